"""Compare runs of several scenarios on the same workload: a table of headline metrics with the
winner of each, labels that say how each scenario differs, and the requests whose latency
differs most between them (request ids match because the workload is the same)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sim_core.config.choices import choices_at

if TYPE_CHECKING:
    from sim_core.results.result import SimulationResult

# (summary key, label, unit, scale to the unit, which way is better: "lower", "higher" or None)
METRICS = (
    ("throughput_rps", "throughput", "req/s", 1.0, "higher"),
    ("output_tokens_per_s", "output tokens/s", "tok/s", 1.0, "higher"),
    ("ttft_p50_s", "TTFT p50", "ms", 1e3, "lower"),
    ("ttft_p90_s", "TTFT p90", "ms", 1e3, "lower"),
    ("ttft_p99_s", "TTFT p99", "ms", 1e3, "lower"),
    ("tbt_p50_s", "TBT p50", "ms", 1e3, "lower"),
    ("tbt_p90_s", "TBT p90", "ms", 1e3, "lower"),
    ("tbt_p99_s", "TBT p99", "ms", 1e3, "lower"),
    ("e2e_p50_s", "e2e p50", "s", 1.0, "lower"),
    ("e2e_p90_s", "e2e p90", "s", 1.0, "lower"),
    ("e2e_p99_s", "e2e p99", "s", 1.0, "lower"),
    ("scheduling_delay_p99_s", "queueing p99", "s", 1.0, "lower"),
    ("num_preemptions", "preemptions", "", 1.0, "lower"),
    ("num_rejected", "rejected", "", 1.0, "lower"),
    ("kv_utilization_mean", "KV use mean", "%", 100.0, None),
    ("kv_utilization_peak", "KV use peak", "%", 100.0, None),
    ("makespan_s", "makespan", "s", 1.0, "lower"),
    ("num_gpus", "GPUs", "", 1.0, "lower"),
)
TIE = "tie"
TIE_PCT = 0.5     # a margin that would show as "0%" is a tie


def comparison_table(runs: dict) -> pd.DataFrame:
    """One row per metric (METRICS): its value in each run (name -> SimulationResult, in the
    metric's unit), the winner (TIE when the best value is shared; empty when no direction is
    better, e.g. KV use) and the winner's margin over the runner-up in percent of A's value."""
    rows = []
    for key, label, unit, scale, better in METRICS:
        values = {name: _value(run, key) * scale for name, run in runs.items()}
        name, margin = winner(values, better)
        rows.append({"metric": label, "unit": unit, **values, "winner": name, "margin_pct": margin})
    return pd.DataFrame(rows)


def _value(run: SimulationResult, key: str) -> float:
    return float(sum(replica.num_gpus for replica in run.replicas) if key == "num_gpus" else run.summary[key])


def winner(values: dict[str, float], better: str | None) -> tuple[str, float]:
    """(best name or TIE, its margin over the runner-up in % of the first run's value, A's: the
    base every difference in the table is relative to; of the runner-up's when A's is 0 or
    missing); a margin below TIE_PCT is a TIE. ("", nan) when nothing can win."""
    finite = {name: v for name, v in values.items() if math.isfinite(v)}
    if better is None or len(finite) < 2:
        return "", math.nan
    sign = 1.0 if better == "lower" else -1.0
    ranked = sorted(finite.items(), key=lambda item: sign * item[1])
    (best, first), (_, second) = ranked[0], ranked[1]
    base = next(iter(values.values()))
    base = base if math.isfinite(base) and base else second
    margin = abs(second - first) / abs(base) * 100.0 if base else (0.0 if first == second else math.inf)
    return (TIE, margin) if margin < TIE_PCT else (best, margin)


def difference_frame(table: pd.DataFrame) -> pd.DataFrame:
    """The table as text for display: each value with its difference to the first run in %."""
    names = [c for c in table.columns if c not in ("metric", "unit", "winner", "margin_pct")]
    shown = {"metric": [f"{m} ({u})" if u else m for m, u in zip(table["metric"], table["unit"])]}
    for i, name in enumerate(names):
        shown[name] = [_cell(v, first, i > 0) for v, first in zip(table[name], table[names[0]])]
    shown["winner"] = [(f"{w} (by {m:.0f}%)" if m >= 1 else f"{w} (by <1%)") if w and w != TIE else w
                       for w, m in zip(table["winner"], table["margin_pct"])]
    return pd.DataFrame(shown)


def _cell(value: float, first: float, relative: bool) -> str:
    if not math.isfinite(value):
        return "n/a"
    text = f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if relative and math.isfinite(first) and first != 0 and value != first:
        text += f" ({(value - first) / abs(first):+.0%})"
    return text


def format_comparison(table: pd.DataFrame) -> str:
    """The difference table as aligned plain text (what `python -m sim_core compare` prints)."""
    return difference_frame(table).to_string(index=False)


def describe_changes(base: dict, variant: dict) -> str:
    """The leaf keys whose values differ, as 'key=value' (last part of the dotted key). A knob at
    its default that only one of the two has (its choice's, e.g. its scheduler policy's, the
    other's does not read it) follows from the choice and is not listed."""
    old, new = _leaves(base), _leaves(variant)
    changed = [(key, new.get(key)) for key in sorted(set(old) | set(new))
               if old.get(key) != new.get(key) and not _choice_default(key, old, new)]
    return ", ".join(f"{key.split('.')[-1]}={value}" for key, value in changed) or "unchanged"


def _choice_default(key: str, old: dict, new: dict) -> bool:
    section, _, knob = key.rpartition(".")
    choices = choices_at(section) if section and (key in old) != (key in new) else None
    return choices is not None and (old if key in old else new)[key] == choices.knob_default(knob)


def _leaves(data: dict, prefix: str = "") -> dict:
    out: dict = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        out.update(_leaves(value, path + ".") if isinstance(value, dict) and value else {path: value})
    return out


def diverging_requests(tables: dict[str, pd.DataFrame], column: str = "ttft", limit: int = 20) -> list[int]:
    """Ids of the requests whose `column` differs most between runs (largest max - min first;
    a request finished in some runs but not others comes before all of them)."""
    frame = pd.DataFrame({name: t.set_index("request_id")[column] for name, t in tables.items()})
    values = frame.to_numpy(dtype=np.float64, na_value=np.nan)
    known = np.isfinite(values)
    high, low = np.where(known, values, -np.inf).max(axis=1), np.where(known, values, np.inf).min(axis=1)
    spread = np.where(known.any(axis=1), high - low, -np.inf)
    partly = known.any(axis=1) & ~known.all(axis=1)
    order = np.lexsort((frame.index.to_numpy(), -spread, ~partly))
    return [int(i) for i in frame.index.to_numpy()[order][:limit]]


def same_workload(scenarios: list[dict]) -> list[dict]:
    """The scenarios with the first one's workload section and workload seed (validated dicts)."""
    first = scenarios[0]
    seed = first["workload"].get("seed")
    workload = {**first["workload"], "seed": first["seed"] if seed is None else seed}
    return [{**scenario, "workload": workload} for scenario in scenarios]
