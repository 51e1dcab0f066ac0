"""Stage times of a fast-forwarded decode run's iterations, each priced as the stepwise path
prices it (engine/fast_forward.py): the cost model's decode time at the batch size the GPU runs,
CUDA-graph padding included (`SteadyDecode.padded`: the padded size changes when a member
finishes), less the host time overlap scheduling hides behind the previous iteration when the
replica overlaps (engine/overlap.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sim_core.engine.overlap import OverlapClock
    from sim_core.predictor.shape import Predictor
    from sim_core.schedulers.steady import SteadyDecode


class RunPricing:
    """Prices a run chunk by chunk (`durations`), then tells the overlap clock what ran (`commit`)."""

    __slots__ = ("gpu", "hidden", "overlap", "predictor", "previous_gpu", "promise", "replica")

    def __init__(self, predictor: Predictor, promise: SteadyDecode, overlap: OverlapClock | None, replica: int,
                 start: float) -> None:
        """`overlap`: the clock when the replica overlaps, else None; the run starts at `start`."""
        self.predictor, self.promise, self.overlap, self.replica = predictor, promise, overlap, replica
        self.previous_gpu = overlap.gpu_before(replica, start) if overlap is not None else None
        self.gpu: list[np.ndarray] = []      # per chunk, with overlap: GPU seconds of each iteration
        self.hidden: list[np.ndarray] = []   # and the host seconds it hid

    def durations(self, num_live: np.ndarray, context: np.ndarray) -> np.ndarray:
        """Seconds of the run's next iterations, whose live members are `num_live` holding
        `context` KV tokens in all."""
        sizes = self.promise.padded(num_live)
        full = self.predictor.decode_run_times(sizes, context, 0)
        if self.overlap is None:
            return full
        durations, gpu, hidden = self.overlap.run_times(self.replica, full, sizes, self.previous_gpu)
        self.previous_gpu = float(gpu[-1])
        self.gpu.append(gpu)
        self.hidden.append(hidden)
        return durations

    def commit(self, num_iterations: int, end: float) -> None:
        """The run's first `num_iterations` iterations ran, the last ending at `end`."""
        if self.overlap is not None:
            gpu = np.concatenate(self.gpu)
            self.overlap.on_run(self.replica, end, float(gpu[num_iterations - 1]),
                                np.concatenate(self.hidden)[:num_iterations])
