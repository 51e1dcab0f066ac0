"""Requests and batches: the things the schedulers move around.

Token accounting follows Vidur (see docs/design/cost-models.md): a request's `num_processed_tokens`
catches up with `total_tokens`; the iteration that finishes the prompt also yields the first
output token; a restart folds everything processed so far into a new, longer prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim_core.memory.cache_ops import CacheOps
    from sim_core.predictor.shape import BatchShape


class RequestStatus(IntEnum):
    """Ordered lifecycle states; `status >= FINISHED` means the request is done."""

    PENDING = 0      # not yet arrived
    WAITING = 1      # in a replica's queue, holds no KV blocks
    RUNNING = 2      # holds KV blocks (in a batch or between batches)
    FINISHED = 3
    REJECTED = 4     # can never be served by this configuration
    IGNORED = 5      # dropped by the policy while queued (vllm_v0: too long for the model or the cache)


NOT_YET = -1.0  # sentinel time for "has not happened"


@dataclass(slots=True, eq=False)
class Request:
    """One inference request and its progress."""

    id: int
    arrived_at: float
    num_prefill_tokens: int
    num_decode_tokens: int
    initial_prefill_tokens: int = 0
    initial_decode_tokens: int = 0
    num_processed_tokens: int = 0
    is_prefill_complete: bool = False
    scheduled: bool = False          # Vidur's flag: reset by restart, read by lightllm
    completed: bool = False
    status: RequestStatus = RequestStatus.PENDING
    replica_id: int = -1
    scheduled_at: float = NOT_YET
    prefill_completed_at: float = NOT_YET
    completed_at: float = NOT_YET
    last_token_at: float = NOT_YET
    max_token_gap: float = 0.0
    num_restarts: int = 0
    num_blocks: int = 0                               # KV blocks held (kept by the pool)
    blocks: list[int] = field(default_factory=list)   # their physical ids, when the pool tracks ids
    priority: int = 0                # smaller is more urgent (the workload's priority column)
    num_cached_tokens: int = 0       # prompt tokens found in a prefix cache, summed over admissions
    num_lookup_tokens: int = 0       # prompt tokens looked up in a prefix cache, summed likewise
    truncated: bool = False          # output cut where the request reached max_model_len
    num_seqs: int = 1                # parallel samples (n); each decodes num_decode_tokens (vllm_v0)
    num_swaps: int = 0               # times its KV blocks were swapped out to CPU (vllm_v0)

    def __post_init__(self) -> None:
        assert self.num_prefill_tokens >= 1 and self.num_decode_tokens >= 1
        self.initial_prefill_tokens = self.num_prefill_tokens
        self.initial_decode_tokens = self.num_decode_tokens

    @property
    def total_tokens(self) -> int:
        return self.num_prefill_tokens + self.num_decode_tokens

    @property
    def num_processed_decode_tokens(self) -> int:
        return max(self.num_processed_tokens - self.num_prefill_tokens, 0)

    def on_batch_schedule(self, time: float) -> None:
        """A batch containing this request was formed at `time`."""
        if not self.scheduled:
            self.scheduled = True
            if self.num_restarts == 0:
                self.scheduled_at = time

    def on_preempted_step_start(self, time: float) -> None:
        """A step holding this request starts at `time` though the request was preempted after
        the step was formed (vllm_v1's async scheduling forms the next step meanwhile): if it is
        the request's first step, the request was scheduled then."""
        if self.scheduled_at == NOT_YET:
            self.scheduled_at = time

    def on_batch_end(self, time: float, num_tokens: int) -> float:
        """Account an iteration that processed `num_tokens`; returns the gap since the previous
        output token if this iteration produced one (else -1: a partial prefill chunk, or the
        request's very first token). A group of parallel samples decodes one token per sequence,
        so its `num_tokens` of a decode iteration counts `num_seqs` tokens of progress 1."""
        if self.is_prefill_complete and self.num_seqs != 1:
            num_tokens //= self.num_seqs
        self.num_processed_tokens += num_tokens
        if not self.is_prefill_complete and self.num_processed_tokens == self.num_prefill_tokens:
            self.is_prefill_complete = True
            self.num_processed_tokens += 1  # the prefill iteration yields the first output token
            if self.prefill_completed_at == NOT_YET:
                self.prefill_completed_at = time
        if self.num_processed_tokens == self.num_prefill_tokens + self.num_decode_tokens:
            self.finish(time)
        if not self.is_prefill_complete:
            return -1.0
        previous, self.last_token_at = self.last_token_at, time
        if previous == NOT_YET:
            return -1.0
        gap = time - previous
        if gap > self.max_token_gap:
            self.max_token_gap = gap
        return gap

    def on_stale_token(self, time: float) -> float:
        """A step that was running when this request was preempted (recompute) yields its token
        anyway (vLLM's async scheduling delivers it): one more known token to compute again, the
        last one finishes the request. Returns the gap since the previous output token (-1: its
        first)."""
        self.num_prefill_tokens += 1
        self.num_decode_tokens -= 1
        if self.prefill_completed_at == NOT_YET:
            self.prefill_completed_at = time
        if not self.num_decode_tokens:
            self.finish(time)
        previous, self.last_token_at = self.last_token_at, time
        if previous == NOT_YET:
            return -1.0
        gap = time - previous
        if gap > self.max_token_gap:
            self.max_token_gap = gap
        return gap

    def finish(self, time: float) -> None:
        """The request has all its output tokens, as of `time`."""
        self.completed = True
        self.completed_at = time
        self.status = RequestStatus.FINISHED

    def on_decode_run(self, num_tokens: int, last_token_at: float, widest_gap: float, finished: bool) -> None:
        """Account `num_tokens` decode iterations advanced in one step (fast-forward): the last
        one ended at `last_token_at`, the widest gap between two of its tokens in the run was
        `widest_gap`, and `finished` says its last output token was among them (`on_decode_runs`
        repeats this inline for a run's members: keep the two alike)."""
        if widest_gap > self.max_token_gap:
            self.max_token_gap = widest_gap
        self.num_processed_tokens += num_tokens
        self.last_token_at = last_token_at
        if finished:
            self.finish(last_token_at)

    @staticmethod
    def on_decode_runs(requests: list[Request], remaining: list[int], first_gaps: list[float], num_tokens: int,
                       last_token_at: float, widest_gap: float) -> None:
        """`on_decode_run` of every member of a run that takes part in all of its `num_tokens`
        iterations (the last ending at `last_token_at`): member i's widest gap is the larger of
        its own first gap (`first_gaps[i]`) and the run's `widest_gap` after it, and it finishes
        when its `remaining[i]` iterations are those. One loop instead of a call per member (the
        body is `on_decode_run`'s, inline: keep the two alike)."""
        for request, left, gap in zip(requests, remaining, first_gaps):
            widest = widest_gap if widest_gap > gap else gap
            if widest > request.max_token_gap:
                request.max_token_gap = widest
            request.num_processed_tokens += num_tokens
            request.last_token_at = last_token_at
            if left == num_tokens:
                request.finish(last_token_at)

    def hand_over_blocks(self) -> tuple[int, list[int]]:
        """Give its KV blocks to a stand-in holder (a P/D hand-off's handle): returns how many
        it held and their ids; it holds none afterwards."""
        held = self.num_blocks, self.blocks
        self.num_blocks, self.blocks = 0, []
        return held

    @property
    def num_known_tokens(self) -> int:
        """Tokens whose ids exist now: the prompt, plus the outputs once decoding."""
        return self.num_processed_tokens if self.is_prefill_complete else self.num_prefill_tokens

    def recompute(self) -> None:
        """Engine-style recompute preemption (vLLM v1, SGLang): the prompt and the outputs so
        far become the new prompt, computed again from token 0 (unlike `restart`, a request
        stopped mid-prompt keeps its whole prompt)."""
        total = self.total_tokens
        self.num_prefill_tokens = self.num_known_tokens
        self.num_decode_tokens = total - self.num_prefill_tokens
        self.num_processed_tokens = 0
        self.scheduled = False
        self.is_prefill_complete = False
        self.num_restarts += 1

    def restart(self) -> None:
        """Recompute preemption: the tokens processed so far become the new prompt."""
        assert self.num_processed_tokens > 0, "only a request that has run can be restarted"
        total = self.total_tokens
        self.num_prefill_tokens = self.num_processed_tokens
        self.num_decode_tokens = total - self.num_prefill_tokens
        self.num_processed_tokens = 0
        self.scheduled = False
        self.is_prefill_complete = False
        self.num_restarts += 1


@dataclass(slots=True, eq=False)
class Batch:
    """Requests run together for one iteration, with the tokens each processes."""

    id: int
    replica_id: int
    requests: list[Request]
    num_tokens: list[int]
    num_prefill_tokens: int = 0   # tokens of requests whose prompt was not yet complete
    formed_at: float = NOT_YET
    completed_at: float = NOT_YET
    shape: BatchShape | None = None   # set when the batch is formed
    num_padding: int = 0          # dummy requests added to reach a CUDA-graph batch size (sglang)
    cache_ops: CacheOps | None = None   # KV swaps and copies run before the model
    cache_seconds: float = 0.0    # their time, added to every stage's time (set when formed)
    stale: dict[int, bool] | None = None   # request id -> its output still brings a token: requests
    # preempted while this batch ran (vllm_v1's async scheduling); their other tokens are void

    def __post_init__(self) -> None:
        assert self.requests and len(self.requests) == len(self.num_tokens)

    @staticmethod
    def prefill_tokens_of(requests: list[Request], num_tokens: list[int]) -> int:
        """Tokens of `num_tokens` that belong to requests whose prompt is not complete yet."""
        return sum(t for r, t in zip(requests, num_tokens) if not r.is_prefill_complete)
