"""Reading a results table: Pareto fronts, the best configuration per objective, and the fewest
GPUs that serve a target rate."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

# (objective, column, which way is better)
OBJECTIVES = (("highest capacity", "max_qps", "max"), ("most QPS per dollar", "qps_per_usd", "max"),
              ("most QPS per GPU", "qps_per_gpu", "max"), ("lowest TBT p99 at capacity", "tbt_p99_s", "min"),
              ("lowest TTFT p90 at capacity", "ttft_p90_s", "min"))


def pareto_mask(x: ArrayLike, y: ArrayLike, x_better: str = "min", y_better: str = "max") -> np.ndarray:
    """True for the points no other point beats or equals on both axes while beating on one;
    NaN points are never on the front. `*_better` is "min" or "max"."""
    x = np.asarray(x, dtype=np.float64) * (1.0 if x_better == "min" else -1.0)
    y = np.asarray(y, dtype=np.float64) * (1.0 if y_better == "min" else -1.0)
    front = np.zeros(len(x), dtype=bool)
    best_x, best_y = math.nan, math.inf
    for i in np.lexsort((y, x)):           # by x, then y: earlier points can only dominate later ones
        if not (math.isfinite(x[i]) and math.isfinite(y[i])):
            continue
        if y[i] < best_y:
            front[i], best_x, best_y = True, x[i], y[i]
        elif y[i] == best_y and x[i] == best_x:   # an exact duplicate of a front point
            front[i] = True
    return front


def config_label(row: pd.Series, vary_keys: list[str]) -> str:
    """'type=sarathi, num_replicas=2' (the varied values of a row; 'base' when nothing varies)."""
    return ", ".join(f"{key.split('.')[-1]}={row[key]}" for key in vary_keys) or "base"


def best_per_objective(table: pd.DataFrame, vary_keys: list[str]) -> pd.DataFrame:
    """For each objective of OBJECTIVES, the configuration that does best (among those that
    serve some load) and its value."""
    served = table[table["max_qps"] > 0]
    rows = []
    for objective, column, better in OBJECTIVES:
        values = pd.to_numeric(served[column], errors="coerce")
        if values.notna().any():
            index = values.idxmax() if better == "max" else values.idxmin()
            rows.append({"objective": objective, "configuration": config_label(served.loc[index], vary_keys),
                         "value": float(values[index]), "column": column})
    return pd.DataFrame(rows, columns=["objective", "configuration", "value", "column"])


@dataclass(frozen=True)
class GpuAnswer:
    """The fewest GPUs for a target rate.

    Attributes:
        row: the configuration with the fewest GPUs whose capacity reaches the target (ties: the
            cheaper, then the higher capacity); None when none does.
        copies, scaled_row: otherwise, how many copies of the configuration with the most QPS
            per GPU would reach it (an estimate: assumes copies add their capacities).
    """

    row: pd.Series | None
    copies: int = 0
    scaled_row: pd.Series | None = None

    def text(self, target_qps: float, vary_keys: list[str]) -> str:
        if self.row is not None:
            return (f"{int(self.row['num_gpus'])} GPU(s): {config_label(self.row, vary_keys)} serves "
                    f"{self.row['max_qps']:.3g} req/s >= {target_qps:g} within the SLOs "
                    f"(${self.row['cost_per_hour_usd']:.2f}/h)")
        if self.scaled_row is None:
            return f"no configuration serves any load within the SLOs; none reaches {target_qps:g} req/s"
        gpus = self.copies * int(self.scaled_row["num_gpus"])
        return (f"no configuration reaches {target_qps:g} req/s alone; about {gpus} GPU(s) as {self.copies} copies "
                f"of {config_label(self.scaled_row, vary_keys)} ({self.scaled_row['max_qps']:.3g} req/s each), "
                "assuming copies add their capacities")


def min_gpus_for(table: pd.DataFrame, target_qps: float) -> GpuAnswer:
    """The fewest GPUs that serve `target_qps` within the SLOs (see GpuAnswer)."""
    enough = table[table["max_qps"] >= target_qps]
    if len(enough):
        ranked = enough.sort_values(["num_gpus", "cost_per_hour_usd", "max_qps"], ascending=[True, True, False],
                                    kind="stable")
        return GpuAnswer(ranked.iloc[0])
    served = table[table["max_qps"] > 0]
    if not len(served):
        return GpuAnswer(None)
    best = served.loc[served["qps_per_gpu"].idxmax()]
    return GpuAnswer(None, math.ceil(target_qps / best["max_qps"]), best)
