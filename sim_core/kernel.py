"""The discrete-event kernel, ordered exactly as Vidur orders its events.

Vidur keys events by (time, creation id). Two consequences define the order here:
* arrivals are created before the run, so at any time they come before every other event;
* an event created while time t is being processed has a larger id than every event that
  existed before, so zero-delay follow-ups run after all events already due at t, in creation
  order. A FIFO holds them; only future events (stage ends) go on the heap, whose `seq` is a
  per-kernel counter.
Stage times must be > 0 (a zero-delay future event would break this argument).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable


class EventKernel:
    """Heap of future events, FIFO of zero-delay events, and the arrival stream."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list = []
        self._soon: deque = deque()
        self._seq = 0

    def at(self, time: float, handler: Callable, *args) -> None:
        """Run `handler(*args)` at `time` (> now)."""
        assert time > self.now, "future events need a positive delay"
        self._seq += 1
        heapq.heappush(self._heap, (time, self._seq, handler, args))

    def soon(self, handler: Callable, *args) -> None:
        """Run `handler(*args)` at the current time, after everything already due now."""
        self._soon.append((handler, args))

    def run(self, arrival_times, on_arrival: Callable[[int], None], on_time: Callable[[float], None],
            after_event: Callable[[], None] | None = None) -> None:
        """Process everything. `arrival_times` is sorted; `on_arrival(i)` handles the i-th
        arrival; `on_time(t)` is told the time before any handler at t runs; `after_event()`,
        if given, runs after every handler (invariant checks in tests)."""
        heap, soon, pop = self._heap, self._soon, heapq.heappop
        times = arrival_times
        num_arrivals, i = len(times), 0
        while heap or i < num_arrivals:
            now = times[i] if i < num_arrivals and (not heap or times[i] <= heap[0][0]) else heap[0][0]
            self.now = now
            on_time(now)
            while i < num_arrivals and times[i] == now:
                on_arrival(i)
                i += 1
                if after_event is not None:
                    after_event()
            while heap and heap[0][0] == now:
                _, _, handler, args = pop(heap)
                handler(*args)
                if after_event is not None:
                    after_event()
            while soon:
                handler, args = soon.popleft()
                handler(*args)
                if after_event is not None:
                    after_event()
