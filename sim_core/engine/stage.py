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

    def add(self, batch: Batch) -> None:
        self.queue.append(batch)

    def start_next(self, now: float) -> Batch | None:
        """Take the next queued batch if the stage is idle (the caller prices and ends it)."""
        if self.busy or not self.queue:
            return None
        self.busy, self.started_at = True, now
        return self.queue.popleft()

    def finish(self) -> None:
        self.busy = False
