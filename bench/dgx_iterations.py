"""Predicted prefill and decode iteration times of Llama-2-70B against those measured on DGX-A100 and DGX-H100.

    python bench/dgx_iterations.py [CSV] [--predictors silicon,roofline] [--rows]

CSV is splitwise-sim's `perf_model.csv` (Mutinifni/splitwise-sim, MIT; default
`../shared/data/real_vllm/splitwise_dgx_perf_model/perf_model.csv`, never shipped here): Llama-2-70B
under vLLM (2023, FP16) at TP 2/4/8 on `a100-80gb` and `h100-80gb`, a batch of `batch_size` requests of
`prompt_size` tokens each. Its columns, read off the data: `prompt_time` is the batch's prefill (ms),
`token_time` the mean decode iteration over the run, `(e2e_time - prompt_time) / (token_size - 1)` (the
ratio is 127.0-127.7 for the 128-token runs; runs asked for more tokens stop early at EOS, so the number
of decode iterations is taken as `(e2e_time - prompt_time) / token_time`). Repeats are reduced to their
median per (hardware, TP, prompt_size, batch_size, token_size).

Each group is priced as one prefill step of `batch_size` x `prompt_size` tokens with nothing cached, and
one decode step of `batch_size` requests at the mean context over the run, `prompt_size + (n + 1) / 2`
for n decode iterations. Only the GPU's part is compared: the stage time less the predictor's host
phases (`cpu_times`), i.e. kernels and collectives, since the 2023 engine's host costs differ from
today's. Prints one row per group with `--rows`, and always, per predictor, hardware and TP, the median
signed and absolute error and the median gap in ms of each phase, the growth of a step between two
groups (which cancels fixed per-step costs), then the A100 / H100 ratio of the measured and of the
predicted times.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim_core import parse_config  # noqa: E402
from sim_core.predictor import build_predictor  # noqa: E402
from sim_core.predictor.shape import BatchShape, Predictor  # noqa: E402

DEFAULT_CSV = Path(__file__).resolve().parents[2] / "shared/data/real_vllm/splitwise_dgx_perf_model/perf_model.csv"
DEVICES = {"a100-80gb": "a100-80gb", "h100-80gb": "h100-sxm"}   # splitwise's name -> our catalog's
KEYS = ["hardware", "tensor_parallel", "prompt_size", "batch_size", "token_size"]


def measured_groups(path: Path) -> pd.DataFrame:
    """Llama-2-70B rows of the CSV, the median of each group's repeats, with `decodes` added."""
    data = pd.read_csv(path)
    data = data[(data["model"] == "llama2-70b") & data["hardware"].isin(list(DEVICES))].copy()
    data["decodes"] = (data["e2e_time"] - data["prompt_time"]) / data["token_time"]
    groups = data.groupby(KEYS)[["prompt_time", "token_time", "decodes"]].median().reset_index()
    return flag_truncated(groups)


def flag_truncated(groups: pd.DataFrame) -> pd.DataFrame:
    """Mark groups whose prefill took less than a smaller batch of the same prompts (`truncated`): TP 2's
    64 x 512 batch is measured at a quarter of its 32 x 512 one, so that run did not prefill the whole
    batch in one step; such groups stay in `--rows` and out of the medians and fits."""
    groups = groups.sort_values(KEYS).copy()
    before = groups.groupby(["hardware", "tensor_parallel", "prompt_size", "token_size"])["prompt_time"].cummax()
    groups["truncated"] = groups["prompt_time"] < before
    return groups


def gpu_ms(predictor: Predictor, shape: BatchShape) -> float:
    """The step's kernels and collectives in ms: its stage time less the host's CPU phases."""
    total = predictor.stage_time(shape, 0)
    return (total - sum(predictor.cpu_times(shape.num_requests).values())) * 1e3


def predictor_for(hardware: str, tp: int, kind: str) -> Predictor:
    scenario = {"model": "llama-2-70b", "device": DEVICES[hardware], "max_model_len": 16384,
                "cluster": {"tensor_parallel_size": tp}, "predictor": {"type": kind}}
    return build_predictor(parse_config(scenario))


