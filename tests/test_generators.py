"""Synthetic generators follow their distributions, reproduce from a seed, and sessions add up."""

from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from sim_core import ConfigError, parse_config
from sim_core.config import ArrivalConfig, LengthConfig
from sim_core.config.choices import section_fields
from sim_core.config.workload import ArrivalSection, LengthSection
from sim_core.workload import build_workload
from sim_core.workload.arrivals import generate_arrivals, mean_rate
from sim_core.workload.lengths import generate_lengths


def arrival_config(**spec):
    """The arrival section's model for `process` (as the scenario validates it)."""
    return TypeAdapter(ArrivalSection).validate_python(spec)


def arrivals(n=20000, seed=1, **spec):
    return generate_arrivals(arrival_config(**spec), n, np.random.default_rng(seed))


def lengths(n=20000, seed=1, observed=None, **spec):
    config = TypeAdapter(LengthSection).validate_python(spec)
    return generate_lengths(config, n, np.random.default_rng(seed), observed)


def test_gamma_gaps_have_the_asked_mean_and_coefficient_of_variation():
    gaps = np.diff(arrivals(process="gamma", qps=4.0, cv=3.0))
    assert gaps.mean() == pytest.approx(0.25, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(3.0, rel=0.08)


def test_constant_arrivals_are_evenly_spaced_from_zero():
    """At 4 req/s, 5 requests arrive at 0, 0.25, 0.5, 0.75 and 1.0 s, whatever the seed; its mean
    rate is its qps."""
    for seed in (1, 2):
        assert arrivals(n=5, seed=seed, process="constant", qps=4.0).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert mean_rate(arrival_config(process="constant", qps=4.0)) == 4.0


def test_a_constant_rate_scenario_builds_its_evenly_spaced_workload():
    """A scenario naming `constant` at 2 req/s with 3 requests arrives at 0, 0.5 and 1.0 s, and
    the process keeps only qps (it reads no cv)."""
    config = parse_config({"workload": {"num_requests": 3, "arrival": {"process": "constant", "qps": 2.0}}})
    assert build_workload(config).arrived_at.tolist() == [0.0, 0.5, 1.0]
    with pytest.raises(ConfigError, match="cv"):
        parse_config({"workload": {"arrival": {"process": "constant", "qps": 2.0, "cv": 3.0}}})


def test_bursty_arrivals_fall_only_in_bursts_at_the_burst_rate():
    times = arrivals(process="bursty", qps=10.0, on_s=2.0, off_s=3.0)
    assert times[0] == 0.0
    assert np.all(np.mod(times, 5.0) < 2.0)                        # nothing in the lulls
    assert len(times) / times[-1] == pytest.approx(mean_rate(arrival_config(process="bursty", qps=10.0, on_s=2.0,
                                                                            off_s=3.0)), rel=0.03)   # 4 req/s


def test_diurnal_arrivals_follow_the_rate_curve():
    """Rates 1 then 3 req/s over the two halves of a 100 s period: a quarter of the arrivals
    fall in the first half."""
    times = arrivals(process="diurnal", period_s=100.0, rate_curve=[1.0, 1.0, 3.0, 3.0, 3.0, 1.0])
    first_half = np.mod(times, 100.0) < 50.0
    curve = arrival_config(process="diurnal", period_s=100.0, rate_curve=[1.0, 1.0, 3.0, 3.0, 3.0, 1.0])
    rates = np.interp(np.linspace(0, 6, 601), np.arange(7), curve.rate_curve + [1.0])
    expected = rates[:301].mean() / rates.mean() / 2
    assert first_half.mean() == pytest.approx(expected, abs=0.02)
    sine = arrivals(process="diurnal", qps=2.0, amplitude=0.8, period_s=1000.0)
    assert len(sine) / sine[-1] == pytest.approx(2.0, rel=0.03)


def test_lognormal_has_the_asked_mean_and_stays_in_bounds():
    drawn = lengths(distribution="lognormal", mean=300.0, sigma=0.5, min=1, max=100_000)
    assert drawn.mean() == pytest.approx(300.0, rel=0.02)
    clipped = lengths(distribution="lognormal", mean=300.0, sigma=2.0, min=50, max=400)
    assert clipped.min() == 50 and clipped.max() == 400


def test_empirical_resamples_only_observed_lengths_in_proportion():
    drawn = lengths(distribution="empirical", trace_file="x.csv", observed=np.array([10, 10, 10, 500]))
    assert set(drawn.tolist()) == {10, 500}
    assert (drawn == 10).mean() == pytest.approx(0.75, abs=0.02)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["poisson", "gamma", "constant", "static", "bursty", "diurnal"]),
       st.sampled_from(["fixed", "uniform", "zipf", "lognormal"]), st.integers(0, 2**32 - 1))
def test_every_generator_reproduces_from_its_seed_and_keeps_its_invariants(process, distribution, seed):
    """Same seed, same workload; times start at 0 and never decrease; lengths stay >= 1."""
    bounds = {"min": 4, "max": 900} if distribution != "fixed" else {}     # fixed reads only its value
    spec = {"seed": seed, "workload": {"num_requests": 300, "arrival": {"process": process},
                                       "prompt_tokens": {"distribution": distribution, **bounds}}}
    one, two = (build_workload(parse_config(spec)) for _ in range(2))
    assert np.array_equal(one.arrived_at, two.arrived_at)
    assert np.array_equal(one.num_prefill_tokens, two.num_prefill_tokens)
    assert one.arrived_at[0] == 0.0 and np.all(np.diff(one.arrived_at) >= 0)
    assert one.num_prefill_tokens.min() >= 1 and one.num_decode_tokens.min() >= 1


