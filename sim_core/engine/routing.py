"""Global schedulers: route each arriving request to one replica.

A router sees each replica through its scheduler's `endpoint` (or, for a decode pool, the
endpoint with its inbox: `cluster/handoff.py`'s DecodeView), never the scheduler itself. Ties
go to the lowest replica id everywhere. What a router reads (`reads`) decides whether a run can
fast-forward decode iterations (`engine/simulation.py`):

* `nothing` (or only the waiting queues, which a decode run never changes): always;
* `outstanding` (waiting + running): yes on the entry pool, whose endpoints the simulator then
  shows through `fast_forward.RunView` (a run's members that finished by now are not counted,
  as stepwise simulation would have them), not on a P/D decode pool;
* `state` (KV blocks in use, cached prefixes, which a run changes as it goes): only when the pool
  has one replica, and so nothing to compare.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np

if TYPE_CHECKING:
    from sim_core.entities import Request

# prefix_affinity: a replica may be chosen for its cached prefix while it has at most this many
# outstanding requests more than the least loaded replica (llm-d pairs its precise prefix-cache
# scorer with a load scorer for the same reason: affinity alone piles a popular prefix on one
# replica).
AFFINITY_LOAD_CAP = 4


class Queued(Protocol):
    """What a router sees of a replica (its scheduler's endpoint, or a decode replica with its inbox)."""

    @property
    def num_waiting(self) -> int: ...

    @property
    def num_outstanding(self) -> int: ...

    @property
    def num_kv_blocks_used(self) -> int: ...

    def num_cached_blocks(self, request: Request) -> int: ...


Reads = Literal["nothing", "outstanding", "state"]


class Router(Protocol):
    reads: Reads

    def route(self, request: Request, replicas: Sequence[Queued]) -> int: ...


# the loads routers compare (attrgetter: no Python frame of its own per replica)
_NUM_WAITING: Callable[[Queued], int] = attrgetter("num_waiting")
_NUM_OUTSTANDING: Callable[[Queued], int] = attrgetter("num_outstanding")
_NUM_KV_BLOCKS_USED: Callable[[Queued], int] = attrgetter("num_kv_blocks_used")


def _least(replicas: Sequence[Queued], load: Callable[[Queued], int]) -> int:
    """Index of the replica with the smallest `load`; ties to the lowest id (`list.index` finds
    the first)."""
    loads = [load(replica) for replica in replicas]
    return loads.index(min(loads))


class RoundRobinRouter:
    """The i-th routed request goes to replica i mod n."""

    reads: Reads = "nothing"

    def __init__(self, num_replicas: int, rng: np.random.Generator) -> None:
        self.num_replicas, self.count = num_replicas, 0

    def route(self, request: Request, replicas: Sequence[Queued]) -> int:
        replica = self.count % self.num_replicas
        self.count += 1
        return replica


class VidurLorRouter:
    """Vidur's `lor` rule, kept exactly to reproduce Vidur: the replica with the fewest requests
    *waiting* in its queue (running ones are not counted), ties to the lowest id. With empty
    queues every request goes to replica 0, so it is not a load balancer: see
    `least_outstanding`."""

    reads: Reads = "nothing"

    def __init__(self, num_replicas: int, rng: np.random.Generator) -> None:
        self.num_replicas = num_replicas

    def route(self, request: Request, replicas: Sequence[Queued]) -> int:
        return _least(replicas, _NUM_WAITING)


class LeastOutstandingRouter:
    """The replica with the fewest outstanding requests (waiting + running), as a serving
    stack's least-request balancer."""

    reads: Reads = "outstanding"

    def __init__(self, num_replicas: int, rng: np.random.Generator) -> None:
        self.num_replicas = num_replicas

    def route(self, request: Request, replicas: Sequence[Queued]) -> int:
        return _least(replicas, _NUM_OUTSTANDING)


class LeastKvRouter:
    """The replica with the fewest KV blocks in use."""

    reads: Reads = "state"

    def __init__(self, num_replicas: int, rng: np.random.Generator) -> None:
        self.num_replicas = num_replicas

    def route(self, request: Request, replicas: Sequence[Queued]) -> int:
        return _least(replicas, _NUM_KV_BLOCKS_USED)


class PrefixAffinityRouter:
    """The replica holding the longest cached prefix of the request's prompt, among those with
    at most AFFINITY_LOAD_CAP outstanding requests more than the least loaded one; ties (no hit
    anywhere included) to the fewest outstanding, then the lowest id."""

    reads: Reads = "state"

    def __init__(self, num_replicas: int, rng: np.random.Generator) -> None:
        self.num_replicas = num_replicas

    def route(self, request: Request, replicas: Sequence[Queued]) -> int:
        loads = [replica.num_outstanding for replica in replicas]
        cap = min(loads) + AFFINITY_LOAD_CAP
        eligible = [index for index in range(len(replicas)) if loads[index] <= cap]
        return min(eligible, key=lambda index: (-replicas[index].num_cached_blocks(request), loads[index], index))


class PowerOfTwoRouter:
    """Two distinct replicas drawn at random (the run's seeded generator); the one with fewer
    outstanding requests, ties to the first drawn."""

    reads: Reads = "outstanding"

    def __init__(self, num_replicas: int, rng: np.random.Generator) -> None:
        self.num_replicas, self.rng = num_replicas, rng

    def route(self, request: Request, replicas: Sequence[Queued]) -> int:
        if self.num_replicas == 1:
            return 0
        first, second = (int(index) for index in self.rng.choice(self.num_replicas, size=2, replace=False))
        return second if replicas[second].num_outstanding < replicas[first].num_outstanding else first


class RandomRouter:
    """Uniformly random replica from the run's seeded generator (drawn in blocks)."""

    reads: Reads = "nothing"

    def __init__(self, num_replicas: int, rng: np.random.Generator) -> None:
        self.num_replicas, self.rng, self._next = num_replicas, rng, 0
        self._draws: list[int] = []

    def route(self, request: Request, replicas: Sequence[Queued]) -> int:
        if self._next == len(self._draws):
            self._draws, self._next = self.rng.integers(self.num_replicas, size=4096).tolist(), 0
        self._next += 1
        return self._draws[self._next - 1]


ROUTERS: dict[str, Callable[[int, np.random.Generator], Router]] = {
    "round_robin": RoundRobinRouter, "lor": VidurLorRouter, "random": RandomRouter,
    "least_outstanding": LeastOutstandingRouter, "least_kv": LeastKvRouter,
    "prefix_affinity": PrefixAffinityRouter, "power_of_two": PowerOfTwoRouter}
