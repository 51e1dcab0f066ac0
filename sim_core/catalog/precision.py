"""Number formats of weights and of the KV cache, and what one value of each costs in bytes.

`bf16`/`fp16` are the 16-bit formats models ship in; `fp8` is E4M3 (vLLM's `fp8` weights and
`--kv-cache-dtype fp8`); `fp4` stands for the 4-bit block formats (MXFP4, NVFP4). Scale factors of
block-quantized formats are not counted here (under 4% of the values' bytes).
"""

from __future__ import annotations

from typing import Literal

WeightDtype = Literal["bf16", "fp16", "fp8", "fp4"]
KvCacheDtype = Literal["auto", "bf16", "fp16", "fp8"]

DTYPE_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp4": 0.5}


def kv_dtype(requested: str, weight_dtype: str) -> str:
    """The KV cache's format: `auto` stores it in the model's activation dtype, which is 16-bit
    even for FP8/FP4-quantized weights (vLLM's `--kv-cache-dtype auto`)."""
    if requested != "auto":
        return requested
    return weight_dtype if weight_dtype in ("bf16", "fp16") else "bf16"
