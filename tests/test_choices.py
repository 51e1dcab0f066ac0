"""Sections with choices (predictor, memory, arrival process, length distributions): each
choice's config model holds exactly the knobs its consumer reads; a knob of another choice is
refused naming the choices that read it (left out at its default); switching a choice keeps what
the new one reads; the app's forms show the current choice's knobs."""

import numpy as np
import pytest
from pydantic import ValidationError
from synthetic_profiles import make_profiles

from sim_core import ConfigError, parse_config
from sim_core.config.arrival import ARRIVALS
from sim_core.config.choices import Choices, section_fields, switch_changes, with_choice
from sim_core.config.lengths import LENGTHS
from sim_core.config.memory import PLANNERS
from sim_core.config.predictor import PREDICTORS, as_roofline
from sim_core.memory import plan_memory
from sim_core.predictor import build_predictor
from sim_core.predictor.shape import BatchShape
from sim_core.workload import build_workload

TRACE = "arrived_at,num_prefill_tokens,num_decode_tokens\n0,5,7\n0.5,6,8\n2,9,3\n"


def recording(member, reads: set):
    """`member` as an instance of a subclass that adds the name of every knob read to `reads`."""
    cls = type(member)

    def __getattribute__(self, name):
        if name in cls.model_fields:
            reads.add(name)
        return cls.__getattribute__(self, name)

    spy = type(f"Recording{cls.__name__}", (cls,), {"__getattribute__": __getattribute__})
    return spy.model_construct(**dict(member))


def knobs_read(choices: Choices, choice: str) -> set:
    """The knobs of `choices` (the discriminator aside) that the member of `choice` has."""
    return set(choices.members()[choice].model_fields) - {choices.key}


@pytest.mark.parametrize("choice", list(PREDICTORS.members()))
def test_each_predictor_model_holds_the_knobs_its_cost_model_reads(choice, tmp_path):
    """Building the cost model and pricing a batch reads exactly the knobs of its type's model
    (learned: its profiles and estimator, and the roofline's knobs for the operators it lacks)."""
    section = {"type": choice, **({"profiles_dir": str(make_profiles(tmp_path, tps=(1,)))} if choice == "learned"
                                  else {})}
    config = parse_config({"predictor": section})
    reads: set = set()
    predictor = build_predictor(config.model_copy(update={"predictor": recording(config.predictor, reads)}))
    predictor.stage_time(BatchShape(2, 65, prefill_chunks=((64, 0),), num_decodes=1, decode_context=100), 0)
    predictor.cpu_times(2)
    assert reads - {"type"} == knobs_read(PREDICTORS, choice)


@pytest.mark.parametrize("choice", list(PLANNERS.members()))
def test_each_memory_model_holds_the_knobs_its_planner_reads(choice):
    """Planning reads exactly the knobs of the planner's model; auto runs Vidur's planner for
    vllm, vLLM's for vllm_v1 and the detailed one for sglang, so it reads what all three read."""
    reads: set = set()
    for policy in ("vllm", "vllm_v1", "sglang"):
        config = parse_config({"scheduler": {"type": policy}, "memory": {"planner": choice}})
        plan_memory(config.model_copy(update={"memory": recording(config.memory, reads)}))
    assert reads - {"planner"} == knobs_read(PLANNERS, choice)


@pytest.mark.parametrize("choice", list(ARRIVALS.members()))
def test_each_arrival_model_holds_the_knobs_its_process_reads(choice, tmp_path):
    """Generating a workload reads exactly the knobs of its process's model, but qps: every
    process has it (the app's rate slider and run-length guess read it), static and replay do
    not generate with it."""
    (tmp_path / "t.csv").write_text(TRACE)
    section = {"process": choice, **({"trace_file": str(tmp_path / "t.csv")} if choice == "replay" else {})}
    config = parse_config({"workload": {"num_requests": 3, "arrival": section}})
    reads: set = set()
    spy = recording(config.workload.arrival, reads)
    build_workload(config.model_copy(update={"workload": config.workload.model_copy(update={"arrival": spy})}))
    unread = {"qps"} if choice in ("static", "replay") else set()
    assert reads - {"process"} == knobs_read(ARRIVALS, choice) - unread


