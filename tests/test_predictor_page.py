"""Predictor page: renders the curves for the scenario, and learned curves when it has profiles."""

from pathlib import Path

from streamlit.testing.v1 import AppTest

from synthetic_profiles import make_profiles

PAGE = str(Path(__file__).resolve().parents[1] / "pages" / "predictor.py")


def test_predictor_page_shows_prefill_and_decode_curves():
    at = AppTest.from_file(PAGE, default_timeout=30).run()
    assert not at.exception
    assert at.title[0].value == "Execution-time predictor"
    assert [s.value for s in at.subheader][:3] == ["Prefill: time per operator vs tokens",
                                                  "Decode: stage time vs batch and context", "Against a measured profile"]
    assert "Upload a profile" in at.info[0].value


def test_predictor_page_adds_the_learned_model_of_a_learned_scenario(tmp_path):
    make_profiles(tmp_path, tps=(1,), max_tokens=256, network=False)
    at = AppTest.from_file(PAGE, default_timeout=30)
    at.session_state["scenario"] = {"predictor": {"type": "learned", "profiles_dir": str(tmp_path)},
                                    "workload": {"num_requests": 5}}
    at.run()
    assert not at.exception
    assert "llama-2-7b on a100-80gb" in at.caption[0].value


def test_predictor_page_reports_a_bad_scenario_in_one_line(tmp_path):
    at = AppTest.from_file(PAGE, default_timeout=30)
    at.session_state["scenario"] = {"predictor": {"type": "learned", "profiles_dir": str(tmp_path)}}
    at.run()
    assert not at.exception and "no compute/<device>/<org>/<model>" in at.error[0].value
