"""Shared page state: the scenario (a non-widget session key), its validation, the cached run.

The scenario is a plain dict kept in `st.session_state["scenario"]`; it is always valid: an edit
that fails validation leaves it unchanged and stores the error under `scenario_error` for the
page to show. Widgets never own it: they mirror it and write back to it (see
`explorer/widgets.py`), so values survive page switches.

Runs are cached once per server process and shared by every session; each caller gets its own
copy of a run (see `result_of`), so no session can change what another sees. Each cached run
also keeps the views built from it (`explorer/views.py`), which leave the cache with it.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field

import pandas as pd
import streamlit as st

from explorer.run_cost import estimated_seconds
from explorer.safe_text import plain
from explorer.server import confine, public_text, run_slots, session_alive, settings
from explorer.titles import titled
from sim_core import SimCoreError, parse_config, run_simulation
from sim_core.config import SimulationConfig
from sim_core.config.choices import switch_changes
from sim_core.engine.budget import check_budget
from sim_core.results.record import LEVELS, keeps
from sim_core.results.result import SimulationResult
from sim_core.scenarios.defaults import DEFAULT_SCENARIO

SCENARIO_KEY, ERROR_KEY, SELECTED_KEY = "scenario", "scenario_error", "selected_request"
ORIGIN_KEY = "scenario_origin"    # the scenario as it was loaded (default, preset, link, file): the title's base
APPLIED_KEY = "scenario_applied"   # while edits wait for Apply: the scenario the views still show
CACHE_ENTRIES = 8
VIEWS_PER_RUN = 16        # derived views (figures, tables) kept per cached run, least recently used dropped
SLOT_WAIT_S = 30.0        # how long a run waits for a free run slot before the page says the server is busy


def scenario() -> dict:
    """The session's current (valid) scenario."""
    if SCENARIO_KEY not in st.session_state:
        st.session_state[SCENARIO_KEY] = copy.deepcopy(DEFAULT_SCENARIO)
    return st.session_state[SCENARIO_KEY]


def get_path(data: dict, path: str, default=None):
    """The value at a dotted path of a nested dict (default when absent)."""
    for part in path.split("."):
        if not isinstance(data, dict) or part not in data:
            return default
        data = data[part]
    return data


def with_path(data: dict, path: str, value) -> dict:
    """A deep copy of `data` with `value` at the dotted path (None removes the key)."""
    data = copy.deepcopy(data)
    *parents, last = path.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    if value is None:
        node.pop(last, None)
    else:
        node[last] = value
    return data


def web_config(data: dict, source: str = "scenario") -> SimulationConfig:
    """Validate a scenario that came from the web (a link, an upload, a widget): it may name
    files only in the upload store and the shipped samples; nothing is opened before that check.

    Raises:
        SimCoreError: one line naming the field (and, for a file, not whether it exists).
    """
    confine(data, source)
    return parse_config(data, source=source)


def origin() -> dict:
    """The scenario as it was last loaded (the session's first scenario until one is loaded)."""
    if ORIGIN_KEY not in st.session_state:
        st.session_state[ORIGIN_KEY] = copy.deepcopy(scenario())
    return st.session_state[ORIGIN_KEY]


def try_scenario(candidate: dict, loaded: bool = False) -> bool:
    """Make `candidate` the scenario if it validates; else keep the old one and record why.
    `loaded`: it is a new origin (a preset, a link, a file) and keeps its own name; otherwise it
    is an edit, named after the origin with the differences (`explorer/titles.py`)."""
    if not loaded:
        candidate = titled(candidate, origin())
    try:
        config = web_config(candidate)
    except SimCoreError as error:
        st.session_state[ERROR_KEY] = str(error)
        return False
    previous = st.session_state.get(SCENARIO_KEY)
    st.session_state[SCENARIO_KEY] = candidate
    if loaded:
        st.session_state[ORIGIN_KEY] = copy.deepcopy(candidate)
    st.session_state.pop(ERROR_KEY, None)
    _hold_if_slow(candidate, config, previous, loaded)
    return True