def priced(groups: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Predicted prefill and decode ms of every group under predictor `kind`."""
    rows = []
    for (hardware, tp), part in groups.groupby(["hardware", "tensor_parallel"]):
        predictor = predictor_for(str(hardware), int(tp), kind)
        for g in part.itertuples():
            bs, ps = int(g.batch_size), int(g.prompt_size)
            context = ps + round((g.decodes + 1) / 2)
            prefill = BatchShape(bs, bs * ps, ((ps, 0),) * bs)
            decode = BatchShape(bs, bs, (), bs, bs * context)
            rows.append({**{k: getattr(g, k) for k in KEYS}, "truncated": g.truncated, "predictor": kind,
                         "prefill_meas": g.prompt_time, "prefill_pred": gpu_ms(predictor, prefill),
                         "decode_meas": g.token_time, "decode_pred": gpu_ms(predictor, decode)})
    out = pd.DataFrame(rows)
    for phase in ("prefill", "decode"):
        out[f"{phase}_err"] = 100 * (out[f"{phase}_pred"] / out[f"{phase}_meas"] - 1)
    return out


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per predictor, hardware and TP (truncated groups left out): the median signed and absolute %
    error of each phase and the median gap measured - predicted in ms (what the GPU-only prediction
    leaves out: the 2023 engine's host work and kernel launches, plus whatever its kernels lost)."""
    rows = []
    kept = table[~table["truncated"]]
    for (kind, hardware, tp), part in kept.groupby(["predictor", "hardware", "tensor_parallel"]):
        row = {"predictor": kind, "hardware": hardware, "tp": tp, "groups": len(part)}
        for phase in ("prefill", "decode"):
            row[f"{phase} err %"] = part[f"{phase}_err"].median()
            row[f"{phase} |err| %"] = part[f"{phase}_err"].abs().median()
            row[f"{phase} gap ms"] = (part[f"{phase}_meas"] - part[f"{phase}_pred"]).median()
        rows.append(row)
    return pd.DataFrame(rows)


def ratios(table: pd.DataFrame) -> pd.DataFrame:
    """Median over the groups both devices share of the A100 / H100 time ratio, measured and
    predicted, per predictor, TP and phase."""
    kept = table[~table["truncated"]]
    a100 = kept[kept["hardware"] == "a100-80gb"].drop(columns="hardware")
    h100 = kept[kept["hardware"] == "h100-80gb"].drop(columns="hardware")
    both = a100.merge(h100, on=["predictor"] + KEYS[1:], suffixes=("_a", "_h"))
    rows = []
    for (kind, tp), part in both.groupby(["predictor", "tensor_parallel"]):
        row = {"predictor": kind, "tp": tp}
        for phase in ("prefill", "decode"):
            row[f"{phase} measured"] = (part[f"{phase}_meas_a"] / part[f"{phase}_meas_h"]).median()
            row[f"{phase} predicted"] = (part[f"{phase}_pred_a"] / part[f"{phase}_pred_h"]).median()
        rows.append(row)
    return pd.DataFrame(rows)


def increments(table: pd.DataFrame) -> pd.DataFrame:
    """Measured and predicted growth of a step between two groups, which cancels any fixed per-step
    cost: prefill from 1 x 1,024 to 1 x 8,192 tokens, decode from 1 to 32 requests of 512-token
    prompts (128 tokens generated), per predictor, hardware and TP."""
    rows = []
    for (kind, hardware, tp), part in table.groupby(["predictor", "hardware", "tensor_parallel"]):
        at = part.set_index(["prompt_size", "batch_size", "token_size"])
        row = {"predictor": kind, "hardware": hardware, "tp": tp}
        for phase, low, high in (("prefill", (1024, 1, 128), (8192, 1, 128)),
                                 ("decode", (512, 1, 128), (512, 32, 128))):
            meas = at.loc[high, f"{phase}_meas"] - at.loc[low, f"{phase}_meas"]
            pred = at.loc[high, f"{phase}_pred"] - at.loc[low, f"{phase}_pred"]
            row[f"{phase} +meas ms"], row[f"{phase} +pred ms"] = meas, pred
            row[f"{phase} +err %"] = 100 * (pred / meas - 1)
        rows.append(row)
    return pd.DataFrame(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", nargs="?", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--predictors", default="silicon,roofline")
    parser.add_argument("--rows", action="store_true", help="print every group's predicted and measured ms")
    args = parser.parse_args()
    if not args.csv.is_file():
        print(f"{args.csv}: no such file (splitwise-sim's data/perf_model.csv)", file=sys.stderr)
        return 2
    groups = measured_groups(args.csv)
    table = pd.concat([priced(groups, kind) for kind in args.predictors.split(",")], ignore_index=True)
    pd.set_option("display.width", 200)
    if args.rows:
        print(table.round(1).to_string(index=False))
        print()
    print(summary(table).round(2).to_string(index=False))
    print("\nGrowth of a step (prefill 1 x 1,024 -> 1 x 8,192 tokens, decode 1 -> 32 requests at 512):")
    print(increments(table).round(1).to_string(index=False))
    print("\nA100 / H100 time ratio, median over shared groups:")
    print(ratios(table).round(2).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
