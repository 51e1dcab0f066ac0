"""AppTest smoke tests: the app runs its default scenario and reruns hit the cache."""

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def test_app_runs_the_default_scenario_and_shows_metrics():
    app = AppTest.from_file(APP, default_timeout=60).run()
    assert not app.exception
    labels = [metric.label for metric in app.metric]
    assert labels[:3] == ["Throughput (req/s)", "Output tokens/s", "TTFT p50 / p99 (ms)"]
    assert app.title[0].value == "LLM serving scheduling explorer"


def test_changing_a_knob_resimulates_and_unrelated_reruns_use_the_cache(monkeypatch):
    import sim_core.simulation as simulation

    calls = []
    original = simulation.run_simulation
    monkeypatch.setattr("pages.state.run_simulation", lambda *a, **k: calls.append(1) or original(*a, **k))
    app = AppTest.from_file(APP, default_timeout=60).run()
    first = len(calls)
    app.slider(key="ov_window").set_value((0.0, 1.0)).run()   # redraw only
    assert len(calls) == first
    app.selectbox(key="ov_policy").set_value("sarathi").run()
    assert not app.exception
    assert len(calls) == first + 1
    assert "sarathi" in str(app.session_state["scenario"]["scheduler"])
