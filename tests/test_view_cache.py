"""Views derived from a cached run are built once per run and arguments (explorer/views.py):
switching pages, view-only reruns and edits held for Apply redraw from the cache."""

import copy

from app_helpers import TINY, open_app

from explorer import state
from explorer.views import derived
from sim_core import parse_config, run_simulation


def _cached_copies(run, count: int) -> list:
    """`count` copies of `run` handed out from one cache entry, as result_of hands them out."""
    cache, entry = state._cache(), state.CachedRun(run)
    with cache.lock:
        return [state._handed_out(cache, entry) for _ in range(count)]


def test_copies_of_one_cached_run_share_their_views_and_new_arguments_build_anew():
    """Two sessions' copies of one cached run: the first call builds (1 call), the second copy
    with the same argument reuses it (still 1) and gets the very same object; argument 2 builds
    again (2 calls); a run that did not come from the cache builds every time (3, then 4)."""
    run = run_simulation(parse_config(TINY))
    first, second = _cached_copies(run, 2)
    calls = []

    def build(result, value):
        calls.append(value)
        return {"value": value}

    made = derived(first, build, 1)
    assert derived(second, build, 1) is made and calls == [1]
    assert derived(second, build, 2) == {"value": 2} and calls == [1, 2]
    derived(run, build, 1)
    derived(run, build, 1)
    assert calls == [1, 2, 1, 1]


def test_a_run_keeps_its_sixteen_most_recently_used_views():
    """Views 0..16 built in order (17 calls): 17 views pass the limit of 16, so view 0, the least
    recently used, is dropped and builds again (call 18); view 16, kept, does not."""
    (copy_of_run,) = _cached_copies(run_simulation(parse_config(TINY)), 1)
    calls = []

    def build(result, value):
        calls.append(value)
        return value

    for value in range(17):
        derived(copy_of_run, build, value)
    derived(copy_of_run, build, 16)
    assert len(calls) == 17
    derived(copy_of_run, build, 0)
    assert len(calls) == 18 and calls[-1] == 0


def test_the_overview_builds_its_figures_once_per_run(monkeypatch):
    """Open the Overview (1 throughput figure built), rerun it twice with no change (still 1),
    visit the KV page and come back (still 1: the Overview's series run and its views stay
    cached); a new arrival rate is a new run with new figures (2)."""
    import sim_core.viz.overview as overview

    built = []
    original = overview.throughput_figure
    monkeypatch.setattr(overview, "throughput_figure", lambda run: built.append(1) or original(run))
    scenario = copy.deepcopy(TINY)
    scenario["seed"] = 2468                      # a key no other test has cached
    app = open_app(None, scenario)
    app.run()
    app.run()
    app.switch_page("pages/kv_cache.py").run()
    app.switch_page("pages/overview.py").run()
    assert not app.exception and len(built) == 1
    app.number_input(key="w:side:workload.arrival.qps").set_value(7.0).run()
    assert not app.exception and len(built) == 2
