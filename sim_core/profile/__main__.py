"""python -m sim_core.profile --model llama-2-7b --device a100-80gb --out profiles/ [--tp 1 2]"""

from __future__ import annotations

import argparse
import sys

from sim_core.catalog import DEVICES, MODELS
from sim_core.errors import ConfigError, SimCoreError
from sim_core.predictor.operators import LayerShape
from sim_core.profile.plan import decode_shapes, prefill_shapes, token_grid
from sim_core.profile.writer import attention_row, mlp_row, profile_folder, write_rows


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sim_core.profile", description=(
        "Measure a model's operators on this GPU with PyTorch; write Vidur-format mlp.csv and attention.csv."))
    parser.add_argument("--model", required=True, choices=sorted(MODELS), help="catalog model id")
    parser.add_argument("--device", required=True, help="catalog id of this GPU (the folder name)")
    parser.add_argument("--out", required=True, help="profiles folder (Vidur layout) to write into")
    parser.add_argument("--tp", type=int, nargs="+", default=[1], help="tensor-parallel shardings to emulate")
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument("--max-batch", type=int, default=128)
    return parser


def profile(args: argparse.Namespace) -> list:
    """Measure and write; returns the written paths."""
    from sim_core.profile.torch_ops import measure_attention, measure_mlp, require_torch

    model = MODELS[args.model]
    if features := model.features_beyond_gqa():      # Vidur's profile layout has standard attention only
        raise ConfigError(f"--model: {args.model} has {' and '.join(features)}; the profiler measures uniform "
                          "layers of standard attention")
    torch = require_torch()
    mlp, attention = [], []
    for tp in args.tp:
        shape = LayerShape.of(model, tp)
        mlp += [mlp_row(model, tp, t, measure_mlp(torch, shape, model.vocab_size // tp, t))
                for t in token_grid(args.max_tokens)]
        attention += [attention_row(model, tp, 1, q, c, True, 16, args.max_model_len,
                                    measure_attention(torch, shape, 1, q, c))
                      for q, c in prefill_shapes(args.max_model_len)]
        attention += [attention_row(model, tp, b, 1, c, False, 16, args.max_model_len,
                                    measure_attention(torch, shape, b, 1, c))
                      for b, c in decode_shapes(args.max_model_len, args.max_batch)]
    folder = profile_folder(args.out, args.device, args.model)
    return [write_rows(folder / "mlp.csv", mlp), write_rows(folder / "attention.csv", attention)]


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.device not in DEVICES:
        print(f"note: device '{args.device}' is not in the catalog; add it under `devices:` in your scenario",
              file=sys.stderr)
    try:
        paths = profile(args)
    except SimCoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("wrote " + ", ".join(map(str, paths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