@pytest.mark.parametrize("choice", list(LENGTHS.members()))
def test_each_length_model_holds_the_knobs_its_distribution_reads(choice, tmp_path):
    """Generating prompt lengths reads exactly the knobs of the distribution's model."""
    (tmp_path / "t.csv").write_text(TRACE)
    section = {"distribution": choice, **({"trace_file": str(tmp_path / "t.csv")} if choice == "empirical" else {})}
    config = parse_config({"workload": {"num_requests": 3, "prompt_tokens": section}})
    reads: set = set()
    spy = recording(config.workload.prompt_tokens, reads)
    build_workload(config.model_copy(update={"workload": config.workload.model_copy(update={"prompt_tokens": spy})}))
    assert reads - {"distribution"} == knobs_read(LENGTHS, choice)


def test_each_choice_has_its_own_knobs():
    """The knobs by choice, shared ones first (qps: every process; min/max: the bounded distributions)."""
    def own(choices: Choices) -> dict:
        return {name: [k for k in model.model_fields if k != choices.key] for name, model in choices.members().items()}
    cpu = [f"cpu_{phase}{per}_s" for phase in ("schedule", "prepare_inputs", "sample", "process_outputs")
           for per in ("", "_per_request")]
    roofline = ["compute_efficiency", "memory_efficiency", "link_efficiency", "expert_load_imbalance", *cpu]
    assert own(PREDICTORS) == {"linear": ["base_s", "per_token_s"], "roofline": roofline,
                               "learned": [*roofline, "profiles_dir", "estimator", "cache_dir"], "silicon": roofline}
    vllm = ["gpu_memory_utilization", "non_torch_gib", "cuda_graph_gib"]
    assert own(PLANNERS) == {"auto": [*vllm, "margin_fraction", "framework_reserve_gib"], "vidur": ["margin_fraction"],
                             "detailed": ["margin_fraction", "framework_reserve_gib"], "vllm": vllm}
    assert own(ARRIVALS) == {"poisson": ["qps"], "gamma": ["qps", "cv"], "constant": ["qps"], "static": ["qps"],
                             "bursty": ["qps", "on_s", "off_s", "off_qps"],
                             "diurnal": ["qps", "period_s", "amplitude", "rate_curve"],
                             "replay": ["qps", "trace_file", "trace_format"]}
    assert own(LENGTHS) == {"fixed": ["value"], "uniform": ["min", "max"], "zipf": ["min", "max", "theta"],
                            "lognormal": ["min", "max", "mean", "sigma"], "empirical": ["trace_file", "trace_format"]}


@pytest.mark.parametrize("section,message", [
    ({"predictor": {"type": "linear", "link_efficiency": 0.5}},
     "predictor.link_efficiency: got 0.5; linear does not read it (read by: roofline, learned, silicon)"),
    ({"memory": {"planner": "vidur", "framework_reserve_gib": 2.0}},
     "memory.framework_reserve_gib: got 2.0; vidur does not read it (read by: auto, detailed)"),
    ({"workload": {"arrival": {"cv": 2.0}}},          # poisson, the default process
     "workload.arrival.cv: got 2.0; poisson does not read it (read by: gamma)"),
    ({"workload": {"output_tokens": {"distribution": "fixed", "max": 64}}},
     "workload.output_tokens.max: got 64; fixed does not read it (read by: uniform, zipf, lognormal)"),
    ({"workload": {"prompt_tokens": {"distribution": "fixed", "min": 2000}}},    # not min > max: not read at all
     "workload.prompt_tokens.min: got 2000; fixed does not read it (read by: uniform, zipf, lognormal)"),
    ({"workload": {"arrival": {"cv": 0}}},             # wrong for the knob itself: the knob's own message
     "workload.arrival.cv: got 0; allowed range 0.0 (exclusive) .. 100.0"),
])
def test_a_knob_of_another_choice_is_one_line_naming_the_choices_that_read_it(section, message):
    with pytest.raises(ConfigError) as error:
        parse_config(section)
    assert str(error.value) == f"scenario: {message}"


def test_a_knob_of_another_choice_at_its_default_is_left_out():
    """What older files held (every choice's knobs at their defaults) loads as the choice's model."""
    config = parse_config({"predictor": {"type": "linear", "base_s": 0.01, "link_efficiency": 0.7,
                                         "profiles_dir": None, "estimator": "random_forest"},
                           "memory": {"planner": "vidur", "framework_reserve_gib": 1.0},
                           "workload": {"arrival": {"process": "gamma", "cv": 3.0, "on_s": 10.0, "rate_curve": []},
                                        "prompt_tokens": {"distribution": "fixed", "value": 9, "theta": 1.1,
                                                          "trace_file": None}}})
    assert config.predictor.model_dump() == {"type": "linear", "base_s": 0.01, "per_token_s": 0.0001}
    assert config.memory.model_dump() == {"planner": "vidur", "margin_fraction": 0.1}
    assert config.workload.arrival.model_dump() == {"process": "gamma", "qps": 2.0, "cv": 3.0}
    assert config.workload.prompt_tokens.model_dump() == {"distribution": "fixed", "value": 9}


