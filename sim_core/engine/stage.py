"""Pipeline-stage scheduler: each stage runs one batch at a time, FIFO."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from sim_core.entities import Batch


@dataclass(slots=True, eq=False)
class Stage:
    """One pipeline stage of a replica (its layers live on num_layers / PP of the layers)."""

    replica_id: int
    stage_id: int
    is_last: bool
    queue: deque = field(default_factory=deque)
    busy: bool = False
    started_at: float = 0.0
    running: Batch | None = None   # the batch it last started (start_next; read by pipeline runs while busy)

    def add(self, batch: Batch) -> None:
        self.queue.append(batch)

    def start_next(self, now: float) -> Batch | None:
        """Take the next queued batch if the stage is idle (the caller prices and ends it)."""
        if self.busy or not self.queue:
            return None
        self.start(now)
        self.running = batch = self.queue.popleft()
        return batch

    def start(self, now: float) -> None:
        """The stage runs a batch from `now` (the caller checked it was idle)."""
        self.busy, self.started_at = True, now

    def begin_iteration(self, time: float) -> None:
        """The busy stage's current iteration began at `time` (a fast-forwarded run's last
        iteration: the iterations before it were advanced in one step)."""
        assert self.busy, "only a running stage is in an iteration"
        self.started_at = time

    def finish(self) -> None:
        self.busy = False
