"""The price of moving KV blocks: swaps over the host link (PCIe), copy-on-write in HBM.

vLLM v0 runs a step's cache operations on the GPU before its model (each stage's workers copy
their own layers, each GPU its own TP share, all in parallel), so their time adds to every
stage of that step. A swap moves `blocks x block bytes` over one GPU's host link
(`DeviceSpec.pcie_bandwidth_gbps`, one direction); a copy reads and writes a block in device
memory (`memory_bandwidth_gbps`). Bandwidth only: no per-copy latency.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim_core.memory.cache_ops import COPY
from sim_core.memory.swap_space import kv_block_bytes

if TYPE_CHECKING:
    from sim_core.config import SimulationConfig


class KvCopyCost:
    """Seconds per cache operation (the same on every pipeline stage: stages hold equal layers)."""

    def __init__(self, block_bytes: float, pcie_bytes_per_s: float, hbm_bytes_per_s: float) -> None:
        self.swap_s_per_block = block_bytes / pcie_bytes_per_s
        self.copy_s_per_block = 2 * block_bytes / hbm_bytes_per_s

    @classmethod
    def from_config(cls, config: SimulationConfig) -> KvCopyCost:
        device = config.device_spec()
        return cls(kv_block_bytes(config), device.pcie_bandwidth_gbps * 1e9, device.memory_bandwidth_gbps * 1e9)

    def seconds(self, kind: int, num_blocks: int) -> float:
        """Time of one operation moving `num_blocks` blocks."""
        return num_blocks * (self.copy_s_per_block if kind == COPY else self.swap_s_per_block)