def _hold_if_slow(candidate: dict, config: SimulationConfig, previous: dict | None, loaded: bool) -> None:
    """An edit whose run would take longer than the server's `apply_above_s` (and is not cached)
    waits for Apply: the views keep showing the last applied scenario. A loaded scenario, a
    quick or cached one, or an edit back to the applied one applies at once."""
    held = st.session_state.get(APPLIED_KEY)
    if loaded or candidate == held or _cached(candidate) or \
            estimated_seconds(config) <= settings().apply_above_s:
        st.session_state.pop(APPLIED_KEY, None)
    elif held is None and previous is not None:
        st.session_state[APPLIED_KEY] = previous


def pending_seconds() -> float | None:
    """While edits wait for Apply: about how long their run takes (else None)."""
    if APPLIED_KEY not in st.session_state:
        return None
    return estimated_seconds(web_config(scenario()))


def apply_edits() -> None:
    """Simulate the edited scenario from now on (the Apply button's callback)."""
    st.session_state.pop(APPLIED_KEY, None)


def _cached(candidate: dict) -> bool:
    cache, key = _cache(), scenario_json(candidate)
    with cache.lock:
        return any(f"{level}:{key}" in cache.runs for level in LEVELS)


def set_field(path: str, value) -> bool:
    """Set one field of the scenario (with the fields it implies) if the result validates; the
    name, when it is the field, becomes the origin's name too."""
    if path == "name":
        st.session_state[ORIGIN_KEY] = {**origin(), "name": value}
    candidate = with_path(scenario(), path, value)
    for other, other_value in implied_changes(path, value).items():
        candidate = with_path(candidate, other, other_value)
    return try_scenario(candidate)


def implied_changes(path: str, value, base: dict | None = None) -> dict:
    """Fields that must change with this one for the scenario (`base`, default: the current
    one) to stay valid; None removes a key (a knob the new choice of a section, e.g. the new
    policy, does not read)."""
    return switch_changes(scenario() if base is None else base, path, value)


def show_error() -> None:
    """Show (once) why the last edit was not applied."""
    message = st.session_state.pop(ERROR_KEY, None)
    if message:
        show_failure(f"Not applied, the previous scenario stays in place: {message}")


def show_failure(message: str, where=st) -> None:
    """An error from input, shown as plain text: escaped, on one line, shortened."""
    where.error(plain(public_text(message), limit=600), icon=":material/error:")


def scenario_json(data: dict | None = None) -> str:
    """Canonical JSON of a scenario (the cache key)."""
    return json.dumps(scenario() if data is None else data, sort_keys=True, separators=(",", ":"))


@dataclass(eq=False)
class CachedRun:
    """A cached run and the views derived from it (view key -> value, least recently used first)."""

    run: SimulationResult
    views: OrderedDict = field(default_factory=OrderedDict)


@dataclass(eq=False)
class RunCache:
    """The server's runs ("<record level>:<scenario JSON>" -> CachedRun, least recently used
    first), the cached run behind each live copy handed out (id of the copy -> CachedRun; a
    copy's entry goes when the copy is collected), and the lock that guards both."""

    runs: OrderedDict = field(default_factory=OrderedDict)
    copies: dict = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


@st.cache_resource
def _cache() -> RunCache:
    return RunCache()


def result(level: str = "full") -> SimulationResult:
    """The run of the current scenario (the last applied one while edits wait for Apply,
    `pending_seconds`) recorded at least at `level` (`engine.record`: what the page reads; the
    level changes no result, only which tables a run keeps). Reused when cached, else simulated at
    `level` with a progress bar (see `result_of`). Stops the page with the error when the run
    itself fails."""
    return result_of(st.session_state.get(APPLIED_KEY) or scenario(), level)


