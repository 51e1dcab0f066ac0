"""Append-only, columnar records of what happened during a run (for charts and traces).

The level decides what is kept (`LEVELS`, each keeping all the one before it keeps): `requests`
keeps only what per-request rows and the summary need; `series` adds the KV/queue time series,
the stage table and a lean batch table (`BATCH_SUMMARY`: id, replica, formation time, tokens and
prompt tokens; what the app's Overview reads); `batches` the whole batch table (its requests,
decode context, padding), the KV swaps / copies and what the cost-model breakdown needs: what the
CLI writes; `full` adds block allocations and request state changes (for the KV-block
animation and request timelines). Token gaps (time between tokens) and KV utilization
accumulators are kept at every level.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from numpy.typing import DTypeLike

from sim_core.portable_math import dot

if TYPE_CHECKING:
    from sim_core.entities import Batch

GAPS_BEFORE_COMPACTING = 1 << 20   # raw token gaps kept before they are folded into counts
RUNS_BEFORE_COMPACTING = 1 << 14   # fast-forward gap chunks kept likewise

# block event deltas: +1 / -1 a request takes / lets go of a block (a shared block has one event
# per holder); +2 / -2 a block gets / loses a prefix-cache key (request -1)

# request state-change codes
QUEUED, ADMITTED, RESTARTED, FINISHED, REJECTED, SWAPPED_OUT, SWAPPED_IN, IGNORED = range(8)
STATE_NAMES = ("queued", "admitted", "restarted", "finished", "rejected", "swapped_out", "swapped_in", "ignored")

LEVELS = ("requests", "series", "batches", "full")   # engine.record, leanest first: each keeps the one before's
i64, f64 = np.int64, np.float64
BATCH_COLUMNS: dict[str, DTypeLike] = {
    "batch_id": i64, "replica_id": i64, "formed_at": f64, "num_requests": i64, "num_tokens": i64,
    "num_prefill_tokens": i64, "num_decodes": i64, "decode_context": i64, "request_ids": object,
    "request_tokens": object, "padded_size": i64}
# the batch table at `series`: enough for output tokens over time (decode tokens by completion,
# which the result joins from the stage table) and batches per replica
BATCH_SUMMARY: dict[str, DTypeLike] = {name: BATCH_COLUMNS[name] for name in
                                       ("batch_id", "replica_id", "formed_at", "num_tokens", "num_prefill_tokens")}


def keeps(level: str, least: str) -> bool:
    """Whether record level `level` keeps everything `least` keeps."""
    return LEVELS.index(level) >= LEVELS.index(least)


class Table:
    """A growing table. Rows from the stepwise path go to per-column lists (`columns`, the
    cheapest appends Python has); rows made in bulk by fast-forwarded runs are kept as chunks
    (`chunks`: per chunk, a tuple with a value per column in `dtypes` order, each an array of
    the chunk's length or one value for all its rows). `arrays()` joins both once, at the end.
    Row order is not kept across the two: tables are sorted by time when the result is built.
    """

    __slots__ = ("dtypes", "columns", "chunks", "chunk_lengths", "chunk_rows")

    def __init__(self, dtypes: dict[str, DTypeLike]) -> None:
        self.dtypes = dtypes
        self.columns: dict[str, list] = {name: [] for name in dtypes}
        self.chunks: list[tuple] = []
        self.chunk_lengths: list[int] = []
        self.chunk_rows = 0

    def add_chunk_values(self, length: int, *values: object) -> None:
        """`length` rows, a value per column in the order of `dtypes` (by position, no keyword
        dict: the hot path of fast-forwarded runs): an array or list of `length` values, or one
        value for all rows (a tuple is one value)."""
        assert len(values) == len(self.dtypes), "a value per column"
        if length > 0:
            self.chunks.append(values)
            self.chunk_lengths.append(length)
            self.chunk_rows += length

    @property
    def list_rows(self) -> int:
        """Rows held in the per-column lists (every column has as many)."""
        return len(next(iter(self.columns.values())))

    def drain(self) -> dict[str, np.ndarray]:
        """`arrays()`, then the table lets go of its rows (it is empty after). The recorder sits
        in the engine's reference cycles (schedulers, stages and the simulator hold it), so what
        it holds is freed by the cyclic collector alone, which `run_simulation` pauses: dropped
        here, the rows go as soon as they are joined, and the collection after the run has tens
        of thousands fewer chunk tuples to walk (0.1 CPU-s at 20,000 requests)."""
        out = self.arrays()
        self.columns = {name: [] for name in self.dtypes}
        self.chunks, self.chunk_lengths, self.chunk_rows = [], [], 0
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        """Every column, the per-column lists' rows first, then the chunks' in their order."""
        lengths = np.array(self.chunk_lengths, dtype=np.int64)
        out, chunks = {}, self.chunks
        for column, (name, dtype) in enumerate(self.dtypes.items()):
            values = [chunk[column] for chunk in chunks]
            rows = self.columns[name]
            head = np.fromiter(rows, dtype=dtype, count=len(rows))   # faster than np.asarray on long lists
            out[name] = np.concatenate((head, _chunk_column(values, lengths, dtype)))
        return out


SEQUENCES = {list, np.ndarray}   # a chunk's column of this type holds a value per row


def _chunk_column(values: Sequence, lengths: np.ndarray, dtype: DTypeLike) -> np.ndarray:
    """One column of all chunks: per-chunk arrays (or lists) joined, per-chunk values repeated,
    or, where a column has both, each chunk's rows made and joined."""
    if not values:
        return np.empty(0, dtype=dtype)
    kinds = set(map(type, values))
    if kinds <= SEQUENCES and dtype is not object:
        return np.concatenate(values, dtype=dtype, casting="unsafe")   # as np.asarray(value, dtype) each
    if kinds.isdisjoint(SEQUENCES):
        one_each = (np.fromiter(values, dtype=object, count=len(values)) if dtype is object
                    else np.asarray(values, dtype))
        return np.repeat(one_each, lengths)
    return np.concatenate([_chunk_rows(value, length, dtype) for value, length in zip(values, lengths.tolist())])


def _chunk_rows(value: object, length: int, dtype: DTypeLike) -> np.ndarray:
    """The rows of one chunk's column (`value`: its array or list, or one value for all rows)."""
    if type(value) in SEQUENCES:
        return np.asarray(value, dtype=dtype)
    rows = np.empty(length, dtype=dtype)
    rows[:] = [value] * length if dtype is object else value   # a tuple stays one object per row
    return rows


class Recorder:
    """Collects records; `now` is set before each handler runs, by the simulator's clock only
    (records of an earlier time pass it explicitly: `on_finished_at`; fast-forward sets it to
    each formation's instant while the radix pool, which records itself, replays a run)."""

    def __init__(self, level: str, num_replicas: int, gap_window: tuple[float, float] | None = None) -> None:
        self.now = 0.0
        # token gaps counted (TBT): all, or only those ending within [start, end] (a capacity
        # probe's steady-state window, which leaves out the warm-up and the drain)
        self.gap_window = gap_window
        self.blocks = Table({"time": f64, "replica": i64, "request": i64, "block": i64, "delta": np.int8})
        # `late`: made at the end of its instant (kernel.late_phase); the result sorts on it after
        # time and replica, so a run's completions recorded afterwards, at an earlier phase of the
        # same instant, land where stepwise simulation records them (then dropped)
        self.states = Table({"time": f64, "replica": i64, "request": i64, "state": np.int8, "late": np.int8})
        self.late = False
        self.keeps_blocks = level == "full"
        self.keeps_batches = keeps(level, "series")              # batch and stage rows, time series
        self.keeps_batch_detail = keeps(level, "batches")        # the whole batch table, KV swaps / copies
        self.batches = Table(BATCH_SUMMARY if level == "series" else BATCH_COLUMNS)
        self.stages = Table({"batch_id": i64, "replica_id": i64, "stage_id": i64, "start": f64, "end": f64})
        self.series = Table({"time": f64, "replica_id": i64, "kv_blocks_used": i64, "num_waiting": i64,
                             "num_running": i64})
        # vllm_v0: reference counts of shared blocks (full), and KV swaps / copies per batch (batches)
        self.block_refs = Table({"time": f64, "replica": i64, "block": i64, "refs": i64})
        self.cache_ops = Table({"replica_id": i64, "batch_id": i64, "formed_at": f64, "request_id": i64,
                                "kind": np.int8, "num_blocks": i64, "seconds": f64})
        # vllm_v1's KV offload: blocks stored to / loaded from the CPU tier (every level: the summary sums them)
        self.offload = Table({"time": f64, "replica_id": i64, "request_id": i64, "kind": np.int8, "num_blocks": i64,
                              "bytes_per_gpu": i64, "num_evicted": i64, "seconds": f64, "cpu_blocks_used": i64})
        self._token_gaps: list[float] = []               # time between consecutive output tokens
        # (gaps, counts) from decode runs; counts is one int when every gap of the run has it
        self._run_gaps: list[tuple[np.ndarray, np.ndarray | int]] = []
        # one gap between consecutive output tokens; the hot path, so the list's own append (no
        # Python frame). compact_gaps empties the list in place, which keeps this bound method valid.
        self.on_token_gap: Callable[[float], None] = (self._token_gaps.append if gap_window is None
                                                       else self._windowed_gap)
        self.gaps = (np.empty(0), np.empty(0, dtype=np.int64))  # both, compacted: distinct gaps, counts
        self.kv_area = [0.0] * num_replicas      # integral of blocks used over time
        self.kv_peak = [0] * num_replicas
        self._kv_last = [(0.0, 0)] * num_replicas
        # records a level does not keep: instance attributes shadow the methods with a no-op (the
        # cheapest call on the hot path); setattr, since type checkers refuse assigning to methods
        if not self.keeps_blocks:
            for name in ("on_allocate", "on_allocate_one", "on_free", "on_cache", "on_state", "on_restart",
                         "on_refs", "on_finished_at", "on_run_allocations"):
                setattr(self, name, self._skip)
        if not self.keeps_batches:
            for name in ("on_batch", "on_batch_row", "on_stage", "_series_row", "on_cache_op", "on_run_stages",
                         "on_run_batches"):
                setattr(self, name, self._skip)
        elif not self.keeps_batch_detail:    # series: the batch table's summary columns, no KV swaps / copies
            # (only the cost-model breakdown reads those)
            # (a decode run's rows come through on_run_batch_counts at this level, run_members.py)
            for name, method in (("on_batch", self._on_batch_summary), ("on_batch_row", self._on_batch_row_summary),
                                 ("on_cache_op", self._skip), ("on_run_batches", self._not_at_series)):
                setattr(self, name, method)

    @staticmethod
    def _skip(*args: object) -> None:
        return None

    def held_rows(self) -> tuple[int, int, int]:
        """(batch rows made one by one, batch rows made in bulk by decode runs, block rows): what
        the run's memory grows with (engine/run_watch.py prices them while the run goes)."""
        return self.batches.list_rows, self.batches.chunk_rows, self.blocks.list_rows + self.blocks.chunk_rows

    # ---- blocks and states ---------------------------------------------------------------

    def on_allocate(self, replica: int, request: int, blocks: list[int]) -> None:
        self._block_rows(replica, request, blocks, 1)

    def on_free(self, replica: int, request: int, blocks: list[int]) -> None:
        self._block_rows(replica, request, blocks, -1)

    def _block_rows(self, replica: int, request: int, blocks: list[int], delta: int) -> None:
        n, cols = len(blocks), self.blocks.columns
        cols["time"].extend([self.now] * n)
        cols["replica"].extend([replica] * n)
        cols["request"].extend([request] * n)
        cols["block"].extend(blocks)
        cols["delta"].extend([delta] * n)

    def on_allocate_one(self, replica: int, request: int, block: int) -> None:
        cols = self.blocks.columns
        cols["time"].append(self.now)
        cols["replica"].append(replica)
        cols["request"].append(request)
        cols["block"].append(block)
        cols["delta"].append(1)

    def on_cache(self, replica: int, blocks: list[int], delta: int) -> None:
        """Blocks got (delta +2) or lost (-2) a prefix-cache key."""
        self._block_rows(replica, -1, blocks, delta)

    def on_state(self, replica: int, request: int, state: int) -> None:
        cols = self.states.columns
        cols["time"].append(self.now)
        cols["replica"].append(replica)
        cols["request"].append(request)
        cols["state"].append(state)
        cols["late"].append(self.late)

    def on_finished_at(self, time: float, replica: int, request: int, blocks: list[int]) -> None:
        """A request finished at `time`, earlier than now (inside a fast-forwarded run), letting
        go of `blocks`: on_state(FINISHED) and on_free as they would have been made then."""
        states, n, cols = self.states.columns, len(blocks), self.blocks.columns
        states["time"].append(time)
        states["replica"].append(replica)
        states["request"].append(request)
        states["state"].append(FINISHED)
        states["late"].append(False)
        cols["time"].extend([time] * n)
        cols["replica"].extend([replica] * n)
        cols["request"].extend([request] * n)
        cols["block"].extend(blocks)
        cols["delta"].extend([-1] * n)

    def on_restart(self, replica: int, request: int) -> None:
        self.on_state(replica, request, RESTARTED)

    def on_refs(self, replica: int, blocks: list[int], refs: int) -> None:
        """Blocks now referenced by `refs` sequences of their request (0: no longer shared)."""
        cols, n = self.block_refs.columns, len(blocks)
        cols["time"].extend([self.now] * n)
        cols["replica"].extend([replica] * n)
        cols["block"].extend(blocks)
        cols["refs"].extend([refs] * n)

    def on_cache_op(self, replica: int, batch_id: int, request: int, kind: int, num_blocks: int,
                    seconds: float) -> None:
        """A KV swap or copy that the batch formed now runs before its model (kind: cache_ops codes)."""
        cols = self.cache_ops.columns
        for name, value in (("replica_id", replica), ("batch_id", batch_id), ("formed_at", self.now),
                            ("request_id", request), ("kind", kind), ("num_blocks", num_blocks),
                            ("seconds", seconds)):
            cols[name].append(value)

    def on_offload(self, replica: int, request: int, kind: int, num_blocks: int, bytes_per_gpu: int,
                   num_evicted: int, seconds: float, cpu_blocks_used: int) -> None:
        """KV offload, now: `request` stored `num_blocks` blocks (`bytes_per_gpu` on each GPU) to
        the CPU tier (kind 0, evicting `num_evicted`) or started loading them back (kind 1, for
        `seconds`); the tier then holds `cpu_blocks_used` blocks."""
        cols = self.offload.columns
        for name, value in (("time", self.now), ("replica_id", replica), ("request_id", request), ("kind", kind),
                            ("num_blocks", num_blocks), ("bytes_per_gpu", bytes_per_gpu), ("num_evicted", num_evicted),
                            ("seconds", seconds), ("cpu_blocks_used", cpu_blocks_used)):
            cols[name].append(value)

    # ---- batches, stages, series -----------------------------------------------------------

    def on_batch(self, batch: Batch) -> None:
        shape = batch.shape
        assert shape is not None, "set when the batch is formed"
        self.on_batch_row(batch.id, batch.replica_id, tuple([r.id for r in batch.requests]),
                          tuple(batch.num_tokens), batch.num_prefill_tokens, shape.num_decodes, shape.decode_context,
                          batch.num_padding)

    def on_batch_row(self, batch_id: int, replica: int, request_ids: tuple, request_tokens: tuple,
                     num_prefill_tokens: int, num_decodes: int, decode_context: int, num_padding: int = 0) -> None:
        """A batch formed now (tuples may be shared between rows: they are never mutated).
        `num_decodes` and `decode_context` are the cost model's view (BatchShape, with CUDA-graph
        padding): zero for models that do not read the KV context. `padded_size` is the batch
        size the GPU runs (requests plus CUDA-graph padding)."""
        cols = self.batches.columns
        cols["batch_id"].append(batch_id)
        cols["replica_id"].append(replica)
        cols["formed_at"].append(self.now)
        cols["num_requests"].append(len(request_ids))
        cols["num_tokens"].append(sum(request_tokens))
        cols["num_prefill_tokens"].append(num_prefill_tokens)
        cols["num_decodes"].append(num_decodes)
        cols["decode_context"].append(decode_context)
        cols["request_ids"].append(request_ids)
        cols["request_tokens"].append(request_tokens)
        cols["padded_size"].append(len(request_ids) + num_padding)

    def _on_batch_summary(self, batch: Batch) -> None:
        """`on_batch` at `series`: the row's `BATCH_SUMMARY` columns only."""
        cols = self.batches.columns
        cols["batch_id"].append(batch.id)
        cols["replica_id"].append(batch.replica_id)
        cols["formed_at"].append(self.now)
        cols["num_tokens"].append(sum(batch.num_tokens))
        cols["num_prefill_tokens"].append(batch.num_prefill_tokens)

    def _on_batch_row_summary(self, batch_id: int, replica: int, request_ids: tuple, request_tokens: tuple,
                              num_prefill_tokens: int, num_decodes: int, decode_context: int,
                              num_padding: int = 0) -> None:
        """`on_batch_row` at `series`."""
        cols = self.batches.columns
        cols["batch_id"].append(batch_id)
        cols["replica_id"].append(replica)
        cols["formed_at"].append(self.now)
        cols["num_tokens"].append(sum(request_tokens))
        cols["num_prefill_tokens"].append(num_prefill_tokens)

    @staticmethod
    def _not_at_series(*args: object) -> None:
        """`on_run_batches` at `series`: a bug (the engine calls on_run_batch_counts there)."""
        raise AssertionError("engine.record 'series' takes a decode run's rows from on_run_batch_counts")

    def on_stage(self, batch_id: int, replica: int, stage: int, start: float, end: float) -> None:
        cols = self.stages.columns
        cols["batch_id"].append(batch_id)
        cols["replica_id"].append(replica)
        cols["stage_id"].append(stage)
        cols["start"].append(start)
        cols["end"].append(end)

    def on_replica_state(self, replica: int, used: int, waiting: int, running: int) -> None:
        """KV blocks used and queue lengths of a replica, now (utilization is integrated here)."""
        last_time, last_used = self._kv_last[replica]
        self.kv_area[replica] += last_used * (self.now - last_time)
        self._kv_last[replica] = (self.now, used)
        if used > self.kv_peak[replica]:
            self.kv_peak[replica] = used
        self._series_row(replica, used, waiting, running)

    def on_kv_state(self, replica: int, used: int) -> None:
        """`on_replica_state` at a level that keeps no time series: the KV blocks in use alone."""
        last_time, last_used = self._kv_last[replica]
        self.kv_area[replica] += last_used * (self.now - last_time)
        self._kv_last[replica] = (self.now, used)
        if used > self.kv_peak[replica]:
            self.kv_peak[replica] = used

    def _series_row(self, replica: int, used: int, waiting: int, running: int) -> None:
        cols = self.series.columns
        cols["time"].append(self.now)
        cols["replica_id"].append(replica)
        cols["kv_blocks_used"].append(used)
        cols["num_waiting"].append(waiting)
        cols["num_running"].append(running)

    def on_replica_states(self, replica: int, times: np.ndarray, used: np.ndarray, waiting: int,
                          running: np.ndarray | None, sequential: bool = False) -> None:
        """Many on_replica_state calls at once (times non-decreasing, after the last one);
        `running` may be None at a level that keeps no time series.
        `sequential`: the utilization integral adds each interval in turn, bitwise as those
        calls would (else one dot product, which rounds differently in the last bits)."""
        last_time, last_used = self._kv_last[replica]
        if sequential:
            areas = np.empty(len(times) + 1)
            areas[0], areas[1] = self.kv_area[replica], last_used * (float(times[0]) - last_time)
            areas[2:] = used[:-1] * (times[1:] - times[:-1])
            self.kv_area[replica] = float(areas.cumsum()[-1])
        else:
            self.kv_area[replica] += (last_used * (float(times[0]) - last_time)
                                      + dot(used[:-1], times[1:] - times[:-1]))
        self._kv_last[replica] = (float(times[-1]), int(used[-1]))
        self.kv_peak[replica] = max(self.kv_peak[replica], int(used.max()))
        if self.keeps_batches:
            assert running is not None, "the time series needs the running column"
            self.series.add_chunk_values(len(times), times, replica, used, waiting, running)

    def on_run_states(self, replica: int, ends: np.ndarray, after: np.ndarray, rising: bool = False,
                      between: np.ndarray | None = None) -> None:
        """`on_replica_states` of a serial decode run at a level that keeps no time series: the
        state after each of its batch ends (at `ends`) and after the formation that follows it
        (`after`, the blocks used then, at the same instant). The interval from a batch end to
        its formation is empty, so the integral adds only `after[j] * (ends[j+1] - ends[j])`:
        the products the full form adds besides are zeros, which leave an exactly rounded sum
        as it is; the blocks used right after a batch end never exceed `after` (a formation
        only takes blocks), so the peak is `after`'s (`rising`: the caller knows `after` never
        falls, so its last value). `between`: `ends[1:] - ends[:-1]` when the caller has it."""
        last_time, last_used = self._kv_last[replica]
        steps = ends[1:] - ends[:-1] if between is None else between
        self.kv_area[replica] += last_used * (float(ends[0]) - last_time) + dot(after[:-1], steps)
        last = int(after[-1])
        self._kv_last[replica] = (float(ends[-1]), last)
        peak = last if rising else int(after.max())
        if peak > self.kv_peak[replica]:
            self.kv_peak[replica] = peak

    # ---- decode runs advanced in one step (engine/fast_forward.py) ----------------------------

    def _windowed_gap(self, gap: float) -> None:
        start, end = self.gap_window  # type: ignore[misc]   # bound only when there is a window
        if start <= self.now <= end:
            self._token_gaps.append(gap)

    def on_token_gaps(self, gap: float, count: int) -> None:
        """`count` equal gaps between output tokens ending now (`on_token_gap` `count` times)."""
        if self.gap_window is None:
            self._token_gaps.extend([gap] * count)
        else:
            for _ in range(count):
                self._windowed_gap(gap)

    def on_run_gaps(self, first_gaps: list[float], steps: np.ndarray, alive: np.ndarray | int,
                    first_at: float = 0.0, step_ends: np.ndarray | None = None) -> None:
        """A decode run's token gaps: each member's gap to its first token of the run (ending at
        `first_at`), then the gaps between the run's iterations, `steps[j]` (ending at
        `step_ends[j]`) seen by `alive[j]` members (`alive` an int: by that many each). The end
        times matter only with a gap window."""
        if self.gap_window is not None:
            start, end = self.gap_window
            if not start <= first_at <= end:
                first_gaps = []
            if step_ends is not None and len(steps):
                inside = (step_ends >= start) & (step_ends <= end)
                steps = steps[inside]
                if not isinstance(alive, int):
                    alive = alive[inside]
        self._token_gaps.extend(first_gaps)
        if len(steps):
            self._run_gaps.append((steps, alive))

    def on_run_allocations(self, replica: int, times: np.ndarray, requests: Sequence[int], blocks: list[int]) -> None:
        """Blocks taken one each during a decode run (full level), at the instants in `times`."""
        self.blocks.add_chunk_values(len(blocks), times, replica, requests, blocks, 1)

    def on_run_stages(self, replica: int, batch_ids: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                      stage_ids: np.ndarray | int = 0) -> None:
        """The stage rows of a decode run's executions (a single-stage run's are all stage 0; a
        pipeline run passes each execution's stage)."""
        self.stages.add_chunk_values(len(batch_ids), batch_ids, replica, stage_ids, starts, ends)

    def on_run_batches(self, count: int, batch_id: np.ndarray, replica_id: int, formed_at: np.ndarray,
                       num_requests: int, num_tokens: int, num_prefill_tokens: int, num_decodes: int,
                       decode_context: np.ndarray, request_ids: tuple, request_tokens: tuple, padded_size: int) -> None:
        """`count` batch rows of a decode run whose members do not change (the columns of the
        batch table, `on_batch_row`'s: the arrays hold `count` values, every other value is
        the same for all rows)."""
        self.batches.add_chunk_values(count, batch_id, replica_id, formed_at, num_requests, num_tokens,
                                      num_prefill_tokens, num_decodes, decode_context, request_ids, request_tokens,
                                      padded_size)

    def on_run_batch_counts(self, batch_id: np.ndarray, replica_id: int, formed_at: np.ndarray,
                            num_tokens: np.ndarray) -> None:
        """The `BATCH_SUMMARY` rows of a decode run's formations (level `series` only): ids,
        formation times and tokens (a decode token per live member), arrays of one value per row."""
        assert not self.keeps_batch_detail, "the whole batch table takes on_run_batches"
        self.batches.add_chunk_values(len(batch_id), batch_id, replica_id, formed_at, num_tokens, 0)

    def compact_gaps(self, force: bool = False) -> None:
        """Fold the token gaps and decode-run gaps into `gaps` (distinct values with their counts;
        percentiles over it equal those over the raw samples; repeated values may remain). Both
        lists are emptied in place (`on_token_gap` is bound to the first). Without `force`,
        only when they are large."""
        raw, runs = self._token_gaps, self._run_gaps
        if not force and len(raw) < GAPS_BEFORE_COMPACTING and len(runs) < RUNS_BEFORE_COMPACTING:
            return
        values = np.concatenate([self.gaps[0], np.asarray(raw, dtype=np.float64), *(r[0] for r in runs)])
        counts = np.concatenate([self.gaps[1], np.ones(len(raw), dtype=np.int64), _run_counts(runs)])
        if force and not len(self.gaps[0]):   # the end of a run that never compacted: no need to
            self.gaps = (values, counts)        # merge equal values, percentiles take them as they are
        else:
            # np.unique's distinct values and counts, from a hash table (pandas' factorize, linear)
            # instead of a stable sort of every sample; only the few distinct values are sorted
            where, distinct = pd.factorize(values, use_na_sentinel=False)
            summed = np.bincount(where, weights=counts, minlength=len(distinct)).astype(np.int64)
            order = distinct.argsort()
            self.gaps = (distinct[order], summed[order])
        raw.clear()
        runs.clear()

    def finish_kv(self, end_time: float) -> None:
        """Close the utilization integrals at the end of the run."""
        for replica, (last_time, last_used) in enumerate(self._kv_last):
            self.kv_area[replica] += last_used * (end_time - last_time)
            self._kv_last[replica] = (end_time, last_used)


def _run_counts(runs: list[tuple[np.ndarray, np.ndarray | int]]) -> np.ndarray:
    """The counts of the decode runs' gaps, in their order: an int count stands for one per gap
    of its run (repeated here in one call for all of them, not once per run)."""
    per_gap = np.array([alive if isinstance(alive, int) else -1 for _, alive in runs], dtype=np.int64)
    counts = per_gap.repeat([len(gaps) for gaps, _ in runs])
    if (per_gap < 0).any():   # runs whose counts change inside them: their own arrays
        mixed = counts < 0
        counts[mixed] = np.concatenate([alive for _, alive in runs if not isinstance(alive, int)])
    return counts
