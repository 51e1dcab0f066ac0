"""Outputs are atomic and self-describing: `run --out` writes a manifest, removes what an earlier
run left and it did not rewrite, refuses a foreign folder, and a write that fails (a real
`File too large` from RLIMIT_FSIZE) names the file in one line and leaves no partial file;
`generate` does the same for its trace; `run --json` is strict JSON; error lines are bounded."""

import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import GOOD, TRACE, cli
from test_pd_cli import SCENARIO as PD_SCENARIO
from test_pd_cli import TRACE as PD_TRACE

from sim_core.export import OutputError, read_manifest, write_atomic

ROOT = Path(__file__).resolve().parents[1]
PLAIN_FILES = ["batch_stages.csv", "batches.csv", "chrome_trace.json", "manifest.json", "operators.csv",
               "requests.csv", "summary.json", "timeseries.csv"]
SYNTHETIC = """
name: fifty
seed: 7
model: llama-2-7b
device: a100-80gb
max_model_len: 1024
predictor: {type: linear}
workload: {num_requests: 50}
"""
ONE_TOKEN_OUTPUTS = """
model: llama-2-7b
device: a100-80gb
max_model_len: 1024
predictor: {type: linear}
workload: {num_requests: 5, output_tokens: {distribution: fixed, value: 1}}
"""


def limited_cli(*args, max_file_bytes: int, max_memory_bytes: int = 3 << 30):
    """The CLI with files capped at `max_file_bytes` (a write past it fails with EFBIG, as SIGXFSZ
    is ignored) and its address space capped (a regression fails instead of eating memory)."""
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))
        resource.setrlimit(resource.RLIMIT_AS, (max_memory_bytes, max_memory_bytes))
    return subprocess.run([sys.executable, "-m", "sim_core", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, preexec_fn=limit, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})


def listing(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


def test_the_manifest_lists_every_file_with_its_size_and_sha256(tmp_path):
    """The manifest names the scenario and seed and lists each written file, no other, with its
    exact size and hash; a second run into the same folder gives the same bytes."""
    (tmp_path / "s.yaml").write_text(SYNTHETIC)
    assert cli("run", "--config", tmp_path / "s.yaml", "--out", tmp_path / "out").returncode == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert {k: manifest[k] for k in ("written_by", "scenario", "seed", "complete")} == {
        "written_by": "sim_core run", "scenario": "fifty", "seed": 7, "complete": True}
    assert sorted(manifest["files"]) == [name for name in PLAIN_FILES if name != "manifest.json"]
    for name, entry in manifest["files"].items():
        data = (tmp_path / "out" / name).read_bytes()
        assert entry == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    before = {name: (tmp_path / "out" / name).read_bytes() for name in PLAIN_FILES}
    assert cli("run", "--config", tmp_path / "s.yaml", "--out", tmp_path / "out").returncode == 0
    assert {name: (tmp_path / "out" / name).read_bytes() for name in PLAIN_FILES} == before


def test_a_rerun_removes_the_earlier_runs_files_it_does_not_write_and_keeps_the_users(tmp_path):
    """A P/D run writes transfers.csv; a plain run into its folder removes it, keeps a file the
    user added, and its manifest lists only its own files."""
    (tmp_path / "pd.yaml").write_text(PD_SCENARIO)
    (tmp_path / "chat.csv").write_text(PD_TRACE)
    (tmp_path / "plain.yaml").write_text(GOOD)
    (tmp_path / "trace.csv").write_text(TRACE)
    out = tmp_path / "out"
    assert cli("run", "--config", tmp_path / "pd.yaml", "--out", out).returncode == 0
    assert listing(out) == sorted([*PLAIN_FILES, "transfers.csv"])
    (out / "my notes.txt").write_text("mine")
    done = cli("run", "--config", tmp_path / "plain.yaml", "--out", out)
    assert done.returncode == 0, done.stderr
    assert listing(out) == sorted([*PLAIN_FILES, "my notes.txt"])
    assert "transfers.csv" not in read_manifest(out)["files"]


def test_a_folder_with_other_files_and_no_manifest_is_refused_before_the_run(tmp_path):
    """Without --overwrite nothing runs and nothing is written; with it the outputs are written
    and the user's file is kept."""
    (tmp_path / "s.yaml").write_text(GOOD)
    (tmp_path / "trace.csv").write_text(TRACE)
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    refused = cli("run", "--config", tmp_path / "s.yaml", "--out", out)
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == (f"error: {out}: folder is not empty (1 entries, e.g. notes.txt) and holds no "
                              "manifest.json of an earlier run; choose an empty or new folder, or pass --overwrite "
                              "(files of the same names are replaced, others kept)\n")
    assert listing(out) == ["notes.txt"]
    done = cli("run", "--config", tmp_path / "s.yaml", "--out", out, "--overwrite")
    assert done.returncode == 0, done.stderr
    assert listing(out) == sorted([*PLAIN_FILES, "notes.txt"]) and (out / "notes.txt").read_text() == "mine"


def test_a_foreign_manifest_json_does_not_make_a_folder_ours(tmp_path):
    """A manifest.json we did not write (no written_by) is another file: the folder is refused."""
    (tmp_path / "s.yaml").write_text(GOOD)
    (tmp_path / "trace.csv").write_text(TRACE)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "manifest.json").write_text('{"name": "my web app", "files": {}}')
    refused = cli("run", "--config", tmp_path / "s.yaml", "--out", tmp_path / "out")
    assert refused.returncode == 2 and "holds no manifest.json of an earlier run" in refused.stderr
    assert (tmp_path / "out" / "manifest.json").read_text() == '{"name": "my web app", "files": {}}'