def test_an_absent_discriminator_is_its_default():
    """A section without its discriminator is its default choice (the predictor's depends on the
    device: the default A100-80GB has measured kernels, so silicon; an A100-40GB, the roofline)."""
    config = parse_config({"predictor": {"link_efficiency": 0.5}, "memory": {"framework_reserve_gib": 2.0},
                           "workload": {"arrival": {"qps": 3.0}, "output_tokens": {"max": 64}}})
    assert (config.predictor.type, config.memory.planner, config.workload.arrival.process,
            config.workload.output_tokens.distribution) == ("silicon", "auto", "poisson", "uniform")
    assert parse_config({"device": "a100-40gb", "predictor": {"link_efficiency": 0.5}}).predictor.type == "roofline"
    assert config.workload.output_tokens.model_dump() == {"distribution": "uniform", "min": 16, "max": 64}


def test_an_unknown_choice_names_the_choices():
    with pytest.raises(ConfigError) as error:
        parse_config({"workload": {"prompt_tokens": {"distribution": "normal"}}})
    assert str(error.value) == ("scenario: workload.prompt_tokens.distribution: got 'normal'; allowed one of: "
                                "fixed, uniform, zipf, lognormal, empirical")


def test_a_rule_between_a_choices_knobs_keeps_its_message():
    with pytest.raises(ConfigError) as error:
        parse_config({"workload": {"arrival": {"process": "replay"}}})
    assert str(error.value) == ("scenario: workload.arrival: got {'process': 'replay'}; process 'replay' needs "
                                "trace_file (the trace whose arrival times to use)")


def test_switching_a_choice_keeps_the_knobs_the_new_one_reads():
    """gamma -> bursty keeps qps, leaves out cv; linear -> roofline leaves out the linear knobs;
    the roofline under a learned scenario keeps its efficiencies and drops the profiles."""
    scenario = {"workload": {"arrival": {"process": "gamma", "qps": 3.0, "cv": 2.0}},
                "predictor": {"type": "linear", "base_s": 0.01}}
    assert with_choice(scenario, "workload.arrival.process", "bursty")["workload"]["arrival"] == {
        "process": "bursty", "qps": 3.0}
    assert switch_changes(scenario, "workload.arrival.process", "bursty") == {"workload.arrival.cv": None}
    assert switch_changes(scenario, "predictor.type", "roofline") == {"predictor.base_s": None}
    assert switch_changes(scenario, "workload.arrival.qps", 4.0) == {}
    learned = parse_config({"predictor": {"type": "learned", "profiles_dir": "p", "link_efficiency": 0.5}}).predictor
    assert as_roofline(learned).model_dump()["link_efficiency"] == 0.5
    assert as_roofline(learned).type == "roofline"


def test_a_sections_fields_offer_every_choice_and_all_their_knobs():
    """What forms, errors and sweeps see: the discriminator with every choice, every choice's knobs."""
    fields = section_fields(LENGTHS.base)
    assert list(fields) == ["distribution", "value", "min", "max", "theta", "mean", "sigma", "trace_file",
                            "trace_format"]
    assert fields["distribution"].description.startswith("fixed: always `value`; uniform: integers in [min, max]")


def test_results_do_not_depend_on_a_left_out_knob():
    """A full old-style section and the choice's own knobs give the same workload."""
    lean = {"seed": 3, "workload": {"num_requests": 50, "arrival": {"process": "gamma", "cv": 2.0}}}
    full = {"seed": 3, "workload": {"num_requests": 50, "arrival": {
        "process": "gamma", "cv": 2.0, "on_s": 10.0, "off_s": 20.0, "off_qps": 0.0, "period_s": 86400.0,
        "amplitude": 0.5, "rate_curve": [], "trace_file": None, "trace_format": "auto"}}}
    assert np.array_equal(build_workload(parse_config(lean)).arrived_at, build_workload(parse_config(full)).arrived_at)


def test_every_choices_config_is_frozen():
    """A validated section never changes; model_copy(update=...) builds another."""
    config = parse_config({"workload": {"arrival": {"process": "gamma"}}})
    for section, knob, value in ((config.predictor, "link_efficiency", 0.5), (config.memory, "margin_fraction", 0.2),
                                 (config.workload.arrival, "cv", 2.0), (config.workload.prompt_tokens, "min", 8)):
        with pytest.raises(ValidationError, match="frozen"):
            setattr(section, knob, value)
