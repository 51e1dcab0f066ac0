"""vLLM v0's SchedulingBudget: tokens and sequences of one step, counted once per request."""

from __future__ import annotations


class SchedulingBudget:
    """What one step has taken of the token budget and the sequence cap.

    Adding a request twice counts it once; subtracting a request that was not added does
    nothing (vLLM keeps the request ids of each count for exactly this).
    """

    __slots__ = ("_seq_ids", "_token_ids", "max_num_seqs", "num_batched_tokens", "num_curr_seqs", "token_budget")

    def __init__(self, token_budget: int, max_num_seqs: int) -> None:
        self.token_budget, self.max_num_seqs = token_budget, max_num_seqs
        self.num_batched_tokens = self.num_curr_seqs = 0
        self._token_ids: set[int] = set()
        self._seq_ids: set[int] = set()

    def can_schedule(self, num_new_tokens: int, num_new_seqs: int) -> bool:
        return (self.num_batched_tokens + num_new_tokens <= self.token_budget
                and self.num_curr_seqs + num_new_seqs <= self.max_num_seqs)

    @property
    def remaining_tokens(self) -> int:
        return self.token_budget - self.num_batched_tokens

    def add_tokens(self, request_id: int, num: int) -> None:
        if request_id not in self._token_ids:
            self._token_ids.add(request_id)
            self.num_batched_tokens += num

    def subtract_tokens(self, request_id: int, num: int) -> None:
        if request_id in self._token_ids:
            self._token_ids.remove(request_id)
            self.num_batched_tokens -= num

    def add_seqs(self, request_id: int, num: int) -> None:
        if request_id not in self._seq_ids:
            self._seq_ids.add(request_id)
            self.num_curr_seqs += num

    def subtract_seqs(self, request_id: int, num: int) -> None:
        if request_id in self._seq_ids:
            self._seq_ids.remove(request_id)
            self.num_curr_seqs -= num
