"""The roofline's RTX prices against LLMServingSim's measured vLLM kernels, and the RTX PRO 6000 runs' decode
steps against the sum of those kernels.

    python bench/rtx_kernels.py LSS_PERF [--runs DIR]

LSS_PERF is the `profiler/perf` folder of an LLMServingSim checkout (casys-kaist/LLMServingSim, MIT; never
shipped here): per GPU and model, vLLM 0.19's per-layer kernels timed one layer at a time (enforce_eager,
CUDA events): `dense.csv` (each layer operator by tokens), `attention.csv` (prefill chunk and cached tokens,
decodes and cached tokens a decode) and `per_sequence.csv` (LM head and sampler by sequences), at TP 1 and 2.
DIR is the folder of the per-request runs (default `../shared/data/real_vllm/llmservingsim_vllm019`).

Prints, per GPU:
1. each operator's median ratio of the roofline's price to the measured kernel at the catalog's efficiencies
   and at the efficiencies fitted to the kernels (a grid search of compute and memory efficiency
   minimising the mean absolute log ratio, over the GEMM rows (QKV, output, gate-up, down projections,
   1-2,048 tokens; the MoE model's attention projections only), and separately over the decode attention
   rows of at least 8 decodes and 256 cached tokens each);
2. Qwen3-30B-A3B's MoE layer on the RTX PRO 6000 as the roofline prices it at the catalog's
   efficiencies against the measured fused-MoE layer (`moe.csv`, by tokens and experts activated);
3. for the RTX PRO 6000 runs of Llama-3.1-8B (TP 1) and Qwen3-32B (TP 2), every second of the server's
   series without prompt tokens: the measured step (requests running / tokens generated), the running
   requests' mean context from the per-request timestamps (prompt plus the output share done by then), and
   the sum of the measured kernels of such a step (layers x (the dense operators at that many tokens + decode
   attention interpolated in decodes and context) + LM head + sampler), plus for TP 2 two all-reduces a
   layer priced by LLMServingSim's NCCL measurement on the same pair of GPUs (its
   `profiler/perf/RTXPRO6000/hardware.yaml`, all-reduce samples 128 KiB-20 MiB, copied below);
4. for the two multi-GPU RTX PRO 6000 runs (Qwen3-32B at TP 2, Qwen3-30B-A3B at DP 2 with expert
   parallelism), the same seconds against the replay's own step (the run's scenario, its predictor's GPU
   time of a decode step of the running requests (per DP rank) at their mean context, plus the sampling
   phase, the host phase vllm_v1 leaves on the path): the median measured / simulated per band of requests
   in flight, with the catalog's link latency (`link_latency_s`, 20 us a message) and without it (the
   generic 8 us once a collective). Runs without the LSS_PERF folder too (`--steps-only`).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim_core.catalog import DEVICES, MODELS, DeviceSpec  # noqa: E402
from sim_core.predictor import operators as ops  # noqa: E402
from sim_core.predictor.roofline import GEMM_LAUNCH_S  # noqa: E402

DEFAULT_RUNS = Path(__file__).resolve().parents[2] / "shared/data/real_vllm/llmservingsim_vllm019"
# (catalog model, LLMServingSim's folder, TPs profiled, the run's folder) per GPU
PROFILED = {
    ("RTXPRO6000", "rtx-pro-6000"): [("llama-3.1-8b", "meta-llama/Llama-3.1-8B", (1, 2), "Llama-3.1-8B"),
                                     ("qwen3-32b", "Qwen/Qwen3-32B", (1, 2), "Qwen3-32B"),
                                     ("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B-Instruct-2507", (1, 2), None)],
    ("RTX4090", "rtx-4090"): [("llama-3.1-8b", "meta-llama/Llama-3.1-8B", (1,), None)],
}
GEMMS = {"qkv_proj": "attn_pre_proj", "o_proj": "attn_post_proj", "gate_up_proj": "mlp_up_proj",
         "down_proj": "mlp_down_proj"}
# LLMServingSim's NCCL all-reduce on its two RTX PRO 6000 (bytes, us; the medians of its hardware.yaml)
NCCL_ALL_REDUCE = [(131072, 17.4), (262144, 21.7), (524288, 29.8), (1048576, 41.0), (1310720, 47.5),
                   (2097152, 67.3), (4194304, 124.9), (8388608, 240.6), (20971520, 587.1)]
GRID_COMPUTE = np.round(np.arange(0.40, 1.0001, 0.01), 2)
GRID_MEMORY = np.round(np.arange(0.50, 1.0001, 0.01), 2)


@dataclass(frozen=True)
class Row:
    """One measured kernel: what it is, its FLOPs and bytes as the roofline counts them, seconds."""

    key: str
    flops: float
    nbytes: float
    seconds: float


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


def kernel_rows(perf: Path, hardware: str, model_id: str, folder: str, tp: int) -> list[Row]:
    """The GEMM and decode-attention rows of one model at one TP, with the roofline's work of each."""
    shape = ops.LayerShape.of(MODELS[model_id], tp)
    base = perf / hardware / folder / "bf16" / f"tp{tp}"
    rows = []
    moe = MODELS[model_id].is_moe
    for r in read_csv(base / "dense.csv"):
        if r["layer"] in GEMMS and (not moe or r["layer"] in ("qkv_proj", "o_proj")):
            cost = ops.layer_kernels(shape, float(r["tokens"]))[GEMMS[r["layer"]]]
            rows.append(Row(f"{model_id} TP{tp} {r['layer']}", float(cost.flops), float(cost.bytes),
                            float(r["time_us"]) * 1e-6))
    for r in read_csv(base / "attention.csv"):
        n, kv = int(r["n_decode"]), int(r["kv_decode"])
        if r["prefill_chunk"] == "0" and n >= 8 and kv >= 256:
            cost = ops.decode_attention(replace(shape, local_share=0.0), n, n * kv)
            rows.append(Row(f"{model_id} TP{tp} decode attention", float(cost.flops), float(cost.bytes),
                            float(r["time_us"]) * 1e-6))
    return rows


