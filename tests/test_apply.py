"""Issue 19, item 12: an edit whose run is estimated to take longer than the server's
SIM_EXPLORER_APPLY_ABOVE_S waits for Apply; the views keep the last applied run meanwhile."""

from app_helpers import TINY, open_app

from explorer.run_cost import SECONDS_PER_EVENT, estimated_seconds
from explorer.server import settings
from sim_core import parse_config
from sim_core.engine.budget import estimate_cost

RATE = "w:side:workload.arrival.qps"


def overview_caption(app) -> str:
    return app.main.caption[0].value


def test_the_estimate_is_the_events_at_a_measured_rate():
    config = parse_config(TINY)
    assert estimated_seconds(config) == estimate_cost(config).num_events * SECONDS_PER_EVENT > 0


def test_a_quick_edit_applies_at_once():
    """The tiny scenario runs far under a second: no Apply button, the Overview follows the edit."""
    app = open_app("pages/overview.py")
    app.sidebar.number_input(key=RATE).set_value(7.0).run()
    assert not app.sidebar.warning and "side_apply" not in [b.key for b in app.sidebar.button]
    assert "edited" in overview_caption(app)


def test_a_slow_edit_waits_for_apply_and_an_edit_back_needs_none(monkeypatch):
    """With every run counted as slow (threshold 0 s), raising the rate to 7.25 req/s (a run no
    test has cached) leaves the Overview on the 6 req/s run and offers Apply; Apply simulates it;
    going back to 6 req/s (a cached run) applies at once."""
    monkeypatch.setenv("SIM_EXPLORER_APPLY_ABOVE_S", "0")
    settings.clear()                       # the server reads its settings once per process
    try:
        slow_edit_then_apply()
    finally:
        monkeypatch.delenv("SIM_EXPLORER_APPLY_ABOVE_S")
        settings.clear()


def slow_edit_then_apply():
    app = open_app("pages/overview.py")
    before = overview_caption(app)
    app.sidebar.number_input(key=RATE).set_value(7.25).run()
    assert app.session_state["scenario"]["workload"]["arrival"]["qps"] == 7.25
    assert app.sidebar.warning[0].value.startswith("Edited: the views show the scenario before your edits.")
    assert overview_caption(app) == before
    app.sidebar.button(key="side_apply").click().run()
    assert not app.sidebar.warning and overview_caption(app) != before and "edited" in overview_caption(app)
    app.sidebar.number_input(key=RATE).set_value(6.0).run()
    assert not app.sidebar.warning and overview_caption(app) == before