def test_sessions_grow_the_context_and_space_turns_by_answer_and_think_time():
    """Turn j's prompt = system prompt + all earlier inputs and answers + its input; it arrives
    no earlier than turn j-1 + its answer's estimated time."""
    spec = {"seed": 5, "max_model_len": 1_000_000, "workload": {
        "num_requests": 400, "arrival": {"process": "poisson", "qps": 1.0},
        "prompt_tokens": {"distribution": "uniform", "min": 10, "max": 50},
        "output_tokens": {"distribution": "uniform", "min": 5, "max": 30},
        "sessions": {"enabled": True, "min_turns": 2, "max_turns": 5, "think_time_s": 3.0,
                     "response_s_per_token": 0.1, "system_prompt_tokens": 100, "num_system_prompts": 3}}}
    w = build_workload(parse_config(spec))
    assert len(w) == 400 and np.all(np.diff(w.arrived_at) >= 0)
    for session in np.unique(w.session_id)[:20]:
        rows = np.flatnonzero(w.session_id == session)
        assert w.turn[rows].tolist() == list(range(len(rows)))
        assert len(set(w.prefix_group[rows].tolist())) == 1 and 0 <= w.prefix_group[rows[0]] < 3
        assert w.prefix_len[rows[0]] == 100
        for prev, cur in pairwise(rows):
            assert w.prefix_len[cur] == w.num_prefill_tokens[prev] + w.num_decode_tokens[prev]
            assert 10 <= w.num_prefill_tokens[cur] - w.prefix_len[cur] <= 50
            assert w.arrived_at[cur] - w.arrived_at[prev] >= 0.1 * w.num_decode_tokens[prev]


def test_replayed_arrivals_come_from_the_trace(tmp_path):
    (tmp_path / "t.csv").write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0,5,5\n0.5,5,5\n2,5,5\n")
    spec = {"workload": {"num_requests": 3, "arrival": {"process": "replay", "trace_file": str(tmp_path / "t.csv")}}}
    assert build_workload(parse_config(spec)).arrived_at.tolist() == [0.0, 0.5, 2.0]
    spec["workload"]["num_requests"] = 5
    with pytest.raises(ConfigError) as error:
        build_workload(parse_config(spec))
    assert str(error.value) == (f"workload.arrival.trace_file: {tmp_path / 't.csv'} has 3 arrivals, "
                                "fewer than the 5 needed")


def test_config_errors_name_the_field_and_the_allowed_range():
    with pytest.raises(ConfigError) as error:
        parse_config({"workload": {"arrival": {"process": "diurnal", "amplitude": 1.5}}})
    assert str(error.value) == "scenario: workload.arrival.amplitude: got 1.5; allowed range 0.0 .. 1.0"
    with pytest.raises(ConfigError) as error:
        parse_config({"workload": {"prompt_tokens": {"distribution": "empirical"}}})
    assert str(error.value) == ("scenario: workload.prompt_tokens: got {'distribution': 'empirical'}; "
                                "distribution 'empirical' needs trace_file (the trace to resample lengths from)")


def test_every_workload_knob_has_a_description_for_the_ui():
    """The app shows Field descriptions as help text; none may be missing."""
    from sim_core.config import SessionConfig, WorkloadConfig

    for model in (WorkloadConfig, ArrivalConfig, LengthConfig, SessionConfig):   # every choice's knobs
        missing = [name for name, field in section_fields(model).items() if not field.description]
        assert missing == [], model.__name__


def test_generated_sessions_round_trip_through_the_canonical_file(tmp_path):
    from sim_core.workload import read_trace, write_trace

    spec = {"seed": 2, "max_model_len": 100_000, "workload": {"num_requests": 50, "sessions": {"enabled": True}}}
    generated = build_workload(parse_config(spec))
    write_trace(generated, tmp_path / "s.csv")
    back = read_trace(tmp_path / "s.csv").workload
    assert back.optional_columns().keys() == {"session_id", "turn", "prefix_group", "prefix_len"}
    assert np.array_equal(back.turn, generated.turn) and np.array_equal(back.arrived_at, generated.arrived_at)


def test_a_shared_prefix_goes_before_every_prompt_and_names_its_group():
    """tokens 300 over 3 groups: each prompt is the generated length plus 300, its prefix_len is
    300 and its group one of 0..2; without it the workload has no prefix columns and the same
    lengths."""
    base = {"num_requests": 60, "prompt_tokens": {"distribution": "uniform", "min": 10, "max": 50}}
    plain = build_workload(parse_config({"workload": base}))
    shared = build_workload(parse_config({"workload": {**base, "shared_prefix": {"tokens": 300, "num_groups": 3}}}))
    assert (shared.num_prefill_tokens == plain.num_prefill_tokens + 300).all()
    assert (shared.prefix_len == 300).all() and set(shared.prefix_group.tolist()) == {0, 1, 2}
    assert plain.prefix_group is None and (shared.arrived_at == plain.arrived_at).all()