def priced(rows: list[Row], device: DeviceSpec, compute: float, memory: float) -> np.ndarray:
    """The roofline's seconds of each row at these efficiencies (Roofs.kernel's formula)."""
    flops = np.array([r.flops for r in rows]) / (device.bf16_tflops * 1e12 * compute)
    nbytes = np.array([r.nbytes for r in rows]) / (device.memory_bandwidth_gbps * 1e9 * memory)
    return np.sqrt(flops * flops + nbytes * nbytes) + GEMM_LAUNCH_S


def fit(rows: list[Row], device: DeviceSpec) -> tuple[float, float, float]:
    """(compute, memory efficiency, mean |log ratio|) minimising the mean absolute log ratio."""
    measured = np.array([r.seconds for r in rows])
    best = (0.0, 0.0, np.inf)
    for compute in GRID_COMPUTE:
        for memory in GRID_MEMORY:
            loss = float(np.mean(np.abs(np.log(priced(rows, device, compute, memory) / measured))))
            if loss < best[2]:
                best = (float(compute), float(memory), loss)
    return best


def report_device(perf: Path, hardware: str, device_id: str) -> None:
    device = DEVICES[device_id]
    rows = [row for model_id, folder, tps, _ in PROFILED[(hardware, device_id)] for tp in tps
            for row in kernel_rows(perf, hardware, model_id, folder, tp)]
    gemms = [r for r in rows if "attention" not in r.key]
    attention = [r for r in rows if "attention" in r.key]
    gemm_fit, attention_fit = fit(gemms, device), fit(attention, device)
    catalog = (device.compute_efficiency, device.memory_efficiency)
    print(f"== {device_id}: catalog compute / memory efficiency {catalog[0]} / {catalog[1]}")
    print(f"   fitted to {len(gemms)} GEMM rows: {gemm_fit[0]:.2f} / {gemm_fit[1]:.2f} (mean |log ratio| "
          f"{gemm_fit[2]:.3f}); to {len(attention)} decode attention rows: memory {attention_fit[1]:.2f} "
          f"({attention_fit[2]:.3f})")
    print("   median priced / measured: at the catalog's | at the fit (GEMMs: the GEMM fit; attention: its own)")
    for key in dict.fromkeys(r.key for r in rows):
        group = [r for r in rows if r.key == key]
        measured = np.array([r.seconds for r in group])
        own = attention_fit if "attention" in key else gemm_fit
        print(f"   {key:42s} {np.median(priced(group, device, *catalog) / measured):6.3f} | "
              f"{np.median(priced(group, device, own[0], own[1]) / measured):6.3f}")


def _interp(table: dict[int, float], x: float) -> float:
    keys = sorted(table)
    return float(np.interp(x, keys, [table[k] for k in keys]))


