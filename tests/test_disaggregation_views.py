"""The KV transfers of a P/D run in the Gantt (a link row per prefill replica), the Chrome
trace, and the pages: the Scenario page edits the pools, the Pipeline page draws the link."""

import json

import pytest
from app_helpers import TINY, chart_specs, has_widget, open_app
from conftest import cost, simulate
from test_disaggregation import MOVE_100, disaggregated

from sim_core.export import chrome_trace
from sim_core.viz.gantt import pipeline_gantt

TWO_MOVES = [(0.0, 100, 3), (0.0, 100, 3)]


def test_the_gantt_has_a_kv_link_row_under_each_prefill_replica_with_one_bar_per_transfer():
    result = disaggregated(TWO_MOVES, decode={"num_replicas": 2})
    figure = pipeline_gantt(result)
    assert list(figure.layout.yaxis.categoryarray) == ["decode 2 / stage 0", "decode 1 / stage 0",
                                                       "prefill 0 / KV link", "prefill 0 / stage 0"]
    moves = next(trace for trace in figure.data if trace.name == "KV transfer")
    assert list(moves.y) == ["prefill 0 / KV link"] * 2
    assert [round(b, 9) for b in moves.base] == [round(cost(200), 9), round(cost(200) + MOVE_100, 9)]
    assert [round(x, 9) for x in moves.x] == [round(MOVE_100, 9)] * 2
    assert [list(row) for row in moves.customdata] == [[0, 52.4288, "decode 1"], [1, 52.4288, "decode 2"]]


def test_the_views_of_a_run_without_pools_keep_their_replica_names_and_no_link():
    result = simulate(TWO_MOVES, cluster={"num_replicas": 2})
    figure = pipeline_gantt(result)
    assert list(figure.layout.yaxis.categoryarray) == ["replica 1 / stage 0", "replica 0 / stage 0"]
    assert "KV transfer" not in [trace.name for trace in figure.data]
    events = chrome_trace(result)["traceEvents"]
    assert [e["args"]["name"] for e in events if e["name"] == "process_name"] == ["Replica 0", "Replica 1", "Requests"]
    assert not [e for e in events if e.get("cat") == "kv_transfer"]


def test_the_chrome_trace_names_the_pools_and_puts_transfers_on_the_link_thread():
    result = disaggregated(TWO_MOVES, decode={"num_replicas": 2})
    events = chrome_trace(result)["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    processes = [e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"]
    assert processes == ["Prefill replica 0", "Decode replica 1", "Decode replica 2", "Requests"]
    assert names[(0, 1)] == "KV link"
    moves = [e for e in events if e.get("cat") == "kv_transfer"]
    assert [(e["pid"], e["tid"], e["args"]["request_id"], e["args"]["to"]) for e in moves] == \
        [(0, 1, 0, "decode 1"), (0, 1, 1, "decode 2")]
    assert moves[1]["ts"] == moves[0]["ts"] + moves[0]["dur"]
    assert abs(moves[0]["dur"] - MOVE_100 * 1e6) < 1e-6
    counters = [e for e in events if e["ph"] == "C" and e["name"] == "KV blocks" and e["pid"] == 1]
    assert all(e["args"]["used"] + e["args"]["free"] == 100 for e in counters)
    json.dumps(chrome_trace(result))


PD_TINY = {**TINY, "disaggregation": {"enabled": True, "prefill": {"num_blocks": 64}, "decode": {"num_blocks": 64}}}


@pytest.mark.parametrize("policy", ["vllm", "vllm_v0", "vllm_v1", "sglang"])
def test_the_pipeline_page_draws_the_kv_link_lane(policy):
    scenario = {**PD_TINY, "scheduler": {**PD_TINY.get("scheduler", {}), "type": policy}}
    app = open_app("pages/pipeline.py", scenario)
    gantt = json.loads(chart_specs(app)[0])
    assert "KV transfer" in [trace["name"] for trace in gantt["data"]]
    assert "prefill 0 / KV link" in gantt["layout"]["yaxis"]["categoryarray"]


def test_the_scenario_page_turns_disaggregation_on_and_edits_each_pool():
    app = open_app("pages/scenario.py")
    assert not has_widget(app, "number_input", "w:form:disaggregation.decode.num_replicas")
    app.toggle(key="w:form:disaggregation.enabled").set_value(True).run()
    assert app.session_state["scenario"]["disaggregation"]["enabled"] is True
    app.number_input(key="w:form:disaggregation.decode.num_replicas").set_value(3).run()
    app.number_input(key="w:form:disaggregation.link_bandwidth_gb_s").set_value(100.0).run()
    assert not app.exception
    pools = app.session_state["scenario"]["disaggregation"]
    assert (pools["decode"]["num_replicas"], pools["link_bandwidth_gb_s"]) == (3, 100.0)
    help_text = app.number_input(key="w:form:disaggregation.link_latency_s").help
    assert help_text.startswith("Fixed cost of one KV transfer")
