"""Number formats of weights and of the KV cache, what one value of each costs in bytes, and which
tensor-core math a quantized model's linear layers run in on a device.

`bf16`/`fp16` are the 16-bit formats models ship in; `fp8` is E4M3 (vLLM's `fp8` weights and
`--kv-cache-dtype fp8`); `fp4` stands for the 4-bit block formats (MXFP4, NVFP4). Scale factors of
block-quantized formats are not counted here (under 4% of the values' bytes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from sim_core.catalog.devices import DeviceSpec

WeightDtype = Literal["bf16", "fp16", "fp8", "fp4"]
KvCacheDtype = Literal["auto", "bf16", "fp16", "fp8"]

DTYPE_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp4": 0.5}
SIXTEEN_BIT = ("bf16", "fp16")


def kv_dtype(requested: str, weight_dtype: str) -> str:
    """The KV cache's format: `auto` stores it in the model's activation dtype, which is 16-bit
    even for FP8/FP4-quantized weights (vLLM's `--kv-cache-dtype auto`)."""
    if requested != "auto":
        return requested
    return weight_dtype if weight_dtype in SIXTEEN_BIT else "bf16"


@dataclass(frozen=True)
class LinearFormat:
    """How a model's linear layers (QKV, output, MLP / expert projections) run on a device.

    `weight` is the format the weights are stored and streamed in; `compute` the format of the
    tensor-core math and of the GEMM's input activations: the weight format itself where the
    device has that math (W8A8 / W4A4: vLLM quantizes the activations on the fly), else bf16
    (weight-only: the kernel widens the weights to BF16 in registers, as vLLM 0.33's Marlin
    kernels do for FP8 and FP4 checkpoints on GPUs without FP8/FP4 tensor cores)."""

    weight: str
    compute: str

    @property
    def is_16bit(self) -> bool:
        return self.weight in SIXTEEN_BIT

    @property
    def weight_only(self) -> bool:
        """Quantized weights with 16-bit math (the device lacks the weight format's math)."""
        return not self.is_16bit and self.compute in SIXTEEN_BIT


def linear_format(weight_dtype: str, device: DeviceSpec) -> LinearFormat:
    """The linear layers' format of a `weight_dtype` model on `device` (see LinearFormat)."""
    if weight_dtype in SIXTEEN_BIT or device.tensor_tflops(weight_dtype) is not None:
        return LinearFormat(weight_dtype, weight_dtype)
    return LinearFormat(weight_dtype, "bf16")
