"""The Chrome trace's request tracks (issue 19 item 14): a thread per request under a Requests
process with its phases nested in its life, and flow arrows to the batches that ran its prompt."""

import json

import pytest
from app_helpers import TINY
from conftest import simulate

from sim_core import parse_config, run_simulation
from sim_core.export import chrome_trace, trace_file_name
from sim_core.export.request_tracks import REQUESTS_PID
from sim_core.scenarios.defaults import DEFAULT_SCENARIO
from sim_core.scenarios.presets import preset


def on_thread(events, request):
    return [e for e in events if e["pid"] == REQUESTS_PID and e["tid"] == request and e["ph"] != "M"]


def test_each_request_has_a_named_thread_with_its_life_and_phases():
    """Two 10-token prompts in one batch: each request's thread is "request #N"; its life runs from
    arrival to completion and its waiting, prefill and decode phases tile it in order."""
    result = simulate([(0.0, 10, 3), (0.5, 10, 3)], scheduler={"batch_size_cap": 4})
    events = json.loads(json.dumps(chrome_trace(result)))["traceEvents"]
    threads = {e["tid"]: e["args"]["name"] for e in events
               if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == REQUESTS_PID}
    assert threads == {0: "request #0", 1: "request #1"}
    assert [e["args"]["name"] for e in events if e["name"] == "process_name"][-1] == "Requests"
    for request, row in result.requests.set_index("request_id").iterrows():
        spans = [e for e in on_thread(events, request) if e["ph"] == "X"]
        life = spans[0]
        assert (life["name"], life["ts"]) == (f"request #{request}", pytest.approx(row["arrived_at"] * 1e6))
        assert life["ts"] + life["dur"] == pytest.approx(row["completed_at"] * 1e6)
        phases = [(e["name"], e["ts"], e["ts"] + e["dur"]) for e in spans[1:]]
        expected = [("waiting", row["arrived_at"], row["scheduled_at"]),
                    ("prefill", row["scheduled_at"], row["prefill_completed_at"]),
                    ("decode", row["prefill_completed_at"], row["completed_at"])]
        expected = [(name, a * 1e6, b * 1e6) for name, a, b in expected if b > a]
        assert [p[0] for p in phases] == [p[0] for p in expected]
        assert [t for p in phases for t in p[1:]] == pytest.approx([t for p in expected for t in p[1:]])


def test_flow_arrows_lead_from_a_request_to_its_prompt_batches_and_its_first_and_last_decode():
    """Every batch entry of more than one token of a request, and the first and the last of its
    one-token (decode) entries, starts an arrow on its thread at the batch's forming time and ends
    on the batch's first-stage slice (bp e) of its replica."""
    result = run_simulation(parse_config(TINY))
    events = chrome_trace(result)["traceEvents"]
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert starts.keys() == ends.keys() and all(e["bp"] == "e" for e in ends.values())
    batches = result.batches
    entries = [(int(r), int(b), int(t))
               for b, ids, tokens in zip(batches["batch_id"], batches["request_ids"], batches["request_tokens"])
               for r, t in zip(ids, tokens)]
    decodes: dict[int, list[int]] = {}
    for request, batch, tokens in entries:
        if tokens == 1:
            decodes.setdefault(request, []).append(batch)
    expected = sorted([(r, b) for r, b, t in entries if t > 1]
                      + [(r, b) for r, seen in decodes.items() for b in {seen[0], seen[-1]}])
    assert len(expected) > len([t for *_, t in entries if t > 1]) + len(decodes)   # some requests have 2 decodes
    stage0 = {(e["pid"], e["args"]["batch_id"]): e for e in events if e.get("cat") == "batch" and e["tid"] == 0}
    got = []
    for flow, start in starts.items():
        end = ends[flow]
        batch = next(b for (rep, b), e in stage0.items() if rep == end["pid"] and e["ts"] == end["ts"])
        got.append((start["tid"], batch))
        assert start["pid"] == REQUESTS_PID and end["tid"] == 0
    assert sorted(got) == expected


def test_a_restarted_request_shows_its_preempted_spans():
    """With state events (record full) a restart to its next admission is a "preempted" slice."""
    result = run_simulation(parse_config(TINY))
    states = result.state_events
    restarted = states[states["state"] == "restarted"]
    assert len(restarted)
    request = int(restarted["request"].iloc[0])
    mine = states[states["request"] == request]
    times, names = mine["time"].tolist(), mine["state"].astype(str).tolist()
    expected = [(times[i] * 1e6, next(times[j] for j in range(i + 1, len(names)) if names[j] == "admitted") * 1e6)
                for i, name in enumerate(names) if name == "restarted"]
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in on_thread(chrome_trace(result)["traceEvents"], request)
             if e["name"] == "preempted"]
    assert [t for span in spans for t in span] == pytest.approx([t for span in expected for t in span])


