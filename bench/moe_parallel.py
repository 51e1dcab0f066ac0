"""Predicted step times of MoE models under tensor, expert and attention-data parallelism.

    python bench/moe_parallel.py [--devices h100-sxm,h200] [--all2all allgather_reducescatter|all_to_all]
    python bench/moe_parallel.py --skew .../perf_db/h100_sxm/moe/vllm/0.24.0/moe_perf.parquet

For Mixtral-8x7B, Qwen3-30B-A3B and DeepSeek-V3 (catalog ids), each layout (TP x DP GPUs, EP 1
or DP x TP; one pipeline stage) is priced by the roofline predictor: a decode step of 64 requests
per DP rank holding 1,024 cached tokens each, and a 2,048-token prefill with nothing cached (one
request per DP rank; the MoE layers see every rank's tokens). Prints GPUs, weights per GPU
(memory/model_bytes.py), the stage time in ms and its MoE dispatch/combine part, and decode
output tokens per second per GPU (64 x DP / step / GPUs). A layout whose weights leave no KV
room on the device prints "does not fit". --all2all picks how tokens reach the experts (default:
vLLM's allgather_reducescatter). docs/design/moe-parallelism.md has the model.

--skew reads one fused-MoE table of AIConfigurator's perf_db (ai-dynamo/aiconfigurator, Apache-2.0;
the project does not ship it) and prints instead the median latency ratio of power-law to balanced
routing for bf16 kernels, by EP size and token range (needs pyarrow).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim_core import ConfigError, parse_config  # noqa: E402
from sim_core.memory.model_bytes import stage_weight_bytes  # noqa: E402
from sim_core.memory.planner import plan_memory  # noqa: E402
from sim_core.predictor import build_predictor  # noqa: E402
from sim_core.predictor.shape import BatchShape  # noqa: E402

GIB = 2**30
DECODE = BatchShape(64, 64, (), 64, 64 * 1024)
PREFILL = BatchShape(1, 2048, ((2048, 0),))
# (TP, DP, EP) per model: TP only, then EP over the same GPUs, then attention DP with EP
LAYOUTS = {
    "mixtral-8x7b": [(8, 1, 1), (8, 1, 8), (4, 1, 1), (4, 1, 4), (2, 4, 8), (1, 8, 8)],
    "qwen3-30b-a3b": [(8, 1, 1), (8, 1, 8), (4, 1, 1), (4, 1, 4), (1, 4, 4), (1, 8, 8)],
    "deepseek-v3": [(8, 1, 1), (8, 1, 8), (1, 8, 8), (16, 1, 1), (8, 2, 16), (1, 16, 16)],
}


def scenario(model: str, device: str, tp: int, dp: int, ep: int, backend: str) -> dict:
    return {"model": model, "device": device, "max_model_len": 4096, "predictor": {"type": "roofline"},
            "memory": {"planner": "detailed"},
            "cluster": {"tensor_parallel_size": tp, "data_parallel_size": dp, "expert_parallel_size": ep,
                        "all2all_backend": backend}}


def row(model: str, device: str, tp: int, dp: int, ep: int, backend: str) -> str:
    label = f"{model:14s} {device:9s} TP{tp} DP{dp} EP{ep}".ljust(42)
    try:
        config = parse_config(scenario(model, device, tp, dp, ep, backend))
    except ConfigError as exc:
        return f"{label} refused: {exc}"
    weights = stage_weight_bytes(config.model_spec(), tp, 1, 0, config.moe_layout()) / GIB
    try:
        plan_memory(config)
    except ConfigError:
        return f"{label} {tp * dp:4d} {weights:8.1f}  does not fit"
    predictor = build_predictor(config)
    cells = []
    for shape in (DECODE, PREFILL):
        parts = predictor.breakdown(shape, 0)
        cells.append(f"{sum(parts.values()) * 1e3:8.2f} {parts.get('moe_dispatch_combine', 0.0) * 1e3:6.2f}")
    step = predictor.stage_time(DECODE, 0)
    per_gpu = 64 * dp / step / (tp * dp)
    return f"{label} {tp * dp:4d} {weights:8.1f} {cells[0]} {cells[1]} {per_gpu:8.0f}"


def skew_table(path: str) -> None:
    """Median power-law / balanced latency of the bf16 fused-MoE kernels of one perf_db table."""
    import pandas as pd

    frame = pd.read_parquet(path)
    frame = frame[frame.moe_dtype == "bfloat16"]
    keys = ["kernel_source", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
            "moe_ep_size"]
    table = frame.pivot_table(index=keys, columns="distribution", values="latency").dropna().reset_index()
    skewed = [c for c in table.columns if str(c).startswith("power_law")]
    for column in skewed:
        table[column] = table[column] / table["balanced"]
    bins = pd.cut(table.num_tokens, [0, 16, 64, 256, 1024, 4096, 16384])
    print(table.groupby(["moe_ep_size", bins], observed=True)[skewed].median().round(3).to_string())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", default="h100-sxm,h200")
    parser.add_argument("--all2all", default="allgather_reducescatter",
                        choices=["allgather_reducescatter", "all_to_all"])
    parser.add_argument("--skew", metavar="MOE_PERF_PARQUET", help="print the routing-skew table of this file")
    args = parser.parse_args()
    if args.skew:
        skew_table(args.skew)
        return 0
    print(f"{'model / device / layout':42s} {'GPUs':>4s} {'GiB/GPU':>8s} {'decode':>8s} {'a2a':>6s} "
          f"{'prefill':>8s} {'a2a':>6s} {'tok/s/GPU':>9s}   (ms; a2a = dispatch + combine)")
    for model, layouts in LAYOUTS.items():
        for device in args.devices.split(","):
            for tp, dp, ep in layouts:
                print(row(model, device, tp, dp, ep, args.all2all))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
