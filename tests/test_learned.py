"""Learned predictor on our own synthetic profiles (roofline x 1.25 with a 1% ripple)."""

import numpy as np
import pytest
from synthetic_profiles import FACTOR, make_profiles

from sim_core import ConfigError, parse_config, run_simulation
from sim_core.catalog import DEVICES, MODELS
from sim_core.config.predictor import RooflinePredictorConfig
from sim_core.predictor import BatchShape, build_predictor
from sim_core.predictor.accuracy import learned_accuracy, pooled, roofline_accuracy
from sim_core.predictor.calibration import calibrate
from sim_core.predictor.profile_dir import load_profile_set


@pytest.fixture(scope="module")
def profiles_dir(tmp_path_factory):
    return make_profiles(tmp_path_factory.mktemp("profiles"))


def learned(profiles_dir, cache=None, tp=1, **extra):
    return parse_config({"cluster": {"tensor_parallel_size": tp}, "workload": {"num_requests": 20},
                         "predictor": {"type": "learned", "profiles_dir": str(profiles_dir), "cache_dir": cache,
                                       **extra}})


def test_learned_gemms_match_held_out_rows_within_5_percent(profiles_dir):
    errors = pooled(learned_accuracy(load_profile_set(profiles_dir, "llama-2-7b", "a100-80gb"), "random_forest"))
    assert all(errors[op] < 5 for op in ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj"))


def test_roofline_error_against_a_profile_slower_by_a_quarter_is_twenty_percent(profiles_dir):
    results = roofline_accuracy(load_profile_set(profiles_dir, "llama-2-7b", "a100-80gb"), MODELS["llama-2-7b"],
                                DEVICES["a100-80gb"], RooflinePredictorConfig())
    assert pooled(results, "median")["mlp_up_proj"] == pytest.approx(100 * (1 - 1 / FACTOR), abs=0.1)


def test_calibration_recovers_the_slowdown_in_the_compute_factor(profiles_dir):
    fit = calibrate(load_profile_set(profiles_dir, "llama-2-7b", "a100-80gb"), MODELS["llama-2-7b"],
                    DEVICES["a100-80gb"])
    assert fit.compute_efficiency == pytest.approx(0.7 / FACTOR, abs=0.011)
    assert fit.median_error_after < 2 < 19 < fit.median_error_before


def test_learned_prices_track_the_profile_and_unprofiled_operators_fall_back(profiles_dir):
    predictor = build_predictor(learned(profiles_dir))
    roofline = build_predictor(parse_config({"predictor": {"type": "roofline"}}))
    shape = BatchShape(1, 512, ((512, 0),))
    up = predictor.breakdown(shape, 0)["mlp_up_proj"] / roofline.breakdown(shape, 0)["mlp_up_proj"]
    assert up == pytest.approx(FACTOR, rel=0.05)
    assert predictor.sources["mlp_up_proj"] == "learned" and predictor.sources["lm_head"] == "roofline"


def test_learned_decode_run_times_equal_stage_time_bit_for_bit(profiles_dir):
    predictor = build_predictor(learned(profiles_dir))
    counts, context = np.array([5, 5, 4, 70]), np.array([500, 505, 396, 70 * 3000])
    single = [predictor.stage_time(BatchShape(int(n), int(n), (), int(n), int(c)), 0) for n, c in zip(counts, context)]
    assert predictor.decode_run_times(counts, context, 0).tolist() == single


def test_trained_grids_are_cached_by_a_hash_of_their_inputs(profiles_dir, tmp_path):
    config = learned(profiles_dir, cache=str(tmp_path / "cache"))
    first = build_predictor(config).stage_time(BatchShape(2, 300, ((299, 0),), 1, 40), 0)
    files = list((tmp_path / "cache").glob("learned-*.npz"))
    assert len(files) == 1
    assert build_predictor(config).stage_time(BatchShape(2, 300, ((299, 0),), 1, 40), 0) == first
    build_predictor(learned(profiles_dir, cache=str(tmp_path / "cache"), estimator="polynomial"))
    assert len(list((tmp_path / "cache").glob("learned-*.npz"))) == 2


def test_a_run_with_the_learned_predictor_finishes_every_request(profiles_dir):
    result = run_simulation(learned(profiles_dir, tp=2))
    assert result.summary["num_finished"] == 20


def test_missing_profile_or_tp_is_one_clear_line(profiles_dir):
    with pytest.raises(ConfigError,
                       match="no compute profile of mistral-7b on a100-80gb; found: llama-2-7b on a100-80gb"):
        build_predictor(parse_config({"model": "mistral-7b", "predictor": {"type": "learned",
                                                                            "profiles_dir": str(profiles_dir)}}))
    with pytest.raises(ConfigError, match="tensor-parallel degrees 1, 2; the scenario uses 4"):
        build_predictor(learned(profiles_dir, tp=4))
    with pytest.raises(ConfigError, match="predictor.profiles_dir: the learned predictor needs a folder"):
        parse_config({"predictor": {"type": "learned"}})
