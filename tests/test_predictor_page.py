"""Predictor page: renders the curves for the scenario, and learned curves when it has profiles."""

from pathlib import Path

from app_helpers import unescaped
from streamlit.testing.v1 import AppTest
from synthetic_profiles import make_profiles

from explorer.server import settings

PAGE = str(Path(__file__).resolve().parents[1] / "pages" / "predictor.py")


def test_predictor_page_shows_prefill_and_decode_curves():
    at = AppTest.from_file(PAGE, default_timeout=30).run()
    assert not at.exception
    assert at.title[0].value == "Execution-time predictor"
    assert [s.value for s in at.subheader][:3] == ["Prefill: time per operator vs tokens",
                                                  "Decode: stage time vs batch and context",
                                                  "Against a measured profile"]
    assert "Upload a profile" in at.info[0].value


def test_predictor_page_adds_the_learned_model_of_a_learned_scenario(tmp_path, monkeypatch):
    """A profile folder inside one the server allows (SIM_EXPLORER_PROFILE_ROOTS) is used."""
    make_profiles(tmp_path, tps=(1,), max_tokens=256, network=False)
    allow_profiles(monkeypatch, tmp_path)
    at = AppTest.from_file(PAGE, default_timeout=30)
    at.session_state["scenario"] = {"predictor": {"type": "learned", "profiles_dir": str(tmp_path)},
                                    "workload": {"num_requests": 5}}
    at.run()
    assert not at.exception
    assert "llama-2-7b on a100-80gb" in unescaped(at.caption[0].value)


def test_predictor_page_reports_a_bad_scenario_in_one_line(tmp_path, monkeypatch):
    allow_profiles(monkeypatch, tmp_path)
    at = AppTest.from_file(PAGE, default_timeout=30)
    at.session_state["scenario"] = {"predictor": {"type": "learned", "profiles_dir": str(tmp_path)}}
    at.run()
    assert not at.exception and "no compute/<device>/<org>/<model>" in unescaped(at.error[0].value)


def test_a_profile_folder_the_server_does_not_allow_is_refused_without_opening_it(tmp_path):
    """Without SIM_EXPLORER_PROFILE_ROOTS no profile folder can be named from the web."""
    make_profiles(tmp_path, tps=(1,), max_tokens=256, network=False)
    settings.clear()
    at = AppTest.from_file(PAGE, default_timeout=30)
    at.session_state["scenario"] = {"predictor": {"type": "learned", "profiles_dir": str(tmp_path)}}
    at.run()
    assert not at.exception and unescaped(at.error[0].value) == (
        "scenario: predictor.profiles_dir: only profile folders this server allows can be used here "
        "(whoever starts it lists them in SIM_EXPLORER_PROFILE_ROOTS)")


def allow_profiles(monkeypatch, folder: Path) -> None:
    monkeypatch.setenv("SIM_EXPLORER_PROFILE_ROOTS", str(folder))
    settings.clear()
