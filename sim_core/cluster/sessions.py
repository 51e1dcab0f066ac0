"""Closed-loop sessions: a session's next turn arrives a pause after its previous turn completes.

A session is the admitted requests sharing a `session_id`, in turn order (the `turn` column,
else arrival order). Its first turn, and every request without a session, arrives at its
workload time; each later turn is released when the previous one completes in the simulation
and arrives `pause` seconds later:

* `workload` gap: its workload arrival time minus the previous turn's (generated closed-loop
  sessions store exactly the drawn think time there; a trace's gap also holds the recorded
  answer time); negative gaps (turn order disagreeing with arrival order) count as 0;
* `think_time`: exponential with mean `think_time_s`, drawn once per request from a generator
  seeded by the scenario.

A turn that can never be served (rejected up front) is skipped: the next turn follows the
previous served one. Released turns are arrivals of the event kernel keyed by request id, so
turns released for the same instant arrive in request order however their predecessors'
completions were ordered; a zero pause arrives at the end of the completion's instant.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from sim_core.workload import Workload

if TYPE_CHECKING:
    from sim_core.config import SessionConfig, SimulationConfig
    from sim_core.engine.kernel import EventKernel

TURN_PHASE = 0  # end-of-instant key phase of released turns (before hand-offs and transfers)


class SessionChains:
    """Which requests arrive on their own, and which follow which, with the pause before each."""

    def __init__(self, heads: list[int], next_turn: np.ndarray | None = None,
                 pause_s: np.ndarray | None = None) -> None:
        self.heads = heads
        self.next_turn = next_turn      # per request id: the request that follows it, or -1
        self.pause_s = pause_s          # per request id: seconds after its predecessor completes
        self.released: set[int] = set()

    @property
    def closed_loop(self) -> bool:
        return self.next_turn is not None

    def follower(self, request_id: int) -> int:
        """The turn released by this request's completion, or -1."""
        return -1 if self.next_turn is None else int(self.next_turn[request_id])

    def release(self, request_id: int, now: float, kernel: EventKernel,
                on_turn_arrival: Callable[[int, float], None]) -> None:
        """The request completed at `now`: schedule its follower's arrival, if it has one, as
        `on_turn_arrival(follower id, arrival time)`."""
        follower = self.follower(request_id)
        if follower < 0:
            return
        self.released.add(follower)
        assert self.pause_s is not None, "closed-loop chains carry their pauses"
        when = now + float(self.pause_s[follower])
        if when > now:
            kernel.arrive_at(when, (follower,), on_turn_arrival, follower, when)
        else:
            kernel.at_instant_end((TURN_PHASE, follower), on_turn_arrival, follower, now)

    def never_arrived(self) -> list[int]:
        """Turns still waiting for a predecessor that never finished (when the run ended)."""
        if self.next_turn is None:
            return []
        following = self.next_turn[self.next_turn >= 0]
        return sorted(int(r) for r in following if int(r) not in self.released)


def build_chains(workload: Workload, admitted: list[int], spec: SessionConfig, seed: int) -> SessionChains:
    """Chains of the admitted requests under `spec` (a SessionConfig); open loop, or a workload
    without sessions, gives one chain per request (everything arrives at its own time)."""
    if not spec.closed_loop or workload.session_id is None or not admitted:
        return SessionChains(admitted)
    rows = np.asarray(admitted, dtype=np.int64)
    session = workload.session_id[rows]
    turn = workload.turn[rows] if workload.turn is not None else np.zeros(len(rows), dtype=np.int64)
    order = rows[np.lexsort((rows, turn, session))]          # by session, turn, then row
    ordered_session = workload.session_id[order]
    follows = np.concatenate(([False], ordered_session[1:] == ordered_session[:-1]))
    next_turn = np.full(len(workload), -1, dtype=np.int64)
    next_turn[order[:-1][follows[1:]]] = order[1:][follows[1:]]
    pause = np.zeros(len(workload))
    followers, previous = order[follows], order[:-1][follows[1:]]
    if spec.closed_loop_gap == "workload":
        pause[followers] = np.maximum(workload.arrived_at[followers] - workload.arrived_at[previous], 0.0)
    else:
        draws = np.random.default_rng(np.random.SeedSequence([seed, 1])).exponential(spec.think_time_s, len(workload))
        pause[followers] = draws[followers]
    heads = sorted(int(r) for r in order[~follows])
    return SessionChains(heads, next_turn, pause)


def session_notes(config: SimulationConfig, workload: Workload) -> list[str]:
    """What the user should know about session timing in this run."""
    if config.workload.sessions.closed_loop and workload.session_id is None:
        note = ("workload.sessions.closed_loop: the workload has no session_id column, so every request "
                "arrives at its own time (open loop)")
        return [note]
    return []
