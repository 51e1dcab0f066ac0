"""The `linear` cost model: base_s + per_token_s x tokens, the same for every stage."""

from __future__ import annotations

import numpy as np

from sim_core.config.predictor import CPU_PHASES
from sim_core.predictor.shape import BatchShape


class LinearPredictor:
    """Closed-form stage time used for exact comparisons with Vidur and for teaching.

    Every pipeline stage of a batch takes the full time (it is not divided across stages);
    no CPU overhead, no communication.
    """

    needs_context = False

    def __init__(self, base_s: float, per_token_s: float) -> None:
        self.base_s, self.per_token_s = base_s, per_token_s

    def stage_time(self, shape: BatchShape, stage_id: int) -> float:
        return self.base_s + self.per_token_s * shape.total_tokens

    def decode_run_times(self, num_requests: np.ndarray, context: np.ndarray, stage_id: int) -> np.ndarray:
        """Stage times of consecutive decode-only iterations with `num_requests[j]` requests
        (bitwise equal to stage_time of each)."""
        return self.base_s + self.per_token_s * num_requests

    def cpu_times(self, requests: float) -> dict[str, float]:
        """No separate host time: the linear model's base_s stands for everything."""
        return {f"cpu_{phase}": 0.0 for phase in CPU_PHASES}

    def breakdown(self, shape: BatchShape, stage_id: int) -> dict[str, float]:
        return {"base": self.base_s, "tokens": self.per_token_s * shape.total_tokens}
