"""Golden outputs: every teaching preset and every sample scenario, run with `record: full`, writes
exactly the files it wrote when this snapshot was taken (sha256 of each table, the summary and the
Chrome trace, plus the block events the KV views replay).

This pins behaviour while code moves (a refactor must leave every byte in place). When a change
is *meant* to alter results, regenerate with `UPDATE_GOLDEN=1 python -m pytest
tests/test_golden_outputs.py` and say in the commit why the numbers moved.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sim_core import parse_config, run_simulation
from sim_core.export import write_outputs
from sim_core.scenarios.presets import PRESETS

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).parent / "data" / "golden_outputs.json"
SAMPLES = sorted((ROOT / "sample_traces").glob("*.yaml"))
CASES = {f"preset: {p.name}": p.scenario for p in PRESETS} | {
    f"sample: {path.name}": yaml.safe_load(path.read_text()) for path in SAMPLES}


def digests(scenario: dict, folder: Path) -> dict[str, str]:
    """sha256 of every output file of the scenario's run at record level full (manifest aside:
    it lists these same digests) and of its block events."""
    scenario = copy.deepcopy(scenario)
    scenario.setdefault("engine", {})["record"] = "full"
    result = run_simulation(parse_config(scenario, base_dir=ROOT / "sample_traces"))
    write_outputs(result, folder)
    found = {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
             for path in sorted(folder.iterdir()) if path.name != "manifest.json"}
    found["block_events"] = hashlib.sha256(result.block_events.to_csv(index=False).encode()).hexdigest()
    return found


@pytest.mark.parametrize("name", sorted(CASES))
def test_outputs_are_byte_identical_to_the_snapshot(name, tmp_path):
    found = digests(CASES[name], tmp_path)
    if os.environ.get("UPDATE_GOLDEN") == "1":
        snapshot = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
        snapshot[name] = found
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(dict(sorted(snapshot.items())), indent=1) + "\n")
        return
    assert found == json.loads(GOLDEN.read_text())[name]


def test_the_snapshot_covers_every_preset_and_sample():
    """A new preset or sample needs its snapshot (UPDATE_GOLDEN=1); a removed one leaves none."""
    assert set(json.loads(GOLDEN.read_text())) == set(CASES)


@pytest.mark.parametrize("machine", [{"OPENBLAS_CORETYPE": "Prescott"}, {"OPENBLAS_CORETYPE": "Haswell"},
                                     {"NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL"}])
def test_the_bytes_do_not_depend_on_the_processor(machine, tmp_path):
    """OpenBLAS picks its dot kernel by the processor, and numpy its log / exp by whether the
    processor has AVX-512; their results differ in the last bit (the snapshot once held only on
    machines with OpenBLAS's SkylakeX kernel). Forced to another BLAS kernel (the x86 baseline,
    AVX2's) or to numpy's AVX2 paths, a run with time-weighted summaries, silicon-priced
    operators and their totals writes the same bytes (`sim_core/portable_math.py`)."""
    name = "sample: sessions.yaml"
    script = ("import json, sys; from pathlib import Path; sys.path.insert(0, 'tests');"
              "from test_golden_outputs import CASES, digests;"
              f"print(json.dumps(digests(CASES[{name!r}], Path(sys.argv[1]))))")
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=ROOT, env={**os.environ, **machine},
                         capture_output=True, text=True, check=True, timeout=300).stdout
    assert json.loads(out) == json.loads(GOLDEN.read_text())[name]
