"""`python -m sim_core predictor ...`: accuracy figures printed, bad folders one line, exit 2."""

import json

import pytest
from synthetic_profiles import make_profiles

from sim_core.cli.main import main


@pytest.fixture(scope="module")
def profiles_dir(tmp_path_factory):
    return make_profiles(tmp_path_factory.mktemp("profiles"), tps=(1,), network=False)


def test_report_json_is_one_object_of_operator_mape(profiles_dir, capsys):
    assert main(["predictor", "report", "--profiles", str(profiles_dir), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {"attn_pre_proj", "mlp_down_proj", "attn_decode", "attn_prefill"} <= set(report)
    assert report["mlp_up_proj"] < 5


def test_compare_prints_the_roofline_median_error(profiles_dir, capsys):
    args = ["predictor", "compare", "--profiles", str(profiles_dir), "--model", "llama-2-7b", "--device", "a100-80gb"]
    assert main(args + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["attn_post_proj"] == pytest.approx(20.0, abs=0.1)
    assert main(args) == 0
    assert "median absolute percentage error per operator" in capsys.readouterr().out


def test_fit_caches_grids_and_prints_accuracy(profiles_dir, tmp_path, capsys):
    assert main(["predictor", "fit", "--profiles", str(profiles_dir), "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "llama-2-7b on a100-80gb, TP=1" in out and "MAPE" in out
    assert len(list(tmp_path.glob("learned-*.npz"))) == 1


def test_calibrate_prints_a_scenario_snippet(profiles_dir, capsys):
    assert main(["predictor", "calibrate", "--profiles", str(profiles_dir), "--model", "llama-2-7b",
                 "--device", "a100-80gb"]) == 0
    assert "predictor: {type: roofline, compute_efficiency: 0.56" in capsys.readouterr().out


def test_a_folder_without_profiles_is_exit_2_with_one_line(tmp_path, capsys):
    assert main(["predictor", "report", "--profiles", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (f"error: {tmp_path}: no compute/<device>/<org>/<model>/mlp.csv "
                                               "or attention.csv found")
