"""The app's run budget (AppTest): a link cannot make the server allocate what it would not,
wait forever for a run slot, or run past its wall-clock limit."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
from app_helpers import APP, TIMEOUT, TINY, open_app, unescaped
from streamlit.testing.v1 import AppTest

import explorer.state
from explorer.server import run_slots, settings
from sim_core.config.share import encode_scenario


@pytest.fixture(autouse=True)
def fresh_settings():
    """Each test reads the environment it sets (settings, run slots and cached runs are per server
    process)."""
    for cached in (settings, run_slots, explorer.state._cache):   # runs are cached per server too
        cached.clear()
    yield
    for cached in (settings, run_slots, explorer.state._cache):
        cached.clear()


def linked(page: str, **sections) -> AppTest:
    """The app opened on `page` through a link whose scenario is TINY with `sections` replaced."""
    scenario = copy.deepcopy(TINY)
    for section, values in sections.items():
        scenario[section] = {**scenario.get(section, {}), **values}
    app = AppTest.from_file(APP, default_timeout=TIMEOUT)
    app.query_params["s"] = encode_scenario(scenario)
    app.run()
    app.switch_page(page).run()
    assert not app.exception
    return app


def test_a_billion_blocks_from_a_link_are_refused_before_anything_is_built():
    """The probe that grew the server to 23 GB: one line naming the field and the limit."""
    app = linked("pages/kv_cache.py", scheduler={"num_blocks": 1_000_000_000})
    assert re.fullmatch(
        r"scheduler.num_blocks: 1,000,000,000 KV blocks per replica, over the limit of 4,194,304 blocks per replica "
        r"for one run \(estimated peak memory \d+ MiB\); set a smaller scheduler.num_blocks, or raise the limit: "
        r"whoever starts the server can raise SIM_EXPLORER_MAX_BLOCKS_PER_REPLICA", unescaped(app.error[0].value))


def test_a_hundred_million_requests_are_refused_before_one_is_generated():
    app = linked("pages/requests.py", workload={"num_requests": 100_000_000})
    assert unescaped(app.error[0].value).startswith(
        "workload.num_requests: 100,000,000 requests, over the limit of 200,000 requests for one run")


def test_the_server_can_raise_its_budget_with_an_environment_variable(monkeypatch):
    """SIM_EXPLORER_MAX_REQUESTS=10 refuses the 40-request TINY scenario, naming the variable."""
    monkeypatch.setenv("SIM_EXPLORER_MAX_REQUESTS", "10")
    app = open_app()
    assert re.fullmatch(
        r"workload.num_requests: 40 requests, over the limit of 10 requests for one run \(estimated peak memory "
        r"\d+ MiB\); generate fewer, or raise the limit: whoever starts the server can raise "
        r"SIM_EXPLORER_MAX_REQUESTS", unescaped(app.error[0].value))


def test_a_run_past_the_wall_clock_limit_stops_with_one_line(monkeypatch):
    """SIM_EXPLORER_MAX_RUN_S=0.001: the run stops at its first check and says why."""
    monkeypatch.setenv("SIM_EXPLORER_MAX_RUN_S", "0.001")
    app = linked("pages/overview.py", workload={"num_requests": 2000})
    assert "wall-clock" in unescaped(app.error[0].value)


def test_when_every_run_slot_stays_taken_the_page_says_the_server_is_busy(monkeypatch):
    """One slot, held elsewhere: the page waits SLOT_WAIT_S and then explains, changing nothing."""
    monkeypatch.setenv("SIM_EXPLORER_MAX_CONCURRENT_RUNS", "1")
    monkeypatch.setattr(explorer.state, "SLOT_WAIT_S", 0.2)
    slots = run_slots()
    assert slots.acquire(timeout=1)
    try:
        app = linked("pages/overview.py", workload={"num_requests": 41})
        assert unescaped(app.error[0].value) == (
            "the server is running its 1 simultaneous simulations (SIM_EXPLORER_MAX_CONCURRENT_RUNS); change a "
            "knob or reload in a moment")
    finally:
        slots.release()
    app.run()
    assert not app.error and app.title[0].value == "LLM serving scheduling explorer"


def test_a_sweep_whose_probes_are_over_the_budget_is_refused_at_start(monkeypatch):
    """Each point is probed with up to 4 x search.num_requests requests per replica (the
    confirming probe): 4 x 300 on each of the scenario's 2 replicas, 2,400, over a limit of 100,
    is refused."""
    monkeypatch.setenv("SIM_EXPLORER_MAX_REQUESTS", "100")
    app = open_app("pages/capacity.py", scenario={**TINY, "workload": {**TINY["workload"], "num_requests": 20}})
    app.number_input(key="cap_num_requests").set_value(300).run()
    app.button(key="cap_start").click().run()
    assert unescaped(app.error[0].value).startswith(
        "workload.num_requests: 2,400 requests, over the limit of 100 requests for one run")
    assert app.info[0].value == "Choose what to vary and press Start sweep."


def test_the_largest_pool_the_app_allows_draws_its_kv_map():
    """4,194,304 blocks per replica (the app's limit) from a link: the KV page draws super-cells
    from the blocks the run touched, without a per-block array of the whole pool."""
    app = linked("pages/kv_cache.py", scheduler={"num_blocks": 4_194_304})
    assert not app.error and app.get("plotly_chart")
    assert "4,194,304 blocks per replica" in unescaped(app.main.caption[0].value)


def test_an_uploaded_trace_over_the_row_limit_is_refused_before_it_is_read(monkeypatch):
    """The rows are counted in bounded memory first; the file is not kept."""
    from explorer.server import uploads

    monkeypatch.setenv("SIM_EXPLORER_MAX_TRACE_ROWS", "2")
    app = open_app("pages/scenario.py")
    app.radio(key="w:sc_source").set_value("trace file").run()
    before = set(uploads().root.iterdir())
    rows = b"arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,100,20\n0.5,200,10\n1.0,57,3\n"
    app.file_uploader(key="sc_trace").set_value(("three.csv", rows, "text/csv")).run()
    assert unescaped(app.error[0].value) == ("three.csv: 3 rows, over this server's limit of 2 trace rows (whoever "
                                             "starts it can raise SIM_EXPLORER_MAX_TRACE_ROWS)")
    assert set(uploads().root.iterdir()) == before


def test_an_uploaded_profile_over_the_row_limit_is_refused_before_any_model_is_trained():
    app = open_app("pages/predictor.py")
    rows = "".join(f"{tokens},1,0.{tokens:07d}\n" for tokens in range(1, 20_002))
    profile = ("num_tokens,num_tensor_parallel_workers,time_stats.mlp_up_proj.median\n" + rows).encode()
    app.file_uploader(key="pr_upload").set_value(("mlp.csv", profile, "text/csv")).run()
    assert unescaped(app.error[0].value) == ("mlp.csv: 20,001 rows, over the 20,000-row limit of an uploaded profile "
                                             "(profile sweeps have a few thousand rows per operator)")


def test_a_sweep_over_a_trace_is_checked_on_the_traces_exact_lengths(monkeypatch):
    """Before a trace is read its output lengths are unknown; Start reads it once and refuses the
    probes whose request steps (3 requests x 600 output tokens) pass the server's limit of 1,000."""
    from explorer.server import uploads

    monkeypatch.setenv("SIM_EXPLORER_MAX_REQUEST_STEPS", "1000")
    trace = b"arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,100,600\n0.5,100,600\n1.0,100,600\n"
    stored = uploads().keep(trace, "long.csv")
    app = open_app("pages/capacity.py", scenario={**TINY, "workload": {"trace_file": str(stored)}})
    app.number_input(key="cap_num_requests").set_value(10).run()
    app.button(key="cap_start").click().run()
    assert "request steps" in unescaped(app.error[0].value) and "1,000" in unescaped(app.error[0].value)
    assert app.info[0].value == "Choose what to vary and press Start sweep."


def test_the_watcher_stops_the_sweeps_of_sessions_that_have_gone():
    """A job whose session check says it has gone is stopped; the others run on."""
    from explorer.capacity_jobs import _Entry, _stop_orphans

    class Job:
        stopped = False

        def stop(self) -> None:
            self.stopped = True
    gone, alive = Job(), Job()
    _stop_orphans({"a": _Entry(gone, Path("a"), lambda: False), "b": _Entry(alive, Path("b"), lambda: True)})
    assert gone.stopped and not alive.stopped
