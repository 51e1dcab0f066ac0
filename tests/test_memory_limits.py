"""Scenarios that once exhausted the machine, run through the CLI in a subprocess whose address
space is capped (RLIMIT_AS): each either runs cheaply or is refused up front with exit 2 and one
line naming the field, so a regression fails here instead of eating the shared machine."""

import os
import resource
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
ADDRESS_SPACE = 5 * 2**29   # 2.5 GiB: the interpreter, numpy and pandas take well under 1 GiB of it
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _cap_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def run_capped(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=ENV, preexec_fn=_cap_address_space,
                          capture_output=True, text=True, timeout=300)


def cli_run(tmp_path: Path, scenario: dict) -> subprocess.CompletedProcess:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return run_capped(["-m", "sim_core", "run", "--config", str(path)])


def refusal(result: subprocess.CompletedProcess) -> str:
    """The one stderr line of a run refused with exit 2."""
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr[-2000:]
    return lines[0]


def test_a_billion_kv_blocks_with_few_requests_runs_in_little_memory(tmp_path):
    """`list(range(num_blocks))` once grew the server to 23 GB; pools now hold only the ids used."""
    result = cli_run(tmp_path, {"scheduler": {"type": "vllm", "num_blocks": 1_000_000_000},
                                "engine": {"record": "full"}, "workload": {"num_requests": 20}})
    assert result.returncode == 0, result.stderr[-2000:]
    assert "simulated 20 requests" in result.stdout


def test_every_pool_class_of_a_billion_blocks_is_cheap_to_build_and_use():
    """Build each pool with 10^9 blocks, take and free a few blocks: all within the capped space."""
    code = """
from sim_core.entities import Request
from sim_core.memory import BlockPool, CountingBlockPool
from sim_core.memory.block_hash_cache import HashedBlockPool
from sim_core.memory.radix_pool import RadixKvPool
from sim_core.memory.shared_blocks import RefCountedBlockPool
n = 10**9
for pool in (BlockPool(n), RefCountedBlockPool(n), CountingBlockPool(n), HashedBlockPool(n, 16)):
    r = Request(0, 0.0, 8, 4)
    pool.allocate(r, 3)
    pool.free(r)
    pool.check_integrity([])
radix, r = RadixKvPool(n, 16, caching=True), Request(0, 0.0, 8, 4)
radix.admit(r, [], radix.tree.root)
radix.allocate(r, 3)
radix.free(r)
radix.check_integrity([])
print("ok")
"""
    result = run_capped(["-c", code])
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


def test_a_hundred_million_requests_are_refused_before_any_is_generated(tmp_path):
    line = refusal(cli_run(tmp_path, {"workload": {"num_requests": 100_000_000}}))
    assert line.startswith("error: workload.num_requests: 100,000,000 requests, over the limit of 20,000,000 "
                           "requests for one run (estimated peak memory ")
    assert line.endswith("generate fewer, or raise the limit: run with --no-limits")


def test_sglang_with_ten_million_output_tokens_per_request_is_refused(tmp_path):
    """200 requests x 10^7 output tokens: 2 x 10^9 request steps (iteration-by-iteration batches)."""
    line = refusal(cli_run(tmp_path, {
        "scheduler": {"type": "sglang", "num_blocks": 1_000_000}, "max_model_len": 10_000_000,
        "workload": {"num_requests": 200, "output_tokens": {"distribution": "fixed", "value": 10_000_000}}}))
    assert line.startswith("error: workload.num_requests x workload.output_tokens: 200 requests x ")
    assert "over the limit of 16.0 GiB" in line and line.endswith("run with --no-limits")


def test_a_thousand_replicas_serving_twenty_thousand_long_requests_are_refused(tmp_path):
    """1,024 replicas get ~20 requests each, so every request runs alone: one batch row per output
    token, 20,000 x ~2,000 of them (tens of GB at engine.record batches)."""
    line = refusal(cli_run(tmp_path, {
        "cluster": {"num_replicas": 1024}, "max_model_len": 8192,
        "workload": {"num_requests": 20_000, "output_tokens": {"distribution": "uniform", "min": 16, "max": 4000}}}))
    assert line.startswith("error: workload.num_requests x workload.output_tokens: 20,000 requests x ")
    assert "recorded at engine.record 'batches'" in line and "over the limit of 16.0 GiB" in line


def test_generate_and_validate_refuse_a_hundred_million_requests_before_generating_one(tmp_path):
    """`generate` and `validate` check the same budget as `run`, and say how to lift it."""
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump({"workload": {"num_requests": 100_000_000}}))
    for command in (["generate", "--config", str(path), "--out", str(tmp_path / "t.csv")], ["validate", str(path)]):
        line = refusal(run_capped(["-m", "sim_core", *command]))
        assert line.startswith("error: workload.num_requests: 100,000,000 requests, over the limit of 20,000,000")
        assert line.endswith("run with --no-limits")
    assert not (tmp_path / "t.csv").exists()


def test_no_limits_lifts_the_cli_budget():
    """--no-limits makes a command run under no budget; without it the CLI's generous default."""
    from sim_core.cli.main import _parser, limits_of
    from sim_core.engine.budget import Limits

    assert limits_of(_parser().parse_args(["run", "--config", "s.yaml", "--no-limits"])) is None
    assert limits_of(_parser().parse_args(["generate", "--config", "s.yaml", "--out", "t.csv"])) == Limits.cli()
