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
    assert [s.value for s in at.subheader][:4] == ["Prefill: time per operator vs tokens",
                                                  "Decode: stage time vs batch and context",
                                                  "Host and engine overheads",
                                                  "Against a measured profile"]
    assert "Upload a profile" in at.info[0].value


def test_predictor_page_says_which_host_phases_async_scheduling_hides():
    """vllm_v1 with async scheduling: of the four host phases only sampling stays on the critical
    path; at 32 requests it costs the roofline's 1 ms + 32 x 5 us = 1.16 ms at vllm_v1's default
    host_scale 0.44: 0.5104 ms (0.51 as the page rounds to the microsecond). The API server's
    4 ms goes to each request's TTFT and E2E."""
    at = AppTest.from_file(PAGE, default_timeout=30)
    at.session_state["scenario"] = {"scheduler": {"type": "vllm_v1", "api_server_s": 0.004}}
    at.run()
    assert not at.exception
    host = next(frame.value for frame in at.dataframe if "where" in frame.value.columns)
    rows = {term: (ms, where) for term, ms, where in zip(host["term"], host["ms"], host["where"])}
    assert rows["cpu_sample"] == (0.51, "on the iteration's critical path")
    assert rows["cpu_schedule"][1] == rows["cpu_prepare_inputs"][1] == rows["cpu_process_outputs"][1] == (
        "hidden behind the previous iteration's GPU work")
    assert rows["api_server"][0] == 4.0 and rows["api_server"][1].startswith("added to each request's TTFT")


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
