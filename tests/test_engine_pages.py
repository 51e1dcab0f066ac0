"""The app with the engine schedulers: the Overview shows the prefix hit rate, the KV map the
shared and cached blocks, the Scenario page the engines' knobs with their labels (AppTest)."""

import copy
import json

from app_helpers import ROOT, TINY, chart_specs, open_app, unescaped
from streamlit.testing.v1 import AppTest

from sim_core import parse_config, run_simulation

CHAT = copy.deepcopy(TINY)
CHAT["cluster"] = {"num_replicas": 1, "tensor_parallel_size": 1, "pipeline_parallel_size": 1}
CHAT["workload"] = {**CHAT["workload"], "sessions": {"enabled": True, "min_turns": 2, "max_turns": 4,
                                                      "think_time_s": 0.5, "system_prompt_tokens": 64}}


def test_overview_shows_the_prefix_hit_rate_of_sglang_on_a_chat():
    scenario = {**CHAT, "scheduler": {"type": "sglang", "block_size": 16, "num_blocks": 256}}
    app = open_app("pages/overview.py", scenario)
    metrics = {m.label: m.value for m in app.metric}
    summary = run_simulation(parse_config(scenario)).summary
    assert summary["prefix_hit_rate"] > 0.2
    assert metrics["Prefix hit rate"] == f"{summary['prefix_hit_rate']:.0%}"
    assert metrics["Truncated at max_model_len"] == "0"


def test_kv_map_shows_shared_and_cached_blocks_under_vllm_v1():
    scenario = {**CHAT, "scheduler": {"type": "vllm_v1", "block_size": 16, "num_blocks": 256}}
    app = open_app("pages/kv_cache.py", scenario)
    figure = json.loads(chart_specs(app)[0])
    legend = {trace.get("name") for trace in figure["data"]}     # one entry per state code present
    assert {"shared prefix", "cached, free"} <= legend


def test_scenario_page_lists_engine_labels_and_shows_only_the_chosen_engines_knobs():
    app = open_app("pages/scenario.py", {**TINY, "scheduler": {"type": "sglang", "block_size": 16, "num_blocks": 64}})
    policy = app.selectbox(key="w:form:scheduler.type")
    assert "sglang · SGLang (v0.4)" in policy.options and "vllm_v1 · vLLM V1 engine (v0.33)" in policy.options
    shown = [w.key for kind in ("number_input", "toggle", "text_input", "selectbox") for w in app.get(kind)]
    assert "w:form:scheduler.cuda_graph_batch_sizes" in shown and "w:form:scheduler.max_running_requests" in shown
    assert "w:form:scheduler.max_num_seqs" not in shown        # a vllm_v1 knob


def test_the_workload_page_generates_shared_system_prompts():
    app = AppTest.from_file(str(ROOT / "pages" / "workload.py"), default_timeout=30).run()
    app.toggle(key="wl_shared").set_value(True).run()
    app.number_input(key="wl_prefix_tokens").set_value(300).run()
    assert not app.exception
    table = app.table[0].value
    assert dict(zip(table["item"], map(unescaped, table["value"])))["extra columns"] == "prefix_group, prefix_len"
