"""AppTests of the shell: default scenario, shared sidebar knobs, cache, URL, kept view."""

import copy

from app_helpers import APP, TIMEOUT, TINY, has_widget, open_app, unescaped
from streamlit.testing.v1 import AppTest

from sim_core.config.share import decode_scenario, encode_scenario
from sim_core.scenarios.defaults import DEFAULT_SCENARIO


def test_the_app_opens_on_the_default_scenario_with_its_headline_metrics():
    app = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not app.exception
    assert app.title[0].value == "LLM serving scheduling explorer"
    labels = [metric.label for metric in app.metric]
    assert labels[:4] == ["Throughput (req/s)", "Output tokens/s", "TTFT p50 / p99", "TBT p50 / p99"]
    assert app.session_state["scenario"] == DEFAULT_SCENARIO
    assert decode_scenario(app.query_params["s"]) == DEFAULT_SCENARIO   # the URL holds the scenario


def test_a_sidebar_knob_resimulates_and_a_view_only_rerun_reuses_the_cached_run(monkeypatch):
    import sim_core.engine.simulation as simulation

    calls = []
    original = simulation.run_simulation
    monkeypatch.setattr("explorer.state.run_simulation", lambda *a, **k: calls.append(1) or original(*a, **k))
    scenario = copy.deepcopy(TINY)
    scenario["seed"] = 1234                      # a key no other test has cached
    app = open_app("pages/pipeline.py", scenario)
    first = len(calls)
    app.slider(key="pp_window").set_value((0.0, 1.0)).run()
    assert len(calls) == first                   # redraw only
    app.selectbox(key="w:side:scheduler.type").set_value("sarathi").run()
    assert not app.exception
    assert len(calls) == first + 1
    assert app.session_state["scenario"]["scheduler"]["type"] == "sarathi"


def test_pages_run_the_level_they_read_and_reuse_a_full_run(monkeypatch):
    """The Overview simulates the lean `series` level; the KV map needs block events (a `full`
    run), which then serves the Pipeline; back on the Overview its own series run is still cached:
    two runs in all."""
    import sim_core.engine.simulation as simulation

    levels = []
    original = simulation.run_simulation
    monkeypatch.setattr("explorer.state.run_simulation",
                        lambda config, *a, **k: levels.append(config.engine.record) or original(config, *a, **k))
    scenario = copy.deepcopy(TINY)
    scenario["seed"] = 4321                      # a key no other test has cached
    app = open_app(None, scenario)               # Overview: requests, series, batch summaries
    app.switch_page("pages/kv_cache.py").run()   # the KV map needs block events: a full run
    app.switch_page("pages/pipeline.py").run()   # takes the cached full run
    app.switch_page("pages/overview.py").run()
    assert not app.exception
    assert levels == ["series", "full"]


def test_the_view_stays_when_the_scenario_changes_from_the_sidebar():
    app = open_app("pages/kv_cache.py")
    app.slider(key="w:side:cluster.num_replicas").set_value(3).run()
    assert not app.exception
    assert app.title[0].value == "KV cache"
    assert app.session_state["scenario"]["cluster"]["num_replicas"] == 3
    assert app.number_input(key="kv_replicas").max == 3


def test_a_link_reproduces_the_scenario_and_a_broken_link_keeps_the_default():
    linked = copy.deepcopy(TINY)
    linked["scheduler"]["type"] = "orca"
    linked["scheduler"].pop("num_blocks")
    app = AppTest.from_file(APP, default_timeout=TIMEOUT)
    app.query_params["s"] = encode_scenario(linked)
    app.run()
    assert not app.exception
    assert app.session_state["scenario"] == linked
    assert app.selectbox(key="w:side:scheduler.type").value == "orca"

    broken = AppTest.from_file(APP, default_timeout=TIMEOUT)
    broken.query_params["s"] = encode_scenario(linked)[:-9]
    broken.run()
    assert "scenario link: not a scenario" in unescaped(broken.error[0].value)
    assert broken.session_state["scenario"] == DEFAULT_SCENARIO


def test_an_invalid_edit_is_reverted_and_explained_and_the_scenario_stays():
    app = open_app("pages/scenario.py")
    before = copy.deepcopy(app.session_state["scenario"])
    app.number_input(key="w:form:cluster.pipeline_parallel_size").set_value(3).run()
    assert not app.exception
    assert unescaped(app.error[0].value) == ("Not applied, the previous scenario stays in place: scenario: "
                                  "cluster.pipeline_parallel_size: 3 must divide the model's 32 layers")
    assert app.session_state["scenario"] == before
    assert app.number_input(key="w:form:cluster.pipeline_parallel_size").value == 2
    assert has_widget(app, "number_input", "w:form:cluster.num_replicas")


def test_a_deep_link_as_the_first_request_runs_the_page_inside_the_app():
    """Streamlit starts in its pages-folder mode, where the first request for /kv_cache runs that
    page script alone; the page reruns through app.py, so it has the sidebar knobs and the URL."""
    app = AppTest.from_file(APP, default_timeout=TIMEOUT)
    app.session_state["scenario"] = copy.deepcopy(TINY)
    app.switch_page("pages/kv_cache.py")              # before any run: the page is named by its file
    app.run()
    assert not app.exception
    assert app.title[0].value == "KV cache"
    assert app.sidebar.selectbox(key="w:side:scheduler.type").value == "vllm"
    assert decode_scenario(app.query_params["s"]) == TINY


def test_the_url_holds_the_scenario_on_pages_that_end_early():
    """Issue 19 item 2: the Predictor page (no profile uploaded), Capacity (before a sweep) and
    Accuracy (no run uploaded) end their run early; a knob turned there still reaches `?s=`, so a
    link copied there reproduces it."""
    for page in ("pages/predictor.py", "pages/capacity.py", "pages/accuracy.py"):
        app = open_app(page)
        app.sidebar.slider(key="w:side:cluster.num_replicas").set_value(5).run()
        assert not app.exception
        assert decode_scenario(app.query_params["s"])["cluster"]["num_replicas"] == 5
        assert decode_scenario(app.query_params["s"]) == app.session_state["scenario"]


def test_a_link_to_an_uploaded_trace_follows_its_content_hash_to_this_servers_store():
    """Issue 19 item 1: a link names an uploaded trace by its content hash; opened on a server
    whose store holds that content (here under another folder) it runs it, and a hash this
    server does not hold is named with what to do, the default scenario staying."""
    import hashlib

    from explorer.server import uploads

    data = b"arrived_at,num_prefill_tokens,num_decode_tokens\n0,100,10\n1,120,12\n"
    digest = hashlib.sha256(data).hexdigest()
    uploads().keep(data, "mine.csv")
    linked = copy.deepcopy(TINY)
    linked["workload"] = {"trace_file": f"/another/server/store/{digest}.csv"}
    app = AppTest.from_file(APP, default_timeout=TIMEOUT)
    app.query_params["s"] = encode_scenario(linked)
    app.run()
    assert not app.exception and not app.error
    assert app.session_state["scenario"]["workload"]["trace_file"] == str(uploads().root / f"{digest}.csv")

    linked["workload"] = {"trace_file": f"/another/server/store/{'0' * 64}.csv"}
    missing = AppTest.from_file(APP, default_timeout=TIMEOUT)
    missing.query_params["s"] = encode_scenario(linked)
    missing.run()
    assert unescaped(missing.error[0].value).endswith(
        "scenario link: it uses an uploaded trace (content hash 000000000000...) that is not on this server; "
        "upload the same file on the Workload page and open the link again")
    assert missing.session_state["scenario"] == DEFAULT_SCENARIO