def test_a_hand_edited_manifest_cannot_make_a_run_remove_other_files(tmp_path):
    """Only names a run can write are ever removed, whatever an earlier manifest lists."""
    (tmp_path / "s.yaml").write_text(GOOD)
    (tmp_path / "trace.csv").write_text(TRACE)
    out = tmp_path / "out"
    assert cli("run", "--config", tmp_path / "s.yaml", "--out", out).returncode == 0
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["files"].update({"precious.txt": None, "../s.yaml": None})
    (out / "manifest.json").write_text(json.dumps(manifest))
    (out / "precious.txt").write_text("keep me")
    assert cli("run", "--config", tmp_path / "s.yaml", "--out", out).returncode == 0
    assert listing(out) == sorted([*PLAIN_FILES, "precious.txt"]) and (tmp_path / "s.yaml").is_file()


def test_temporary_files_left_by_a_killed_run_are_cleaned_up(tmp_path):
    """A folder holding only a killed run's temporary file counts as empty, and loses it."""
    (tmp_path / "s.yaml").write_text(GOOD)
    (tmp_path / "trace.csv").write_text(TRACE)
    out = tmp_path / "out"
    out.mkdir()
    (out / ".requests.csv.tmp-99999").write_text("request_id,arr")
    done = cli("run", "--config", tmp_path / "s.yaml", "--out", out)
    assert done.returncode == 0, done.stderr
    assert listing(out) == PLAIN_FILES


def test_a_file_too_large_names_the_file_and_leaves_no_partial_file(tmp_path):
    """With files capped at 2,000 bytes requests.csv cannot be written: one line naming it,
    exit 2, no requests.csv and no temporary file, a manifest marked incomplete."""
    (tmp_path / "s.yaml").write_text(SYNTHETIC)
    out = tmp_path / "out"
    done = limited_cli("run", "--config", tmp_path / "s.yaml", "--out", out, max_file_bytes=2_000)
    assert (done.returncode, done.stderr) == (2, f"error: cannot write {out / 'requests.csv'}: File too large\n")
    assert listing(out) == ["manifest.json"]
    manifest = read_manifest(out)
    assert manifest["complete"] is False and "requests.csv" in manifest["files"]


