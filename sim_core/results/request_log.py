"""Per-request outcomes kept as columns, so finished Request objects can be freed mid-run.

The simulator writes a request's final figures here when it retires the request (after it
finished, or at the end of the run); rows never written keep the defaults of a request that
never arrived (rejected up front): replica -1, times -1, no restarts, no token gap. A request's
arrival time is the workload's unless it arrived at another (a closed-loop session's later turn).
Status is finished, ignored (dropped by the policy while queued, vllm_v0) or rejected
(everything else). `num_decode_tokens` is the output actually served: less than the workload's
for a request cut at max_model_len (`truncated`, sglang). `num_cached_tokens` /
`num_lookup_tokens`: prompt tokens found in / looked up in a prefix cache, summed over the
request's admissions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sim_core.entities import Request, RequestStatus

if TYPE_CHECKING:
    from sim_core.workload.model import Workload


class RequestLog:
    """One slot per workload row (request id = row index)."""

    __slots__ = (
        "arrived_at",
        "completed_at",
        "finished",
        "ignored",
        "num_cached_tokens",
        "num_lookup_tokens",
        "num_restarts",
        "num_seqs",
        "num_served_decode",
        "num_swaps",
        "prefill_completed_at",
        "replica_id",
        "scheduled_at",
        "tbt_max",
        "truncated",
    )

    def __init__(self, num_requests: int) -> None:
        self.replica_id = np.full(num_requests, -1, dtype=np.int64)
        self.arrived_at = np.full(num_requests, np.nan)
        self.finished = np.zeros(num_requests, dtype=bool)
        self.scheduled_at = np.full(num_requests, -1.0)
        self.prefill_completed_at = np.full(num_requests, -1.0)
        self.completed_at = np.full(num_requests, -1.0)
        self.num_restarts = np.zeros(num_requests, dtype=np.int64)
        self.tbt_max = np.full(num_requests, np.nan)
        self.num_cached_tokens = np.zeros(num_requests, dtype=np.int64)
        self.num_lookup_tokens = np.zeros(num_requests, dtype=np.int64)
        self.truncated = np.zeros(num_requests, dtype=bool)
        self.num_served_decode = np.zeros(num_requests, dtype=np.int64)   # kept for truncated rows
        self.ignored = np.zeros(num_requests, dtype=bool)
        self.num_seqs = np.ones(num_requests, dtype=np.int64)
        self.num_swaps = np.zeros(num_requests, dtype=np.int64)

    def record(self, request: Request) -> None:
        """Store the request's figures as they are now (call when it is done or the run ends)."""
        rid = request.id
        self.replica_id[rid] = request.replica_id
        self.arrived_at[rid] = request.arrived_at
        self.finished[rid] = request.status == RequestStatus.FINISHED
        self.scheduled_at[rid] = request.scheduled_at
        self.prefill_completed_at[rid] = request.prefill_completed_at
        self.completed_at[rid] = request.completed_at
        self.num_restarts[rid] = request.num_restarts
        self.tbt_max[rid] = request.max_token_gap
        self.num_cached_tokens[rid] = request.num_cached_tokens
        self.num_lookup_tokens[rid] = request.num_lookup_tokens
        if request.truncated:
            self.truncated[rid] = True
            self.num_served_decode[rid] = request.initial_decode_tokens
        self.ignored[rid] = request.status == RequestStatus.IGNORED
        self.num_seqs[rid] = request.num_seqs
        self.num_swaps[rid] = request.num_swaps

    def record_many(self, requests: list[Request]) -> None:
        """`record` of each of `requests` (distinct), one assignment per column."""
        if not requests:
            return
        ids = [r.id for r in requests]
        finished, ignored = RequestStatus.FINISHED, RequestStatus.IGNORED
        self.replica_id[ids] = [r.replica_id for r in requests]
        self.arrived_at[ids] = [r.arrived_at for r in requests]
        self.finished[ids] = [r.status == finished for r in requests]
        self.scheduled_at[ids] = [r.scheduled_at for r in requests]
        self.prefill_completed_at[ids] = [r.prefill_completed_at for r in requests]
        self.completed_at[ids] = [r.completed_at for r in requests]
        self.num_restarts[ids] = [r.num_restarts for r in requests]
        self.tbt_max[ids] = [r.max_token_gap for r in requests]
        self.num_cached_tokens[ids] = [r.num_cached_tokens for r in requests]
        self.num_lookup_tokens[ids] = [r.num_lookup_tokens for r in requests]
        for request in requests:
            if request.truncated:
                self.truncated[request.id] = True
                self.num_served_decode[request.id] = request.initial_decode_tokens
        self.ignored[ids] = [r.status == ignored for r in requests]
        self.num_seqs[ids] = [r.num_seqs for r in requests]
        self.num_swaps[ids] = [r.num_swaps for r in requests]

    def rows(self, workload: Workload, rejected: dict[int, str]) -> dict:
        """Columns for `metrics.request_table` (status and reasons as lists of str)."""
        n = len(workload)
        reasons = [""] * n
        for rid, reason in rejected.items():
            if not self.finished[rid]:
                reasons[rid] = reason
        arrived = np.where(np.isnan(self.arrived_at), workload.arrived_at, self.arrived_at)
        return {"request_id": np.arange(n, dtype=np.int64), "arrived_at": arrived,
                "num_prefill_tokens": workload.num_prefill_tokens,
                "num_decode_tokens": np.where(self.truncated, self.num_served_decode, workload.num_decode_tokens),
                "replica_id": self.replica_id,
                "status": np.where(self.finished, "finished", np.where(self.ignored, "ignored", "rejected")).tolist(),
                "scheduled_at": self.scheduled_at, "prefill_completed_at": self.prefill_completed_at,
                "completed_at": self.completed_at, "num_restarts": self.num_restarts, "tbt_max": self.tbt_max,
                "reject_reason": reasons, "n": self.num_seqs, "num_swaps": self.num_swaps,
                "num_cached_tokens": self.num_cached_tokens, "num_lookup_tokens": self.num_lookup_tokens,
                "truncated": self.truncated}
