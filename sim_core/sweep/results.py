"""The results table: one row per configuration, with cost from the price per GPU-hour."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sim_core.export.atomic import atomic_open
from sim_core.sweep.grid import gpu_hour_price
from sim_core.sweep.probe import KEPT

RESULTS_NAME = "results.csv"
RATES = ("max_qps", "qps_per_usd", "qps_per_gpu", "usd_per_million_output_tokens", "qps_low", "qps_high",
         "uncertainty")
HEAD = ("max_qps", "num_gpus", "cost_per_hour_usd", "qps_per_usd", "binding_slo", "qps_per_gpu", "device",
        "usd_per_million_output_tokens", "qps_low", "qps_high", "uncertainty", "non_monotonic")


def results_table(records: list[dict], vary_keys: list[str], gpu_hour_usd: float | dict) -> pd.DataFrame:
    """A column per varied key (named as in `vary`), then HEAD, the metrics measured at max_qps
    (KEPT; empty when max_qps is 0), `num_probes`, `error` and the point `key`.

    cost_per_hour_usd = num_gpus x price; qps_per_usd = max_qps / cost_per_hour_usd (requests
    per second sustained per dollar-hour; 0 when free or at capacity 0);
    usd_per_million_output_tokens = cost_per_hour_usd / (output tokens per hour at max_qps) x 1e6
    (empty at capacity 0); qps_low / qps_high / uncertainty: the search's qps_range and its
    relative width; non_monotonic: how many passes above a fail the search saw. A point that
    failed has its error (one line) and empty max_qps, rates and metrics."""
    rows = []
    for record in records:
        cost = record["num_gpus"] * gpu_hour_price(gpu_hour_usd, record["device"])
        max_qps = record["max_qps"]
        row = {"device": record["device"], **{key: record["values"].get(key) for key in vary_keys}}
        row.update(max_qps=max_qps, num_gpus=record["num_gpus"], cost_per_hour_usd=cost,
                   qps_per_usd=None if max_qps is None else max_qps / cost if cost > 0 else 0.0,
                   binding_slo=record["binding_slo"],
                   qps_per_gpu=None if max_qps is None else max_qps / record["num_gpus"])
        row.update({name: (record["at_capacity"] or {}).get(name) for name in KEPT})
        low, high = record.get("qps_range") or (None, None)
        row.update(usd_per_million_output_tokens=_usd_per_million(cost, row["output_tokens_per_s"]),
                   qps_low=low if max_qps is not None else None, qps_high=high, uncertainty=record.get("uncertainty"),
                   non_monotonic=len(record.get("non_monotonic") or ()))
        row.update(num_probes=len(record["probes"]), error=record.get("error"), key=record["key"])
        rows.append(row)
    columns = [*vary_keys, *(name for name in HEAD if name not in vary_keys), *KEPT, "num_probes", "error", "key"]
    table = pd.DataFrame(rows, columns=columns)
    for name in RATES:            # numbers (NaN for failed points) even when every point failed
        table[name] = table[name].astype("float64")
    return table


def _usd_per_million(cost_per_hour: float, output_tokens_per_s: float | None) -> float | None:
    """What a million output tokens cost when the configuration runs at its capacity."""
    if not output_tokens_per_s:
        return None
    return cost_per_hour / (output_tokens_per_s * 3600.0) * 1e6


def write_results_csv(table: pd.DataFrame, folder: str | Path) -> Path:
    """Write `folder/results.csv` whole or not at all (the folder is created when missing).

    Raises:
        OutputError: the file cannot be written (named; no partial file is left).
    """
    path = Path(folder) / RESULTS_NAME
    with atomic_open(path) as file:
        table.to_csv(file, index=False)
    return path
