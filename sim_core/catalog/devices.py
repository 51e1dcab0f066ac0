"""Accelerators by catalog id.

`bf16_tflops` is dense (no sparsity) BF16/FP16 tensor throughput; `fp8_tflops` and `fp4_tflops`
the dense FP8 and FP4 tensor throughput, None where the device has no such tensor-core math
(then an FP8 or FP4 model runs weight-only: its weights are stored and streamed in the narrow
format and widened to BF16 inside the kernel, as vLLM's Marlin kernels do on Ampere; see
docs/design/precision.md); `memory_gib` the HBM/GDDR capacity as the driver reports it in GiB
(Vidur's planner multiplies it by 1024**3; the entries from before FP8 keep the nominal
capacity, the golden outputs pin them; the later ones give the total nvidia-smi / rocm-smi
prints, noted per entry); `driver_memory_gib` the total PyTorch reports (`total_memory`, what
vLLM's gpu_memory_utilization multiplies, so what the `vllm` planner uses) where known: 79.18
(H100 SXM 80GB), 79.15 / 39.39 (A100 80GB / 40GB) and 44.42 (L40S) as PyTorch's out-of-memory
messages print them, 23.52 for the RTX 4090 (25,250,627,584 bytes in a vLLM 0.19 run's metadata, LLMServingSim,
MIT); `memory_bandwidth_gbps` in GB/s; `link_bandwidth_gbps` the per-GPU
intra-node bandwidth (NVLink / Infinity Fabric where present, else PCIe), one direction, GB/s;
`pcie_bandwidth_gbps` the GPU's host link, one direction, GB/s (it prices vLLM v0's KV swaps):
PCIe Gen4 x16 is 32 GB/s (A100, A30, A40, L40S, RTX 4090: PCI-SIG 4.0 spec, 16 GT/s x 16 lanes),
Gen5 x16 is 64 GB/s (H100, H200, B200, MI300X: PCI-SIG 5.0, 32 GT/s x 16 lanes), Gen6 x16 128 GB/s
(B300: PCI-SIG 6.0, 64 GT/s x 16 lanes); Grace-Hopper and Grace-Blackwell reach their CPU over
NVLink-C2C (900 GB/s both directions together).

`link_latency_s` is the latency of one message over that link, paid at every step of a collective,
set only where a box's link is known to be slow to start (the RTX PRO 6000 pair below, whose
collectives pass through host memory); elsewhere the roofline charges NCCL's generic latency once a
collective (`roofline.COLLECTIVE_LATENCY_S`).

`compute_efficiency` and `memory_efficiency` are the fractions of those peaks that real LLM
kernels reach (the roofline predictor's defaults; a scenario or a calibration can override
them; the FP8/FP4 roofs take the same compute fraction). A100 and A30 values were read off
Vidur-format profiles (large GEMMs reach ~0.70 / ~0.62 of peak on them), the RTX 4090's and RTX PRO
6000's from vLLM's measured kernels (LLMServingSim), which also give their attention's own fraction
(`attention_memory_efficiency`: the paged KV cache reads slower than the weights stream); the others
are conservative estimates for their generation, noted per device.
"""

from __future__ import annotations

from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field


