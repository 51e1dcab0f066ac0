"""Global schedulers: route each arriving request to one replica."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np


class Queued(Protocol):
    """What a router sees of a replica (its scheduler's endpoint, or a decode replica with its inbox)."""

    @property
    def num_waiting(self) -> int: ...


class Router(Protocol):
    def route(self, replicas: Sequence[Queued]) -> int: ...


class RoundRobinRouter:
    """The i-th routed request goes to replica i mod n."""

    def __init__(self, num_replicas: int, rng: np.random.Generator) -> None:
        self.num_replicas, self.count = num_replicas, 0

    def route(self, replicas: Sequence[Queued]) -> int:
        replica = self.count % self.num_replicas
        self.count += 1
        return replica


class LeastOutstandingRouter:
    """The replica with the fewest requests waiting in its queue; ties to the lowest id."""

    def __init__(self, num_replicas: int, rng: np.random.Generator) -> None:
        self.num_replicas = num_replicas

    def route(self, replicas: Sequence[Queued]) -> int:
        best, best_waiting = 0, None
        for index, replica in enumerate(replicas):
            waiting = replica.num_waiting
            if best_waiting is None or waiting < best_waiting:
                best, best_waiting = index, waiting
        return best


class RandomRouter:
    """Uniformly random replica from the run's seeded generator (drawn in blocks)."""

    def __init__(self, num_replicas: int, rng: np.random.Generator) -> None:
        self.num_replicas, self.rng, self._next = num_replicas, rng, 0
        self._draws: list[int] = []

    def route(self, replicas: Sequence[Queued]) -> int:
        if self._next == len(self._draws):
            self._draws, self._next = self.rng.integers(self.num_replicas, size=4096).tolist(), 0
        self._next += 1
        return self._draws[self._next - 1]


ROUTERS: dict[str, Callable[[int, np.random.Generator], Router]] = {
    "round_robin": RoundRobinRouter, "lor": LeastOutstandingRouter, "random": RandomRouter}
