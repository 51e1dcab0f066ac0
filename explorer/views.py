"""Views derived from a cached run (figures, tables), cached beside the run.

A page builds its figures from the run `explorer.state.result()` hands it; `derived(run, build,
*args)` is `build(run, *args)` computed once per cached run and arguments. So switching pages, a
rerun from a widget that does not change a figure, or an edit held for Apply redraws from the
cache instead of recomputing, and the browser, getting the same figure JSON, has nothing to
redraw. A new scenario is a new run, and with it new views: a view never outlives its run (see
`explorer/state.py`, CachedRun). Every session shares the cached views: never change one in place.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from explorer.state import VIEWS_PER_RUN, cached_entry
from sim_core.results.result import SimulationResult

T = TypeVar("T")


def derived(run: SimulationResult, build: Callable[..., T], *args, **kwargs) -> T:
    """`build(run, *args, **kwargs)`, reused while the run stays cached. The key is the
    builder's module and qualified name with the arguments (which must be hashable: numbers,
    strings, tuples, None); a run that did not come from the cache is built every time."""
    entry, lock = cached_entry(run)
    if entry is None:
        return build(run, *args, **kwargs)
    key = (build.__module__, build.__qualname__, args, tuple(sorted(kwargs.items())))
    with lock:
        if key in entry.views:
            entry.views.move_to_end(key)
            return entry.views[key]
    value = build(run, *args, **kwargs)       # outside the lock: two sessions may build it at once
    with lock:
        entry.views[key] = value
        while len(entry.views) > VIEWS_PER_RUN:
            entry.views.popitem(last=False)
    return value
