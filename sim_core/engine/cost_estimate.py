"""A run's cost estimated from the scenario (and its workload once built), before anything big is
built: named figures and an estimated peak of memory (`estimate_cost` -> `CostEstimate`).

How many batches a run forms is known only once it runs, so memory is checked twice:

* Before anything is built, on an estimate. Each batch holds at least one request step (one
  per output token, one per prompt chunk), so `num_request_steps` bounds the batches; a lightly
  loaded replica (each request alone) nearly reaches it, a busy one does not (a batch of 50
  decodes is one row). The estimate divides the steps by the concurrency Little's law gives
  with a lower bound on each request's time (`_concurrency`): the batches it implies lean
  high. A scenario whose estimated peak passes the limit is refused.
* While the run goes, `run_watch.MemoryWatch` prices the batch and block rows the recorder actually
  holds and stops the run (BudgetError) as soon as they would pass the limit, before the
  result is built. That check, not the estimate, guarantees the limit.
* KV block ids are handed out lazily (sim_core/memory), so a pool holds what the run touches:
  at most min(configured blocks, blocks the requests take), never one entry per configured block.

Per-item constants (bytes) were measured around `run_simulation` with tracemalloc (peak of the
traced Python and numpy allocations, result frames included) and as the growth of the peak
resident set (allocator overhead included), on light loads (qps 0.05-0.5: each request alone,
the worst case per step) and heavy ones, for vllm (fast-forwarded and iteration by
iteration), vllm_v1, sglang and vllm_v0 at every record level, 300-80,000 requests and 1-1,024
replicas; each constant is rounded up from the largest per-item figure seen. `python
bench/budget_calibration.py --rss` re-measures and prints measured vs estimated: with the
likely batch count the estimates are 1.1-2.0x the traced peak on light and heavy loads alike
(stepwise and fast-forwarded, vllm, vllm_v1, sglang, vllm_v0, P/D, PP 4), and the default
scenario at 20,000 requests is estimated at 856 MiB (record full; measured 422) where pricing
one batch per request step gave 2.9 GiB.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from math import ceil
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sim_core.cluster.pools import pool_views
from sim_core.config import SimulationConfig
from sim_core.config.arrival import ReplayArrivalConfig
from sim_core.config.lengths import EmpiricalLengthConfig
from sim_core.memory import plan_memory
from sim_core.memory.model_bytes import stage_weight_bytes
from sim_core.results.record import GAPS_BEFORE_COMPACTING
from sim_core.workload.formats import is_json_lines
from sim_core.workload.synthetic import generate_columns

if TYPE_CHECKING:
    from sim_core.workload.model import Workload

RUN_BYTES = 4_000_000      # a run of nothing: schedulers, predictor, empty result frames
REPLICA_BYTES = 8_000      # scheduler, stages, pool and recorder state per replica (measured ~3 kB)
REQUEST_BYTES = 1000       # workload columns, Request object, request log row, result row (measured <= 780; RSS 950)
# per request step (measured <= 790; RSS 850; series: batches' bound, its rows are narrower)
STEP_BYTES = {"requests": 0, "series": 900, "batches": 900, "full": 900}
RUN_STEP_BYTES = 600       # a batch row a decode run made in bulk, with its stage and series rows (measured <= 560)
BLOCK_ROW_BYTES = 300      # record full: one block row (taken, let go, keyed or evicted; measured <= 260)
STAGE_ROW_BYTES = 250      # record batches/full: a stage row per pipeline stage after the first (RSS ~200)
GAP_BYTES = 64             # a raw token gap until GAPS_BEFORE_COMPACTING are folded (list + fold copies; RSS ~60)
BLOCK_EVENT_BYTES = 600    # record full: a block taken and let go (and keyed / evicted) (measured <= 520)
POOL_BLOCK_BYTES = 48      # a block id the pool has handed out: owner/ref/key entries and the id itself
TRACE_ROW_BYTES = 200      # reading one trace row (one text chunk plus parsed columns)
SAMPLE_REQUESTS = 4096     # synthetic workloads: lengths are estimated from this many generated requests
UNCHUNKED = 1 << 62        # a prompt runs in one iteration
MIB, GIB = 1024**2, 1024**3


@dataclass(frozen=True)
class CostEstimate:
    """What a run would hold, from the scenario (and its workload once read).

    Token figures are None while a trace is not read yet (its row count is known, its lengths
    are not); `exact` is True when they come from the built workload, False when synthetic
    lengths were estimated from a generated sample.
    """

    num_replicas: int
    num_blocks_per_replica: int        # the largest pool's KV blocks per replica
    num_kv_blocks: int                 # KV blocks x replicas over all pools, as configured
    num_requests: int
    num_trace_rows: int                # rows of trace files still to read (0 once the workload is built)
    num_prompt_tokens: int | None      # after max_model_len clipping
    num_output_tokens: int | None
    num_request_steps: int | None      # (request, batch) pairs: an upper bound on batches
    num_batches: int | None            # batches the run likely forms (_likely_batches): request steps / concurrency
    num_block_allocations: int | None  # KV blocks the requests take over the run
    num_events: int | None             # simulated events (about: 3 per step, 2 + 4 x PP with PP stages)
    num_recorded_rows: int | None      # table rows engine.record keeps, an upper bound
    record: str
    peak_bytes: int                    # estimated: batch rows priced at num_batches
    parts: Mapping[str, int] = field(default_factory=dict)   # peak_bytes by figure
    exact: bool = False

    @property
    def committed_bytes(self) -> int:
        """What the run holds however it batches: peak_bytes less the batch rows."""
        return self.peak_bytes - self.parts.get("request_steps", 0)


def estimate_cost(config: SimulationConfig, workload: Workload | None = None) -> CostEstimate:
    """Estimate what running `config` would hold, without building anything big.

    Args:
        config: the validated scenario.
        workload: the built workload, if any (exact figures); else synthetic lengths come from
            a small generated sample and a trace contributes only its row count.

    Raises:
        ConfigError, TraceError: as the run would (the memory planner, a generated sample).
    """
    return estimate_with_rows(config, workload, trace_rows(config) if workload is None else {})


def estimate_with_rows(config: SimulationConfig, workload: Workload | None, rows: dict[str, int]) -> CostEstimate:
    """estimate_cost, given the rows of the trace files still to read (none once the workload is built)."""
    views = pool_views(config)
    pools = [(_num_blocks(view.config), view.num_replicas) for view in views]
    stages = max(view.config.cluster.pipeline_parallel_size for view in views)
    tokens = _tokens(config, workload, pools[0][0], rows)
    num_requests = tokens.num_requests
    num_replicas = sum(replicas for _, replicas in pools)
    configured = sum(blocks * replicas for blocks, replicas in pools)
    level = config.engine.record
    parts = {"run": RUN_BYTES, "replicas": REPLICA_BYTES * num_replicas, "requests": REQUEST_BYTES * num_requests,
             "trace_rows": TRACE_ROW_BYTES * sum(rows.values())}
    steps = allocations = events = recorded = None
    if tokens.output is not None:
        assert tokens.steps is not None and tokens.blocks is not None and tokens.prompt_blocks is not None, \
            "_totals sets every total"
        steps = tokens.steps
        allocations = tokens.blocks + (tokens.prompt_blocks if len(pools) > 1 else 0)  # P/D: prompts in both pools
        events = steps * (3 if stages == 1 else 2 + 4 * stages) + 2 * num_requests
        recorded = _recorded_rows(level, steps, stages, allocations, num_requests)
        assert tokens.batches is not None, "_totals sets every total"
        bulk = config.engine.fast_forward and stages == 1     # decode runs record their rows in bulk
        row_bytes = RUN_STEP_BYTES if bulk and level != "requests" else STEP_BYTES[level]
        step_bytes = row_bytes + (STAGE_ROW_BYTES * (stages - 1) if level != "requests" else 0)
        parts["request_steps"] = step_bytes * tokens.batches
        parts["token_gaps"] = GAP_BYTES * min(tokens.output, GAPS_BEFORE_COMPACTING)
        parts["block_events"] = BLOCK_EVENT_BYTES * allocations if level == "full" else 0
        parts["kv_blocks"] = POOL_BLOCK_BYTES * min(configured, allocations)
    return CostEstimate(num_replicas, max(blocks for blocks, _ in pools), configured, num_requests,
                        sum(rows.values()), tokens.prompt, tokens.output, steps, tokens.batches, allocations, events,
                        recorded, level, sum(parts.values()), parts, workload is not None)


def _recorded_rows(level: str, steps: int, stages: int, allocations: int, num_requests: int) -> int:
    """Rows of the recorder's tables: per batch a batch row, a stage row per pipeline stage and
    two series rows; `full` adds two block rows per allocation and about four state changes
    per request."""
    if level == "requests":
        return num_requests
    rows = num_requests + (3 + stages) * steps
    return rows + 2 * allocations + 4 * num_requests if level == "full" else rows


# ---- figures from the scenario -----------------------------------------------------------------


def _num_blocks(config: SimulationConfig) -> int:
    """KV blocks per replica: scheduler.num_blocks or the memory planner's."""
    return config.scheduler.num_blocks or plan_memory(config).num_blocks


