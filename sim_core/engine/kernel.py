"""The discrete-event kernel, ordered exactly as Vidur orders its events.

Vidur keys events by (time, creation id). Two consequences define the order here:
* arrivals are created before the run, so at any time they come before every other event;
* an event created while time t is being processed has a larger id than every event that
  existed before, so zero-delay follow-ups run after all events already due at t, in creation
  order. A FIFO holds them; only future events (stage ends) go on the heap, whose `seq` is a
  per-kernel counter. When the clock moves to an instant the FIFO is empty, so the events of
  the heap due then are moved into it, in order, and every handler is dispatched from one loop.
Stage times must be > 0 (a zero-delay future event would break this argument). Validation
keeps them >= 1e-6 s and arrivals before 1e9 s (sim_core/config/limits.py); below CLOCK_LIMIT_S
such a delay always advances the float64 clock, and an event past it (a cost or bandwidth so
extreme that time runs away) ends the run with a SimulationError instead of a stuck clock.

Two extensions serve closed-loop sessions and P/D disaggregation, whose events cross replicas
(they are unused, and cost nothing, in other runs). Their order must not depend on the order in
which same-time events of different replicas happen to be created (fast-forward creates fewer
events than stepwise simulation), so both are ordered by a caller's key instead of creation:
* `arrive_at`: an arrival created during the run (a session's next turn). At its time it runs
  right after the pre-created arrivals of that instant, before every other event, like them;
  arrivals of the same instant run in key order.
* `at_instant_end`: work that runs once nothing else is due at the current time (the end of the
  instant), in key order, each batch followed by the zero-delay events it creates; repeated
  while such work appears. While it runs, `late_phase` is True: every replica has already made
  its decisions for this instant.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, TypeVarTuple, Unpack

from sim_core.errors import SimulationError

CLOCK_LIMIT_S = 2.0**33   # ~272 years; float64 spacing there is 1.9e-6 s, so 1e-6 s still rounds up


Ts = TypeVarTuple("Ts")
Handler = Callable[..., None]
# a future event on the heap: [time, seq, handler, args]; `cancel` sets the handler to None (a list,
# not a tuple, for that: the heap compares (time, seq), unique, and never reaches the handler)
Entry = list[Any]


def _key(entry: tuple[tuple, Handler, tuple]) -> tuple:
    return entry[0]


def _runaway(time: float) -> SimulationError:
    return SimulationError(f"simulated time would reach {time:.3g} s, past the {CLOCK_LIMIT_S:.3g} s the clock "
                           "resolves to a microsecond; a cost model, bandwidth or think time in the scenario makes "
                           "events this far apart")


class EventKernel:
    """Heap of future events, FIFO of zero-delay events, and the arrival stream."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[Entry] = []
        self._soon: deque[tuple[Handler, tuple]] = deque()
        self._seq = 0
        self._arrivals: list[tuple[float, tuple, Handler, tuple]] = []   # created during the run
        self._late: list[tuple[tuple, Handler, tuple]] = []   # due at the end of the current instant
        self.late_phase = False
        self.on_late: Callable[[], None] | None = None   # told when the end of an instant begins

    def at(self, time: float, handler: Callable[[Unpack[Ts]], None], *args: *Ts) -> None:
        """Run `handler(*args)` at `time` (> now).

        Raises:
            SimulationError: `time` is past CLOCK_LIMIT_S (or NaN)."""
        if not time < CLOCK_LIMIT_S:
            raise _runaway(time)
        assert time > self.now, "future events need a positive delay"
        self._seq += 1
        heapq.heappush(self._heap, [time, self._seq, handler, args])

    def at_cancellable(self, time: float, handler: Callable[[Unpack[Ts]], None], *args: *Ts) -> Entry:
        """`at`, returning the event for `cancel`.

        Raises:
            SimulationError: `time` is past CLOCK_LIMIT_S (or NaN)."""
        if not time < CLOCK_LIMIT_S:
            raise _runaway(time)
        assert time > self.now, "future events need a positive delay"
        self._seq += 1
        entry = [time, self._seq, handler, args]
        heapq.heappush(self._heap, entry)
        return entry

    @staticmethod
    def cancel(entry: Entry) -> None:
        """The event `at_cancellable` returned will not run (nor will its instant happen, when no
        other event is due then: a cancelled event leaves no trace, as if never scheduled)."""
        entry[2] = None

    def soon(self, handler: Callable[[Unpack[Ts]], None], *args: *Ts) -> None:
        """Run `handler(*args)` at the current time, after everything already due now."""
        self._soon.append((handler, args))

    def arrive_at(self, time: float, key: tuple, handler: Callable[[Unpack[Ts]], None], *args: *Ts) -> None:
        """An arrival at `time` (> now) created during the run; `key` (unique among them)
        orders arrivals of the same instant.

        Raises:
            SimulationError: `time` is past CLOCK_LIMIT_S (or NaN)."""
        if not time < CLOCK_LIMIT_S:
            raise _runaway(time)
        assert time > self.now, "a future arrival needs a positive delay"
        heapq.heappush(self._arrivals, (time, key, handler, args))

    def at_instant_end(self, key: tuple, handler: Callable[[Unpack[Ts]], None], *args: *Ts) -> None:
        """Run `handler(*args)` at the end of the current instant, in `key` order (keys are
        unique and comparable across all callers)."""
        self._late.append((key, handler, args))

    def run(self, arrival_times: Sequence[float], on_arrival: Callable[[int], None], on_time: Callable[[float], None],
            after_event: Callable[[], None] | None = None) -> None:
        """Process everything. `arrival_times` is sorted; `on_arrival(i)` handles the i-th
        arrival; `on_time(t)` is told the time before any handler at t runs; `after_event()`,
        if given, runs after every handler (invariant checks in tests)."""
        heap, soon, created, pop = self._heap, self._soon, self._arrivals, heapq.heappop
        times, num_arrivals, i = arrival_times, len(arrival_times), 0
        now = math.nan   # equal to nothing: the first pass moves the clock to the first instant
        while True:
            # The next handler due now. Pre-created arrivals go first; `soon` then holds, in
            # order, the created arrivals and stage ends due now (queued when the clock moved:
            # `soon` is always empty then) followed by the zero-delay events made since.
            if i < num_arrivals and times[i] == now:
                handler, args = on_arrival, (i,)
                i += 1
            elif soon:
                handler, args = soon.popleft()
            elif self._late:   # the end of the instant: a batch in key order, then what it creates
                self.late_phase = True
                if self.on_late is not None:
                    self.on_late()
                soon.extend([(handler, args) for _, handler, args in sorted(self._late, key=_key)])
                self._late = []
                continue
            elif heap or i < num_arrivals or created:   # the next instant
                if heap and heap[0][2] is None:   # a cancelled event: gone without an instant
                    pop(heap)
                    continue
                now = times[i] if i < num_arrivals and (not heap or times[i] <= heap[0][0]) else \
                    heap[0][0] if heap else math.inf
                if created and created[0][0] < now:
                    now = created[0][0]
                self.now = now
                self.late_phase = False
                while created and created[0][0] == now:   # in key order
                    _, _, handler, args = pop(created)
                    soon.append((handler, args))
                while heap and heap[0][0] == now:   # in creation order
                    _, _, handler, args = pop(heap)
                    if handler is not None:   # (else cancelled)
                        soon.append((handler, args))
                on_time(now)
                continue
            else:
                return
            handler(*args)
            if after_event is not None:
                after_event()