def test_the_trace_file_is_named_after_the_scenario():
    """Letters and digits of the name joined by "-", cut at 80 characters; unnamed: chrome_trace.json."""
    assert trace_file_name("default: Llama-2-13B on A100-40GB, 2 replicas, vLLM, 5 req/s") == \
        "default-Llama-2-13B-on-A100-40GB-2-replicas-vLLM-5-req-s.trace.json"
    assert trace_file_name(None) == trace_file_name("::") == "chrome_trace.json"
    assert trace_file_name("x" * 100) == "x" * 80 + ".trace.json"


def overlaps_without_nesting(events) -> list[tuple]:
    """Complete slices ('X') of one thread that overlap without one containing the other: Perfetto
    drops such slices, so a trace it draws whole has none (times in microseconds, 1 ns slack)."""
    by_thread: dict[tuple, list[tuple[float, float, str]]] = {}
    for event in events:
        if event["ph"] == "X":
            by_thread.setdefault((event["pid"], event["tid"]), []).append(
                (event["ts"], event["ts"] + event["dur"], event["name"]))
    bad = []
    for thread, slices in by_thread.items():
        open_ends: list[tuple[float, str]] = []
        for start, end, name in sorted(slices, key=lambda s: (s[0], -s[1])):
            while open_ends and open_ends[-1][0] <= start + 1e-3:
                open_ends.pop()
            if open_ends and end > open_ends[-1][0] + 1e-3:
                bad.append((thread, name, start, end, open_ends[-1]))
            open_ends.append((end, name))
    return bad


def test_a_10000_request_trace_nests_every_slice_and_pairs_every_arrow():
    """The default scenario at 10,000 requests (record full: preemptions included): the trace is
    valid JSON, no slice of a thread overlaps another without nesting in it, every duration is
    finite and non-negative, and every arrow's start has its end on a batch slice that contains it
    on the replica's first stage."""
    config = parse_config({**DEFAULT_SCENARIO, "workload": {**DEFAULT_SCENARIO["workload"], "num_requests": 10_000},
                           "engine": {"record": "full"}})
    result = run_simulation(config)
    events = json.loads(json.dumps(chrome_trace(result)))["traceEvents"]
    assert len({e["tid"] for e in events if e["pid"] == REQUESTS_PID and e["ph"] == "X"}) == 10_000
    assert any(e["name"] == "preempted" for e in events if e["pid"] == REQUESTS_PID)
    assert all(e["dur"] >= 0 and e["dur"] < float("inf") for e in events if e["ph"] == "X")
    assert overlaps_without_nesting(events) == []
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert starts.keys() == ends.keys() and len(starts) > 10_000
    stage0 = {}
    for e in events:
        if e["ph"] == "X" and e.get("cat") == "batch" and e["tid"] == 0:
            stage0.setdefault(e["pid"], set()).add(e["ts"])
    assert all(end["ts"] in stage0[end["pid"]] for end in ends.values())


def test_a_swapped_request_shows_its_swapped_span():
    """vLLM v0 swapping under tight KV (the preset): each swap-out to the next swap-in of a request
    is a "swapped" slice on its thread, nested in its life."""
    scenario = preset("Swap preemption under tight KV (vLLM v0.6, V0 engine)").scenario
    result = run_simulation(parse_config({**scenario, "engine": {"record": "full"}}))
    states = result.state_events
    out = states[states["state"] == "swapped_out"].iloc[0]
    back = states[(states["state"] == "swapped_in") & (states["request"] == out["request"])
                  & (states["time"] >= out["time"])].iloc[0]
    events = chrome_trace(result)["traceEvents"]
    swapped = [e for e in on_thread(events, int(out["request"])) if e["name"] == "swapped"]
    assert swapped[0]["ts"] == pytest.approx(out["time"] * 1e6)
    assert swapped[0]["ts"] + swapped[0]["dur"] == pytest.approx(back["time"] * 1e6)
    assert overlaps_without_nesting(events) == []


def test_the_nesting_check_finds_slices_that_overlap_without_nesting():
    """[0, 10] holds [2, 5] and [5, 10]; [8, 12] crosses the end of [0, 10]."""
    def x(ts, end, name):
        return {"ph": "X", "pid": 1, "tid": 1, "ts": ts, "dur": end - ts, "name": name}
    nested = [x(0, 10, "life"), x(2, 5, "a"), x(5, 10, "b")]
    assert overlaps_without_nesting(nested) == []
    assert [bad[1] for bad in overlaps_without_nesting(nested + [x(8, 12, "c")])] == ["c"]
