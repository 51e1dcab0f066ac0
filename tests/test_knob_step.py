"""Issue 20, item 4: what one knob step simulates. A step is one new scenario, so exactly one
`run_simulation`, at the record level of the page it is made on (the Overview reads requests,
time series and batch summaries: `series`; the Pipeline the whole batch and stage tables:
`batches`; the KV map and the Requests page block and state events: `full`);
the rerun that holds a slow edit for Apply simulates nothing, and a page that then opens on the
same scenario takes the cached run when its level has all it needs (a full run serves the
Overview), so nothing is simulated twice."""

import copy

import pytest
from app_helpers import TINY, open_app

from explorer.server import settings

RATE = "w:side:workload.arrival.qps"
PAGES = [("pages/overview.py", "series", 501), ("pages/pipeline.py", "batches", 502),
         ("pages/kv_cache.py", "full", 503), ("pages/requests.py", "full", 504)]


@pytest.fixture
def levels(monkeypatch) -> list[str]:
    """The record level of every simulation the app starts, in order."""
    import sim_core.engine.simulation as simulation

    started: list[str] = []
    original = simulation.run_simulation
    monkeypatch.setattr("explorer.state.run_simulation",
                        lambda config, *a, **k: started.append(config.engine.record) or original(config, *a, **k))
    return started


@pytest.fixture
def every_edit_slow(monkeypatch):
    """Every edit counts as slow (threshold 0 s) and waits for Apply, as at 20,000 requests."""
    monkeypatch.setenv("SIM_EXPLORER_APPLY_ABOVE_S", "0")
    settings.clear()                       # the server reads its settings once per process
    yield
    monkeypatch.delenv("SIM_EXPLORER_APPLY_ABOVE_S")
    settings.clear()


def opened(page: str, seed: int):
    """The app on `page` with TINY under a seed no other test uses (nothing of it cached)."""
    scenario = copy.deepcopy(TINY)
    scenario["seed"] = seed
    return open_app(page, scenario)


@pytest.mark.parametrize(("page", "level", "seed"), PAGES)
def test_a_knob_step_simulates_once_at_the_pages_level(levels, page, level, seed):
    app = opened(page, seed)
    levels.clear()
    app.sidebar.number_input(key=RATE).set_value(6.25).run()
    assert not app.exception
    assert levels == [level]


@pytest.mark.parametrize(("page", "level", "seed"), PAGES)
def test_a_held_step_simulates_only_when_applied(levels, every_edit_slow, page, level, seed):
    app = opened(page, seed + 100)
    levels.clear()
    app.sidebar.number_input(key=RATE).set_value(6.25).run()
    assert levels == []                                  # held: the views show the run before
    app.sidebar.button(key="side_apply").click().run()
    assert not app.exception
    assert levels == [level]


def test_after_a_step_on_the_kv_page_the_overview_takes_its_full_run(levels):
    app = opened("pages/kv_cache.py", 601)
    levels.clear()
    app.sidebar.number_input(key=RATE).set_value(6.25).run()
    app.switch_page("pages/overview.py").run()
    app.switch_page("pages/pipeline.py").run()
    assert not app.exception
    assert levels == ["full"]


def test_the_overview_keeps_its_series_run_after_the_pipeline_ran_batches(levels):
    """A step on the Overview simulates `series`; the Pipeline then needs the whole batch table
    and simulates `batches` once; back on the Overview its own `series` run is still cached
    (the leanest cached run that has all it reads), so nothing more is simulated."""
    app = opened("pages/overview.py", 602)
    levels.clear()
    app.sidebar.number_input(key=RATE).set_value(6.25).run()
    app.switch_page("pages/pipeline.py").run()
    app.switch_page("pages/overview.py").run()
    app.switch_page("pages/pipeline.py").run()
    assert not app.exception
    assert levels == ["series", "batches"]
