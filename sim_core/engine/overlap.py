"""Overlap scheduling (SGLang's overlap loop, vLLM's async scheduling): the CPU schedules
iteration i and processes the outputs of iteration i-1 while the GPU runs, so that host time
hides behind GPU time.

Without overlap an iteration takes the predictor's stage time T_i, which holds the four CPU
phases of the host loop (`cpu_times`: schedule, prepare inputs, sample, process outputs) and
the GPU work G_i = T_i - (sum of the CPU phases). With overlap, the phases H the policy names
(`overlapped_cpu_phases`; SGLang: schedule and process outputs; vLLM also prepares the inputs
of step N+1 while step N runs) of iteration i run while the GPU is still busy with i-1:

    time_i = T_i - min(sum of cpu_h_i for h in H, G_(i-1))

when iteration i starts the instant iteration i-1 ends on the same replica (back to back).
After an idle gap nothing is hidden: there was no GPU work to hide behind. The other phases
stay on the critical path. The CPU phases are priced for the batch's (padded) size.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sim_core.predictor.shape import BatchShape, Predictor


class OverlapClock:
    """Prices first-stage iterations of replicas that overlap (pipeline parallelism 1)."""

    def __init__(self, predictors: Sequence[Predictor], hidden_phases: Sequence[tuple[str, ...]]) -> None:
        self.predictors = predictors                 # per replica
        self.hidden = [tuple(f"cpu_{phase}" for phase in phases) for phases in hidden_phases]   # per replica
        self._last = [(-1.0, 0.0)] * len(predictors)  # (end time, GPU seconds) of the last iteration
        self._hidden_s = 0.0                         # CPU seconds hidden so far (all replicas)
        # While a decode run is under way (fast-forward prices its iterations ahead and adds what
        # they hid when it ends), additions wait here, as (start time, order, seconds), so that the
        # total adds them in the order of their iterations' starts, as stepwise simulation does.
        self._pending: list[tuple[float, int, float]] = []
        self._runs: dict[int, float] = {}            # replica -> start of its run under way
        self._order = 0

    def iteration_time(self, replica: int, shape: BatchShape, now: float) -> float:
        """Seconds of the iteration of `shape` starting at `now` (remembered for the next)."""
        predictor = self.predictors[replica]
        full = predictor.stage_time(shape, 0)
        cpu = predictor.cpu_times(shape.num_requests)
        gpu = full - sum(cpu.values())
        end, previous_gpu = self._last[replica]
        hidden = min(sum(cpu[phase] for phase in self.hidden[replica]), previous_gpu) if end == now else 0.0
        duration = full - hidden
        self.on_iteration(replica, now, now + duration, gpu, hidden)
        return duration

    def on_iteration(self, replica: int, start: float, end: float, gpu: float, hidden: float) -> None:
        """An iteration of the replica ran from `start` to `end`, `gpu` of it GPU seconds, hiding
        `hidden` host seconds: the total takes them (held while a run is under way) and the
        replica's next iteration hides behind it. `iteration_time` prices one; fast-forward's
        serial runs price their first themselves (`run_times`)."""
        if self._runs or self._pending:
            self._hold(start, hidden)
        else:
            self._hidden_s += hidden
        self._last[replica] = (end, gpu)

    def ended_at(self, replica: int, end: float) -> None:
        """The replica's last iteration ended at `end`, later than priced (a DP group's step
        lasts as long as its slowest rank, engine/dp_group.py): the next one hides behind it."""
        self._last[replica] = (end, self._last[replica][1])

    @property
    def hidden_s(self) -> float:
        """CPU seconds hidden so far, over all replicas."""
        total = self._hidden_s
        for _, _, seconds in sorted(self._pending):
            total += seconds
        return total

    def _hold(self, start: float, seconds: float) -> None:
        heapq.heappush(self._pending, (start, self._order, seconds))
        self._order += 1

    def _flush(self) -> None:
        """Add the held seconds of iterations that started before every run under way."""
        before = min(self._runs.values(), default=math.inf)
        pending, total = self._pending, self._hidden_s
        while pending and pending[0][0] < before:
            total += heapq.heappop(pending)[2]
        self._hidden_s = total

    # ---- decode runs (engine/fast_forward.py) ---------------------------------------------------

    def last_iteration(self, replica: int) -> tuple[float, float]:
        """(end time, GPU seconds) of the replica's latest priced iteration."""
        return self._last[replica]

    def gpu_before(self, replica: int, now: float) -> float | None:
        """GPU seconds of the replica's last iteration when it ended exactly at `now` (an
        iteration starting now hides host time behind it), else None (an idle gap)."""
        end, gpu = self._last[replica]
        return gpu if end == now else None

    def run_times(self, replica: int, full: np.ndarray, sizes: np.ndarray,
                  previous_gpu: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`iteration_time` of consecutive back-to-back decode iterations, bitwise: stage times
        `full` of batches of `sizes` requests (CUDA-graph padding included), the first following
        an iteration of `previous_gpu` GPU seconds (None: an idle gap, nothing hidden). Returns
        the durations, the seconds hidden in each and the GPU seconds of each (nothing is
        remembered: see on_iteration, after_run)."""
        # every cost model's cpu_times is elementwise (numpy arithmetic; linear: zeros)
        cpu = self.predictors[replica].cpu_times(sizes)   # type: ignore[arg-type]
        gpu = np.asarray(full - sum(cpu.values()), dtype=np.float64)
        hideable = sum(cpu[phase] for phase in self.hidden[replica])
        hidden = np.minimum(hideable, np.concatenate(([0.0 if previous_gpu is None else previous_gpu], gpu[:-1])))
        if previous_gpu is None:
            hidden[0] = 0.0
        return full - hidden, hidden, gpu

    def start_run(self, replica: int, start: float) -> None:
        """A decode run starts on the replica at `start`: later additions wait for its end."""
        self._runs[replica] = start

    def after_run(self, replica: int, end: float, gpu: float, starts: np.ndarray, hidden: np.ndarray) -> None:
        """A run's iterations were priced by run_times: the last ended at `end` after `gpu` GPU
        seconds; `hidden[j]` is what the iteration starting at `starts[j]` hid (added in the order
        of their starts among every replica's, as iteration by iteration). Also for a run that
        ended without any (`hidden` empty)."""
        del self._runs[replica]
        if not self._runs and not self._pending:
            # nothing else held: the heap would give these back in their (sorted) order, and
            # the flush would add them all, one by one
            total = self._hidden_s
            for seconds in hidden.tolist():
                total += seconds
            self._hidden_s = total
        else:
            for start, seconds in zip(starts.tolist(), hidden.tolist()):
                self._hold(start, seconds)
            self._flush()
        if len(hidden):
            self._last[replica] = (end, gpu)
