"""AppTests of the Scenario page: presets, knobs shown only where they apply, scenario files,
trace uploads (bad ones are explained in the page and change nothing)."""

import copy
import hashlib
from pathlib import Path

import yaml
from app_helpers import ROOT, TINY, has_widget, open_app, unescaped

from sim_core.scenarios.presets import preset


def test_loading_a_preset_replaces_the_scenario_and_every_widget_follows():
    app = open_app("pages/scenario.py")
    app.selectbox(key="sc_preset").set_value("Chunked prefill smooths TBT (Sarathi)").run()
    app.button(key="sc_load").click().run()
    assert not app.exception
    assert app.session_state["scenario"] == preset("Chunked prefill smooths TBT (Sarathi)").scenario
    assert app.selectbox(key="w:side:scheduler.type").value == "sarathi"
    assert app.number_input(key="w:form:scheduler.chunk_size").value == 512


def test_scheduler_knobs_show_only_for_the_policies_that_read_them():
    app = open_app("pages/scenario.py")
    assert has_widget(app, "number_input", "w:form:scheduler.max_tokens_in_batch")
    assert not has_widget(app, "number_input", "w:form:scheduler.chunk_size")
    app.selectbox(key="w:form:scheduler.type").set_value("sarathi").run()
    assert has_widget(app, "number_input", "w:form:scheduler.chunk_size")
    assert not has_widget(app, "number_input", "w:form:scheduler.max_tokens_in_batch")
    help_text = app.number_input(key="w:form:scheduler.chunk_size").help
    assert help_text.startswith("sarathi: token budget of one iteration")


def test_switching_the_policy_drops_the_knobs_the_new_one_does_not_read():
    """From the Sarathi preset (chunk_size 512) to vllm: chunk_size leaves the scenario and its
    widget the page; vllm's own knob appears with its default."""
    app = open_app("pages/scenario.py")
    app.selectbox(key="sc_preset").set_value("Chunked prefill smooths TBT (Sarathi)").run()
    app.button(key="sc_load").click().run()
    app.selectbox(key="w:form:scheduler.type").set_value("vllm").run()
    assert not app.exception and "chunk_size" not in app.session_state["scenario"]["scheduler"]
    assert app.session_state["scenario"]["scheduler"]["type"] == "vllm"
    assert not has_widget(app, "number_input", "w:form:scheduler.chunk_size")
    assert app.number_input(key="w:form:scheduler.max_tokens_in_batch").value == 4096


def test_switching_to_lightllm_also_sets_what_it_requires():
    app = open_app("pages/scenario.py")
    app.selectbox(key="w:form:scheduler.type").set_value("lightllm").run()
    scenario = app.session_state["scenario"]
    assert (scenario["scheduler"]["type"], scenario["scheduler"]["block_size"],
            scenario["cluster"]["pipeline_parallel_size"]) == ("lightllm", 1, 1)
    assert app.number_input(key="w:form:scheduler.block_size").value == 1


def test_a_scenario_file_is_imported_and_a_bad_one_is_explained():
    app = open_app("pages/scenario.py")
    imported = copy.deepcopy(TINY)
    imported["cluster"]["num_replicas"] = 3
    app.file_uploader(key="sc_import").set_value(("mine.yaml", yaml.safe_dump(imported).encode(), "text/yaml")).run()
    assert app.session_state["scenario"] == imported
    bad = copy.deepcopy(imported)
    bad["scheduler"]["chunk_size"] = 0
    app.file_uploader(key="sc_import").set_value(("bad.yaml", yaml.safe_dump(bad).encode(), "text/yaml")).run()
    assert unescaped(app.error[0].value) == ("Not applied, the previous scenario stays in place: bad.yaml: "
                                  "scheduler.chunk_size: got 0; allowed range 1 .. 10000000")
    assert app.session_state["scenario"] == imported