class KernelStep:
    """The sum of LLMServingSim's measured kernels of a decode-only step (microseconds)."""

    def __init__(self, base: Path, layers: int, hidden: int, tp: int) -> None:
        self.layers, self.hidden, self.tp = layers, hidden, tp
        self.dense: dict[str, dict[int, float]] = {}
        for r in read_csv(base / "dense.csv"):
            self.dense.setdefault(r["layer"], {})[int(r["tokens"])] = float(r["time_us"])
        self.per_sequence: dict[str, dict[int, float]] = {}
        for r in read_csv(base / "per_sequence.csv"):
            self.per_sequence.setdefault(r["layer"], {})[int(r["sequences"])] = float(r["time_us"])
        self.attention: dict[int, dict[int, float]] = {}
        for r in read_csv(base / "attention.csv"):
            if r["prefill_chunk"] == "0" and int(r["n_decode"]) > 0:
                self.attention.setdefault(int(r["n_decode"]), {})[int(r["kv_decode"])] = float(r["time_us"])

    def decode_attention(self, n: float, kv: float) -> float:
        counts = sorted(self.attention)
        low, high = max(c for c in counts if c <= n), min(c for c in counts if c >= n)
        at_low, at_high = _interp(self.attention[low], kv), _interp(self.attention[high], kv)
        return at_low if low == high else float(np.interp(n, [low, high], [at_low, at_high]))

    def kernels(self, n: int, kv: float) -> float:
        """Layers x (every dense operator, the norm twice, + decode attention) + LM head + sampler."""
        per_layer = sum(_interp(t, n) for name, t in self.dense.items() if name not in ("embedding", "final_layernorm"))
        per_layer += _interp(self.dense["layernorm"], n) + self.decode_attention(n, kv)
        return self.layers * per_layer + sum(_interp(t, n) for t in self.per_sequence.values())

    def all_reduces(self, n: int) -> float:
        if self.tp == 1:
            return 0.0
        sizes, micros = zip(*NCCL_ALL_REDUCE)
        return 2 * self.layers * float(np.interp(n * self.hidden * 2, sizes, micros))


def decode_seconds(run: Path) -> list[tuple[float, int, float, float]]:
    """(t, requests running, their mean context, measured step ms) of each second without prompt tokens."""
    requests = [json.loads(line) for line in (run / "vllm/requests.jsonl").open()]
    offset = min(r["queued_ts"] - r["arrival_time"] for r in requests)
    start = min(r["arrival_time"] for r in requests) + offset
    out = []
    for row in read_csv(run / "vllm/timeseries.csv"):
        running, generated = int(row["running"]), float(row["gen_throughput"])
        if float(row["prompt_throughput"]) > 0 or running == 0 or generated == 0:
            continue
        now = start + float(row["t"]) - 0.5      # the middle of the second
        context = [r["input_toks"] + r["output_toks"] * (now - r["first_token_ts"])
                   / max(1e-9, r["last_token_ts"] - r["first_token_ts"])
                   for r in requests if r["first_token_ts"] <= now <= r["last_token_ts"]]
        if context:
            out.append((float(row["t"]), running, float(np.mean(context)), running / generated * 1e3))
    return out


def report_steps(perf: Path, runs: Path) -> None:
    for model_id, folder, _tps, run_name in PROFILED[("RTXPRO6000", "rtx-pro-6000")]:
        if run_name is None or not (runs / "RTXPRO6000" / run_name).is_dir():
            continue
        meta = json.loads((runs / "RTXPRO6000" / run_name / "vllm/meta.json").read_text())
        tp = int(meta["engine_kwargs"]["tensor_parallel_size"])
        model = MODELS[model_id]
        step = KernelStep(perf / "RTXPRO6000" / folder / "bf16" / f"tp{tp}", model.num_layers, model.embedding_dim, tp)
        print(f"== RTX PRO 6000 {run_name}, TP {tp}: decode-only seconds (ms a step)")
        print("      t  running  context  measured  kernels  all-reduces  measured - both")
        for t, running, context, measured in decode_seconds(runs / "RTXPRO6000" / run_name):
            kernels, reduces = step.kernels(running, context) / 1e3, step.all_reduces(running) / 1e3
            print(f"   {t:5.0f}  {running:7d}  {context:7.0f}  {measured:8.1f}  {kernels:7.1f}  {reduces:11.1f}  "
                  f"{measured - kernels - reduces:+14.1f}")


BANDS = (8, 16, 32, 48, 64, 80, 96, 112, 128, 256)   # upper ends of the bands of requests in flight


