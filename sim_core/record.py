"""Append-only, columnar records of what happened during a run (for charts and traces).

The level decides what is kept: `full` adds block allocations and request state changes (for
the KV-block animation and request timelines) to what `batches` keeps (batch and stage tables,
KV/queue time series). `requests` keeps only what per-request rows and the summary need.
Token gaps (time between tokens) and KV utilization accumulators are kept at every level.
"""

from __future__ import annotations

import numpy as np

# request state-change codes
QUEUED, ADMITTED, RESTARTED, FINISHED, REJECTED = range(5)
STATE_NAMES = ("queued", "admitted", "restarted", "finished", "rejected")


class Column(list):
    """A growing column of one record field: a plain list (appends and list extends are the
    cheapest Python can do), turned into a typed numpy array once, at the end."""

    __slots__ = ("dtype",)

    def __init__(self, dtype) -> None:
        super().__init__()
        self.dtype = dtype

    def to_numpy(self) -> np.ndarray:
        if self.dtype is object:
            return np.fromiter(self, dtype=object, count=len(self))
        return np.asarray(self, dtype=self.dtype)


def _columns(spec: dict) -> dict[str, Column]:
    return {name: Column(dtype) for name, dtype in spec.items()}


class Recorder:
    """Collects records; `now` is set by the event kernel before each handler runs."""

    def __init__(self, level: str, num_replicas: int, num_blocks: int) -> None:
        self.level = level
        self.now = 0.0
        i64, f64 = np.int64, np.float64
        self.blocks = _columns({"time": f64, "replica": i64, "request": i64, "block": i64, "delta": np.int8})
        self.states = _columns({"time": f64, "replica": i64, "request": i64, "state": np.int8})
        self.batches = _columns({"batch_id": i64, "replica_id": i64, "formed_at": f64, "num_requests": i64,
                                 "num_tokens": i64, "num_prefill_tokens": i64, "request_ids": object,
                                 "request_tokens": object})
        self.stages = _columns({"batch_id": i64, "replica_id": i64, "stage_id": i64, "start": f64, "end": f64})
        self.series = _columns({"time": f64, "replica_id": i64, "kv_blocks_used": i64, "num_waiting": i64,
                                "num_running": i64})
        self.token_gaps = Column(f64)
        self.weighted_gaps = (Column(f64), Column(i64))  # (gap, count) from fast-forwarded runs
        self.num_blocks = num_blocks
        self.kv_area = [0.0] * num_replicas      # integral of blocks used over time
        self.kv_peak = [0] * num_replicas
        self._kv_last = [(0.0, 0)] * num_replicas
        if level != "full":
            self.on_allocate = self.on_allocate_one = self.on_free = self.on_allocate_rows = self._skip
            self.on_state = self.on_restart = self._skip
        if level == "requests":
            self.on_batch = self.on_batch_row = self.on_stage = self._series_row = self._skip
            self.on_batch_rows = self.on_stage_rows = self._skip

    @staticmethod
    def _skip(*args) -> None:
        return None

    # ---- blocks and states ---------------------------------------------------------------

    def on_allocate(self, replica: int, request: int, blocks: list[int]) -> None:
        self._block_rows(replica, request, blocks, 1)

    def on_free(self, replica: int, request: int, blocks: list[int]) -> None:
        self._block_rows(replica, request, blocks, -1)

    def _block_rows(self, replica: int, request: int, blocks: list[int], delta: int) -> None:
        n, cols = len(blocks), self.blocks
        cols["time"].extend([self.now] * n)
        cols["replica"].extend([replica] * n)
        cols["request"].extend([request] * n)
        cols["block"].extend(blocks)
        cols["delta"].extend([delta] * n)

    def on_allocate_one(self, replica: int, request: int, block: int) -> None:
        cols = self.blocks
        cols["time"].append(self.now)
        cols["replica"].append(replica)
        cols["request"].append(request)
        cols["block"].append(block)
        cols["delta"].append(1)

    def on_state(self, replica: int, request: int, state: int) -> None:
        cols = self.states
        cols["time"].append(self.now)
        cols["replica"].append(replica)
        cols["request"].append(request)
        cols["state"].append(state)

    def on_restart(self, replica: int, request: int) -> None:
        self.on_state(replica, request, RESTARTED)

    # ---- batches, stages, series -----------------------------------------------------------

    def on_batch(self, batch) -> None:
        self.on_batch_row(batch.id, batch.replica_id, tuple(r.id for r in batch.requests),
                          tuple(batch.num_tokens), batch.num_prefill_tokens)

    def on_batch_row(self, batch_id: int, replica: int, request_ids: tuple, request_tokens: tuple,
                     num_prefill_tokens: int) -> None:
        """A batch formed now (tuples may be shared between rows: they are never mutated)."""
        cols = self.batches
        cols["batch_id"].append(batch_id)
        cols["replica_id"].append(replica)
        cols["formed_at"].append(self.now)
        cols["num_requests"].append(len(request_ids))
        cols["num_tokens"].append(sum(request_tokens))
        cols["num_prefill_tokens"].append(num_prefill_tokens)
        cols["request_ids"].append(request_ids)
        cols["request_tokens"].append(request_tokens)

    def on_stage(self, batch_id: int, replica: int, stage: int, start: float, end: float) -> None:
        cols = self.stages
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

    def _series_row(self, replica: int, used: int, waiting: int, running: int) -> None:
        cols = self.series
        cols["time"].append(self.now)
        cols["replica_id"].append(replica)
        cols["kv_blocks_used"].append(used)
        cols["num_waiting"].append(waiting)
        cols["num_running"].append(running)

    # ---- bulk appends (a fast-forwarded run records many rows at once) -----------------------

    def on_allocate_rows(self, times: list, replica: int, requests: list, blocks: list) -> None:
        n, cols = len(times), self.blocks
        cols["time"].extend(times)
        cols["replica"].extend([replica] * n)
        cols["request"].extend(requests)
        cols["block"].extend(blocks)
        cols["delta"].extend([1] * n)

    def on_batch_rows(self, first_id: int, replica: int, formed_at: list, request_ids: tuple,
                      request_tokens: tuple) -> None:
        """Identical decode batches (ids first_id, first_id + 1, ...), one per formation time."""
        n, cols = len(formed_at), self.batches
        cols["batch_id"].extend(range(first_id, first_id + n))
        cols["replica_id"].extend([replica] * n)
        cols["formed_at"].extend(formed_at)
        cols["num_requests"].extend([len(request_ids)] * n)
        cols["num_tokens"].extend([sum(request_tokens)] * n)
        cols["num_prefill_tokens"].extend([0] * n)
        cols["request_ids"].extend([request_ids] * n)
        cols["request_tokens"].extend([request_tokens] * n)

    def on_stage_rows(self, first_id: int, replica: int, stage: int, starts: list, ends: list) -> None:
        n, cols = len(starts), self.stages
        cols["batch_id"].extend(range(first_id, first_id + n))
        cols["replica_id"].extend([replica] * n)
        cols["stage_id"].extend([stage] * n)
        cols["start"].extend(starts)
        cols["end"].extend(ends)

    def on_replica_states(self, replica: int, times: np.ndarray, used: np.ndarray, waiting: int, running: int) -> None:
        """Many on_replica_state calls at once (times non-decreasing, after the last one)."""
        last_time, last_used = self._kv_last[replica]
        self.kv_area[replica] += last_used * (float(times[0]) - last_time) + float(np.dot(used[:-1], np.diff(times)))
        self._kv_last[replica] = (float(times[-1]), int(used[-1]))
        self.kv_peak[replica] = max(self.kv_peak[replica], int(used.max()))
        if self.level != "requests":
            n, cols = len(times), self.series
            cols["time"].extend(times.tolist())
            cols["replica_id"].extend([replica] * n)
            cols["kv_blocks_used"].extend(used.tolist())
            cols["num_waiting"].extend([waiting] * n)
            cols["num_running"].extend([running] * n)

    def finish_kv(self, end_time: float) -> None:
        """Close the utilization integrals at the end of the run."""
        for replica, (last_time, last_used) in enumerate(self._kv_last):
            self.kv_area[replica] += last_used * (end_time - last_time)
            self._kv_last[replica] = (end_time, last_used)


def to_frame_columns(columns: dict[str, Column]) -> dict[str, np.ndarray]:
    """The recorded columns as numpy arrays (for a DataFrame)."""
    return {name: column.to_numpy() for name, column in columns.items()}
