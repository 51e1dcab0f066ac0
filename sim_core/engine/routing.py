"""Global schedulers: route each arriving request to one replica.

A router sees each replica through its scheduler's `endpoint` (or, for a decode pool, the
endpoint with its inbox: `cluster/handoff.py`'s DecodeView), never the scheduler itself. Ties
go to the lowest replica id everywhere. Routers that read a replica's running requests or KV
(`reads_load`) see them exactly only when decode runs are simulated iteration by iteration, so
a run with such a router over several replicas does not fast-forward (`engine/simulation.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

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


class Router(Protocol):
    reads_load: bool

    def route(self, request: Request, replicas: Sequence[Queued]) -> int: ...


def _least(replicas: Sequence[Queued], load: Callable[[Queued], int]) -> int:
    """Index of the replica with the smallest `load`; ties to the lowest id."""
    return min(range(len(replicas)), key=lambda index: (load(replicas[index]), index))


class RoundRobinRouter:
    """The i-th routed request goes to replica i mod n."""

    reads_load = False

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

    reads_load = False

    def __init__(self, num_replicas: int, rng: np.random.Generator) -> None:
        self.num_replicas = num_replicas

    def route(self, request: Request, replicas: Sequence[Queued]) -> int:
        return _least(replicas, lambda replica: replica.num_waiting)


class LeastOutstandingRouter:
    """The replica with the fewest outstanding requests (waiting + running), as a serving
    stack's least-request balancer."""

    reads_load = True

    def __init__(self, num_replicas: int, rng: np.random.Generator) -> None:
        self.num_replicas = num_replicas

    def route(self, request: Request, replicas: Sequence[Queued]) -> int:
        return _least(replicas, lambda replica: replica.num_outstanding)


class LeastKvRouter:
    """The replica with the fewest KV blocks in use."""

    reads_load = True

    def __init__(self, num_replicas: int, rng: np.random.Generator) -> None:
        self.num_replicas = num_replicas

    def route(self, request: Request, replicas: Sequence[Queued]) -> int:
        return _least(replicas, lambda replica: replica.num_kv_blocks_used)


class PrefixAffinityRouter:
    """The replica holding the longest cached prefix of the request's prompt, among those with
    at most AFFINITY_LOAD_CAP outstanding requests more than the least loaded one; ties (no hit
    anywhere included) to the fewest outstanding, then the lowest id."""

    reads_load = True

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

    reads_load = True

    def __init__(self, num_replicas: int, rng: np.random.Generator) -> None:
        self.num_replicas, self.rng = num_replicas, rng

    def route(self, request: Request, replicas: Sequence[Queued]) -> int:
        if self.num_replicas == 1:
            return 0
        first, second = (int(index) for index in self.rng.choice(self.num_replicas, size=2, replace=False))
        return second if replicas[second].num_outstanding < replicas[first].num_outstanding else first


class RandomRouter:
    """Uniformly random replica from the run's seeded generator (drawn in blocks)."""

    reads_load = False

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