def test_a_failed_rerun_leaves_the_earlier_file_whole(tmp_path):
    """The earlier run's chrome_trace.json (the largest file) stays byte for byte when the rerun
    cannot write its own; the files written before it are the rerun's."""
    (tmp_path / "s.yaml").write_text(SYNTHETIC)
    out = tmp_path / "out"
    assert cli("run", "--config", tmp_path / "s.yaml", "--out", out).returncode == 0
    trace = (out / "chrome_trace.json").read_bytes()
    (tmp_path / "s.yaml").write_text(SYNTHETIC.replace("seed: 7", "seed: 8"))
    done = limited_cli("run", "--config", tmp_path / "s.yaml", "--out", out, max_file_bytes=len(trace) // 2)
    assert (done.returncode, done.stderr) == (2, f"error: cannot write {out / 'chrome_trace.json'}: File too large\n")
    assert (out / "chrome_trace.json").read_bytes() == trace
    assert listing(out) == PLAIN_FILES
    assert read_manifest(out)["seed"] == 8 and read_manifest(out)["complete"] is False


def test_a_complete_run_after_a_failed_one_cleans_the_folder(tmp_path):
    """The incomplete manifest of a failed run lets the next run into the folder without
    --overwrite, and that run's manifest is complete."""
    (tmp_path / "s.yaml").write_text(SYNTHETIC)
    out = tmp_path / "out"
    assert limited_cli("run", "--config", tmp_path / "s.yaml", "--out", out, max_file_bytes=2_000).returncode == 2
    done = cli("run", "--config", tmp_path / "s.yaml", "--out", out)
    assert done.returncode == 0, done.stderr
    assert listing(out) == PLAIN_FILES and read_manifest(out)["complete"] is True


def test_generate_leaves_no_partial_trace(tmp_path):
    """A trace larger than the file cap is not written at all, and an existing trace of that
    name keeps its content."""
    (tmp_path / "s.yaml").write_text(SYNTHETIC)
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "trace.csv"
    done = limited_cli("generate", "--config", tmp_path / "s.yaml", "--out", target, max_file_bytes=500)
    assert (done.returncode, done.stderr) == (2, f"error: cannot write {target}: File too large\n")
    assert listing(tmp_path / "out") == []
    target.write_text("old trace\n")
    done = limited_cli("generate", "--config", tmp_path / "s.yaml", "--out", target, max_file_bytes=500)
    assert done.returncode == 2 and target.read_text() == "old trace\n" and listing(tmp_path / "out") == ["trace.csv"]
    done = cli("generate", "--config", tmp_path / "s.yaml", "--out", target)
    assert done.returncode == 0 and target.read_text().count("\n") == 51


def test_write_atomic_names_the_file_it_cannot_write(tmp_path):
    """A folder that cannot be made (a file is in the way) is an OutputError naming the file."""
    (tmp_path / "blocker").write_text("")
    with pytest.raises(OutputError) as raised:
        write_atomic(tmp_path / "blocker" / "x.csv", "a,b\n")
    assert str(raised.value) == f"cannot write {tmp_path / 'blocker' / 'x.csv'}: File exists"
    assert listing(tmp_path) == ["blocker"]


def test_run_json_is_strict_json_with_null_for_missing_samples(tmp_path):
    """Every request has one output token, so there is no TBT sample: null, not NaN."""
    (tmp_path / "s.yaml").write_text(ONE_TOKEN_OUTPUTS)
    done = cli("run", "--config", tmp_path / "s.yaml", "--json")
    assert done.returncode == 0, done.stderr

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")
    summary = json.loads(done.stdout, parse_constant=refuse)
    assert (summary["tbt_p50_s"], summary["tbt_p99_s"], summary["num_finished"]) == (None, None, 5)


def test_a_huge_value_is_not_echoed_in_full(tmp_path):
    """A 30 MB cell in a trace gives one short error line: the reader echoes 60 characters of it."""
    cell = "9" * 30_000_000 + "x"
    (tmp_path / "big.csv").write_text(f"arrived_at,num_prefill_tokens,num_decode_tokens\n0,{cell},5\n")
    done = limited_cli("validate", tmp_path / "big.csv", max_file_bytes=1 << 30)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    line = done.stderr.rstrip("\n")
    assert line == (f"error: {tmp_path / 'big.csv'}, row 1 (line 2), column 'num_prefill_tokens': "
                    f"value '{'9' * 57}...' is not a number")


def test_a_link_in_the_output_folder_is_replaced_not_followed(tmp_path):
    """requests.csv as a symbolic link to a file elsewhere: the run replaces the link with its
    own file and the file it pointed to keeps its content."""
    (tmp_path / "s.yaml").write_text(GOOD)
    (tmp_path / "trace.csv").write_text(TRACE)
    out = tmp_path / "out"
    assert cli("run", "--config", tmp_path / "s.yaml", "--out", out).returncode == 0
    (tmp_path / "elsewhere.txt").write_text("not yours")
    (out / "requests.csv").unlink()
    (out / "requests.csv").symlink_to(tmp_path / "elsewhere.txt")
    assert cli("run", "--config", tmp_path / "s.yaml", "--out", out).returncode == 0
    assert (tmp_path / "elsewhere.txt").read_text() == "not yours"
    assert not (out / "requests.csv").is_symlink() and (out / "requests.csv").read_text().startswith("request_id,")
