"""Predicted step times of one model in 16-bit, with FP8 weights and with an FP8 KV cache.

    python bench/precision_steps.py [--device h100-sxm] [--predictors roofline,silicon]

A Llama-3.1-8B-shaped model (32 layers, 32 query / 8 KV heads of 128, hidden 4096, MLP 14336,
vocabulary 128256), TP 1, one stage: a decode step of 64 requests holding 1,024 cached tokens
each, and a 2,048-token prefill with nothing cached. Prints the stage time and its GPU part (the
stage time less the host's CPU phases, which are the same knobs in every case) in ms, per
predictor and format: bf16 weights and KV cache; fp8 weights (KV auto = bf16); bf16 weights and
an fp8 KV cache; both fp8; fp4 weights. A predictor that cannot price a case (silicon without measured
tables of those formats) prints why.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim_core import ConfigError, parse_config  # noqa: E402
from sim_core.predictor import build_predictor  # noqa: E402
from sim_core.predictor.shape import BatchShape  # noqa: E402

LLAMA_31_8B = {"name": "Llama-3.1-8B", "num_layers": 32, "num_q_heads": 32, "num_kv_heads": 8,
               "embedding_dim": 4096, "mlp_hidden_dim": 14336, "vocab_size": 128256,
               "max_position_embeddings": 131072}
SHAPES = {"decode 64 x 1k": BatchShape(64, 64, (), 64, 64 * 1024),
          "prefill 2k": BatchShape(1, 2048, ((2048, 0),))}
FORMATS = {"bf16": ("bf16", "auto"), "fp8 weights": ("fp8", "auto"), "fp8 KV": ("bf16", "fp8"),
           "fp8 both": ("fp8", "fp8"), "fp4 weights": ("fp4", "auto")}


def scenario(device: str, predictor: str, weight: str, kv: str) -> dict:
    model = {**LLAMA_31_8B, "weight_dtype": weight}
    return {"model": "llama-3.1-8b-shaped", "models": {"llama-3.1-8b-shaped": model}, "device": device,
            "max_model_len": 8192, "cluster": {"kv_cache_dtype": kv}, "predictor": {"type": predictor}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="h100-sxm")
    parser.add_argument("--predictors", default="roofline,silicon")
    args = parser.parse_args()
    print(f"{'predictor':9s} {'formats':12s} {'shape':15s} {'stage ms':>9s} {'GPU ms':>8s}")
    for kind in args.predictors.split(","):
        for label, (weight, kv) in FORMATS.items():
            try:
                predictor = build_predictor(parse_config(scenario(args.device, kind, weight, kv)))
            except ConfigError as exc:
                print(f"{kind:9s} {label:12s} refused: {exc}")
                continue
            for name, shape in SHAPES.items():
                total = predictor.stage_time(shape, 0)
                gpu = total - sum(predictor.cpu_times(shape.num_requests).values())
                print(f"{kind:9s} {label:12s} {name:15s} {total * 1e3:9.3f} {gpu * 1e3:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
