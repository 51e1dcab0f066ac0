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
        self.hidden_s = 0.0                          # CPU seconds hidden so far (all replicas)

    def iteration_time(self, replica: int, shape: BatchShape, now: float) -> float:
        """Seconds of the iteration of `shape` starting at `now` (remembered for the next)."""
        predictor = self.predictors[replica]
        full = predictor.stage_time(shape, 0)
        cpu = predictor.cpu_times(shape.num_requests)
        gpu = full - sum(cpu.values())
        end, previous_gpu = self._last[replica]
        hidden = min(sum(cpu[phase] for phase in self.hidden[replica]), previous_gpu) if end == now else 0.0
        duration = full - hidden
        self.hidden_s += hidden
        self._last[replica] = (now + duration, gpu)
        return duration

    # ---- decode runs (engine/fast_forward.py) ------------------------------------------------

    def gpu_before(self, replica: int, now: float) -> float | None:
        """GPU seconds of the replica's last iteration when it ended exactly at `now` (an
        iteration starting now hides host time behind it), else None (an idle gap)."""
        end, gpu = self._last[replica]
        return gpu if end == now else None

    def run_times(self, replica: int, full: np.ndarray, sizes: np.ndarray,
                  gpu_before: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`iteration_time` of consecutive back-to-back iterations of a decode run, bitwise: stage
        times `full` of batches of `sizes` (padded) requests, the first after an iteration of
        `gpu_before` GPU seconds (None: after an idle gap). Changes nothing (see `on_run`).
        Returns each iteration's duration, GPU seconds and hidden host seconds."""
        # every cost model's cpu_times is elementwise (numpy arithmetic; linear: zeros)
        cpu = self.predictors[replica].cpu_times(sizes)  # type: ignore[arg-type]
        gpu = full - sum(cpu.values())
        overlapped = sum(cpu[phase] for phase in self.hidden[replica])
        before = np.empty_like(full)
        before[1:] = gpu[:-1]
        before[0] = 0.0 if gpu_before is None else gpu_before
        hidden = np.minimum(overlapped, before)
        if gpu_before is None:
            hidden[0] = 0.0
        return full - hidden, gpu, hidden

    def on_run(self, replica: int, end: float, gpu: float, hidden: np.ndarray) -> None:
        """A decode run's iterations ran (priced by `run_times`): their hidden seconds join the
        total in iteration order (interleaved with other replicas' iterations stepwise, so with
        several replicas the total may differ in its last bits); the last one ended at `end`
        after `gpu` GPU seconds."""
        if len(hidden):
            self.hidden_s = float(np.cumsum(np.concatenate(([self.hidden_s], hidden)))[-1])
        self._last[replica] = (end, gpu)
