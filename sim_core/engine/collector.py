"""Python's cyclic garbage collector, paused while a run simulates (`run_simulation`).

A run allocates millions of small objects and keeps many (requests, records, tables). Each time
the objects kept grow by a quarter, Python's collector walks every tracked object of the
process, including everything the caller holds (the app server's cached runs and their figures, a
sweep's earlier results): on the app's default scenario at 20,000 requests that was 0.4-1.7
CPU-s of a 5-7 s run, growing with what the process holds (`bench/README.md`, "The app's
latency"). Reference counting still frees what a run drops while the collector waits; the
reference cycles it leaves (about 10^5 small objects at 20,000 requests; no growth of the peak
memory measured, also at 200,000 requests on 16 replicas) are collected once it resumes.

The collector is one per process and runs may overlap (the app runs one per session thread, up
to its run slots): it stays paused while any run holds it, and after the last one resumes as it
was before the first (a collector someone else disabled stays disabled).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

MAX_PAUSE_S = 60.0   # a pause held this long (runs overlapping throughout) collects once


class CollectorPause:
    """How many runs hold the collector paused, and whether it ran before the first did."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.lock = threading.Lock()
        self.holders = 0
        self.was_enabled = False
        self.clock = clock
        self.since = 0.0   # when the pause began, or last collected

    def hold(self) -> None:
        """One more run holds the collector paused (the first pauses it)."""
        with self.lock:
            if self.holders == 0:
                self.was_enabled = gc.isenabled()
                gc.disable()
                self.since = self.clock()
            else:
                self._collect_if_long()
            self.holders += 1

    def release(self) -> None:
        """A run lets go; after the last, the collector runs again if it ran before the first."""
        with self.lock:
            self.holders -= 1
            if self.holders == 0 and self.was_enabled:
                gc.enable()
            elif self.holders > 0:
                self._collect_if_long()

    def _collect_if_long(self) -> None:
        if self.was_enabled and self.clock() - self.since >= MAX_PAUSE_S:
            gc.collect()
            self.since = self.clock()


_PAUSE = CollectorPause()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the `with` block (also when it raises)."""
    _PAUSE.hold()
    try:
        yield
    finally:
        _PAUSE.release()
