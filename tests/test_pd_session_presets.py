"""The P/D and agentic-session presets show the behaviour they teach."""

import numpy as np

from sim_core import parse_config, run_simulation
from sim_core.scenarios.presets import preset
from sim_core.workload import build_workload


def _run(name: str):
    config = parse_config(preset(name).scenario)
    workload = build_workload(config)
    return run_simulation(config, workload), workload


def _overlapping_turns(result, workload) -> int:
    """Turns that arrive before the previous turn of their session completed."""
    requests = result.requests.assign(session=workload.session_id, turn=workload.turn)
    count = 0
    for _, turns in requests.groupby("session"):
        turns = turns.sort_values("turn")
        count += int(np.sum(turns["arrived_at"].to_numpy()[1:] < turns["completed_at"].to_numpy()[:-1]))
    return count


def test_disaggregation_cuts_the_tbt_tail_of_the_colocated_baseline():
    colocated, _ = _run("Colocated prefill and decode (baseline for P/D)")
    disaggregated, _ = _run("P/D disaggregation removes prefill interference")
    assert disaggregated.summary["tbt_p99_s"] < 0.3 * colocated.summary["tbt_p99_s"]
    finished = disaggregated.requests["status"] == "finished"
    multi_token = disaggregated.requests["num_decode_tokens"] > 1
    assert disaggregated.summary["num_transfers"] == int((finished & multi_token).sum())
    decode = disaggregated.batches[disaggregated.batches["replica_id"] == 1]
    assert (decode["num_prefill_tokens"] == 0).all()          # the decode replica never runs a prompt


def test_closed_loop_sessions_never_overlap_and_keep_ttft_low_where_open_loop_floods():
    open_loop, open_workload = _run("Multi-turn chat, open loop")
    closed, closed_workload = _run("Agentic sessions, closed loop")
    assert _overlapping_turns(open_loop, open_workload) > 50
    assert _overlapping_turns(closed, closed_workload) == 0
    assert closed.summary["ttft_p99_s"] < open_loop.summary["ttft_p99_s"] / 5
