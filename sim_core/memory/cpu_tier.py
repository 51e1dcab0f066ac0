"""The CPU tier of KV offloading (vLLM's OffloadingConnector with its CPU backend, v0.33).

A fixed number of CPU blocks, one GPU block each (vLLM's default `blocks_per_chunk` 1), keyed
by the prefix keys of the GPU cache (`memory/prefix_keys.py`). A block is stored when the GPU
computes it (write-through, not on GPU eviction) and can be read once its store completed. A
block being read (a load in flight) is pinned. `docs/design/kv-offload.md` has the rules.

Eviction is least recently used by rank, as vLLM's `LRUCachePolicy`: each request gets a rank
from a logical clock the first time it touches the tier, and a key it stores or reuses gets
(request rank, -position) unless its rank is already higher, so within one request the tail
goes before the head. When a request finishes, every key it touched gets a fresh rank, tail
first, so its head is the most recent. A store that needs room evicts the lowest-ranked
readable, unpinned blocks outside the offer; when there are not enough, nothing is stored.

Sizing (`offload_size`): `kv_offloading_size` GiB for the whole replica, as vLLM's
`CPUOffloadingSpec` divides `cpu_bytes_to_use` by one block's bytes summed over every GPU of
the replica, rounded up to the page size (4096 B).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sim_core.memory.swap_space import GIB, kv_block_bytes

if TYPE_CHECKING:
    from sim_core.config.simulation import SimulationConfig

PAGE_BYTES = 4096   # vLLM aligns a CPU chunk to the host page size (mmap.PAGESIZE)

Rank = tuple[int, int]


@dataclass(frozen=True, slots=True)
class OffloadSize:
    """A replica's CPU tier: `num_blocks` blocks of `block_bytes` per GPU, read back over a host
    link of `link_bytes_per_s` per GPU (every GPU loads its own share at once)."""

    num_blocks: int
    block_bytes: int
    link_bytes_per_s: float

    def load_seconds(self, num_blocks: int) -> float:
        """Time to read `num_blocks` blocks back to the GPUs (bandwidth only)."""
        return num_blocks * self.block_bytes / self.link_bytes_per_s


def offload_size(config: SimulationConfig, gib: float) -> OffloadSize:
    """The CPU tier `gib` GiB buy for the scenario's replica (per GPU: its TP share of the KV
    heads, its pipeline stage's layers; the host link is `DeviceSpec.pcie_bandwidth_gbps`)."""
    block_bytes = kv_block_bytes(config)
    cluster = config.cluster
    world_size = cluster.tensor_parallel_size * cluster.pipeline_parallel_size
    aligned = -(-block_bytes * world_size // PAGE_BYTES) * PAGE_BYTES
    link = config.device_spec().pcie_bandwidth_gbps * 1e9
    return OffloadSize(int(gib * GIB) // aligned, block_bytes, link)


class CpuKvTier:
    """`num_blocks` CPU blocks holding prefix-cache keys; never raises for backpressure."""

    def __init__(self, num_blocks: int) -> None:
        assert num_blocks >= 1
        self.num_blocks = num_blocks
        self._ready: dict[int, bool] = {}          # key -> readable (its store completed)
        self._pins: dict[int, int] = {}            # key -> loads reading it
        self._rank: dict[int, Rank] = {}
        self._heap: list[tuple[Rank, int]] = []    # evictable keys by rank (stale entries skipped)
        self._clock = 0
        self._request_rank: dict[int, int] = {}    # request id -> its rank while alive
        self._touched: dict[int, dict[int, int]] = {}   # request id -> keys it touched -> position
        self.num_stored = 0
        self.num_evicted = 0

    @property
    def num_used(self) -> int:
        return len(self._ready)

    @property
    def num_open_requests(self) -> int:
        """Requests that touched the tier and have not finished (their recency is pending)."""
        return len(self._touched)

    def __contains__(self, key: int) -> bool:
        return key in self._ready

    def is_readable(self, key: int) -> bool:
        return self._ready.get(key, False)

    def is_pinned(self, key: int) -> bool:
        """Whether a load is reading the block."""
        return key in self._pins

    # ---- lookups and loads ------------------------------------------------------------------

    def num_hits(self, keys: Sequence[int]) -> int:
        """How many of `keys`, from the first, are readable (stops at the first that is not)."""
        for index, key in enumerate(keys):
            if not self._ready.get(key, False):
                return index
        return len(keys)

    def pin(self, request: int, keys: Sequence[int], first_position: int) -> None:
        """A load of `keys` (readable; positions from `first_position`) for `request` starts."""
        for key in keys:
            assert self._ready[key], "only readable blocks are loaded"
            self._pins[key] = self._pins.get(key, 0) + 1
        self._access(request, keys, first_position)

    def unpin(self, keys: Sequence[int]) -> None:
        """The load of `keys` ended: unpinned blocks may be evicted again."""
        for key in keys:
            left = self._pins[key] - 1
            if left:
                self._pins[key] = left
            else:
                del self._pins[key]
                self._push(key)

    # ---- stores -------------------------------------------------------------------------------

    def store(self, request: int, keys: Sequence[int], first_position: int) -> list[int] | None:
        """Offer the blocks of `keys` (positions from `first_position`) that `request` computed:
        those not held yet are stored (readable once `complete` is called), evicting as needed.
        Returns the keys stored, or None when there is no room (nothing stored)."""
        new = [key for key in keys if key not in self._ready]
        reused = [(position, key) for position, key in enumerate(keys, first_position) if self._ready.get(key)]
        for position, key in reused:
            self._access_one(request, key, position)
        if not new:
            return []
        shortfall = len(new) - (self.num_blocks - len(self._ready))
        if shortfall > 0 and not self._evict(shortfall, set(keys)):
            return None
        positions = {key: position for position, key in enumerate(keys, first_position)}
        for key in new:
            self._ready[key] = False
            self._rank[key] = (0, 0)
            self._access_one(request, key, positions[key])
        self.num_stored += len(new)
        return new

    def complete(self, keys: Sequence[int]) -> None:
        """The stores of `keys` ended: they are readable (and evictable)."""
        for key in keys:
            if key in self._ready and not self._ready[key]:
                self._ready[key] = True
                self._push(key)

    def _evict(self, num: int, protected: set[int]) -> bool:
        """Drop the `num` lowest-ranked evictable blocks outside `protected`; False (nothing
        dropped) when there are fewer."""
        chosen: list[tuple[Rank, int]] = []
        kept: list[tuple[Rank, int]] = []
        seen: set[int] = set()
        while self._heap and len(chosen) < num:
            entry = heapq.heappop(self._heap)
            rank, key = entry
            if not self._evictable(key) or self._rank[key] != rank or key in seen:
                continue   # a stale entry, or a second one for the same rank
            seen.add(key)
            (kept if key in protected else chosen).append(entry)
        for entry in kept:
            heapq.heappush(self._heap, entry)
        if len(chosen) < num:
            for entry in chosen:
                heapq.heappush(self._heap, entry)
            return False
        for _, key in chosen:
            del self._ready[key], self._rank[key]
        self.num_evicted += num
        return True

    # ---- recency --------------------------------------------------------------------------------

    def on_request_finished(self, request: int) -> None:
        """Fresh ranks for every key the request touched, tail first (its head becomes the most
        recent); the request's own rank is forgotten."""
        touched = self._touched.pop(request, {})
        self._request_rank.pop(request, None)
        for key, _ in sorted(touched.items(), key=lambda item: -item[1]):
            if key in self._ready:
                self._clock += 1
                self._rank[key] = (self._clock, 0)
                self._push(key)

    def _access(self, request: int, keys: Sequence[int], first_position: int) -> None:
        for position, key in enumerate(keys, first_position):
            self._access_one(request, key, position)

    def _access_one(self, request: int, key: int, position: int) -> None:
        touched = self._touched.setdefault(request, {})
        if key in touched:
            return   # vLLM ranks a key once per request
        touched[key] = position
        if request not in self._request_rank:
            self._clock += 1
            self._request_rank[request] = self._clock
        rank = (self._request_rank[request], -position)
        if self._rank[key] < rank:
            self._rank[key] = rank
            self._push(key)

    def _evictable(self, key: int) -> bool:
        return self._ready.get(key, False) and key not in self._pins

    def _push(self, key: int) -> None:
        if self._evictable(key):
            heapq.heappush(self._heap, (self._rank[key], key))
            if len(self._heap) > 2 * len(self._ready) + 64:   # drop stale entries now and then
                self._heap = [(self._rank[k], k) for k in self._ready if self._evictable(k)]
                heapq.heapify(self._heap)

    def eviction_order(self) -> list[int]:
        """Evictable keys, next to be evicted first (for tests)."""
        return sorted((key for key in self._ready if self._evictable(key)), key=lambda key: self._rank[key])

    # ---- invariants -----------------------------------------------------------------------------

    def check_integrity(self) -> None:
        """Assert: within capacity; ranks and pins only for held keys; every evictable key has a
        current heap entry."""
        assert len(self._ready) <= self.num_blocks, "the CPU tier holds more blocks than it has"
        assert self._rank.keys() == self._ready.keys(), "rank table out of step"
        assert all(self._ready.get(key, False) for key in self._pins), "a pinned block is not readable"
        assert all(count > 0 for count in self._pins.values()), "a non-positive pin count"
        current = {key for rank, key in self._heap if key in self._rank and self._rank[key] == rank}
        assert all(key in current for key in self._ready if self._evictable(key)), "an evictable block is lost"
