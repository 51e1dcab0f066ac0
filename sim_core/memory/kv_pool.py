"""The interface every KV block pool offers the scheduler base and the simulator (a typing
protocol: the pools share no base class)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sim_core.entities import Request


class BlockHolder(Protocol):
    """Whoever holds blocks in a pool: a request, or a P/D hand-off's handle standing in for one."""

    id: int
    num_blocks: int
    blocks: list[int]


class PoolCounts(Protocol):
    """What the simulator and fast-forward read of a replica's pool."""

    @property
    def tracks_ids(self) -> bool: ...
    @property
    def num_blocks(self) -> int: ...
    @property
    def num_free(self) -> int: ...
    @property
    def num_used(self) -> int: ...
    @property
    def num_holders(self) -> int: ...


class KvPool(PoolCounts, Protocol):
    """A pool the scheduler base allocates from (can/do pair; `free` returns the freed ids)."""

    def can_allocate(self, num: int) -> bool: ...
    def allocate(self, request: Request, num: int) -> list[int]: ...
    def free(self, request: BlockHolder) -> list[int]: ...
    def check_integrity(self, holders: list[Request] | None = None) -> None: ...
