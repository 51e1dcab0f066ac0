"""A pipeline run's timeline: its micro-batches (`Lane`) and their stage executions (`Timeline`).

The timeline is a small event loop over stage executions (no Batch objects, no
kernel events; a micro-batch alone in the pipeline is one cumulative sum):
an execution starts when its micro-batch is ready for the stage (its previous stage ended, or
for stage 0 its previous iteration left the last stage) and the stage is free; it ends a stage
time later (the cost model's, bitwise `Simulator.stage_time`). Same-instant events of one
replica cannot reorder anything: a stage receives batches only from the stage before it (stage
0 from the last), whose executions are serial, so no two batches become ready for a stage at
one instant, and a start time is max(ready, free) whichever of two same-instant events is
handled first. Two micro-batches on two stages go in lockstep once both run: `_rounds` and
`_sprint` take their events two at a time without the heap, the loop taking over where it stops.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from sim_core.entities import Batch


@dataclass(slots=True, eq=False)
class Lane:
    """One micro-batch of a pipeline run: `first` is its batch in flight when the run started
    (iteration 0); it runs until its members' iterations (`remaining`) are done."""

    first: Batch
    remaining: list[int]        # per member: iterations left, iteration 0 included
    order: np.ndarray           # `remaining` sorted
    suffix: np.ndarray | None   # KV tokens held by the members in `order` from position i on
    durations: list[list[float]]   # [stage][iteration] seconds
    ends: list[float] = field(default_factory=list)   # its batch ends inside the run (set at its end)
    ids: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))   # batch id of each iteration

    @property
    def num_iterations(self) -> int:
        """Iterations until its last member finishes (its static batch then ends)."""
        return int(self.order[-1])



