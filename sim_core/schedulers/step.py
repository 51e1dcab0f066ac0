"""One iteration's schedule while a policy builds it: requests, their tokens, the budget left."""

from __future__ import annotations

from sim_core.entities import Request


class Step:
    """Requests scheduled so far in this iteration (in order) and the token budget left."""

    __slots__ = ("blocked", "budget", "ids", "num_tokens", "preempted", "requests")

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.requests: list[Request] = []
        self.num_tokens: list[int] = []
        self.preempted = False
        self.blocked = False   # a request waits for blocks held by a batch in flight (PP > 1)
        self.ids: set[int] = set()

    def __contains__(self, request: Request) -> bool:
        return request.id in self.ids

    def add(self, request: Request, num_tokens: int) -> None:
        # (V1Step.add, which vllm_v1 uses, makes these changes and more: keep the two alike)
        self.requests.append(request)
        self.num_tokens.append(num_tokens)
        self.budget -= num_tokens
        self.ids.add(request.id)

    def remove(self, request: Request) -> None:
        """Take a request back out (it was preempted later in the same step); its tokens
        return to the budget."""
        index = next(i for i, r in enumerate(self.requests) if r is request)
        self.budget += self.num_tokens.pop(index)
        del self.requests[index]
        self.ids.discard(request.id)
