"""The results table: one row per configuration, with cost from the price per GPU-hour."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sim_core.sweep.grid import gpu_hour_price
from sim_core.sweep.probe import KEPT

RESULTS_NAME = "results.csv"
HEAD = ("max_qps", "num_gpus", "cost_per_hour_usd", "qps_per_usd", "binding_slo", "qps_per_gpu", "device")


def results_table(records: list[dict], vary_keys: list[str], gpu_hour_usd: float | dict) -> pd.DataFrame:
    """A column per varied key (named as in `vary`), then HEAD, the metrics measured at max_qps
    (KEPT; empty when max_qps is 0), `num_probes` and the point `key`.

    cost_per_hour_usd = num_gpus x price; qps_per_usd = max_qps / cost_per_hour_usd (requests
    per second sustained per dollar-hour; 0 when free or at capacity 0)."""
    rows = []
    for record in records:
        cost = record["num_gpus"] * gpu_hour_price(gpu_hour_usd, record["device"])
        row = {"device": record["device"], **{key: record["values"].get(key) for key in vary_keys}}
        row.update(max_qps=record["max_qps"], num_gpus=record["num_gpus"], cost_per_hour_usd=cost,
                   qps_per_usd=record["max_qps"] / cost if cost > 0 else 0.0, binding_slo=record["binding_slo"],
                   qps_per_gpu=record["max_qps"] / record["num_gpus"])
        row.update({name: (record["at_capacity"] or {}).get(name) for name in KEPT})
        row.update(num_probes=len(record["probes"]), key=record["key"])
        rows.append(row)
    columns = [*vary_keys, *(name for name in HEAD if name not in vary_keys), *KEPT, "num_probes", "key"]
    return pd.DataFrame(rows, columns=columns)


def write_results_csv(table: pd.DataFrame, folder: str | Path) -> Path:
    """Write `folder/results.csv` (the folder is created when missing)."""
    path = Path(folder) / RESULTS_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(path, index=False)
    return path