def replay_step_ratios(run: Path, generic_link: bool) -> dict[int, list[float]]:
    """Measured / simulated decode step per band of requests in flight (report 4)."""
    from sim_core.accuracy.layouts import read_folder
    from sim_core.accuracy.replay import scenario_config
    from sim_core.predictor import build_predictor
    from sim_core.predictor.shape import BatchShape

    [measured] = read_folder(run)
    device = measured.scenario["device"]
    overrides = ({"devices": {"generic-link": DEVICES[device].model_copy(update={"link_latency_s": None}).model_dump()},
                  "device": "generic-link"} if generic_link else None)
    config = scenario_config(measured, overrides)
    predictor = build_predictor(config)
    dp = config.cluster.data_parallel_size
    bands: dict[int, list[float]] = {}
    for _t, running, context, step_ms in decode_seconds(run):
        per_rank = max(1, int(round(running / dp)))
        shape = BatchShape(per_rank, per_rank, (), per_rank, int(per_rank * context))
        phases = predictor.breakdown(shape, 0)
        host = sum(v for k, v in phases.items() if k.startswith("cpu_"))
        simulated = predictor.stage_time(shape, 0) - host + phases["cpu_sample"]
        bands.setdefault(min(b for b in BANDS if running <= b), []).append(step_ms / (simulated * 1e3))
    return bands


def report_replay_steps(runs: Path) -> None:
    for name in ("Qwen3-32B", "Qwen3-30B-A3B-Instruct-2507"):
        run = runs / "RTXPRO6000" / name
        if not run.is_dir():
            continue
        print(f"== RTX PRO 6000 {name}: decode-only seconds, measured / the replay's step, median per band of "
              "requests in flight (seconds)")
        for label, generic in (("link latency 20 us a message (catalog)", False), ("generic 8 us a collective", True)):
            bands = replay_step_ratios(run, generic)
            cells = "  ".join(f"<={b}: {np.median(v):.3f} ({len(v)})" for b, v in sorted(bands.items()))
            print(f"   {label}: {cells}")


def report_moe(perf: Path) -> None:
    """Qwen3-30B-A3B's MoE layer (router, experts up, activation, down: all 128 experts on one GPU)
    priced by the roofline at the catalog's efficiencies against the measured fused-MoE layer at the
    number of experts `t` tokens touch (interpolated in the measured activated-expert counts)."""
    from sim_core.config.predictor import RooflinePredictorConfig
    from sim_core.predictor.roofline import RooflinePredictor

    model = MODELS["qwen3-30b-a3b"]
    predictor = RooflinePredictor(model, DEVICES["rtx-pro-6000"], 1, 1, RooflinePredictorConfig())
    base = perf / "RTXPRO6000/Qwen/Qwen3-30B-A3B-Instruct-2507/bf16/tp1"
    measured = {(int(r["tokens"]), int(r["activated_experts"])): float(r["time_us"])
                for r in read_csv(base / "moe.csv")}
    print("== RTX PRO 6000 Qwen3-30B-A3B MoE layer (us): tokens, experts touched, priced, measured, ratio")
    for tokens in sorted({t for t, _ in measured if t >= 8}):
        kernels = predictor.kernel_times(np.array([float(tokens)]))
        names = ("moe_router", "mlp_up_proj", "mlp_act", "mlp_down_proj")
        priced_us = 1e6 * sum(float(kernels[name][0]) for name in names)
        touched = float(ops.touched_experts(tokens, model.num_experts, model.num_experts_per_token, model.num_experts))
        counts = sorted(a for t, a in measured if t == tokens)
        at = float(np.interp(touched, counts, [measured[(tokens, a)] for a in counts]))
        print(f"   {tokens:5d}  {touched:6.1f}  {priced_us:7.1f}  {at:7.1f}  {priced_us / at:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("perf", type=Path, help="LLMServingSim's profiler/perf folder")
    parser.add_argument("--runs", type=Path, default=DEFAULT_RUNS, help="the per-request runs' folder")
    parser.add_argument("--steps-only", action="store_true", help="only report 4 (LSS_PERF is not read)")
    args = parser.parse_args()
    if args.steps_only:
        report_replay_steps(args.runs)
        return 0
    for hardware, device_id in PROFILED:
        report_device(args.perf, hardware, device_id)
    report_moe(args.perf)
    report_steps(args.perf, args.runs)
    report_replay_steps(args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
