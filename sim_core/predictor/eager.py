"""Steps too large for a CUDA graph: the host's launch time floors them.

vLLM (V1, CUDA graphs on, its default) captures its forward pass as CUDA graphs for steps of up
to `graph_tokens` tokens: min(2 x max_num_seqs, 512, max_num_batched_tokens) by default (a
decode-only step replays one full graph, a mixed step piecewise graphs around attention). A
larger step, e.g. one with a prompt chunk of some hundred tokens, runs without one: the host
launches it layer by layer (the compiled pieces, the attention, and for a MoE layer the router,
the top-k, the experts' alignment and fused kernels and, under expert or data parallelism, the
token dispatch and combine). The GPU runs behind the host, so such a step takes the longer of
its GPU work and the host's launching (a graphed step hides the launches in one replay):

    stage time = host phases on the path + max(GPU work + the stage's layers x the gap of a
                 layer, sum over the stage's layers of the per-layer launch time)

The gap of a layer is what the GPU loses to running a layer's kernels one by one rather than as
one replayed graph, even with the host ahead of it: the idle time between kernels a graph
removes and, under tensor parallelism, the eager all-reduce's copy into its registered buffer.

The per-layer launch times and the gap are the engine's (`vllm_v1.eager_layer_s`,
`eager_moe_layer_s`, `eager_gap_layer_s`; docs/accuracy.md for how they were set);
`SchedulerConfig.eager_launch()` gives them with the graph size, and `build_predictor` hands them
to the grid predictors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim_core.catalog import ModelSpec


@dataclass(frozen=True)
class EagerLaunch:
    """The host's launch time of steps that run without a CUDA graph.

    Attributes:
        graph_tokens: the most tokens a step may hold and still run as a CUDA graph.
        layer_s: host seconds to launch one layer with a dense MLP.
        moe_layer_s: host seconds to launch one layer whose MLP is the experts.
        gap_layer_s: GPU seconds one layer of such a step takes beyond its kernels (any layer).
    """

    graph_tokens: int
    layer_s: float
    moe_layer_s: float
    gap_layer_s: float = 0.0

    def stage_floors(self, model: ModelSpec, pp: int) -> list[float]:
        """Per pipeline stage (of `pp`): the least seconds a step over `graph_tokens` takes on
        the GPU side, the launch time of the stage's layers."""
        return [sum(self.moe_layer_s if model.is_moe_layer(layer) else self.layer_s
                    for layer in model.stage_layers(pp, stage)) for stage in range(pp)]

    def stage_gaps(self, model: ModelSpec, pp: int) -> list[float]:
        """Per pipeline stage (of `pp`): the seconds a step over `graph_tokens` adds to its GPU
        work, the gap of a layer times the stage's layers."""
        return [self.gap_layer_s * len(model.stage_layers(pp, stage)) for stage in range(pp)]
