"""What one session does cannot reach another: a cached run is handed out as a private copy, no
page or helper assigns into a shared object, and a session's presence (what stops its background
work) ends when Streamlit releases the session."""

import ast
import copy

import pandas as pd
from app_helpers import ROOT, TIMEOUT, TINY
from streamlit.testing.v1 import AppTest

from sim_core import parse_config, run_simulation

SCENARIO = {**copy.deepcopy(TINY), "seed": 2468}         # a key no other test has cached


def _change_everything_it_got():
    """Session A: write into every part of the cached run it was handed."""
    import streamlit as st

    from explorer.state import result_of

    run = result_of(st.session_state["scenario"])
    try:
        run.requests["arrived_at"].to_numpy()[0] = -1.0
        st.session_state["array_write"] = "allowed"
    except ValueError:
        st.session_state["array_write"] = "refused"
    run.requests.loc[0, "ttft"] = -1.0
    run.requests["planted"] = 1
    del run.batch_stages["end"]
    run.summary["num_requests"] = -1
    run.notes.append("planted")
    try:                                             # configs may be frozen: then the write is refused
        run.config.seed = 99
    except ValueError:
        pass


def _keep_what_it_got():
    """Session B: ask for the same run and keep it for the test to read."""
    import streamlit as st

    from explorer.state import result_of

    st.session_state["run"] = result_of(st.session_state["scenario"])


def session(script) -> AppTest:
    app = AppTest.from_function(script, default_timeout=TIMEOUT)
    app.session_state["scenario"] = copy.deepcopy(SCENARIO)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def test_a_session_that_changes_its_cached_run_leaves_the_next_sessions_run_as_simulated(monkeypatch):
    """Session A writes into the tables, summary, notes and config of the run it got; session B,
    served the same cached run (one simulation for both), sees it as a fresh simulation has it."""
    import sim_core.engine.simulation as simulation

    calls = []
    original = simulation.run_simulation
    monkeypatch.setattr("explorer.state.run_simulation", lambda *a, **k: calls.append(1) or original(*a, **k))
    first = session(_change_everything_it_got)
    run = session(_keep_what_it_got).session_state["run"]
    assert len(calls) == 1
    assert first.session_state["array_write"] == "refused"        # the tables' arrays are read-only
    fresh = run_simulation(parse_config(SCENARIO))
    pd.testing.assert_frame_equal(run.requests, fresh.requests)
    pd.testing.assert_frame_equal(run.batch_stages, fresh.batch_stages)
    assert run.summary["num_requests"] == 40 and run.notes == [] and run.config.seed == 2468


def test_no_page_or_helper_assigns_to_an_attribute_of_an_object_it_did_not_make():
    """A run's config and tables reach every view of every session: pages and explorer modules
    change a copy (`model_copy`, `with_path`), never an attribute of what they were given (only
    `self.` inside a class)."""
    offenders = []
    for path in [ROOT / "app.py", *sorted(ROOT.glob("pages/*.py")), *sorted(ROOT.glob("explorer/*.py"))]:
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for target in targets:
                for part in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if isinstance(part, ast.Attribute) and not _on_self(part):
                        offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def _on_self(node: ast.Attribute) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "self"


def _presence_check():
    import streamlit as st

    from explorer.server import presence, session_alive

    if st.session_state.get("leave"):
        presence.clear()                 # what Streamlit does to a session's resources when it disconnects
    else:
        st.session_state["alive"] = session_alive()


def test_a_sessions_presence_ends_when_streamlit_releases_the_session():
    """The check a sweep's watcher polls is true while the session is there and false once
    Streamlit releases the session's resources (as it does when its browser disconnects)."""
    app = AppTest.from_function(_presence_check, default_timeout=TIMEOUT).run()
    alive = app.session_state["alive"]
    assert alive()
    app.session_state["leave"] = True
    app.run()
    assert not app.exception and not alive()
