"""A measured benchmark run, as the accuracy check and calibration read it: the scenario that
reproduces the server and the load, and the latencies the client measured, per load stage.

Every reader (inference-perf folders, vLLM's `vllm bench serve` JSON, BLIS validation tables,
per-request logs) produces this one shape, so replay and comparison never see a file format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from sim_core.workload.model import Workload

WHOLE_RUN = -1  # MeasuredStage.index of the figures over every stage together

# metric -> what it measures (all in seconds). `itl` is the time per output token from the means,
# (mean E2E - mean TTFT) / (output tokens - 1): the one per-token figure every layout can give the
# same way (a client's own per-token fields differ: inference-perf re-tokenises each streamed
# chunk, which doubles the count for Llama tokenizers).
METRICS = {"ttft": "time to first token", "e2e": "end-to-end latency", "itl": "time per output token (from means)"}
STATS = ("mean", "p50", "p90", "p99")


def latency_figures(values: np.ndarray) -> dict[str, float]:
    """Mean and p50/p90/p99 of latencies in seconds (numpy's linear percentiles, as vLLM's and
    inference-perf's clients compute them); NaN for every statistic when there are none."""
    if not len(values):
        return {stat: float("nan") for stat in STATS}
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {"mean": float(values.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99)}


@dataclass(frozen=True)
class MeasuredStage:
    """Client-side figures of the requests sent during one load stage (or the whole run).

    Attributes:
        index: the stage's position (0-based), or WHOLE_RUN.
        start_s, end_s: the window of send times (seconds from the run's first send).
        rate: the offered load in requests per second (NaN when the stage had no set rate).
        num_requests: requests sent; num_failed: those that got no complete answer.
        values: metric -> statistic -> seconds, only the ones measured (see METRICS, STATS).
    """

    index: int
    start_s: float
    end_s: float
    rate: float
    num_requests: int
    num_failed: int
    values: dict[str, dict[str, float]]

    @property
    def label(self) -> str:
        return "all" if self.index == WHOLE_RUN else str(self.index)


@dataclass(frozen=True)
class MeasuredRun:
    """One measured run of a real server.

    Attributes:
        name: short label (the run folder's name, or the experiment's id).
        layout: which reader produced it (e.g. `inference_perf`, `vllm_bench`).
        scenario: a scenario document (validated by SimulationConfig) with the server's model,
            device, parallelism and engine knobs; its workload section only sizes the run.
        workload: the requests as the client sent them (arrival, prompt and output tokens,
            shared prefixes).
        stages: the measured figures: the whole run (index WHOLE_RUN) first, then each stage.
        output_tokens: the output length the server generated per request (the `itl` divisor).
        requests: per-request measurements when the layout has them (columns `arrived_at`,
            `ttft`, `e2e`, `num_prefill_tokens`, `num_decode_tokens`; seconds), else None.
        notes: what the replay cannot reproduce or had to assume (shown beside the figures).
        saturated: the server could not keep up in the measurement (client time-outs or
            failures): its latencies are those of the requests that got through.
        unsupported: why the run cannot be replayed yet (a model or GPU the catalog cannot
            express); empty when it can. Such a run has an empty scenario and workload.
    """

    name: str
    layout: str
    scenario: dict[str, Any]
    workload: Workload
    stages: tuple[MeasuredStage, ...]
    output_tokens: float
    requests: pd.DataFrame | None = None
    notes: tuple[str, ...] = field(default=())
    saturated: bool = False
    unsupported: str = ""

    def stage(self, index: int) -> MeasuredStage | None:
        """The stage with this index (WHOLE_RUN for the whole run), if measured."""
        return next((s for s in self.stages if s.index == index), None)
