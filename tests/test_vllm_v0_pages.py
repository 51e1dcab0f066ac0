"""AppTests with vllm_v0: its knobs on the Scenario page, the KV-copy lane on the Pipeline page,
shared blocks on the KV-cache map."""

import base64
import copy
import json

import numpy as np
from app_helpers import TINY, chart_specs, has_widget, open_app

from sim_core.viz.kv_blocks import SHARED

# tight KV, swaps, and requests of 2 samples: every vllm_v0 behaviour the views draw
V0 = copy.deepcopy(TINY)
V0["cluster"] = {"num_replicas": 1, "tensor_parallel_size": 1, "pipeline_parallel_size": 1}
V0["scheduler"] = {"type": "vllm_v0", "block_size": 16, "num_blocks": 40, "preemption_mode": "swap"}
V0["workload"]["parallel_samples"] = 2


def test_the_scenario_page_shows_vllm_v0_knobs_and_hides_vidur_ones():
    """batch_size_cap is shared (the detailed planner's logits reserve reads it for every policy);
    max_tokens_in_batch is vllm's and lightllm's alone."""
    app = open_app("pages/scenario.py")
    app.selectbox(key="w:form:scheduler.type").set_value("vllm_v0").run()
    assert not app.exception
    assert app.selectbox(key="w:form:scheduler.preemption_mode").value == "recompute"
    assert has_widget(app, "number_input", "w:form:scheduler.swap_space_gb")
    assert has_widget(app, "toggle", "w:form:scheduler.enable_chunked_prefill")
    assert has_widget(app, "number_input", "w:form:scheduler.max_num_seqs")
    assert not has_widget(app, "number_input", "w:form:scheduler.max_tokens_in_batch")
    app.selectbox(key="w:form:scheduler.preemption_mode").set_value("swap").run()
    assert app.session_state["scenario"]["scheduler"]["preemption_mode"] == "swap"


def test_the_pipeline_page_draws_kv_copies_on_their_own_lane():
    app = open_app("pages/pipeline.py", V0)
    gantt = json.loads(chart_specs(app)[0])
    names = {trace["name"] for trace in gantt["data"]}
    assert {"swap out (PCIe)", "swap in (PCIe)", "copy-on-write"} <= names
    assert gantt["layout"]["yaxis"]["categoryarray"] == ["replica 0 / stage 0 / KV copies", "replica 0 / stage 0"]


def test_the_kv_map_colours_shared_blocks():
    """Two samples per request share their prompt blocks: some frame shows SHARED cells and the
    legend names the state; the swap space in use is drawn under the map."""
    app = open_app("pages/kv_cache.py", V0)
    kv_map = json.loads(chart_specs(app)[0])
    assert "shared prefix" in {trace.get("name") for trace in kv_map["data"]}
    assert "replica 0 CPU swap use" in {trace.get("name") for trace in kv_map["data"]}   # swaps happen here
    assert any(SHARED in _codes(frame["data"][0]["z"]) for frame in kv_map["frames"])


def _codes(z) -> set[int]:
    """Heatmap values sent as a base64 typed array (or nested lists)."""
    if isinstance(z, dict):
        return set(np.frombuffer(base64.b64decode(z["bdata"]), dtype=np.dtype(z["dtype"])).tolist())
    return {v for row in z for v in row}
