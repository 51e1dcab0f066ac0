"""The scenario's title follows its settings: the loaded name, marked "edited" with the differences."""

import copy

from app_helpers import TINY, open_app, unescaped

from explorer.titles import differences, titled
from sim_core import parse_config, run_simulation
from sim_core.export.chrome_trace import chrome_trace
from sim_core.scenarios.defaults import DEFAULT_SCENARIO

DEFAULT_NAME = "default: Llama-2-13B on A100-40GB, 2 replicas, vLLM, 5 req/s"


def test_the_differences_name_the_new_choice_of_a_section_and_the_changed_knobs():
    """A switched scheduler is named by its policy alone (not the knobs it dropped); other changes
    read as labels in path order, a removed field as "no <field>"."""
    edited = copy.deepcopy(TINY)
    edited["scheduler"] = {"type": "sarathi", "chunk_size": 512}
    edited["cluster"]["tensor_parallel_size"] = 2
    edited["workload"]["arrival"]["qps"] = 7.9
    edited.pop("max_model_len")
    assert differences(TINY, edited) == ["TP 2", "no max_model_len", "sarathi", "7.9 req/s"]
    assert differences(TINY, copy.deepcopy(TINY)) == []


def test_an_edited_scenario_is_titled_after_its_origin_and_an_undone_edit_drops_the_mark():
    """The title keeps the loaded name, lists at most six differences, and returns to the plain
    name when the settings are back to the origin's."""
    edited = copy.deepcopy(TINY)
    edited["cluster"]["num_replicas"] = 3
    assert titled(edited, TINY)["name"] == "tiny: 40 requests, 64 KV blocks (edited: 3 replicas)"
    assert titled(titled(edited, TINY), TINY)["name"] == "tiny: 40 requests, 64 KV blocks (edited: 3 replicas)"
    assert titled(copy.deepcopy(TINY), TINY)["name"] == "tiny: 40 requests, 64 KV blocks"
    for seed in range(8):
        edited[f"x{seed}"] = seed
    assert titled(edited, TINY)["name"].endswith("(edited: 3 replicas, x0 0, x1 1, x2 2, x3 3, x4 4, +3 more)")


def test_the_sidebar_the_overview_and_the_chrome_trace_name_the_knobs_a_user_turned():
    """Issue 19 item 1: turning the scheduler, TP, PP, replicas and rate in the sidebar names them
    in the sidebar, the Overview subtitle and the Chrome trace's otherData.scenario."""
    app = open_app()
    app.sidebar.selectbox(key="w:side:scheduler.type").set_value("sarathi").run()
    app.sidebar.selectbox(key="w:side:cluster.tensor_parallel_size").set_value(2).run()
    app.sidebar.selectbox(key="w:side:cluster.pipeline_parallel_size").set_value(4).run()
    app.sidebar.slider(key="w:side:cluster.num_replicas").set_value(3).run()
    app.sidebar.number_input(key="w:side:workload.arrival.qps").set_value(7.9).run()
    assert not app.exception
    title = "tiny: 40 requests, 64 KV blocks (edited: 3 replicas, PP 4, TP 2, sarathi, 7.9 req/s)"
    assert app.session_state["scenario"]["name"] == title
    assert unescaped(app.sidebar.caption[0].value) == title
    assert unescaped(app.caption[0].value).startswith(title + " · 40 requests")
    trace = chrome_trace(run_simulation(parse_config(app.session_state["scenario"])))
    assert trace["otherData"]["scenario"] == title
    app.sidebar.number_input(key="w:side:workload.arrival.qps").set_value(6.0).run()
    assert app.session_state["scenario"]["name"] == title.replace(", 7.9 req/s", "")   # back to 6 req/s


def test_the_default_scenario_keeps_its_name_until_a_knob_turns():
    """The default is named as shipped; one turned knob is listed after that name."""
    app = open_app(scenario=DEFAULT_SCENARIO)
    assert app.session_state["scenario"]["name"] == DEFAULT_NAME
    app.sidebar.slider(key="w:side:cluster.num_replicas").set_value(4).run()
    assert app.session_state["scenario"]["name"] == DEFAULT_NAME + " (edited: 4 replicas)"
