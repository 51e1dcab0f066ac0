"""CPU swap space of one replica (vLLM v0's `--swap-space`): where swapped-out KV blocks wait.

vLLM v0 sizes it per GPU: `swap_space` GiB divided by the bytes one KV block takes on one GPU
(its TP share of the KV heads, its PP share of the layers). Every GPU of a replica holds the
same number of CPU blocks, so one count per replica describes it. Ids are not tracked: nothing
decides by them; the KV-cache page draws the swap space as a share in use over time
(`viz.kv_blocks.swap_use`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim_core.memory.model_bytes import kv_bytes_per_token

if TYPE_CHECKING:
    from sim_core.config.simulation import SimulationConfig

GIB = 1024**3


def kv_block_bytes(config: SimulationConfig) -> int:
    """Bytes of one KV block on one GPU: K and V x block_size tokens x head_dim x the GPU's KV
    heads x the layers of its pipeline stage x 2 bytes (the detailed planner's figure)."""
    model, cluster = config.model_spec(), config.cluster
    layers = model.num_layers // cluster.pipeline_parallel_size
    return int(config.scheduler.block_size
               * kv_bytes_per_token(model, config.kv_cache_dtype(), cluster.tensor_parallel_size, layers))


def num_swap_blocks(config: SimulationConfig) -> int:
    """CPU blocks that the policy's swap space per GPU holds (vllm_v0: `scheduler.swap_space_gb`
    GiB; vLLM: swap bytes // block bytes); 0 for a policy that does not swap."""
    return int(config.scheduler.swap_space_gib() * GIB // kv_block_bytes(config))


class SwapSpace:
    """Fixed number of CPU blocks; a swapped request holds some until it is swapped back in."""

    __slots__ = ("held", "num_blocks", "num_free")

    def __init__(self, num_blocks: int) -> None:
        assert num_blocks >= 0
        self.num_blocks = self.num_free = num_blocks
        self.held: dict[int, int] = {}   # request id -> CPU blocks

    def can_swap_out(self, num: int) -> bool:
        return num <= self.num_free

    def swap_out(self, request_id: int, num: int) -> None:
        """Take `num` CPU blocks for `request_id` (the caller checked can_swap_out)."""
        assert request_id not in self.held and 0 < num <= self.num_free
        self.held[request_id] = num
        self.num_free -= num

    def release(self, request_id: int) -> int:
        """Free the CPU blocks of `request_id` (swapped back in, or dropped); returns how many."""
        num = self.held.pop(request_id)
        self.num_free += num
        return num

    def check_integrity(self) -> None:
        """Assert held + free == total and no request holds an empty or negative count."""
        assert all(num > 0 for num in self.held.values()), "a swapped request holds no CPU block"
        assert sum(self.held.values()) + self.num_free == self.num_blocks, "CPU held + free != total"