def test_an_uploaded_trace_is_validated_and_a_bad_row_is_reported_with_file_row_and_column():
    app = open_app("pages/scenario.py")
    app.radio(key="w:sc_source").set_value("trace file").run()
    good = b"arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,100,20\n0.5,200,10\n1.0,50,5\n"
    app.file_uploader(key="sc_trace").set_value(("mine.csv", good, "text/csv")).run()
    assert not app.exception
    trace = app.session_state["scenario"]["workload"]["trace_file"]
    assert Path(trace).read_bytes() == good and Path(trace).name == hashlib.sha256(good).hexdigest() + ".csv"
    assert "mine.csv: 3 requests over 1.0 s; prompts 50..200 tokens, outputs 5..20" in [
        unescaped(c.value) for c in app.main.caption]
    assert unescaped(app.success[0].value) == "Replaying mine.csv"
    bad = b"arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,100,20\n0.5,lots,10\n"
    app.file_uploader(key="sc_trace").set_value(("broken.csv", bad, "text/csv")).run()
    assert unescaped(app.error[0].value).startswith("broken.csv, row 2 (line 3), column 'num_prefill_tokens': ")
    assert app.session_state["scenario"]["workload"]["trace_file"] == trace


def test_a_bundled_sample_trace_can_be_replayed():
    app = open_app("pages/scenario.py")
    app.radio(key="w:sc_source").set_value("trace file").run()
    app.selectbox(key="sc_sample").set_value("code.csv").run()
    stored = Path(app.session_state["scenario"]["workload"]["trace_file"])
    assert stored.read_bytes() == (ROOT / "sample_traces" / "code.csv").read_bytes()
    assert unescaped(app.success[0].value) == "Replaying code.csv"
    app.switch_page("pages/overview.py").run()
    assert not app.exception
    assert app.caption[0].value.endswith("s simulated")


def test_list_knobs_take_comma_separated_numbers_and_refuse_anything_else():
    app = open_app("pages/scenario.py")
    app.selectbox(key="w:form:workload.arrival.process").set_value("diurnal").run()
    app.text_input(key="w:form:workload.arrival.rate_curve").set_value("1, 2, 4").run()
    assert app.session_state["scenario"]["workload"]["arrival"]["rate_curve"] == [1.0, 2.0, 4.0]
    app.text_input(key="w:form:workload.arrival.rate_curve").set_value("1, x").run()
    assert unescaped(app.error[0].value).endswith("workload.arrival.rate_curve: expected numbers separated by commas")
    assert app.session_state["scenario"]["workload"]["arrival"]["rate_curve"] == [1.0, 2.0, 4.0]
    assert app.text_input(key="w:form:workload.arrival.rate_curve").value == "1, 2, 4"


def test_every_section_with_choices_shows_its_choices_knobs_and_a_switch_drops_the_others():
    """The cost model and the prompt lengths are forms of their current choice: from linear to
    roofline the linear knobs leave the scenario and the page and the roofline's appear; from
    uniform to fixed min and max leave and the fixed value appears (its default, 256)."""
    app = open_app("pages/scenario.py")
    assert has_widget(app, "number_input", "w:form:predictor.base_s")
    assert not has_widget(app, "number_input", "w:form:predictor.link_efficiency")
    app.selectbox(key="w:form:predictor.type").set_value("roofline").run()
    assert not app.exception and app.session_state["scenario"]["predictor"] == {"type": "roofline"}
    assert not has_widget(app, "number_input", "w:form:predictor.base_s")
    assert app.number_input(key="w:form:predictor.link_efficiency").value == 0.7
    app.selectbox(key="w:form:workload.prompt_tokens.distribution").set_value("fixed").run()
    assert app.session_state["scenario"]["workload"]["prompt_tokens"] == {"distribution": "fixed"}
    assert not has_widget(app, "number_input", "w:form:workload.prompt_tokens.min")
    assert app.number_input(key="w:form:workload.prompt_tokens.value").value == 256


def test_expert_and_data_parallelism_show_only_for_moe_models():
    """Llama-2-7B (dense): no EP/DP knobs; Mixtral-8x7B: both, and all2all_backend; setting DP 2
    there puts it in the scenario."""
    assert not has_widget(open_app("pages/scenario.py"), "number_input", "w:form:cluster.data_parallel_size")
    app = open_app("pages/scenario.py", {**TINY, "model": "mixtral-8x7b"})
    assert has_widget(app, "number_input", "w:form:cluster.expert_parallel_size")
    assert has_widget(app, "selectbox", "w:form:cluster.all2all_backend")
    app.number_input(key="w:form:cluster.data_parallel_size").set_value(2).run()
    assert not app.exception and app.session_state["scenario"]["cluster"]["data_parallel_size"] == 2