def result_of(data: dict, level: str = "full") -> SimulationResult:
    """The run of any valid scenario dict (Compare and Capacity run variants), cached like result():
    a cached run of the scenario at `level` or any level that keeps more, the leanest first (its
    views may be cached too: the Overview keeps its `series` run after the KV page ran `full`),
    else a new run at `level`, cached under it. The caller gets its own copy: what it changes in
    it, no other caller sees."""
    scenario_key = scenario_json(data)
    levels, simulated = [kept for kept in LEVELS if keeps(kept, level)], level
    cache = _cache()
    with cache.lock:
        for level in levels:
            key = f"{level}:{scenario_key}"
            if key in cache.runs:
                cache.runs.move_to_end(key)
                return _handed_out(cache, cache.runs[key])
    try:
        value = _simulate(scenario_key, simulated)
    except SimCoreError as error:
        show_failure(str(error))
        st.stop()
    entry = CachedRun(value)
    with cache.lock:
        cache.runs[f"{simulated}:{scenario_key}"] = entry
        while len(cache.runs) > CACHE_ENTRIES:
            cache.runs.popitem(last=False)
        return _handed_out(cache, entry)


def _handed_out(cache: RunCache, entry: CachedRun) -> SimulationResult:
    """A copy of a cached run for one caller, remembered as coming from `entry` (under the lock)."""
    run = own_copy(entry.run)
    cache.copies[id(run)] = entry
    weakref.finalize(run, cache.copies.pop, id(run), None)
    return run


def cached_entry(run: SimulationResult) -> tuple[CachedRun | None, threading.Lock]:
    """The cache entry a run copy came from (None for a run that did not come from the cache)
    and the lock that guards its views. An entry that has left the cache still serves the
    copies made from it; its views go with the last of them."""
    cache = _cache()
    with cache.lock:
        return cache.copies.get(id(run)), cache.lock


def own_copy(run: SimulationResult) -> SimulationResult:
    """A cached run as one caller may use it: its tables are shallow copies (with pandas'
    copy-on-write a change to one copies the data it touches and never reaches the cached
    tables; their arrays are read-only), every other part (summary, notes, config, pools) a deep
    copy."""
    return dataclasses.replace(run, **{field.name: _private(getattr(run, field.name))
                                       for field in dataclasses.fields(run) if field.init})


def _private(value):
    return value.copy(deep=False) if isinstance(value, pd.DataFrame) else copy.deepcopy(value)


def _simulate(scenario_key: str, record: str) -> SimulationResult:
    """Run under the server's budget, in one of its run slots; the run stops when its session
    goes away or it passes the wall-clock limit."""
    parsed = web_config(json.loads(scenario_key))
    config = parsed.model_copy(update={"engine": parsed.engine.model_copy(update={"record": record})})
    chosen, alive = settings(), session_alive()
    check_budget(config, chosen.limits)     # a refusal costs no slot and no wait
    bar, shown = st.empty(), [time.perf_counter()]

    def report(simulated: float) -> None:
        if time.perf_counter() - shown[0] > 0.25:
            shown[0] = time.perf_counter()
            bar.progress(min(simulated / _horizon(config), 0.99), text=f"Simulating... t = {simulated:.1f} s")
    slots = run_slots()
    if not slots.acquire(timeout=SLOT_WAIT_S):
        raise ServerBusy(f"the server is running its {chosen.max_concurrent_runs} simultaneous simulations "
                         "(SIM_EXPLORER_MAX_CONCURRENT_RUNS); change a knob or reload in a moment")
    try:
        return run_simulation(config, progress=report, limits=chosen.limits, should_stop=lambda: not alive())
    finally:
        slots.release()
        bar.empty()


class ServerBusy(SimCoreError):
    """Every run slot of the server stayed taken for SLOT_WAIT_S."""


def _horizon(config) -> float:
    """A guess of the run's length in simulated seconds (the last arrival, at least 1 s)."""
    work = config.workload
    if work.trace_file or work.arrival.process == "static":
        return max(work.num_requests / 5.0, 1.0)
    return max(work.num_requests / work.arrival.qps * work.time_scale_factor, 1.0)


def selected_request() -> int | None:
    """The request the user picked on the Requests page (highlighted on the other views)."""
    return st.session_state.get(SELECTED_KEY)
