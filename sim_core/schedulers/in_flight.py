"""Steps launched whose outputs are not processed yet (vLLM's async scheduling).

With async scheduling vLLM schedules step N+1 while step N runs: N's tokens already count as
computed (its sampled tokens are placeholders) but N's outputs are not processed, so a request
finishing in N still runs and holds its blocks. A request preempted while a step holding it runs
still gets that step's output, which vLLM delivers as stale: the token (when the step samples
one) is appended to the request, whose counters were reset by the preemption.

The engine loop (`EngineCore.step_with_batch_queue`, a queue of two steps): the host schedules
a step, launches it and, while fewer than two are queued, schedules the next at once; then it
blocks until the oldest step ends and processes its outputs. So it schedules only when nothing is
in flight (an arrival wakes it) or right after processing a step's outputs (`host_free`).
"""

from __future__ import annotations

from collections import deque

from sim_core.entities import Batch, Request


class InFlight:
    """Batches launched and not yet ended, oldest first, and their tokens per request."""

    __slots__ = ("_outputs_processed", "batches", "by_id")

    def __init__(self) -> None:
        self.batches: deque[Batch] = deque()
        self.by_id: dict[int, int] = {}   # request id -> tokens in launched batches (read-only outside)
        self._outputs_processed = False

    @property
    def host_free(self) -> bool:
        """Whether the host may schedule now: idle, or the oldest step's outputs just processed
        (cleared by setting it False when it schedules)."""
        return not self.batches or self._outputs_processed

    @host_free.setter
    def host_free(self, value: bool) -> None:
        self._outputs_processed = value

    def __bool__(self) -> bool:
        return bool(self.batches)

    def __len__(self) -> int:
        return len(self.batches)

    def tokens(self, request: Request) -> int:
        """Tokens of the request in flight (counted as computed by the scheduler)."""
        return self.by_id.get(request.id, 0)

    def launch(self, batch: Batch) -> None:
        self.batches.append(batch)
        tokens = self.by_id
        for request, num_tokens in zip(batch.requests, batch.num_tokens):
            tokens[request.id] = tokens.get(request.id, 0) + num_tokens

    def land(self, batch: Batch) -> None:
        """The oldest batch ended (its outputs are being processed): its tokens are no longer in flight."""
        assert self.batches and self.batches[0] is batch, "batches end in launch order"
        self.batches.popleft()
        self._outputs_processed = True
        stale, tokens = batch.stale, self.by_id
        for request, num_tokens in zip(batch.requests, batch.num_tokens):
            if stale is not None and request.id in stale:
                continue
            left = tokens[request.id] - num_tokens
            if left:
                tokens[request.id] = left
            else:
                del tokens[request.id]

    def preempt(self, request: Request, samples: bool) -> None:
        """The request is preempted while in flight: its batch's output for it becomes stale
        (`samples`: that output holds a token)."""
        del self.by_id[request.id]
        for batch in self.batches:
            if request in batch.requests:
                if batch.stale is None:
                    batch.stale = {}
                batch.stale[request.id] = samples
