"""The conversation each request belongs to: the workload's `session_id` and `turn`, joined to a
run's per-request rows (request id = workload row), so a view can group a session's turns."""

from __future__ import annotations

import pandas as pd

from sim_core.workload.model import Workload

SESSION_COLUMNS = ("session_id", "turn")


def session_columns(workload: Workload) -> pd.DataFrame | None:
    """`request_id`, `session_id` and `turn` (the turn in arrival order when the workload has no
    `turn` column) per request; None when the workload has no sessions."""
    if workload.session_id is None:
        return None
    table = pd.DataFrame({"request_id": range(len(workload)), "session_id": workload.session_id})
    if workload.turn is not None:
        table["turn"] = workload.turn
    else:
        table["turn"] = table.groupby("session_id").cumcount()
    return table


def with_sessions(requests: pd.DataFrame, sessions: pd.DataFrame | None) -> pd.DataFrame:
    """`requests` with `session_id` and `turn` after `request_id` (unchanged when `sessions` is None)."""
    if sessions is None:
        return requests
    joined = requests.merge(sessions, on="request_id", how="left", validate="one_to_one")
    order = ["request_id", *SESSION_COLUMNS, *(c for c in requests.columns if c != "request_id")]
    return joined[order]
