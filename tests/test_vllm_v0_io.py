"""vllm_v0 at the edges: the `n` trace column, the synthetic knob, the KV map's shared and
swapped codes, the KV-copy lane of the Gantt and the Chrome trace, exported files."""

import numpy as np
import pytest
from conftest import cost, scenario
from test_vllm_v0 import COPY, SWAP, run, timeline

from sim_core import TraceError, parse_config, run_simulation
from sim_core.config.policies import policy_config
from sim_core.export.chrome_trace import KV_COPY_TID, chrome_trace
from sim_core.export.files import write_outputs
from sim_core.viz.gantt import pipeline_gantt
from sim_core.viz.kv_blocks import (
    DECODE,
    FREE,
    PREEMPTED,
    SELECTED,
    SHARED,
    replica_frames,
)
from sim_core.workload import ReadOptions, Workload, build_workload, read_trace
from sim_core.workload.trace import write_trace


def _group_run():
    """test_vllm_v0's group scenario: S and G (2 samples) on 8 blocks; G swapped out at t[4]
    (blocks 2, 3, 5, 6, 7) and back in at t[20] (blocks 0, 1, 4, 2, 3)."""
    result = run([(0.0, 8, 20), (0.0, 6, 6)], n=[1, 2], num_blocks=8, preemption_mode="recompute")
    t = timeline(0.0, cost(14), cost(3) + COPY, cost(3), cost(3), cost(1) + 5 * SWAP, *[cost(1)] * 15,
                 cost(2) + 5 * SWAP, cost(2))
    return result, t


