"""Runs pause Python's cyclic garbage collector while they simulate (sim_core/engine/collector.py)."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest

from sim_core import parse_config, run_simulation
from sim_core.engine.collector import CollectorPause, collector_paused
from sim_core.engine.run_watch import RunCancelled


@pytest.fixture(autouse=True)
def enabled_collector():
    """Each test starts with the collector running and leaves it running."""
    gc.enable()
    yield
    gc.enable()


def test_paused_inside_and_running_after():
    """Inside the block the collector is off; after it, on again."""
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_overlapping_runs_resume_after_the_last():
    """Two runs overlap (as two sessions' threads do): the collector stays paused until the
    second of them ends, whichever ends first."""
    first_in, first_may_leave, first_out = threading.Event(), threading.Event(), threading.Event()

    def first_run() -> None:
        with collector_paused():
            first_in.set()
            first_may_leave.wait(5)
        first_out.set()

    thread = threading.Thread(target=first_run)
    thread.start()
    first_in.wait(5)
    with collector_paused():
        first_may_leave.set()
        first_out.wait(5)
        assert first_out.is_set() and not gc.isenabled()   # the first ended, this one still holds it
    thread.join(5)
    assert gc.isenabled()


def test_a_run_that_raises_resumes_the_collector():
    """A run that fails still lets the collector go again."""
    with pytest.raises(ValueError, match="bad run"), collector_paused():
        raise ValueError("bad run")
    assert gc.isenabled()


def test_a_collector_disabled_before_stays_disabled():
    """Whoever disabled the collector before the run keeps it disabled after it."""
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_run_simulation_pauses_the_collector_for_its_events_only():
    """`run_simulation` (the CLI's, the app's and the sweep's entry point) holds the collector
    paused: every event of a small run sees it off, and it runs again once the result is back.
    A run stopped inside (its `should_stop` says so at once) resumes it too."""
    seen: list[bool] = []
    scenario = {"model": "llama-2-7b", "device": "a100-80gb", "predictor": {"type": "linear"},
                "scheduler": {"type": "vllm", "num_blocks": 64, "block_size": 16},
                "workload": {"num_requests": 5, "arrival": {"process": "poisson", "qps": 5.0},
                             "prompt_tokens": {"distribution": "fixed", "value": 64},
                             "output_tokens": {"distribution": "fixed", "value": 8}}}
    result = run_simulation(parse_config(scenario), after_event=lambda _: seen.append(gc.isenabled()))
    assert result.summary["num_finished"] == 5
    assert seen and not any(seen)
    assert gc.isenabled()
    with pytest.raises(RunCancelled):
        run_simulation(parse_config(scenario), should_stop=lambda: True)
    assert gc.isenabled()


class _Cycle:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def _cycle() -> weakref.ref:
    return weakref.ref(_Cycle())


def test_a_pause_held_throughout_by_overlapping_runs_collects_once_a_minute():
    """Runs overlap without a gap (a busy server): the pause never ends, so one that has lasted
    MAX_PAUSE_S (60 s) collects at the next run's start or end, and the minute starts again.
    Clock: the first run holds at 0; a second starts at 59 (not yet a minute: the cycle made at
    0 survives); the first ends at 60 (a minute: collected, still paused); a third starts at 100
    (40 s since the collection: a new cycle survives) and the second ends at 120 (collected).
    The last run ends and the collector runs again."""
    now = [0.0]
    pause = CollectorPause(clock=lambda: now[0])
    pause.hold()
    early = _cycle()
    now[0] = 59.0
    pause.hold()
    assert early() is not None and not gc.isenabled()
    now[0] = 60.0
    pause.release()
    assert early() is None and not gc.isenabled()
    later = _cycle()
    now[0] = 100.0
    pause.hold()
    assert later() is not None
    now[0] = 120.0
    pause.release()
    assert later() is None and not gc.isenabled()
    pause.release()
    assert gc.isenabled()
