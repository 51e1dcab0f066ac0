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
    """Batches launched and not yet ended, oldest first, and their tokens per request.

    Each batch's tokens are kept apart (request id -> tokens, made in one comprehension when it
    launches, dropped whole when it lands): a request's tokens in flight are the sum over the
    batches, of which a formation sees at most one (it schedules only with room for a second)."""

    __slots__ = ("_outputs_processed", "_tokens", "batches")

    def __init__(self) -> None:
        self.batches: deque[Batch] = deque()
        self._tokens: deque[dict[int, int]] = deque()   # per batch, in the same order
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

    @property
    def by_id(self) -> dict[int, int]:
        """Request id -> its tokens in flight (read-only: with one batch in flight, that batch's
        own record; with two, their sum, made now)."""
        tokens = self._tokens
        if len(tokens) == 1:
            return tokens[0]
        merged: dict[int, int] = {}
        for of_batch in tokens:
            for rid, num_tokens in of_batch.items():
                merged[rid] = merged.get(rid, 0) + num_tokens
        return merged

    def tokens(self, request: Request) -> int:
        """Tokens of the request in flight (counted as computed by the scheduler)."""
        rid = request.id
        return sum(of_batch.get(rid, 0) for of_batch in self._tokens)

    def launch(self, batch: Batch, tokens: dict[int, int] | None = None) -> None:
        """`batch` starts; `tokens`, when given, is its request id -> tokens record, made as it
        was formed (kept and changed here from now on)."""
        self.batches.append(batch)
        if tokens is None:
            tokens = {r.id: n for r, n in zip(batch.requests, batch.num_tokens)}   # (a request once a batch)
        self._tokens.append(tokens)

    def land(self, batch: Batch) -> None:
        """The oldest batch ended (its outputs are being processed): its tokens are no longer in flight."""
        assert self.batches and self.batches[0] is batch, "batches end in launch order"
        self.batches.popleft()
        self._tokens.popleft()
        self._outputs_processed = True

    def preempt(self, request: Request, samples: bool) -> None:
        """The request is preempted while in flight: its batch's output for it becomes stale
        (`samples`: that output holds a token), and its tokens no longer count."""
        rid = request.id
        for batch, of_batch in zip(self.batches, self._tokens):
            if of_batch.pop(rid, None) is not None:
                if batch.stale is None:
                    batch.stale = {}
                batch.stale[rid] = samples
