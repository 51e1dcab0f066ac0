"""What is watched while a run goes: its caller's Stop, its wall-clock limit and the memory its
records hold (the estimate made before the run is in `cost_estimate.py`; this is what enforces the limit).

    StopCheck(should_stop, deadline_s)            RunCancelled / RunTimeLimit, polled by the simulator
    MemoryWatch(config, estimate, limits, rows)  BudgetError once the rows held pass the memory limit
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sim_core.cluster.pools import pool_views
from sim_core.config import SimulationConfig
from sim_core.engine.budget import format_size
from sim_core.engine.cost_estimate import BLOCK_ROW_BYTES, RUN_STEP_BYTES, STAGE_ROW_BYTES, STEP_BYTES, CostEstimate
from sim_core.engine.limits import BudgetError, Limits
from sim_core.errors import SimCoreError


class RunCancelled(SimCoreError):
    """A running simulation was stopped by its caller (Stop pressed, session ended)."""


class RunTimeLimit(RunCancelled):
    """A running simulation passed its wall-clock limit."""


class MemoryWatch:
    """Stops a run whose records would pass the memory limit, as they grow: the bytes the
    scenario commits however it batches (less its block rows, counted here as they are made),
    plus the batch and block rows the recorder holds, each priced at its measured cost
    (`rows()`: batch rows made one by one, batch rows decode runs made in bulk, block rows)."""

    def __init__(self, config: SimulationConfig, estimate: CostEstimate, limits: Limits,
                 rows: Callable[[], tuple[int, int, int]]) -> None:
        assert limits.max_peak_bytes is not None, "only made under a memory limit"
        stages = max(view.config.cluster.pipeline_parallel_size for view in pool_views(config))
        self.limit, self.rows, self.hint = limits.max_peak_bytes, rows, limits.raise_hint("max_peak_bytes")
        self.base = estimate.committed_bytes - estimate.parts.get("block_events", 0)
        self.one_bytes = STEP_BYTES[estimate.record] + STAGE_ROW_BYTES * (stages - 1)

    def held_bytes(self) -> tuple[int, int, int]:
        """(bytes in all, of which batch rows, of which block rows) the run holds now."""
        one, bulk, blocks = self.rows()
        batches, block_rows = one * self.one_bytes + bulk * RUN_STEP_BYTES, blocks * BLOCK_ROW_BYTES
        return self.base + batches + block_rows, batches, block_rows

    def __call__(self, at: str) -> None:
        """Raise BudgetError if the rows held pass the limit; `at` says when (for the message)."""
        held, batches, blocks = self.held_bytes()
        if held <= self.limit:
            return
        one, bulk, block_rows = self.rows()
        if blocks > batches:
            where, advice = "engine.record", "use engine.record 'batches'"
        else:
            where, advice = "workload.num_requests x workload.output_tokens", \
                "fewer requests or shorter outputs, or engine.record 'requests'"
        raise BudgetError(f"{where}: run stopped{at}: its records ({one + bulk:,} batches, {block_rows:,} block "
                          f"rows) need about {format_size(held)}, over the limit of {format_size(self.limit)}; "
                          f"{advice}, or raise the limit: {self.hint}")


class StopCheck:
    """Polled by the simulator every few thousand simulated instants and between the phases of
    a run: raises RunCancelled when `should_stop()` returns True, RunTimeLimit once more than
    `deadline_s` seconds of wall-clock time have passed since it was made, BudgetError once
    `memory` (set when the recorder exists) finds the records over the memory limit."""

    def __init__(self, should_stop: Callable[[], bool] | None = None, deadline_s: float | None = None,
                 how_to_raise: str = "", clock: Callable[[], float] = time.monotonic) -> None:
        self.should_stop, self.deadline_s, self.how_to_raise = should_stop, deadline_s, how_to_raise
        self._clock = clock
        self.started = clock()
        self.memory: MemoryWatch | None = None

    @property
    def active(self) -> bool:
        return self.should_stop is not None or self.deadline_s is not None or self.memory is not None

    def __call__(self, now: float | None = None) -> None:
        """Raise if the run must stop; `now` is the simulated time reached (for the message)."""
        at = "" if now is None else f" at simulated time {now:,.3f} s"
        if self.memory is not None:
            self.memory(at)
        if self.should_stop is not None and self.should_stop():
            raise RunCancelled(f"run cancelled{at}: its caller asked it to stop (Stop pressed or the session ended)")
        if self.deadline_s is not None and self._clock() - self.started > self.deadline_s:
            raised = f", or raise the limit: {self.how_to_raise}" if self.how_to_raise else ""
            raise RunTimeLimit(f"run stopped{at}: over its wall-clock limit of {self.deadline_s:g} s; simulate "
                               f"less (fewer requests, shorter outputs){raised}")
