"""Append-only, columnar records of what happened during a run (for charts and traces).

The level decides what is kept: `full` adds block allocations and request state changes (for
the KV-block animation and request timelines) to what `batches` keeps (batch and stage tables,
KV/queue time series). `requests` keeps only what per-request rows and the summary need.
Token gaps (time between tokens) and KV utilization accumulators are kept at every level.
"""

from __future__ import annotations

from array import array

# request state-change codes
QUEUED, ADMITTED, RESTARTED, FINISHED, REJECTED = range(5)
STATE_NAMES = ("queued", "admitted", "restarted", "finished", "rejected")


class Recorder:
    """Collects records; `now` is set by the event kernel before each handler runs."""

    def __init__(self, level: str, num_replicas: int, num_blocks: int) -> None:
        self.level = level
        self.now = 0.0
        self.blocks = {k: array(c) for k, c in (("time", "d"), ("replica", "i"), ("request", "q"),
                                                ("block", "q"), ("delta", "b"))}
        self.states = {k: array(c) for k, c in (("time", "d"), ("replica", "i"), ("request", "q"),
                                                ("state", "b"))}
        self.batches: dict[str, list] = {k: [] for k in ("batch_id", "replica_id", "formed_at",
                                                          "num_requests", "num_tokens", "num_prefill_tokens",
                                                          "request_ids", "request_tokens")}
        self.stages = {k: array(c) for k, c in (("batch_id", "q"), ("replica_id", "i"), ("stage_id", "i"),
                                                ("start", "d"), ("end", "d"))}
        self.series = {k: array(c) for k, c in (("time", "d"), ("replica_id", "i"), ("kv_blocks_used", "q"),
                                                ("num_waiting", "q"), ("num_running", "q"))}
        self.token_gaps = array("d")
        self.weighted_gaps = (array("d"), array("q"))  # (gap, count) pairs from fast-forwarded runs
        self.num_blocks = num_blocks
        self.kv_area = [0.0] * num_replicas      # integral of blocks used over time
        self.kv_peak = [0] * num_replicas
        self._kv_last = [(0.0, 0)] * num_replicas
        if level != "full":
            self.on_allocate = self.on_allocate_one = self.on_free = self._skip
            self.on_state = self.on_restart = self._skip
        if level == "requests":
            self.on_batch = self.on_stage = self._skip_series = self._skip

    @staticmethod
    def _skip(*args) -> None:
        return None

    # ---- blocks and states ---------------------------------------------------------------

    def on_allocate(self, replica: int, request: int, blocks: list[int]) -> None:
        n, cols = len(blocks), self.blocks
        cols["time"].extend([self.now] * n)
        cols["replica"].extend([replica] * n)
        cols["request"].extend([request] * n)
        cols["block"].extend(blocks)
        cols["delta"].extend([1] * n)

    def on_allocate_one(self, replica: int, request: int, block: int) -> None:
        cols = self.blocks
        cols["time"].append(self.now)
        cols["replica"].append(replica)
        cols["request"].append(request)
        cols["block"].append(block)
        cols["delta"].append(1)

    def on_free(self, replica: int, request: int, blocks: list[int]) -> None:
        n, cols = len(blocks), self.blocks
        cols["time"].extend([self.now] * n)
        cols["replica"].extend([replica] * n)
        cols["request"].extend([request] * n)
        cols["block"].extend(blocks)
        cols["delta"].extend([-1] * n)

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
        cols = self.batches
        cols["batch_id"].append(batch.id)
        cols["replica_id"].append(batch.replica_id)
        cols["formed_at"].append(self.now)
        cols["num_requests"].append(len(batch.requests))
        cols["num_tokens"].append(batch.shape.total_tokens)
        cols["num_prefill_tokens"].append(batch.num_prefill_tokens)
        cols["request_ids"].append(tuple(r.id for r in batch.requests))
        cols["request_tokens"].append(tuple(batch.num_tokens))

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
        self._skip_series(replica, used, waiting, running)

    def _skip_series(self, replica: int, used: int, waiting: int, running: int) -> None:
        cols = self.series
        cols["time"].append(self.now)
        cols["replica_id"].append(replica)
        cols["kv_blocks_used"].append(used)
        cols["num_waiting"].append(waiting)
        cols["num_running"].append(running)

    def finish_kv(self, end_time: float) -> None:
        """Close the utilization integrals at the end of the run."""
        for replica, (last_time, last_used) in enumerate(self._kv_last):
            self.kv_area[replica] += last_used * (end_time - last_time)
            self._kv_last[replica] = (end_time, last_used)
