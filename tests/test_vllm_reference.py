"""vllm_v1 makes the real vLLM scheduler's decisions: every case under data/vllm_reference/ (the
outputs of vLLM 0.33.0's own Scheduler / AsyncScheduler, driven by bench/vllm_reference.py) is
replayed through run_simulation with the same scenario file, and every step (its requests, their
tokens, when it was formed, started and ended), every preemption (which request, when) and every
request's times must agree to 1e-6 s."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from sim_core import load_config, run_simulation

DATA = Path(__file__).parent / "data" / "vllm_reference"
CASES = sorted(path.stem for path in DATA.glob("*.yaml"))
TOLERANCE_S = 1e-6


def _rows(path: Path) -> list[dict]:
    with path.open() as file:
        return list(csv.DictReader(file))


def _reference_steps(case: str) -> list[tuple]:
    """(formed_at, start, end, [(request, tokens), ...]) per step that ran, in GPU order."""
    steps = []
    for row in _rows(DATA / f"{case}.steps.csv"):
        scheduled = []
        for item in row["scheduled"].split():
            if "-" in item:
                first, last = map(int, item.split("-"))
                scheduled.extend((r, 1) for r in range(first, last + 1))
            else:
                request, _, tokens = item.partition(":")
                scheduled.append((int(request), int(tokens or 1)))
        steps.append((float(row["formed_at"]), float(row["start"]), float(row["end"]), scheduled))
    return steps


def _reference_preemptions(case: str) -> list[tuple[float, int]]:
    """(host time of the schedule() that preempted, request) in preemption order."""
    preemptions = []
    for row in _rows(DATA / f"{case}.steps.csv"):
        for item in row["preempted"].split():
            request, _, time = item.partition("@")
            preemptions.append((float(time or row["formed_at"]), int(request)))
    return preemptions


def _our_steps(result) -> list[tuple]:
    """The same view of our run: batches in the order the GPU runs them."""
    stages = result.batch_stages.set_index("batch_id")
    batches = result.batches.sort_values("batch_id")
    steps = [(float(formed_at), float(stages.loc[batch_id, "start"]), float(stages.loc[batch_id, "end"]),
              [(int(r), int(n)) for r, n in zip(ids, tokens)])
             for batch_id, formed_at, ids, tokens in zip(batches["batch_id"], batches["formed_at"],
                                                         batches["request_ids"], batches["request_tokens"])]
    return sorted(steps, key=lambda step: step[1])


def _our_preemptions(result) -> list[tuple[float, int]]:
    restarts = result.state_events[result.state_events["state"] == "restarted"]
    return [(float(t), int(r)) for t, r in zip(restarts["time"], restarts["request"])]


def _show(step: tuple | None) -> str:
    if step is None:
        return "no step"
    formed, start, end, scheduled = step
    items = " ".join(f"{r}" if n == 1 else f"{r}:{n}" for r, n in scheduled)
    return f"formed {formed:.6f} start {start:.6f} end {end:.6f} [{items}]"


def _same_step(theirs: tuple, ours: tuple) -> bool:
    return all(abs(a - b) <= TOLERANCE_S for a, b in zip(theirs[:3], ours[:3])) and theirs[3] == ours[3]


def replay(case: str, fast_forward: bool = True):
    config = load_config(DATA / f"{case}.yaml")
    config = config.model_copy(update={"engine": config.engine.model_copy(
        update={"record": "full", "fast_forward": fast_forward})})
    return run_simulation(config)


@pytest.mark.parametrize("fast_forward", [True, False], ids=["fast", "stepwise"])
@pytest.mark.parametrize("case", CASES)
def test_steps_match_vllm(case, fast_forward):
    """Step by step, the same requests with the same tokens, formed, started and ended at the
    same times; the first divergent step is named with both batches. Then the same preemptions,
    in the same order, decided at the same times."""
    result = replay(case, fast_forward)
    theirs, ours = _reference_steps(case), _our_steps(result)
    for index in range(max(len(theirs), len(ours))):
        a = theirs[index] if index < len(theirs) else None
        b = ours[index] if index < len(ours) else None
        if a is None or b is None or not _same_step(a, b):
            pytest.fail(f"step {index} differs:\n  vLLM: {_show(a)}\n  ours: {_show(b)}")
    theirs_p, ours_p = _reference_preemptions(case), _our_preemptions(result)
    for index in range(max(len(theirs_p), len(ours_p))):
        a_p = theirs_p[index] if index < len(theirs_p) else None
        b_p = ours_p[index] if index < len(ours_p) else None
        if a_p is None or b_p is None or a_p[1] != b_p[1] or abs(a_p[0] - b_p[0]) > TOLERANCE_S:
            pytest.fail(f"preemption {index} differs: vLLM (time, request) {a_p}, ours {b_p}")


@pytest.mark.parametrize("case", CASES)
def test_requests_match_vllm(case):
    """Every request: the same lengths, times (to 1e-6 s) and number of preemptions."""
    reference = _rows(DATA / f"{case}.requests.csv")
    requests = replay(case).requests
    assert len(requests) == len(reference)
    for row, ours in zip(reference, requests.itertuples()):
        assert (int(row["num_prefill_tokens"]), int(row["num_decode_tokens"])) == \
            (ours.num_prefill_tokens, ours.num_decode_tokens), f"request {row['id']}: the workloads differ"
        for column in ("arrived_at", "scheduled_at", "prefill_completed_at", "completed_at"):
            assert abs(float(row[column]) - getattr(ours, column)) <= TOLERANCE_S, (
                f"request {row['id']}: {column} vLLM {row[column]} ours {getattr(ours, column)}")
        assert int(row["num_preemptions"]) == ours.num_restarts, f"request {row['id']}: preemptions"


def test_the_reference_covers_both_loops_preemptions_priorities_and_evictions():
    """The cases are not trivial: both engine loops, preemptions under each, the priority
    policy, prefix caching with a pool small enough to evict, chunked prompts, a trace slice."""
    scenarios = {case: yaml.safe_load((DATA / f"{case}.yaml").read_text()) for case in CASES}
    preemptions = {case: sum(int(r["num_preemptions"]) for r in _rows(DATA / f"{case}.requests.csv")) for case in CASES}
    loops = {case: s["scheduler"].get("async_scheduling", True) for case, s in scenarios.items()}
    assert len(CASES) >= 12 and set(loops.values()) == {True, False}
    assert any(preemptions[c] and loops[c] for c in CASES) and any(preemptions[c] and not loops[c] for c in CASES)
    assert {s["scheduler"].get("scheduling_policy", "fcfs") for s in scenarios.values()} == {"fcfs", "priority"}
    assert any("shared_prefix" in s["workload"] and s["scheduler"]["num_blocks"] < 500 for s in scenarios.values())
    assert any(s["workload"].get("trace_file", "").endswith("sample_traces/chat.csv") for s in scenarios.values())
    prompt_steps: dict[tuple[str, int], int] = {}   # (case, request) -> steps running more than a token
    for case in CASES:
        for step in _reference_steps(case):
            for request, tokens in step[3]:
                if tokens > 1:
                    prompt_steps[case, request] = prompt_steps.get((case, request), 0) + 1
    assert max(prompt_steps.values()) >= 3   # a prompt chunked over several steps
