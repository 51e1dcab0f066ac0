"""vllm_v0's preemption and ignore rules (a mixin of VllmV0Scheduler, which owns the queues,
`blocks`, `pool`, `recorder` and the step's `_to_waiting` / `_to_swapped` lists).

* swap when the mode is swap or the victim is a group of several samples (as vLLM's default
  mode does) and its blocks fit the CPU swap space; else recompute (vLLM aborts the engine
  when the swap space is full);
* recompute: a decoding request folds its tokens into its prompt (`Request.restart`), a group
  prefills its prompt and every sample's tokens again (`recompute_group`), a prompt cut short
  restarts (`restart_from_prompt`); one that would only fail again the same way is ignored;
* ignored requests get status IGNORED and a reason in `ignored`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim_core.entities import Request, RequestStatus
from sim_core.memory.cache_ops import CacheOps
from sim_core.results.record import IGNORED, SWAPPED_OUT
from sim_core.schedulers.seq_group import recompute_group, restart_from_prompt

if TYPE_CHECKING:
    from sim_core.memory.shared_blocks import RefCountedBlockPool, RefCountedCountingPool
    from sim_core.results.record import Recorder
    from sim_core.schedulers.v0_blocks import V0BlockManager
    from sim_core.schedulers.vllm_v0 import VllmV0Config


class V0Preemption:
    """Preempting and ignoring requests, for VllmV0Scheduler."""

    # what VllmV0Scheduler (and its base) provide
    config: VllmV0Config
    _recorder: Recorder
    replica_id: int
    pool: RefCountedBlockPool | RefCountedCountingPool
    blocks: V0BlockManager
    ignored: dict[int, str]
    _num_preemptions: int
    chunked: bool
    prompt_limit: int
    max_num_seqs: int
    token_budget: int
    _to_waiting: list[Request]
    _to_swapped: list[Request]

    def _preempt(self, victim: Request, ops: CacheOps) -> None:
        """Swap `victim` out (mode swap, or a group of several sequences, as vLLM does), else
        recompute it; when the swap space is full, recompute too (vLLM aborts the engine there).
        A group recomputed for lack of swap space (vLLM cannot) prefills its prompt and all its
        samples' tokens again (`recompute_group`). A recompute that would only come back to the
        same wall is an ignore instead (below)."""
        self._num_preemptions += 1
        swap = victim.num_seqs > 1 or self.config.preemption_mode == "swap"
        if swap and self.blocks.can_swap_out(victim):
            self._swap_out(victim, ops)
        elif self._cannot_continue(victim):
            self._ignore_running(victim)
        else:
            self._recompute(victim)

    def _cannot_continue(self, victim: Request) -> bool:
        """A prompt cut short (chunked prefill) restarts from scratch, so it would fill the same
        blocks and fail again when its next chunk needs more than the replica has (vLLM would spin
        there). A decoding request still gains a token per recompute: it goes on until its
        prompt no longer fits and is ignored."""
        return (not victim.is_prefill_complete
                and victim.num_blocks + self.blocks.live_seqs(victim) > self.pool.num_blocks)

    def _recompute(self, victim: Request) -> None:
        self.blocks.free(victim)
        group = self.blocks.groups.get(victim.id)
        if group is not None:
            group.unfork()
        if not victim.is_prefill_complete:
            restart_from_prompt(victim)
        elif group is not None:
            recompute_group(victim)
        else:
            victim.restart()
        victim.status = RequestStatus.WAITING
        self._to_waiting.append(victim)
        self._recorder.on_restart(self.replica_id, victim.id)

    def _swap_out(self, victim: Request, ops: CacheOps) -> None:
        self.blocks.swap_out(victim, ops)
        victim.num_swaps += 1
        victim.status = RequestStatus.WAITING
        self._to_swapped.append(victim)
        self._recorder.on_state(self.replica_id, victim.id, SWAPPED_OUT)

    # ---- requests that cannot be served --------------------------------------------------------

    def _ignore(self, request: Request, reason: str) -> None:
        request.status = RequestStatus.IGNORED
        self.ignored[request.id] = f"ignored: {reason}"
        self.blocks.groups.pop(request.id, None)
        self._recorder.on_state(self.replica_id, request.id, IGNORED)

    def _ignore_running(self, victim: Request) -> None:
        need = self.blocks.live_seqs(victim) + victim.num_blocks
        self.blocks.free(victim)
        self._ignore(victim, f"its next step needs {need} KV blocks (its blocks + one per sequence) but the "
                             f"replica has {self.pool.num_blocks}, and it was not swapped out")

    def _too_long(self, request: Request) -> str:
        limit = "max_model_len" if self.chunked else "min(max_model_len, max_num_batched_tokens)"
        return f"its prompt of {request.num_prefill_tokens} tokens exceeds the limit {self.prompt_limit} ({limit})"

    def _too_many_samples(self, request: Request) -> str:
        return (f"it asks for {request.num_seqs} samples but an iteration runs at most "
                f"{min(self.max_num_seqs, self.token_budget)} sequences (max_num_seqs, max_num_batched_tokens)")

    def _too_big(self, request: Request) -> str:
        usable = self.pool.num_blocks - self.blocks.watermark
        return (f"its prompt needs {self.blocks.prompt_blocks(request)} KV blocks but at most {usable} can be "
                f"allocated ({self.pool.num_blocks} blocks minus a watermark of {self.blocks.watermark})")

    def _cannot_resume(self, request: Request) -> str:
        return (f"swapped out, it needs {self.blocks.swap_in_need(request)} KV blocks to resume "
                f"(its blocks + one per sequence) but the replica has {self.pool.num_blocks}")