def trace_files(config: SimulationConfig) -> dict[str, str]:
    """Every trace file the workload may read, by the field that names it."""
    spec = config.workload
    files = {"workload.trace_file": spec.trace_file}
    if isinstance(spec.arrival, ReplayArrivalConfig):
        files["workload.arrival.trace_file"] = spec.arrival.trace_file
    for name in ("prompt_tokens", "output_tokens"):
        lengths = getattr(spec, name)
        if isinstance(lengths, EmpiricalLengthConfig):
            files[f"workload.{name}.trace_file"] = lengths.trace_file
    return {where: path for where, path in files.items() if path}


def trace_rows(config: SimulationConfig) -> dict[str, int]:
    """Data rows of each trace file, counted without parsing."""
    limit = config.workload.max_trace_mb * MIB
    return {where: count_rows(path, limit) for where, path in trace_files(config).items()}


def count_rows(path: str, max_bytes: int) -> int:
    """Lines of a JSON-lines file, or of a CSV less its header, read in 1 MiB pieces (bounded
    memory); 0 for a file that is missing, unreadable or over `max_bytes` (the trace reader
    refuses those with its own message)."""
    file = Path(path)
    try:
        if not file.is_file() or file.stat().st_size > max_bytes:
            return 0
        lines, last = 0, b"\n"
        with file.open("rb") as handle:
            while piece := handle.read(MIB):
                lines += piece.count(b"\n")
                last = piece[-1:]
        lines += last != b"\n"     # a last line without its newline
        return max(0, lines - (0 if is_json_lines(file) else 1))
    except OSError:
        return 0


