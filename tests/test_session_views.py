"""Multi-turn runs carry each request's session and turn (issue 19 item 11): joined from the
workload (request id = workload row) and shown, grouped, on the Requests page."""

import copy
import json

import numpy as np
import pandas as pd
from app_helpers import TINY, chart_specs, open_app

from sim_core.results.sessions import session_columns, with_sessions
from sim_core.workload import Workload

CHAT = copy.deepcopy(TINY)
CHAT["cluster"] = {"num_replicas": 1, "tensor_parallel_size": 1, "pipeline_parallel_size": 1}
CHAT["workload"] = {**CHAT["workload"], "sessions": {"enabled": True, "min_turns": 2, "max_turns": 4,
                                                      "think_time_s": 0.5, "system_prompt_tokens": 64}}


def test_session_columns_follow_the_workload_rows_and_count_turns_in_arrival_order():
    """Rows 0..4 of sessions 7, 8, 7, 7, 8 are turns 0, 0, 1, 2, 1 when the workload has no turn column."""
    work = Workload(np.arange(5, dtype=float), np.full(5, 10), np.full(5, 2), "test", (),
                    session_id=np.array([7, 8, 7, 7, 8]))
    table = session_columns(work)
    assert table.values.tolist() == [[0, 7, 0], [1, 8, 0], [2, 7, 1], [3, 7, 2], [4, 8, 1]]
    requests = pd.DataFrame({"request_id": [0, 1, 2, 3, 4], "ttft": [0.1] * 5})
    joined = with_sessions(requests, table)
    assert list(joined.columns) == ["request_id", "session_id", "turn", "ttft"]
    assert joined["session_id"].tolist() == [7, 8, 7, 7, 8]
    assert with_sessions(requests, None) is requests
    assert session_columns(Workload(np.zeros(1), np.ones(1, int), np.ones(1, int), "test", ())) is None


def test_the_requests_page_shows_sessions_and_sorts_turns_together():
    """With sessions the table has session_id and turn, "session" sorts a conversation's turns
    together in turn order, and the timeline labels each row "#id s<session> t<turn>"."""
    app = open_app("pages/requests.py", CHAT)
    assert "session" in app.selectbox(key="rq_sort").options
    app.selectbox(key="rq_sort").set_value("session").run()
    table = app.dataframe[-1].value
    assert list(table.columns[:3]) == ["request_id", "session_id", "turn"]
    sessions, turns = table["session_id"].tolist(), table["turn"].tolist()
    assert sessions == sorted(sessions)
    for session in set(sessions):
        assert [t for s, t in zip(sessions, turns) if s == session] == list(range(sessions.count(session)))
    figure = json.loads(chart_specs(app)[0])
    first = table.iloc[0]
    assert figure["layout"]["yaxis"]["categoryarray"][-1] == \
        f"#{first['request_id']} s{first['session_id']} t{first['turn']}"


def test_without_sessions_the_requests_page_is_unchanged():
    """No session columns and no "session" sort when the workload has no sessions."""
    app = open_app("pages/requests.py")
    assert "session" not in app.selectbox(key="rq_sort").options
    assert "session_id" not in app.dataframe[-1].value.columns
