"""Regenerate the silicon predictor's shipped tables from AIConfigurator's measured kernel data.

    python bench/derive_silicon.py [PERF_DB] [--out sim_core/predictor/silicon_data]

PERF_DB (default ../shared/data/silicon/perf_db) is the `perf_db` folder of
ai-dynamo/aiconfigurator @095f58a (Apache-2.0): per system, measured latencies of vLLM's kernels
(GEMM, prefill and decode attention, fused MoE, custom and NCCL all-reduce). For each system
with a catalog device (a100_sxm -> a100-80gb, h100_sxm -> h100-sxm, h200_sxm -> h200,
b200_sxm -> b200, l40s -> l40s) this writes `<device>.npz`: one vLLM version per table (0.14.0
where measured, else the oldest, recorded in the file's `meta`; fp8 and nvfp4 GEMMs from the
newest), bf16, fp8 and (B200) fp4 GEMM grids, context and generation attention grids per head
configuration over a bf16 and an fp8 KV cache, all-reduce by bytes and TP, and balanced bf16
fused-MoE curves; points the database lacks are filled by the predictor's
own interpolation rule. What is kept and why: sim_core/predictor/silicon_derive.py and
docs/design/silicon_predictor.md. The output is deterministic: rerunning on the same data
rewrites the files byte for byte.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim_core.predictor.silicon_derive import SYSTEMS, derive_arrays, write_npz  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("perf_db", nargs="?", default=str(ROOT.parent / "shared/data/silicon/perf_db"))
    parser.add_argument("--out", default=str(ROOT / "sim_core/predictor/silicon_data"))
    args = parser.parse_args()
    perf_db, out = Path(args.perf_db), Path(args.out)
    if not perf_db.is_dir():
        print(f"error: {perf_db}: no such folder (the perf_db of aiconfigurator)", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    for system, device in SYSTEMS.items():
        if not (perf_db / system).is_dir():
            print(f"{system}: not in {perf_db}, skipped")
            continue
        path = out / f"{device}.npz"
        write_npz(path, derive_arrays(perf_db, system))
        print(f"{system} -> {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} "
              f"({path.stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