@dataclass(frozen=True)
class _Tokens:
    num_requests: int
    prompt: int | None = None
    output: int | None = None
    steps: int | None = None
    batches: int | None = None         # likely batches (_likely_batches)
    blocks: int | None = None          # blocks a request holds at its end, summed
    prompt_blocks: int | None = None   # of which its prompt's


def _tokens(config: SimulationConfig, workload: Workload | None, blocks_per_replica: int,
            rows: dict[str, int]) -> _Tokens:
    """Request and token totals: exact from a workload, scaled up from a generated sample for a
    synthetic scenario, only the request count for a trace not read yet."""
    spec = config.workload
    if workload is not None:
        return _totals(config, workload.num_prefill_tokens, workload.num_decode_tokens, workload.n,
                       workload.arrived_at, blocks_per_replica, 1.0)
    if spec.trace_file:
        rows_kept = round(rows.get("workload.trace_file", 0) * spec.sample_fraction)
        return _Tokens(min(rows_kept, spec.max_trace_requests or rows_kept))
    prompt, output, n, arrivals = _sample_lengths(config)
    return _totals(config, prompt, output, n, arrivals, blocks_per_replica, spec.num_requests / len(prompt))


def _sample_lengths(config: SimulationConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """Prompt and output lengths (and the n column) and arrival times of the first
    SAMPLE_REQUESTS generated requests, lengths scaled and clipped to max_model_len as the
    workload builder does (float64: no overflow; rows that the builder would refuse are kept,
    the run reports them)."""
    spec = config.workload
    sample = spec.model_copy(update={"num_requests": min(spec.num_requests, SAMPLE_REQUESTS)})
    with np.errstate(all="ignore"):        # arrival times may overflow here; the builder refuses them
        columns = generate_columns(sample, np.random.default_rng(config.seed if spec.seed is None else spec.seed))
    prompt = np.maximum(np.floor(columns["num_prefill_tokens"] * spec.prefill_scale_factor), 1)
    output = np.maximum(np.floor(columns["num_decode_tokens"] * spec.decode_scale_factor), 1)
    if config.scheduler.traits.clips_prompts:
        prompt = np.maximum(prompt - np.maximum(prompt + output - config.max_model_len, 0), 1)
    return prompt, output, columns.get("n"), columns["arrived_at"]


def _totals(config: SimulationConfig, prompt: np.ndarray, output: np.ndarray, n: np.ndarray | None,
            arrivals: np.ndarray, blocks_per_replica: int, scale: float) -> _Tokens:
    """Totals over per-request lengths (clipped to max_model_len as Vidur does) and the likely
    batch count from the arrivals' rate, times `scale`."""
    sched, traits = config.scheduler, config.scheduler.traits
    prompt, output = np.asarray(prompt, dtype=np.float64), np.asarray(output, dtype=np.float64)
    if not traits.clips_prompts:   # (sglang) the output is cut where a request reaches its limit
        limit = min(config.max_model_len, blocks_per_replica * sched.block_size - 1)
        output = np.clip(np.minimum(output, limit - prompt), 0, None)
    samples = np.asarray(n, dtype=np.float64) if n is not None and traits.serves_parallel_samples else 1.0
    steps = np.ceil(prompt / (sched.prefill_chunk() or UNCHUNKED)) + output
    prompt_blocks = np.ceil(prompt / sched.block_size)
    blocks = prompt_blocks + samples * np.ceil(output / sched.block_size)
    total_prompt, total_output, total_steps, total_blocks, total_prompt_blocks = (
        int(ceil(float(values.sum()) * scale)) for values in (prompt, output, steps, blocks, prompt_blocks))
    concurrency = _concurrency(config, steps, prompt + output, arrivals, blocks_per_replica, scale)
    return _Tokens(round(len(prompt) * scale), total_prompt, total_output, total_steps,
                   int(ceil(total_steps / concurrency)), total_blocks, total_prompt_blocks)


def _concurrency(config: SimulationConfig, steps: np.ndarray, tokens: np.ndarray, arrivals: np.ndarray,
                 blocks_per_replica: int, scale: float) -> float:
    """Requests a replica likely batches together, from Little's law with a lower bound on each
    request's time in the replica (its steps, each at least one iteration of at least
    `_least_iteration_s`): arrival rate per replica x mean steps x that time, at least 1 and
    at most what the batch cap, the replica's share of the requests and its KV tokens allow.
    An estimate that leans low (so the batches it implies lean high), not a bound: the run's
    MemoryWatch enforces the limit."""
    replicas = sum(view.num_replicas for view in pool_views(config))
    span = float(np.max(arrivals) - np.min(arrivals)) if len(arrivals) > 1 else 0.0
    rate = (len(arrivals) - 1) / span / replicas if span > 0 else float("inf")
    mean_steps, mean_tokens = float(np.mean(steps)), max(float(np.mean(tokens)), 1.0)
    cap = min(float(config.scheduler.profile_batch(config.max_model_len)[1]), len(steps) * scale / replicas,
              blocks_per_replica * config.scheduler.block_size / mean_tokens)
    likely = rate * mean_steps * _least_iteration_s(config) if rate < float("inf") else cap
    return max(1.0, min(likely, cap))


def _least_iteration_s(config: SimulationConfig) -> float:
    """A lower bound on one iteration's time: the linear predictor's fixed part and one token;
    for the others, reading the weights one token touches (a MoE model: top_k of its experts)
    once at the device's memory bandwidth."""
    predictor = config.predictor
    if predictor.type == "linear":
        return float(getattr(predictor, "base_s", 0.0)) + float(getattr(predictor, "per_token_s", 0.0))
    model = config.model_spec()
    share = model.num_experts_per_token / model.num_experts if model.is_moe else 1.0
    weights = stage_weight_bytes(model, config.cluster.tensor_parallel_size, config.cluster.pipeline_parallel_size, 0)
    return weights * share / (config.device_spec().memory_bandwidth_gbps * 1e9)
