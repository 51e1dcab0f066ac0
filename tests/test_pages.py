"""One AppTest per view on the tiny scenario: no exception, the key elements are there, and
the selection made on the Requests page shows on the KV-cache map and the Gantt."""

import json

from app_helpers import chart_specs, has_widget, open_app

from sim_core.viz.kv_blocks import SELECTED


def test_overview_shows_metrics_cdfs_time_series_and_per_replica_load():
    app = open_app("pages/overview.py")
    assert [m.label for m in app.metric][8:] == ["Preemptions", "KV use mean / peak", "Rejected",
                                                 "KV blocks / replica"]
    assert app.metric[11].value == "64"
    assert [s.value for s in app.subheader] == ["Latency CDFs", "Throughput over time", "Queue length over time",
                                                "Load per replica"]
    cdf = json.loads(chart_specs(app)[0])
    titles = [cdf["layout"][axis]["title"]["text"] for axis in ("xaxis", "xaxis2", "xaxis3", "xaxis4")]
    # each panel in the unit of its largest value: 3.3 s, 50 ms, 751 ms, 5.8 s
    assert titles == ["TTFT (s)", "TPOT (mean TBT) (ms)", "worst TBT (ms)", "end-to-end (s)"]
    assert len(chart_specs(app)) == 4


def test_kv_cache_page_animates_one_cell_per_block_with_play_and_scrubber():
    app = open_app("pages/kv_cache.py")
    figure = json.loads(chart_specs(app)[0])
    assert [b["label"] for b in figure["layout"]["updatemenus"][0]["buttons"]] == ["▶ Play", "❚❚ Pause"]
    assert len(figure["frames"]) == 40 == len(figure["layout"]["sliders"][0]["steps"])
    assert "One cell per physical block" in app.caption[0].value
    app.slider(key="kv_frames").set_value(20).run()
    assert len(json.loads(chart_specs(app)[0])["frames"]) == 20


def test_requests_page_sorts_filters_and_selects_a_request_for_the_other_views():
    app = open_app("pages/requests.py")
    assert app.caption[0].value.startswith("Showing 40 of 40 requests")
    app.selectbox(key="rq_sort").set_value("most restarts").run()
    app.toggle(key="rq_restarted").set_value(True).run()
    shown = app.caption[0].value
    assert shown.startswith("Showing ") and not shown.startswith("Showing 0 ")
    app.number_input(key="rq_pick").set_value(5).run()
    assert app.session_state["selected_request"] == 5
    assert app.sidebar.info[0].value == "Selected request #5"
    app.switch_page("pages/pipeline.py").run()
    gantt = json.loads(chart_specs(app)[0])
    assert "request 5" in [trace["name"] for trace in gantt["data"]]
    app.switch_page("pages/kv_cache.py").run()
    kv_map = json.loads(chart_specs(app)[0])
    assert "selected request" in [trace.get("name") for trace in kv_map["data"]]
    assert any(SELECTED in _codes(frame["data"][0]["z"]) for frame in kv_map["frames"])


def test_pipeline_page_has_the_gantt_busy_shares_operator_times_and_four_downloads():
    app = open_app("pages/pipeline.py")
    gantt, operators = (json.loads(spec) for spec in chart_specs(app))
    # TINY uses the linear cost model: its two parts, the larger (per-iteration base) on top
    assert operators["data"][0]["y"] == ["tokens", "base"]
    assert {trace["name"] for trace in gantt["data"]} <= {"prefill", "mixed", "decode"}
    assert gantt["layout"]["xaxis"]["title"]["text"] == "time (s)"
    assert app.caption[0].value.startswith("Busy share per stage in the window")
    labels = [button.proto.label for button in app.get("download_button")]
    assert labels == ["Chrome trace (Perfetto)", "Chrome trace, gzip", "Per-request CSV", "Scenario YAML"]


def test_memory_page_shows_the_plan_of_the_deciding_gpu():
    app = open_app("pages/memory.py")
    names = [trace["name"] for trace in json.loads(chart_specs(app)[0])["data"]]
    assert names == ["weights", "activations", "KV cache", "framework reserve", "margin", "unused"]
    facts = {m.label: m.value for m in app.metric}
    assert facts["planner"] == "vidur"
    assert facts["blocks per max-length request"] == "128"
    assert "overrides the planner" in app.info[0].value
    app.selectbox(key="w:memory:memory.planner").set_value("detailed").run()
    assert {m.label: m.value for m in app.metric}["planner"] == "detailed"


def test_memory_page_shows_vllms_budget_with_its_own_knobs():
    """With the vllm planner the bars split off non-torch memory and CUDA graphs, the margin is
    what gpu_memory_utilization leaves, and that knob replaces margin_fraction (PP=2: two GPUs,
    so the fitted 0.7 GiB of non-torch memory)."""
    app = open_app("pages/memory.py")
    app.selectbox(key="w:memory:memory.planner").set_value("vllm").run()
    assert not app.exception
    names = [trace["name"] for trace in json.loads(chart_specs(app)[0])["data"]]
    assert names == ["weights", "activations", "KV cache", "non-torch", "CUDA graphs", "margin", "unused"]
    assert {m.label: m.value for m in app.metric}["planner"] == "vllm"
    assert has_widget(app, "number_input", "w:memory:memory.gpu_memory_utilization")
    assert not has_widget(app, "number_input", "w:memory:memory.margin_fraction")
    parts = next(c.value for c in app.caption if c.value.startswith("GiB per part"))
    assert "non-torch 0.70 GiB" in parts and "margin 7.91 GiB" in parts    # 10% of the A100's 79.15 GiB


def _codes(z) -> set[int]:
    """The values of a heatmap z sent as a base64 typed array (or a plain nested list)."""
    import base64

    import numpy as np

    if isinstance(z, dict):
        return set(np.frombuffer(base64.b64decode(z["bdata"]), dtype=np.dtype(z["dtype"])).tolist())
    return {v for row in z for v in row}