def test_the_n_column_is_read_validated_and_written_back(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens,n\n0.0,10,5,4\n0.5,8,2,1\n")
    workload = read_trace(path, ReadOptions()).workload
    assert workload.n.tolist() == [4, 1]
    write_trace(workload, tmp_path / "back.csv")
    assert (tmp_path / "back.csv").read_text().splitlines()[0] == "arrived_at,num_prefill_tokens,num_decode_tokens,n"
    assert read_trace(tmp_path / "back.csv", ReadOptions()).workload.n.tolist() == [4, 1]
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens,n\n0.0,10,5,4\n0.5,8,2,0\n")
    with pytest.raises(TraceError, match=r"row 2 \(line 3\), column 'n': value 0 is below 1 \(parallel samples\)"):
        read_trace(path, ReadOptions())


def test_the_synthetic_knob_adds_an_n_column_and_other_policies_serve_one_sequence():
    small = {"num_requests": 5, "parallel_samples": 3, "prompt_tokens": {"distribution": "fixed", "value": 32},
             "output_tokens": {"distribution": "fixed", "value": 8}}
    config = parse_config(scenario("vllm", workload=small))
    workload = build_workload(config)
    assert workload.n.tolist() == [3] * 5
    result = run_simulation(config, workload)
    assert result.requests["n"].tolist() == [1] * 5
    assert result.summary["output_tokens_per_s"] == 5 * 8 / result.summary["makespan_s"]
    assert any("n column (parallel samples) is read only by vllm_v0" in note for note in result.notes)
    v0 = run_simulation(parse_config(scenario("vllm_v0", workload=small)))
    assert v0.requests["n"].tolist() == [3] * 5 and v0.summary["num_finished"] == 5
    assert v0.summary["output_tokens_per_s"] == 3 * 5 * 8 / v0.summary["makespan_s"]


def test_the_kv_map_shows_shared_blocks_and_blocks_in_transit_to_and_from_cpu():
    """Between the fork and the swap-out G's block 2 is shared by both sequences; while G's
    swap-out copy runs its released blocks still show as swapped (owner G); while its swap-in
    copy runs its new blocks do too; then they are decode blocks again."""
    result, t = _group_run()
    times = np.array([t[2], t[4] + 2 * SWAP, t[20] + 2 * SWAP, t[21]])
    frames = replica_frames(result, 0, times)
    assert frames.owners[0].tolist() == [0, 0, 1, 1, 0, 1, -1, -1]
    assert frames.states[0].tolist() == [DECODE, DECODE, SHARED, DECODE, DECODE, DECODE, FREE, FREE]
    assert frames.owners[1].tolist() == [0, 0, 1, 1, 0, 1, 1, 1]
    assert frames.states[1].tolist() == [DECODE, DECODE] + [PREEMPTED] * 2 + [DECODE] + [PREEMPTED] * 3
    assert frames.owners[2].tolist() == [1, 1, 1, 1, 1, -1, -1, -1]
    assert frames.states[2].tolist() == [PREEMPTED] * 5 + [FREE] * 3
    assert frames.states[3].tolist() == [SHARED] + [DECODE] * 4 + [FREE] * 3
    selected = replica_frames(result, 0, times[3:], selected=1)
    assert selected.states[0].tolist() == [SELECTED] * 5 + [FREE] * 3


def test_the_gantt_and_the_chrome_trace_give_kv_copies_their_own_lane():
    result, t = _group_run()
    figure = pipeline_gantt(result)
    assert list(figure.layout.yaxis.categoryarray) == ["replica 0 / stage 0 / KV copies", "replica 0 / stage 0"]
    bars = {trace.name: trace for trace in figure.data}
    assert set(bars) >= {"swap out (PCIe)", "swap in (PCIe)", "copy-on-write"}
    swap_out = bars["swap out (PCIe)"]
    assert list(swap_out.base) == [t[4]] and list(swap_out.x) == pytest.approx([5 * SWAP], abs=1e-12)
    assert list(bars["copy-on-write"].base) == [t[1]]
    trace = chrome_trace(result)["traceEvents"]
    copies = [e for e in trace if e.get("cat") == "kv_copy"]
    assert [(e["name"], e["tid"], round(e["ts"], 3)) for e in copies] == [
        ("copy 1 blocks (request 1)", KV_COPY_TID, round(t[1] * 1e6, 3)),
        ("swap_out 5 blocks (request 1)", KV_COPY_TID, round(t[4] * 1e6, 3)),
        ("swap_in 5 blocks (request 1)", KV_COPY_TID, round(t[20] * 1e6, 3))]
    assert {"name": "thread_name", "ph": "M", "pid": 0, "tid": KV_COPY_TID,
            "args": {"name": "Stage 0 KV copies"}} in trace


def test_outputs_include_the_kv_copies_and_the_new_request_columns(tmp_path):
    result, t = _group_run()
    paths = write_outputs(result, tmp_path)
    assert tmp_path / "cache_ops.csv" in paths
    assert (tmp_path / "cache_ops.csv").read_text().splitlines() == [
        "replica_id,batch_id,formed_at,request_id,kind,num_blocks,seconds",
        f"0,1,{t[1]},1,copy,1,{COPY}", f"0,4,{t[4]},1,swap_out,5,{5 * SWAP}", f"0,20,{t[20]},1,swap_in,5,{5 * SWAP}"]
    header = (tmp_path / "requests.csv").read_text().splitlines()[0].split(",")
    assert header[-2:] == ["n", "num_swaps"]


def test_only_vllm_v0_reads_its_knobs():
    v0, vidur = policy_config("vllm_v0").model_fields, policy_config("vllm").model_fields
    for knob in ("preemption_mode", "swap_space_gb", "enable_chunked_prefill", "max_num_seqs",
                 "max_num_batched_tokens"):
        assert knob in v0 and knob not in vidur
    assert "watermark_blocks_fraction" in v0 and "max_tokens_in_batch" not in v0


def test_a_workload_without_n_runs_one_sequence_per_request():
    workload = Workload(np.array([0.0]), np.array([4]), np.array([2]), "t")
    result = run_simulation(parse_config(scenario("vllm_v0")), workload)
    assert result.requests["n"].tolist() == [1] and result.batches["request_tokens"].tolist() == [(4,), (1,)]
