"""Trace transforms: window, sampling, rate rescaling, length scaling and clipping, with notes."""

import numpy as np
import pytest

from sim_core import ConfigError, TraceError, parse_config
from sim_core.workload import build_workload

ROWS = "arrived_at,num_prefill_tokens,num_decode_tokens\n" + "".join(
    f"{t},{10 * (i + 1)},{i + 1}\n" for i, t in enumerate([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]))


def built(tmp_path, **workload):
    path = tmp_path / "t.csv"
    path.write_text(ROWS)
    return build_workload(parse_config({"max_model_len": 4096, "workload": {"trace_file": str(path), **workload}}))


def test_a_time_window_keeps_its_arrivals_and_starts_them_at_zero(tmp_path):
    w = built(tmp_path, window_start_s=2.0, window_end_s=5.0)
    assert w.arrived_at.tolist() == [0.0, 1.0, 2.0]
    assert w.num_prefill_tokens.tolist() == [30, 40, 50]
    assert w.notes == ("kept the 3 of 10 request(s) arriving in [2, 5) s; times shifted by -2 s",)


def test_an_empty_window_is_an_error_that_shows_the_trace_span(tmp_path):
    with pytest.raises(TraceError) as error:
        built(tmp_path, window_start_s=20.0)
    assert str(error.value).endswith("no request arrives in the window [20, end) s; the trace spans 0 .. 9 s")


def test_sampling_is_seeded_and_keeps_arrival_order(tmp_path):
    one, two = built(tmp_path, sample_fraction=0.5), built(tmp_path, sample_fraction=0.5)
    assert len(one) == 5 and np.array_equal(one.arrived_at, two.arrived_at)
    assert np.all(np.diff(one.arrived_at) > 0)
    assert one.notes == ("sampled 5 of 10 request(s) (fraction 0.5)",)


def test_target_qps_rescales_the_mean_rate(tmp_path):
    w = built(tmp_path, target_qps=4.0)   # 9 gaps over 9 s: 1 req/s -> 4 req/s
    assert w.arrived_at.tolist() == [t / 4 for t in range(10)]
    assert w.notes == ("arrival times scaled by 0.25 (rate 1 -> 4 req/s)",)


def test_target_qps_on_a_single_instant_cannot_apply(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n1,5,5\n1,6,6\n")
    with pytest.raises(ConfigError, match="all arrive at one instant"):
        build_workload(parse_config({"workload": {"trace_file": str(path), "target_qps": 2.0}}))


def test_length_scaling_and_clipping_say_how_many_rows_were_clipped(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(ROWS)
    config = parse_config({"max_model_len": 120, "workload": {"trace_file": str(path), "prefill_scale_factor": 1.5}})
    w = build_workload(config)
    assert w.num_prefill_tokens.tolist() == [15, 30, 45, 60, 75, 90, 105, 112, 111, 110]
    assert w.notes == ("3 request(s) exceeded max_model_len 120; their prompts were shortened to fit (as Vidur does)",)


def test_a_lengths_only_trace_gets_generated_arrivals(tmp_path):
    path = tmp_path / "l.csv"
    path.write_text("num_prefill_tokens,num_decode_tokens\n5,5\n6,6\n7,7\n")
    w = build_workload(parse_config({"workload": {"trace_file": str(path), "arrival": {"process": "static"}}}))
    assert w.arrived_at.tolist() == [0.0, 0.0, 0.0] and w.num_prefill_tokens.tolist() == [5, 6, 7]
    assert w.notes[-1] == f"{path}: no arrival times in a vidur_lengths trace; generated them (static, 2 req/s)"


def test_optional_columns_stay_aligned_through_transforms(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens,session_id,hash_ids\n"
                    "2,5,5,20,1 2\n0,6,6,10,3\n1,7,7,30,\n3,8,8,40,4 5 6\n")
    w = build_workload(parse_config({"workload": {"trace_file": str(path), "window_start_s": 1.0}}))
    assert w.session_id.tolist() == [30, 20, 40]
    assert [w.hashes_of(i).tolist() for i in range(3)] == [[], [1, 2], [4, 5, 6]]


def test_transform_settings_are_checked_with_one_line_naming_the_field():
    with pytest.raises(ConfigError) as error:
        parse_config({"workload": {"window_start_s": 10, "window_end_s": 5}})
    assert str(error.value) == ("scenario: workload: got {'window_start_s': 10, 'window_end_s': 5}; "
                                "window_end_s (5.0) must exceed window_start_s (10.0)")
    with pytest.raises(ConfigError) as error:
        parse_config({"workload": {"sample_fraction": 0}})
    assert str(error.value) == "scenario: workload.sample_fraction: got 0; allowed range 0.0 (exclusive) .. 1.0"
