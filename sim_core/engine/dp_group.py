"""Attention data parallelism of a MoE model: the DP ranks of one replica step together.

vLLM 0.33.0 runs the DP ranks of a MoE model in lockstep (v1/engine/core.py: `DPEngineCoreProc`,
used only when `model_config.is_moe`; dense DP ranks are independent engines). Every forward
pass meets the other ranks' in each MoE layer's dispatch / combine, so:

* when any rank of the group runs a step, every rank runs one: a rank with nothing scheduled
  runs `execute_dummy_batch` (`_dummy_run` of 1 decode token) while the wave lasts;
* the step of the group ends when its slowest rank ends (the ranks meet at every MoE layer);
  a rank whose batch is shorter waits, and forms its next batch only then;
* DP padding (v1/worker/dp_utils.py `coordinate_batch_across_dp`): before each forward the
  ranks all-reduce their token counts; when every rank's step runs a CUDA graph (its tokens at
  most the largest capture size) each rank is padded to the group's largest count, else every
  rank runs its own (`should_dp_pad = synced_cudagraph_mode != NONE`, the minimum over ranks).

Here each DP rank is a scheduling replica (cluster/pools.py) with its own single pipeline stage.
A batch a rank forms is not started at once but handed to its group (`submit`); at the end of
the instant (after every rank formed what it will form now) the group starts one step: each
rank's batch, or a dummy batch (1 decode token), padded to the largest when the padding rule
holds, priced by the rank's own predictor (the roofline's experts and exchange for the group's
tokens: `RooflinePredictor.group_correction`); the step lasts the longest of them and every rank's
stage is busy for all of it. A batch a rank forms meanwhile (vLLM's async scheduling, or a rank
running a dummy batch that receives a request) queues behind the step, as on a busy stage.

What is recorded: a real batch's stage span runs from the group's start to the group's end; a
dummy batch records nothing in the batch and stage tables (it serves no request, and the busy
share counts served work only); `DpLockstep.num_dummy_steps` counts them per rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from sim_core.predictor import BatchShape
from sim_core.predictor.roofline import RooflinePredictor

if TYPE_CHECKING:
    from sim_core.engine.simulator import Simulator
    from sim_core.entities import Batch

DP_PHASE = 3   # end-of-instant key phase: after released session turns (0) and P/D hand-offs (1, 2)
DUMMY_BATCH = BatchShape(1, 1, (), 1, 0)   # execute_dummy_batch: one decode token, no KV context
MAX_GRAPH_TOKENS = 512   # vLLM's default largest CUDA-graph capture size (config/vllm.py)


def dp_padded(shape: BatchShape, num_padding: int) -> BatchShape:
    """`shape` padded with `num_padding` dummy tokens: they run through every token-wise layer
    (projections, experts, exchange) but are no request (no logits, no host work per request)
    and attend to no KV cache."""
    return replace(shape, total_tokens=shape.total_tokens + num_padding)


def graph_limit(max_num_seqs: int) -> int:
    """vLLM's default largest CUDA-graph capture size: min(2 x max_num_seqs, 512) tokens (one
    token per decode, no speculative decoding); 512 when max_num_seqs is unbounded (0)."""
    return min(2 * max_num_seqs, MAX_GRAPH_TOKENS) if max_num_seqs > 0 else MAX_GRAPH_TOKENS


@dataclass(slots=True, eq=False)
class DpGroup:
    """The DP ranks (scheduling replicas) of one replica and the batches waiting for its next step."""

    index: int
    ranks: range
    pending: dict[int, Batch] = field(default_factory=dict)   # rank -> batch of the next step
    running: bool = False      # a step is under way (every rank's stage is busy)
    start_due: bool = False    # a start is scheduled at the end of this instant


def _shape(batch: Batch) -> BatchShape:
    assert batch.shape is not None, "set when the batch is formed"
    return batch.shape


class DpLockstep:
    """Steps the DP groups of a run together (see the module docstring).

    Args:
        sim: the simulator (its kernel, stages, predictors and recorder).
        dp: ranks per group; replicas 0..dp-1 form group 0, dp..2dp-1 group 1, and so on.
        max_graph_tokens: the largest step that runs a CUDA graph (DP padding applies when
            every rank's step is at most this; 0: never pad).
    """

    def __init__(self, sim: Simulator, dp: int, max_graph_tokens: int) -> None:
        self.sim, self.dp, self.max_graph_tokens = sim, dp, max_graph_tokens
        num = len(sim.schedulers) // dp
        self.groups = [DpGroup(g, range(g * dp, (g + 1) * dp)) for g in range(num)]
        self.num_dummy_steps = [0] * len(sim.schedulers)

    def submit(self, replica: int, batch: Batch) -> None:
        """`replica`'s batch is ready on its idle stage: it runs in its group's next step (the
        stage counts as busy from now, as when a batch starts at once)."""
        group = self.groups[replica // self.dp]
        assert not group.running and replica not in group.pending, "a busy rank queues on its stage"
        group.pending[replica] = batch
        self.sim.stages[replica][0].start(self.sim.kernel.now)   # taken: what it forms next queues behind
        self._schedule_start(group)

    def _schedule_start(self, group: DpGroup) -> None:
        if not group.start_due:
            group.start_due = True
            self.sim.kernel.at_instant_end((DP_PHASE, group.index), self._start, group)

    def _start(self, group: DpGroup) -> None:
        """Run one step of the group now: every rank's pending batch, the others a dummy batch."""
        group.start_due = False
        sim, now = self.sim, self.sim.kernel.now
        batches, group.pending = group.pending, {}
        shapes = {r: _shape(batches[r]) if r in batches else DUMMY_BATCH for r in group.ranks}
        largest = max(shape.total_tokens for shape in shapes.values())
        if largest <= self.max_graph_tokens:   # every rank runs a CUDA graph: pad to the largest
            shapes = {r: dp_padded(shape, largest - shape.total_tokens) for r, shape in shapes.items()}
        group_tokens = sum(shape.total_tokens for shape in shapes.values())
        seconds = 0.0
        for r, shape in shapes.items():
            if r in batches:
                batches[r].shape = shape
                own = sim.stage_time(r, batches[r], 0)
            else:
                self.num_dummy_steps[r] += 1
                own = sim.predictors[r].stage_time(shape, 0)
            predictor = sim.predictors[r]
            if isinstance(predictor, RooflinePredictor):   # the experts see the group's tokens
                own += predictor.group_correction(shape.total_tokens, group_tokens)
            seconds = max(seconds, own)
            sim.stages[r][0].start(now)
        group.running = True
        sim.kernel.at(now + seconds, self._end, group, batches)

    def _end(self, group: DpGroup, batches: dict[int, Batch]) -> None:
        """The group's step ended now: each real batch ends; a batch a rank formed meanwhile
        (queued on its stage) is scheduled now and runs in the next step, its stage kept busy."""
        sim, now = self.sim, self.sim.kernel.now
        group.running = False
        for r in group.ranks:
            state = sim.stages[r][0]
            batch = batches.get(r)
            if batch is not None:
                sim.recorder.on_stage(batch.id, r, 0, state.started_at, now)
                if sim.overlap is not None and sim.overlapping[r]:
                    sim.overlap.ended_at(r, now)
                sim.kernel.soon(sim.on_batch_end, r, batch)
            state.finish()
            queued = state.start_next(now)   # busy again: a batch formed now queues behind it
            if queued is not None:
                sim._on_start(r, queued)
                group.pending[r] = queued
        if group.pending:
            self._schedule_start(group)