class Timeline:
    """The stage executions of a run, computed forward from its start by a small event loop
    (`advance`), and what runs and waits at the point reached.

    An execution starts when its micro-batch is ready for the stage (its previous stage ended,
    or for stage 0 its previous iteration left the last stage, its batch end and re-formation
    being at that instant) and the stage is free; it ends a stage time later. Events at one
    instant are taken with a lane's final execution first, so when the loop stops at an instant
    (a lane's final iteration ends, or a cut) every event before it has been handled and none
    at it."""

    __slots__ = ("durations", "finals", "last", "heap", "seq", "iteration", "started", "busy", "queues",
                 "lanes_done", "rows", "count", "formed_at", "formed", "end", "final", "solo",
                 "flat")

    def __init__(self, lanes: list[Lane], located: list[tuple[int, Batch, float | None]], now: float,
                 num_stages: int, keep: bool = True) -> None:
        """`located[m]` says where lane m's batch is; the last lane's batch was formed `now`;
        `keep`: keep every execution's row (`columns`), else only count them."""
        self.durations = [lane.durations for lane in lanes]
        self.finals = [lane.num_iterations - 1 for lane in lanes]
        self.last = num_stages - 1
        self.heap: list[tuple[float, int, int, int, int]] = []   # (end, not final, seq, lane, stage)
        self.seq = 0
        self.iteration = [0] * len(lanes)
        self.started = [0.0] * len(lanes)
        self.busy: list[int | None] = [None] * num_stages
        self.queues: list[deque[int]] = [deque() for _ in range(num_stages)]
        self.lanes_done: list[list[float]] = [[] for _ in lanes]   # per lane, its batch ends so far
        # lane, iteration, stage, start, end of each execution handled, in order (when kept)
        self.rows: list[tuple[int, int, int, float, float]] | None = [] if keep else None
        self.count = 0          # executions handled
        self.formed_at: list[float] = []   # the instant of each batch formed, in order
        self.formed: list[int] = []        # and its lane
        self.end = now          # every event before it handled, none at or after it
        self.final = False      # whether `end` is a lane's final batch end
        self.solo: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        self.flat: list[list[float]] | None = None   # per lane, its stage times in execution order (`_sprint`)
        if len(lanes) == 1:   # alone in the pipeline: its executions follow each other back to back
            self.solo = self._solo(lanes[0], now, num_stages)
            return
        for m, (k, _, since) in enumerate(located):
            if since is None:
                self.queues[k].append(m)
            else:
                self._start(m, k, since)
        new = len(lanes) - 1   # the batch just formed enters stage 0
        if self.busy[0] is None:
            self._start(new, 0, now)
        else:
            self.queues[0].append(new)

    @staticmethod
    def _solo(lane: Lane, now: float, num_stages: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """A lone micro-batch (formed now, so entering stage 0 now) never waits for a stage:
        each execution starts as the one before ends, so the ends are the sequential sums of
        its stage times in order (numpy's cumsum adds in order: the loop's floats), up to its
        final iteration's last stage. Returns the iterations, stages, starts and ends."""
        count = lane.num_iterations * num_stages
        durations = np.array(lane.durations, dtype=np.float64).T.ravel()[:count]   # iteration-major
        durations[0] += now
        ends = durations.cumsum()
        starts = np.concatenate(([now], ends[:-1]))
        index = np.arange(count, dtype=np.int64)
        return index // num_stages, index % num_stages, starts, ends

    def _advance_solo(self, until: float) -> None:
        """`advance` of a lone micro-batch: cut its executions at `until` (or its final one)."""
        assert self.solo is not None
        iterations, stages, starts, ends = self.solo
        done = min(int(ends.searchsorted(until, side="left")), len(ends) - 1)
        self.final = until > ends[-1]
        self.end = float(ends[-1]) if self.final else until
        self.count = done
        batch_ends = ends[:done][stages[:done] == self.last].tolist()
        self.lanes_done = [batch_ends]
        self.formed_at, self.formed = batch_ends, [0] * len(batch_ends)
        self.busy = [None] * len(self.busy)
        self.busy[int(stages[done])] = 0
        self.started = [float(starts[done])]
        self.heap = [(float(ends[done]), 0 if self.final else 1, 0, 0, int(stages[done]))]

    def _start(self, m: int, k: int, time: float) -> None:
        self.seq += 1
        self.busy[k], self.started[m] = m, time
        j = self.iteration[m]
        heapq.heappush(self.heap, (time + self.durations[m][k][j], 0 if k == self.last and j == self.finals[m] else 1,
                                   self.seq, m, k))

    def advance(self, until: float, budget: int) -> None:
        """Handle events before `until`, at most `budget` executions (then up to the next
        instant, `end`, the earliest end not handled), stopping at a lane's final batch end
        (`final`, `end` its instant)."""
        if self.solo is not None:
            return self._advance_solo(until)
        now = self.end
        if len(self.iteration) == 2 and len(self.busy) == 2:   # two micro-batches on two stages
            for _ in range(3):   # both run within two events of the start (`_rounds`)
                if len(self.heap) == 2:
                    if self.rows is None:
                        budget, now = self._sprint(until, budget, now)
                    budget, now = self._rounds(until, budget, now)
                    break
                budget, now, stopped = self._loop(until, budget, now, 1)
                if stopped:
                    break
        self._loop(until, budget, now, -1)
        end, not_final = self.heap[0][0], self.heap[0][1]
        self.final = not not_final and end < until
        self.end = min(end, until)

    def _loop(self, until: float, budget: int, now: float, limit: int) -> tuple[int, float, bool]:
        """The event loop of `advance` from `now` (the last event handled), for at most `limit`
        events (-1: no limit); returns the budget left, the last event's instant and whether it
        stopped (rather than reached its limit). (`_start` inlined: this loop is most of a busy
        pipeline run's time.)"""
        heap, busy, queues, iteration, started, last = (self.heap, self.busy, self.queues, self.iteration,
                                                        self.started, self.last)
        durations, finals, rows, formed_at, formed, done = (self.durations, self.finals, self.rows, self.formed_at,
                                                            self.formed, self.lanes_done)
        push, pop = heapq.heappush, heapq.heappop
        seq, count, stopped = self.seq, self.count, True
        while True:
            if not limit:
                stopped = False
                break
            limit -= 1
            item = heap[0]
            end = item[0]
            if (budget <= 0 and end != now) or not item[1] or end >= until:
                break
            pop(heap)
            m, k = item[3], item[4]
            budget -= 1
            count += 1
            now = end
            j = iteration[m]
            if rows is not None:
                rows.append((m, j, k, started[m], end))
            queue = queues[k]
            if queue:   # the stage takes the head of its queue
                n = queue.popleft()
                seq += 1
                busy[k], started[n], i = n, end, iteration[n]
                push(heap, (end + durations[n][k][i], 0 if k == last and i == finals[n] else 1, seq, n, k))
            else:
                busy[k] = None
            if k == last:   # the batch ends; the policy forms its next iteration now
                done[m].append(end)
                j += 1
                iteration[m] = j
                formed_at.append(end)
                formed.append(m)
                k = 0
            else:
                k += 1
            if busy[k] is None:
                seq += 1
                busy[k], started[m] = m, end
                push(heap, (end + durations[m][k][j], 0 if k == last and j == finals[m] else 1, seq, m, k))
            else:
                queues[k].append(m)
        self.seq, self.count = seq, count
        return budget, now, stopped

    def _rounds(self, until: float, budget: int, now: float) -> tuple[int, float]:
        """`_loop` for two micro-batches running on two stages, a round (two events) at a time,
        up to the round where `_loop` would stop (it takes over there). In lockstep: the first
        of the two to end (x, lane p on stage kp) queues at the other stage (y's), leaving its
        own idle; when y (lane q on kq) ends, stage kq takes p and q starts on kp: both start
        at y's end, so the pair is again two micro-batches running, and every round is the
        same two events, in the heap's order, with the same seq numbers as `_loop`'s."""
        heap, busy, iteration, started, last = self.heap, self.busy, self.iteration, self.started, self.last
        durations, finals, rows, formed_at, formed, done = (self.durations, self.finals, self.rows, self.formed_at,
                                                            self.formed, self.lanes_done)
        seq, count = self.seq, self.count
        x, y = heap   # a heap of two: x is the smaller
        while True:
            e1, e2 = x[0], y[0]
            if (budget <= 0 and e1 != now) or not x[1] or e1 >= until:
                break
            if (budget <= 1 and e2 != e1) or not y[1] or e2 >= until:
                break
            p, kp, q, kq = x[3], x[4], y[3], y[4]
            budget -= 2
            count += 2
            now = e2
            if rows is not None:
                rows.append((p, iteration[p], kp, started[p], e1))
                rows.append((q, iteration[q], kq, started[q], e2))
            if kp == last:   # p's batch ends at e1, its next iteration formed then
                done[p].append(e1)
                iteration[p] += 1
                formed_at.append(e1)
                formed.append(p)
            j = iteration[p]
            seq += 1
            started[p] = e2
            x = (e2 + durations[p][kq][j], 0 if kq == last and j == finals[p] else 1, seq, p, kq)
            if kq == last:
                done[q].append(e2)
                iteration[q] += 1
                formed_at.append(e2)
                formed.append(q)
            i = iteration[q]
            seq += 1
            started[q] = e2
            y = (e2 + durations[q][kp][i], 0 if kp == last and i == finals[q] else 1, seq, q, kp)
            if y < x:
                x, y = y, x
        heap[:] = [x, y]
        busy[x[4]], busy[y[4]] = x[3], y[3]
        self.seq, self.count = seq, count
        return budget, now

    def _sprint(self, until: float, budget: int, now: float) -> tuple[int, float]:
        """`_rounds` without rows kept, for the rounds every check of the loop passes whatever
        their ties: a budget of two or more left, no final execution, both ends before `until`.
        A lane moves one execution on per round (stage 0, 1, then its next iteration's 0), so
        with `flat` its stage times in that order, lane m's execution at position 2j + k, a
        round starting at T ends lane m's at T + flat[m][position] (the loop's addition) and
        the next starts at the later of the two ends; the lane on stage 1 ends its batch. The
        first of the pair to end gets the smaller seq of the next pair (on a tie, the one that
        went first before keeps going first)."""
        if self.flat is None:
            self.flat = [[time for pair in zip(lane[0], lane[1]) for time in pair] for lane in self.durations]
        heap, iteration, finals = self.heap, self.iteration, self.finals
        fa, fb = self.flat
        one_first = heap[0][3] == 0
        ends = {heap[0][3]: heap[0], heap[1][3]: heap[1]}
        x, y = ends[0], ends[1]
        a, b = 2 * iteration[0] + x[4], 2 * iteration[1] + y[4]
        last_a, last_b = 2 * finals[0] + 1, 2 * finals[1] + 1
        rounds = min(budget // 2, last_a - a, last_b - b)
        if rounds <= 0:
            return budget, now
        formed_at = self.formed_at
        append, before, first = formed_at.append, len(formed_at), a & 1 ^ 1   # the lane on stage 1 first
        ea, eb, start, a0, stop = x[0], y[0], now, a, a + rounds
        while a < stop:
            later = ea if ea > eb else eb
            if later >= until:
                break
            if ea != eb:
                one_first = ea < eb
            append(ea if a & 1 else eb)   # the lane leaving the last stage: its batch ends
            a += 1
            b += 1
            start = later
            ea = later + fa[a]
            eb = later + fb[b]
        r = a - a0
        if not r:
            return budget, now
        batch_ends = formed_at[before:]   # alternately the two lanes', `first`'s first
        self.lanes_done[first] += batch_ends[0::2]
        self.lanes_done[first ^ 1] += batch_ends[1::2]
        self.formed += [first, first ^ 1] * (r // 2) + [first] * (r % 2)
        seq = self.seq + 2 * r
        x = (ea, 0 if a == last_a else 1, seq - 1 if one_first else seq, 0, a & 1)
        y = (eb, 0 if b == last_b else 1, seq if one_first else seq - 1, 1, b & 1)
        heap[:] = [x, y] if x < y else [y, x]
        self.busy[a & 1], self.busy[b & 1] = 0, 1
        iteration[0], iteration[1] = a // 2, b // 2
        self.started[0] = self.started[1] = start
        self.seq, self.count = seq, self.count + 2 * r
        return budget - 2 * r, start

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The executions handled (kept ones): lanes, iterations, stages, starts, ends."""
        if self.solo is not None:
            iterations, stages, starts, ends = self.solo
            done = self.count
            return np.zeros(done, dtype=np.int64), iterations[:done], stages[:done], starts[:done], ends[:done]
        assert self.rows is not None, "rows are kept"
        columns: list[tuple] = list(zip(*self.rows)) if self.rows else [(), (), (), (), ()]
        lanes, iterations, stages = (np.array(values, dtype=np.int64) for values in columns[:3])
        return lanes, iterations, stages, np.array(columns[3], dtype=np.float64), np.array(columns[4], dtype=np.float64)

    def running(self) -> list[tuple[int, float, float] | None]:
        """Per stage: (lane, start, end) of the execution running at `end`, or None (idle)."""
        slots: list[tuple[int, float, float] | None] = [None] * len(self.busy)
        for end, _, _, m, k in self.heap:
            slots[k] = (m, self.started[m], end)
        return slots
