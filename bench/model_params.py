"""Parameter counts of the catalog's config.json copies: ours against transformers' own models.

Run with a Python that has transformers and torch (vLLM 0.33.0's environment has both; no GPU,
no weights: the models are built on the meta device):

    /path/to/vllm-env/bin/python bench/model_params.py --project-python .venv/bin/python

For each `tests/data/hf_configs/<id>.json` it builds the model transformers would build (the
quantization block dropped: parameters, not bytes), counts its parameters (a multimodal model's
vision tower and projector apart) and prints them next to what `memory/model_bytes.py` counts
for the same file in bf16 (`stage_weight_bytes` / 2 at TP 1). Never imported by the tests.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "tests" / "data" / "hf_configs"
OURS = """
import json, sys
from sim_core.catalog import load_hf_config
from sim_core.memory.model_bytes import stage_weight_bytes
counts = {}
for path in sys.argv[1:]:
    spec = load_hf_config(path)
    bf16 = spec.model_copy(update={"weight_dtype": "bf16", "attention_weight_dtype": None})
    counts[path] = [stage_weight_bytes(bf16, 1, 1, 0) / 2, spec.encoder_params]
print(json.dumps(counts))
"""


def transformers_count(path: Path) -> tuple[int, int]:
    """(all parameters, those of the vision tower and projector) of the model transformers builds."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

    fields = json.loads(path.read_text())
    fields.pop("quantization_config", None)
    config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    builder = AutoModelForImageTextToText if "vision_config" in fields else AutoModelForCausalLM
    with torch.device("meta"):
        model = builder.from_config(config)
    named = list(model.named_parameters())
    vision = sum(p.numel() for n, p in named if "vision" in n or "multi_modal_projector" in n)
    return sum(p.numel() for _, p in named), vision


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--project-python", default=str(ROOT / ".venv" / "bin" / "python"))
    args = parser.parse_args()
    paths = sorted(CONFIGS.glob("*.json"))
    ours = json.loads(subprocess.run([args.project_python, "-c", OURS, *map(str, paths)], cwd=ROOT, check=True,
                                     capture_output=True, text=True).stdout)
    print(f"{'config':20s} {'transformers':>16s} {'ours':>16s} {'difference':>12s}  vision (theirs / ours)")
    for path in paths:
        total, vision = transformers_count(path)
        counted, encoder = ours[str(path)]
        difference = int(counted) - total
        print(f"{path.stem:20s} {total:>16,} {int(counted):>16,} {difference:>+12,}  {vision:,} / {encoder:,}",
              flush=True)


if __name__ == "__main__":
    sys.exit(main())
