"""Accelerators by catalog id.

`bf16_tflops` is dense (no sparsity) BF16/FP16 tensor throughput; `memory_gib` the HBM/GDDR
capacity as the driver reports it in GiB (Vidur's planner multiplies it by 1024**3);
`memory_bandwidth_gbps` in GB/s; `link_bandwidth_gbps` the per-GPU intra-node bandwidth
(NVLink / Infinity Fabric where present, else PCIe), one direction, GB/s;
`pcie_bandwidth_gbps` the GPU's host link, one direction, GB/s (it prices vLLM v0's KV swaps):
PCIe Gen4 x16 is 32 GB/s (A100, A30, A40, L40S, RTX 4090: PCI-SIG 4.0 spec, 16 GT/s x 16 lanes),
Gen5 x16 is 64 GB/s (H100, H200, B200, MI300X: PCI-SIG 5.0, 32 GT/s x 16 lanes).

`compute_efficiency` and `memory_efficiency` are the fractions of those peaks that real LLM
kernels reach (the roofline predictor's defaults; a scenario or a calibration can override
them). A100 and A30 values were read off Vidur-format profiles (large GEMMs reach ~0.70 / ~0.62
of peak on them), the RTX 4090's from a measured vLLM run; the others are conservative estimates for
their generation, noted per device.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class DeviceSpec(BaseModel):
    """One accelerator: compute and memory roofs, capacity, and interconnect."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Human-readable name, e.g. 'NVIDIA A100 80GB SXM'.")
    bf16_tflops: float = Field(gt=0, le=100_000, description="Dense BF16 tensor-core TFLOP/s.")
    memory_gib: float = Field(gt=0, le=100_000, description="Device memory in GiB.")
    memory_bandwidth_gbps: float = Field(gt=0, le=1_000_000, description="Memory bandwidth, GB/s.")
    link_bandwidth_gbps: float = Field(gt=0, le=1_000_000, description=(
        "Intra-node GPU-GPU bandwidth per direction, GB/s."))
    pcie_bandwidth_gbps: float = Field(default=32.0, gt=0, description="Host link bandwidth per direction, GB/s.")
    compute_efficiency: float = Field(default=0.7, gt=0, le=1, description=(
        "Fraction of peak tensor FLOP/s that large matrix multiplies reach on this device."))
    memory_efficiency: float = Field(default=0.8, gt=0, le=1, description=(
        "Fraction of peak memory bandwidth that streaming kernels reach on this device."))


DEVICES: dict[str, DeviceSpec] = {
    # NVIDIA A100 datasheet (2021): 312 TFLOPS BF16 dense, 1,555 GB/s (40GB) / 2,039 GB/s (80GB SXM),
    # NVLink 600 GB/s bidirectional = 300 GB/s per direction.
    "a100-40gb": DeviceSpec(name="NVIDIA A100 40GB SXM", bf16_tflops=312, memory_gib=40,
                            memory_bandwidth_gbps=1555, link_bandwidth_gbps=300),
    # Efficiency defaults (0.7 / 0.8) fit Vidur-format A100 profiles of Llama-2-7B.
    "a100-80gb": DeviceSpec(name="NVIDIA A100 80GB SXM", bf16_tflops=312, memory_gib=80,
                            memory_bandwidth_gbps=2039, link_bandwidth_gbps=300),
    # NVIDIA H100 datasheet: SXM5 989 TFLOPS BF16 dense, 80 GB HBM3 at 3.35 TB/s, NVLink 900 GB/s bidirectional.
    "h100-sxm": DeviceSpec(name="NVIDIA H100 SXM5 80GB", bf16_tflops=989, memory_gib=80,
                           memory_bandwidth_gbps=3350, link_bandwidth_gbps=450, pcie_bandwidth_gbps=64,
                           compute_efficiency=0.65),  # Hopper GEMMs at LLM sizes: ~0.6-0.7 of peak
    # NVIDIA H200 datasheet: 989 TFLOPS BF16 dense, 141 GB HBM3e at 4.8 TB/s, NVLink 900 GB/s.
    "h200": DeviceSpec(name="NVIDIA H200 SXM 141GB", bf16_tflops=989, memory_gib=141,
                       memory_bandwidth_gbps=4800, link_bandwidth_gbps=450, pcie_bandwidth_gbps=64,
                       compute_efficiency=0.65),  # same compute as H100
    # NVIDIA Blackwell B200 datasheet (HGX B200): 2.25 PFLOPS BF16 dense, 180 GB HBM3e at 7.7 TB/s,
    # NVLink 5 at 1.8 TB/s bidirectional.
    "b200": DeviceSpec(name="NVIDIA B200 180GB", bf16_tflops=2250, memory_gib=180,
                       memory_bandwidth_gbps=7700, link_bandwidth_gbps=900, pcie_bandwidth_gbps=64,
                       compute_efficiency=0.6),  # new generation: kernels further from peak
    # NVIDIA L40S datasheet: 362 TFLOPS BF16 dense (733 with sparsity), 48 GB GDDR6 at 864 GB/s, PCIe Gen4 x16.
    "l40s": DeviceSpec(name="NVIDIA L40S 48GB", bf16_tflops=362, memory_gib=48,
                       memory_bandwidth_gbps=864, link_bandwidth_gbps=32,
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
    # Infinity Fabric 896 GB/s aggregate peer bandwidth (7 links x 64 GB/s x 2 directions).
    "mi300x": DeviceSpec(name="AMD Instinct MI300X 192GB", bf16_tflops=1307, memory_gib=192,
                         memory_bandwidth_gbps=5300, link_bandwidth_gbps=448, pcie_bandwidth_gbps=64,
                         compute_efficiency=0.5, memory_efficiency=0.7),  # public MI300X GEMM benchmarks: ~half of peak
    # NVIDIA Ada whitepaper (RTX 4090): 165.2 TFLOPS BF16 dense with FP32 accumulate,
    # 24 GB GDDR6X at 1,008 GB/s, PCIe Gen4 x16, no NVLink.
    # Efficiencies from a measured vLLM 0.19 run of Llama-3.1-8B (LLMServingSim, MIT; `python -m
    # sim_core calibrate` fits memory 1.0 / compute 0.88 on it with the roofline's per-kernel
    # launch costs, which vLLM's CUDA graphs avoid; kept at 0.92 / 0.80, attainable on GDDR6X).
    "rtx-4090": DeviceSpec(name="NVIDIA GeForce RTX 4090 24GB", bf16_tflops=165.2, memory_gib=24,
                           memory_bandwidth_gbps=1008, link_bandwidth_gbps=32,
                           compute_efficiency=0.80, memory_efficiency=0.92),  # GDDR6X
}

# Devices whose vLLM kernel latencies the silicon predictor ships (sim_core/predictor/silicon_data,
# from AIConfigurator's measurements): a scenario on one of them is priced by `silicon` unless it
# names its predictor. tests/test_silicon_predictor.py checks this list against the shipped files.
MEASURED_KERNELS = ("a100-80gb", "b200", "h100-sxm", "h200", "l40s")
