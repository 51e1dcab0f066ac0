"""vllm_v1's step while it is formed: a `Step` that also keeps, as it goes, what the batch and
the steps in flight need of it, so that neither takes another pass over the members."""

from __future__ import annotations

from sim_core.entities import Request
from sim_core.schedulers.step import Step


class V1Step(Step):
    """A `Step` whose scheduled requests are `tokens` (request id -> its tokens this step, in
    order: `InFlight.launch` keeps this dict as the step's record) and which counts the tokens
    of requests whose prompt is not complete (`Batch.num_prefill_tokens`). `ids` stays empty:
    membership is `tokens`."""

    __slots__ = ("prefill", "tokens")

    def __init__(self, budget: int) -> None:
        super().__init__(budget)
        self.tokens: dict[int, int] = {}
        self.prefill = 0

    def __contains__(self, request: Request) -> bool:
        return request.id in self.tokens

    def add(self, request: Request, num_tokens: int) -> None:
        # (VllmV1Scheduler._run makes these changes inline: keep the two alike)
        self.requests.append(request)
        self.num_tokens.append(num_tokens)
        self.budget -= num_tokens
        self.tokens[request.id] = num_tokens
        if not request.is_prefill_complete:
            self.prefill += num_tokens

    def remove(self, request: Request) -> None:
        """Take a request back out. Call it before anything changes the request's prompt state
        (a preemption resets its prompt only after: `_make_room`): its tokens leave `prefill` by
        the state it has now, which must be the state `add` (or `_run`'s inline add) saw."""
        super().remove(request)
        num_tokens = self.tokens.pop(request.id)
        if not request.is_prefill_complete:
            self.prefill -= num_tokens
