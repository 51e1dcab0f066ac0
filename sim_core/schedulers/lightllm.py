"""`lightllm` (LightLLM as modelled by Vidur): token-level KV, separate prefill/decode batches.

Blocks are tokens (block_size 1) and there is no pipeline parallelism. Each request is summed
up as (tokens already run, tokens still to generate). A candidate is admitted when, with the
running requests and the candidates before it sorted by tokens-to-go (descending),
max_i(to_go_i * (i + 1) + cumulative already-run_i) < num_blocks, i.e. the projected peak
never exceeds the pool. With requests running, a decode batch of all of them is formed unless
max_waiting_iters decode batches have run since the last prefill try.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from sim_core.config import PolicyTraits, SchedulerConfig
from sim_core.config.scheduler import MaxTokensInBatch
from sim_core.entities import Batch, Request
from sim_core.errors import SimulationError
from sim_core.schedulers.base import UNBOUNDED, ReplicaScheduler
from sim_core.schedulers.steady import SteadyDecode

if TYPE_CHECKING:
    from sim_core.config import SimulationConfig
    from sim_core.results.record import Recorder
    from sim_core.schedulers.base import ReplicaLimits


class LightLLMConfig(SchedulerConfig):
    """The knobs lightllm reads; its KV blocks are tokens and it has no pipeline parallelism."""

    type: Literal["lightllm"] = Field("lightllm", description=(
        "token-level KV, separate prefill/decode, as Vidur models it"))
    max_tokens_in_batch: MaxTokensInBatch
    max_waiting_iters: int = Field(10, ge=0, le=1_000_000, description=(
        "lightllm: decode iterations after which a prefill batch is tried even while requests run."))

    def check_scenario(self, scenario: SimulationConfig) -> None:
        if self.block_size != 1:
            raise ValueError(f"scheduler.block_size: lightllm needs 1 (got {self.block_size})")
        if scenario.cluster.pipeline_parallel_size != 1:
            raise ValueError("cluster.pipeline_parallel_size: lightllm supports only 1 "
                             f"(got {scenario.cluster.pipeline_parallel_size})")
        super().check_scenario(scenario)

    def activation_tokens(self, max_model_len: int) -> int:
        return self.max_tokens_in_batch


def usage_tuple(request: Request) -> tuple[int, int]:
    """(tokens already run, tokens still to generate) as LightLLM's estimate sees a request."""
    if request.scheduled:
        to_go = request.num_decode_tokens - request.num_processed_decode_tokens - 1
        return request.num_processed_tokens, max(0, to_go)
    return request.num_prefill_tokens + 1, max(0, request.num_decode_tokens - 2)


def projected_peak(usages: list[tuple[int, int]]) -> int:
    """Peak tokens held if the requests finish in order of tokens-to-go (longest last)."""
    peak, ran = 0, 0
    for i, (already, to_go) in enumerate(sorted(usages, key=lambda u: -u[1])):
        ran += already
        peak = max(peak, to_go * (i + 1) + ran)
    return peak


class LightLLMScheduler(ReplicaScheduler):
    # no preemption, so a request cannot be taken over mid-generation: no P/D disaggregation
    traits = PolicyTraits(LightLLMConfig, "LightLLM as modelled by Vidur", memory_planner="vidur",
                          supports_disaggregation=False,
                          implied_changes={"scheduler.block_size": 1, "cluster.pipeline_parallel_size": 1})
    config: LightLLMConfig
    running: list[Request]

    def __init__(self, replica_id: int, num_stages: int, config: LightLLMConfig, limits: ReplicaLimits,
                 recorder: Recorder) -> None:
        super().__init__(replica_id, num_stages, config, limits, recorder)
        assert self._block_size == 1 and self.num_stages == 1
        self.num_waiting_iters = 0
        self._steady_with_waiting = False

    def _next_batch(self) -> Batch | None:
        if not self.running:
            batch = self._prefill_batch()
            if batch is not None:
                self.num_waiting_iters = 0
            return batch
        if self.num_waiting_iters >= self.config.max_waiting_iters:
            self.num_waiting_iters = 0
            batch = self._prefill_batch()
            if batch is not None:
                return batch
        if not self.pool.can_allocate(len(self.running)):
            raise SimulationError(
                f"lightllm: replica {self.replica_id} has {len(self.running)} running requests but "
                f"only {self.pool.num_free} free KV tokens; LightLLM as Vidur models it has no "
                "preemption. Raise num_blocks or lower batch_size_cap")
        self.num_waiting_iters += 1
        return self._decode_batch()

    def _steady_decode(self, batch: Batch, preempted: bool) -> SteadyDecode | None:
        # Decode batches of all running requests recur; a prefill try happens only when the
        # waiting counter reaches max_waiting_iters, and matters only if someone is waiting.
        if batch.num_prefill_tokens:
            return None
        self._steady_with_waiting = bool(self.waiting)  # arrivals cut a run, so this holds throughout
        limit = max(0, self.config.max_waiting_iters - self.num_waiting_iters + 1) if self.waiting else UNBOUNDED
        return SteadyDecode(self, limit, past_completions=not self.waiting, growth="per_token")

    def _on_steady_decode(self, first: Batch, last: Batch, num_iterations: int) -> None:
        limit, formations = self.config.max_waiting_iters, num_iterations - 1
        if self._steady_with_waiting:
            self.num_waiting_iters += formations
        elif limit == 0:
            self.num_waiting_iters = 1
        else:
            self.num_waiting_iters = (self.num_waiting_iters - 1 + formations) % limit + 1

    def _prefill_batch(self) -> Batch | None:
        usages = [usage_tuple(r) for r in self.running]
        requests: list[Request] = []
        num_tokens: list[int] = []
        total = 0
        cap, waiting = self.config.batch_size_cap, self.waiting
        while waiting:
            request = waiting[0]
            tokens = self._next_num_tokens(request)
            if total + tokens > self.config.max_tokens_in_batch:
                break
            if self.pool.num_holders == cap or len(requests) == self._micro_batch_cap:
                break
            usages.append(usage_tuple(request))
            if projected_peak(usages) >= self._limits.num_blocks:
                break
            waiting.popleft()
            self._allocate(request, request.num_prefill_tokens)
            requests.append(request)
            num_tokens.append(tokens)
            total += tokens
        return self._make_batch(requests, num_tokens, total)

    def _decode_batch(self) -> Batch | None:
        requests, self.running = self.running, []
        for request in requests:
            self._allocate(request, 1)
        return self._make_batch(requests, [1] * len(requests), 0)

    def _rejection_reason(self, num_prefill_tokens: int, num_decode_tokens: int) -> str | None:
        if num_prefill_tokens > self.config.max_tokens_in_batch:
            return (f"its prompt of {num_prefill_tokens} tokens exceeds max_tokens_in_batch "
                    f"{self.config.max_tokens_in_batch}")
        alone = (num_prefill_tokens + 1) + max(0, num_decode_tokens - 2)
        if alone >= self._limits.num_blocks:
            return (f"LightLLM's admission estimate for it alone is {alone} tokens, not below the "
                    f"{self._limits.num_blocks}-token pool")
        return None