class DeviceSpec(BaseModel):
    """One accelerator: compute and memory roofs, capacity, and interconnect."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Human-readable name, e.g. 'NVIDIA A100 80GB SXM'.")
    bf16_tflops: float = Field(gt=0, le=100_000, description="Dense BF16 tensor-core TFLOP/s.")
    fp8_tflops: float | None = Field(default=None, gt=0, le=100_000, description=(
        "Dense FP8 tensor-core TFLOP/s; none: no FP8 math (FP8 weights then run weight-only, BF16 compute)."))
    fp4_tflops: float | None = Field(default=None, gt=0, le=100_000, description=(
        "Dense FP4 tensor-core TFLOP/s; none: no FP4 math (FP4 weights then run weight-only, BF16 compute)."))
    memory_gib: float = Field(gt=0, le=100_000, description="Device memory in GiB.")
    driver_memory_gib: float | None = Field(default=None, gt=0, le=100_000, description=(
        "Total memory as the CUDA driver reports it (PyTorch's total_memory), which vLLM's "
        "gpu_memory_utilization multiplies; None: memory_gib."))
    memory_bandwidth_gbps: float = Field(gt=0, le=1_000_000, description="Memory bandwidth, GB/s.")
    link_bandwidth_gbps: float = Field(gt=0, le=1_000_000, description=(
        "Intra-node GPU-GPU bandwidth per direction, GB/s."))
    pcie_bandwidth_gbps: float = Field(default=32.0, gt=0, description="Host link bandwidth per direction, GB/s.")
    compute_efficiency: float = Field(default=0.7, gt=0, le=1, description=(
        "Fraction of peak tensor FLOP/s that large matrix multiplies reach on this device."))
    memory_efficiency: float = Field(default=0.8, gt=0, le=1, description=(
        "Fraction of peak memory bandwidth that streaming kernels reach on this device."))
    attention_memory_efficiency: float | None = Field(default=None, gt=0, le=1, description=(
        "Fraction of peak memory bandwidth that attention's reads of the paged KV cache reach, where "
        "measured apart from the weights' streaming; None: memory_efficiency."))
    link_latency_s: float | None = Field(default=None, ge=0, le=1, description=(
        "Latency of one message over the GPU-GPU link, s, paid at every step of a collective (a ring "
        "all-reduce over n GPUs takes 2 (n - 1) steps), where the link is known to be slow to start "
        "(a path through host memory); None: the roofline's generic latency of one whole collective."))

    def tensor_tflops(self, dtype: str) -> float | None:
        """Dense tensor-core TFLOP/s of math in `dtype` (bf16/fp16, fp8, fp4); None where the
        device has none."""
        return {"bf16": self.bf16_tflops, "fp16": self.bf16_tflops, "fp8": self.fp8_tflops,
                "fp4": self.fp4_tflops}[dtype]


DEVICES: dict[str, DeviceSpec] = {
    # NVIDIA A100 datasheet (2021): 312 TFLOPS BF16 dense, 1,555 GB/s (40GB) / 2,039 GB/s (80GB SXM),
    # NVLink 600 GB/s bidirectional = 300 GB/s per direction.
    "a100-40gb": DeviceSpec(name="NVIDIA A100 40GB SXM", bf16_tflops=312, memory_gib=40, driver_memory_gib=39.39,
                            memory_bandwidth_gbps=1555, link_bandwidth_gbps=300),
    # Efficiency defaults (0.7 / 0.8) fit Vidur-format A100 profiles of Llama-2-7B.
    "a100-80gb": DeviceSpec(name="NVIDIA A100 80GB SXM", bf16_tflops=312, memory_gib=80, driver_memory_gib=79.15,
                            memory_bandwidth_gbps=2039, link_bandwidth_gbps=300),
    # NVIDIA H100 datasheet: SXM5 989 TFLOPS BF16 dense, 80 GB HBM3 at 3.35 TB/s, NVLink 900 GB/s bidirectional.
    # FP8 1,979 TFLOPS dense (3,958 with sparsity).
    "h100-sxm": DeviceSpec(name="NVIDIA H100 SXM5 80GB", bf16_tflops=989, fp8_tflops=1979, memory_gib=80,
                           driver_memory_gib=79.18, memory_bandwidth_gbps=3350, link_bandwidth_gbps=450,
                           pcie_bandwidth_gbps=64,
                           compute_efficiency=0.65),  # Hopper GEMMs at LLM sizes: ~0.6-0.7 of peak
    # NVIDIA H200 datasheet: 989 TFLOPS BF16 dense, FP8 1,979 dense, 141 GB HBM3e at 4.8 TB/s, NVLink 900 GB/s.
    "h200": DeviceSpec(name="NVIDIA H200 SXM 141GB", bf16_tflops=989, fp8_tflops=1979, memory_gib=141,
                       memory_bandwidth_gbps=4800, link_bandwidth_gbps=450, pcie_bandwidth_gbps=64,
                       compute_efficiency=0.65),  # same compute as H100
    # NVIDIA Blackwell B200 datasheet (HGX B200): 2.25 PFLOPS BF16 dense, 180 GB HBM3e at 7.7 TB/s,
    # NVLink 5 at 1.8 TB/s bidirectional; FP8 4.5 PFLOPS and FP4 9 PFLOPS dense (the board's sparse 72 and
    # 144 PFLOPS over 8 GPUs, halved).
    "b200": DeviceSpec(name="NVIDIA B200 180GB", bf16_tflops=2250, fp8_tflops=4500, fp4_tflops=9000, memory_gib=180,
                       memory_bandwidth_gbps=7700, link_bandwidth_gbps=900, pcie_bandwidth_gbps=64,
                       compute_efficiency=0.6),  # new generation: kernels further from peak
    # NVIDIA L40S datasheet: 362 TFLOPS BF16 dense (733 with sparsity), FP8 733 dense (1,466 with sparsity),
    # 48 GB GDDR6 at 864 GB/s, PCIe Gen4 x16. nvidia-smi prints 46,068 MiB; PyTorch's total 44.42 GiB (an
    # out-of-memory message on 8 L40S, stepfun-ai/Step-Video-T2V#8; an L40, the same board memory, prints 44.40).
    "l40s": DeviceSpec(name="NVIDIA L40S 48GB", bf16_tflops=362, fp8_tflops=733, memory_gib=48,
                       driver_memory_gib=44.42, memory_bandwidth_gbps=864, link_bandwidth_gbps=32,
                       compute_efficiency=0.6, memory_efficiency=0.75),  # power-capped PCIe card, GDDR6
    # NVIDIA A40 datasheet: 149.7 TFLOPS BF16 dense, 48 GB GDDR6 at 696 GB/s, PCIe Gen4 x16.
    "a40": DeviceSpec(name="NVIDIA A40 48GB", bf16_tflops=149.7, memory_gib=48,
                      memory_bandwidth_gbps=696, link_bandwidth_gbps=32,
                      compute_efficiency=0.65, memory_efficiency=0.75),  # GDDR6
    # NVIDIA A30 datasheet: 165 TFLOPS BF16 dense, 24 GB HBM2 at 933 GB/s, NVLink bridge 200 GB/s bidirectional.
    "a30": DeviceSpec(name="NVIDIA A30 24GB", bf16_tflops=165, memory_gib=24,
                      memory_bandwidth_gbps=933, link_bandwidth_gbps=100,
                      compute_efficiency=0.62, memory_efficiency=0.75),  # from a Vidur-format A30 profile
    # AMD Instinct MI300X datasheet: 1,307 TFLOPS BF16 dense, 192 GB HBM3 at 5.3 TB/s,
    # Infinity Fabric 896 GB/s aggregate peer bandwidth (7 links x 64 GB/s x 2 directions); FP8 2,614.9 dense.
    "mi300x": DeviceSpec(name="AMD Instinct MI300X 192GB", bf16_tflops=1307, fp8_tflops=2614.9, memory_gib=192,
                         memory_bandwidth_gbps=5300, link_bandwidth_gbps=448, pcie_bandwidth_gbps=64,
                         compute_efficiency=0.5, memory_efficiency=0.7),  # public MI300X GEMM benchmarks: ~half of peak
    # NVIDIA Ada whitepaper (RTX 4090): 165.2 TFLOPS BF16 dense with FP32 accumulate,
    # 24 GB GDDR6X at 1,008 GB/s, PCIe Gen4 x16, no NVLink; FP8 330.3 dense with FP32 accumulate (vLLM's
    # FP8 GEMMs accumulate in FP32).
    # Efficiencies fitted to vLLM 0.19's measured kernels of Llama-3.1-8B on this GPU (LLMServingSim's
    # profiler/perf/RTX4090, MIT; `python bench/rtx_kernels.py`): its GEMMs 0.98 / 0.94 (608 rows, 1-2,048
    # tokens), its decode attention's KV reads 0.87 (docs/accuracy.md).
    "rtx-4090": DeviceSpec(name="NVIDIA GeForce RTX 4090 24GB", bf16_tflops=165.2, fp8_tflops=330.3, memory_gib=24,
                           driver_memory_gib=23.52, memory_bandwidth_gbps=1008, link_bandwidth_gbps=32,
                           compute_efficiency=0.98, memory_efficiency=0.94,
                           attention_memory_efficiency=0.87),  # GDDR6X
    # NVIDIA H100 datasheet (2023), PCIe 80GB: 756 TFLOPS BF16 dense (1,513 with sparsity), FP8 1,513 dense,
    # 80 GB HBM2e at 2.0 TB/s, NVLink bridge 600 GB/s bidirectional (card pairs), PCIe Gen5 x16;
    # nvidia-smi: 81,559 MiB.
    "h100-pcie": DeviceSpec(name="NVIDIA H100 PCIe 80GB", bf16_tflops=756, fp8_tflops=1513, memory_gib=79.65,
                            memory_bandwidth_gbps=2000, link_bandwidth_gbps=300, pcie_bandwidth_gbps=64,
                            compute_efficiency=0.6),  # a 350 W card: clocks drop under long GEMMs
    # NVIDIA H20 product brief (2024; Hopper for the Chinese market): 148 TFLOPS BF16 dense, FP8 296 dense,
    # 96 GB HBM3 at 4.0 TB/s, NVLink 900 GB/s bidirectional, PCIe Gen5 x16; nvidia-smi: 97,871 MiB.
    "h20": DeviceSpec(name="NVIDIA H20 96GB", bf16_tflops=148, fp8_tflops=296, memory_gib=95.58,
                      memory_bandwidth_gbps=4000, link_bandwidth_gbps=450, pcie_bandwidth_gbps=64,
                      compute_efficiency=0.7),  # a small compute roof beside a large bandwidth: GEMMs fill it
    # NVIDIA GH200 Grace Hopper Superchip datasheet (2024), the 96 GB HBM3 version ("GH200 480GB"): H100
    # compute (989 TFLOPS BF16 dense, FP8 1,979 dense), 4.0 TB/s, NVLink 900 GB/s bidirectional to other
    # GH200s; its host link is NVLink-C2C to the Grace CPU, 900 GB/s bidirectional; nvidia-smi: 97,871 MiB.
    "gh200": DeviceSpec(name="NVIDIA GH200 96GB", bf16_tflops=989, fp8_tflops=1979, memory_gib=95.58,
                        memory_bandwidth_gbps=4000, link_bandwidth_gbps=450, pcie_bandwidth_gbps=450,
                        compute_efficiency=0.65),  # as H100
    # NVIDIA HGX B300 datasheet (2025), per GPU (the 8-GPU board's sparse figures over 8, halved; FP4 dense
    # as given): 2.25 PFLOPS BF16 dense, FP8 4.5 PFLOPS, FP4 13.5 PFLOPS (Blackwell Ultra), 288 GB HBM3e at
    # 8 TB/s, NVLink 5 at 1.8 TB/s bidirectional, PCIe Gen6 x16; nvidia-smi: 275,040 MiB.
    "b300": DeviceSpec(name="NVIDIA B300 288GB", bf16_tflops=2250, fp8_tflops=4500, fp4_tflops=13500,
                       memory_gib=268.59, memory_bandwidth_gbps=8000, link_bandwidth_gbps=900,
                       pcie_bandwidth_gbps=128, compute_efficiency=0.6),  # as B200
    # NVIDIA GB200 NVL72 datasheet (2024), per GPU (a superchip is one Grace CPU and two GPUs; its sparse
    # figures halved, over 2): 2.5 PFLOPS BF16 dense, FP8 5 PFLOPS, FP4 10 PFLOPS, 186 GB HBM3e (13.4 TB over
    # 72) at 8 TB/s, NVLink 5 at 1.8 TB/s bidirectional; NVLink-C2C to the Grace CPU, 900 GB/s bidirectional
    # shared by the two GPUs: 225 GB/s per GPU and direction; nvidia-smi: 189,471 MiB.
    "gb200": DeviceSpec(name="NVIDIA GB200 186GB (one GPU)", bf16_tflops=2500,
                        fp8_tflops=5000, fp4_tflops=10000, memory_gib=185.03, memory_bandwidth_gbps=8000,
                        link_bandwidth_gbps=900, pcie_bandwidth_gbps=225, compute_efficiency=0.6),  # as B200
    # NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet (2025) and the RTX Blackwell architecture
    # whitepaper: 503.8 TFLOPS BF16 dense with FP32 accumulate, FP8 1,007.6, FP4 2,015.2 (4 PFLOPS with
    # sparsity), 96 GB GDDR7 at 1,792 GB/s, PCIe Gen5 x16, no NVLink; nvidia-smi: 97,887 MiB. The
    # Workstation Edition has the same figures. Efficiencies fitted to vLLM 0.19's measured kernels of
    # Llama-3.1-8B, Qwen3-32B and Qwen3-30B-A3B at TP 1 and 2 (LLMServingSim's profiler/perf/RTXPRO6000,
    # MIT; `python bench/rtx_kernels.py`): the GEMMs 0.74 / 0.83 (3,040 rows), decode attention's KV reads
    # 0.74 (540 rows). The GPU-GPU link is not the PCIe figure: collectives between two of these cards
    # without PCIe peer-to-peer go through host memory, 16 GB/s (LLMServingSim's setting for the box of its
    # vLLM 0.19 runs, which replays their E2E within 2.2%; those runs' TP 2 steps need 11-16 GB/s,
    # docs/accuracy.md), i.e. 22.86 GB/s at the roofline's default link_efficiency 0.7. So this entry's
    # link_bandwidth_gbps is an effective figure for that box, not the card's physical link, and a scenario
    # that changes link_efficiency moves it off 16 GB/s. A server with peer-to-peer on measures 28-36 GB/s
    # in NCCL (LLMServingSim's later measurement, ACS and IOMMU off): describe one as a custom device with
    # link_bandwidth_gbps 40-51 (those figures / 0.7). The same description of the box gives the link's
    # latency, 20 us a message (`link_latency`; its ASTRA-sim network charges it per message), paid at each
    # step of a collective: a TP 2 all-reduce, a reduce-scatter and an all-gather step, 40 us; the runs' decode-only
    # steps then price within 0.91-1.08 of measured from 17 to 256 requests in flight (docs/accuracy.md,
    # *The pair's link latency*). A peer-to-peer server's NCCL: set link_latency_s None.
    "rtx-pro-6000": DeviceSpec(name="NVIDIA RTX PRO 6000 Blackwell 96GB", bf16_tflops=503.8, fp8_tflops=1007.6,
                               fp4_tflops=2015.2, memory_gib=95.59, memory_bandwidth_gbps=1792,
                               link_bandwidth_gbps=22.86, pcie_bandwidth_gbps=64,
                               compute_efficiency=0.74, memory_efficiency=0.83,
                               attention_memory_efficiency=0.74, link_latency_s=20e-6),  # GDDR7
    # AMD Instinct MI325X datasheet (2024): 1,307.4 TFLOPS BF16 dense, FP8 2,614.9 dense, 256 GB HBM3E at
    # 6 TB/s, Infinity Fabric 896 GB/s aggregate peer bandwidth (as MI300X), PCIe Gen5 x16; ROCm counts the
    # HBM in GiB (256, as 192 on MI300X).
    "mi325x": DeviceSpec(name="AMD Instinct MI325X 256GB", bf16_tflops=1307.4, fp8_tflops=2614.9, memory_gib=256,
                         memory_bandwidth_gbps=6000, link_bandwidth_gbps=448, pcie_bandwidth_gbps=64,
                         compute_efficiency=0.5, memory_efficiency=0.7),  # as MI300X (the same CDNA 3 compute)
    # AMD Instinct MI355X datasheet (2025): 2,516.6 TFLOPS BF16 dense, FP8 5,033.2 dense, MXFP4 10,066.4
    # dense, 288 GB HBM3E at 8 TB/s, Infinity Fabric 7 links x 153.6 GB/s = 1,075.2 GB/s aggregate (537.6
    # per direction), PCIe Gen5 x16; torch reports 309,220,868,096 B = 288 GiB.
    "mi355x": DeviceSpec(name="AMD Instinct MI355X 288GB", bf16_tflops=2516.6, fp8_tflops=5033.2,
                         fp4_tflops=10066.4, memory_gib=288, memory_bandwidth_gbps=8000, link_bandwidth_gbps=537.6,
                         pcie_bandwidth_gbps=64, compute_efficiency=0.5, memory_efficiency=0.7),  # as MI300X
}

# Devices whose vLLM kernel latencies the silicon predictor ships (sim_core/predictor/silicon_data,
# from AIConfigurator's measurements), with the number formats measured there: the linear layers'
# weights (GEMM tables: bf16 stands for both 16-bit formats; fp8 is per-tensor W8A8, fp4 NVFP4) and the KV cache
# (attention tables). A scenario on one of them is priced by `silicon` unless it names its predictor
# or its formats were not measured. tests/test_silicon_predictor.py checks both against the files.
class MeasuredFormats(NamedTuple):
    weights: tuple[str, ...]
    kv_cache: tuple[str, ...]


MEASURED_KERNELS: dict[str, MeasuredFormats] = {
    "a100-80gb": MeasuredFormats(("bf16",), ("bf16",)),
    "b200": MeasuredFormats(("bf16", "fp4", "fp8"), ("bf16", "fp8")),
    "h100-sxm": MeasuredFormats(("bf16", "fp8"), ("bf16", "fp8")),
    "h200": MeasuredFormats(("bf16", "fp8"), ("bf16", "fp8")),
    "l40s": MeasuredFormats(("bf16", "fp8"), ("bf16", "fp8")),
}


def unmeasured_formats(device_id: str, weight_dtype: str, kv_dtype: str) -> str | None:
    """Why the silicon predictor cannot price these formats on this device, in words (None: it
    can; the device must be one of MEASURED_KERNELS)."""
    measured = MEASURED_KERNELS[device_id]
    weight, kv = _table_format(weight_dtype), _table_format(kv_dtype)
    if weight not in measured.weights:
        return (f"its tables for '{device_id}' measure {'/'.join(measured.weights)} GEMMs, not {weight_dtype} "
                f"weights")
    if kv not in measured.kv_cache:
        return (f"its tables for '{device_id}' measure attention over a {'/'.join(measured.kv_cache)} KV cache, "
                f"not {kv_dtype}")
    return None


def _table_format(dtype: str) -> str:
    """The tables' name of a format: bf16 for both 16-bit ones (the same kernels' speed)."""
    return "bf16" if dtype in ("bf16", "fp16") else dtype
