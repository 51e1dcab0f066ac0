"""Measured against simulated, figure by figure, and the median absolute percentage error."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from sim_core.accuracy.measured import METRICS, STATS, MeasuredRun, MeasuredStage
from sim_core.accuracy.replay import Replay, itl_from_means

COLUMNS = ["run", "stage", "metric", "stat", "measured_s", "simulated_s", "error_pct"]
HEADLINE = (("e2e", "mean"), ("ttft", "mean"), ("itl", "mean"), ("e2e", "p90"), ("e2e", "p99"),
            ("ttft", "p90"), ("ttft", "p99"))


def measured_values(run: MeasuredRun, stage: MeasuredStage) -> dict[str, dict[str, float]]:
    """A stage's measured figures with `itl` from the means added when the layout lacks it."""
    values = {metric: dict(stats) for metric, stats in stage.values.items()}
    if "itl" not in values and "e2e" in values and "ttft" in values:
        values["itl"] = {"mean": itl_from_means(values["e2e"]["mean"], values["ttft"]["mean"], run.output_tokens)}
    return values


def comparison(replays: Sequence[Replay]) -> pd.DataFrame:
    """One row per run, stage, metric and statistic measured: both values and the signed error
    (simulated - measured) / measured in percent."""
    rows = []
    for item in replays:
        for measured, simulated in zip(item.run.stages, item.stages):
            real = measured_values(item.run, measured)
            for metric in METRICS:
                for stat in STATS:
                    value = real.get(metric, {}).get(stat)
                    if value is None:
                        continue
                    sim = simulated.values.get(metric, {}).get(stat, float("nan"))
                    error = (sim - value) / value * 100 if value else float("nan")
                    rows.append((item.run.name, measured.label, metric, stat, value, sim, error))
    return pd.DataFrame(rows, columns=COLUMNS)


def median_errors(table: pd.DataFrame) -> dict[str, float]:
    """Median absolute percentage error of each headline figure (`metric stat`) over the runs'
    whole-run figures (each stage's, for a run measured per stage only)."""
    whole = set(table.loc[table["stage"] == "all", "run"])
    mine = table[(table["stage"] == "all") | ~table["run"].isin(whole)]
    out = {}
    for metric, stat in HEADLINE:
        errors = mine[(mine["metric"] == metric) & (mine["stat"] == stat)]["error_pct"].abs().dropna()
        if len(errors):
            out[f"{metric} {stat}"] = float(np.median(errors))
    return out
