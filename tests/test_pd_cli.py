"""The CLI runs a P/D-disaggregated scenario over a trace of closed-loop sessions."""

import pandas as pd
from test_cli import cli

SCENARIO = """
model: llama-2-7b
device: a100-80gb
max_model_len: 1024
predictor: {type: linear, base_s: 0.01, per_token_s: 0.001}
scheduler: {type: vllm, num_blocks: 100}
disaggregation: {enabled: true, link_bandwidth_gb_s: 100, link_latency_s: 0.002, decode: {num_replicas: 2}}
workload: {trace_file: chat.csv, sessions: {closed_loop: true}}
"""
# session 7 has two turns 4 s apart in the trace; session 9 one turn
TRACE = ("arrived_at,num_prefill_tokens,num_decode_tokens,session_id,turn\n"
         "0.0,100,5,7,0\n0.5,20,2,9,0\n4.0,150,3,7,1\n")


def test_validate_and_run_a_disaggregated_closed_loop_trace(tmp_path):
    (tmp_path / "s.yaml").write_text(SCENARIO)
    (tmp_path / "chat.csv").write_text(TRACE)
    checked = cli("validate", tmp_path / "s.yaml")
    assert checked.returncode == 0, checked.stderr
    assert "vllm on 1 prefill + 2 decode x llama-2-7b (a100-80gb), 100/100 KV blocks" in checked.stdout
    done = cli("run", "--config", tmp_path / "s.yaml", "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert "P/D disaggregated: 1 prefill + 2 decode" in done.stdout
    assert "KV transfers: 3 over 100 GB/s + 0.002 s" in done.stdout
    requests = pd.read_csv(tmp_path / "out" / "requests.csv")
    move = 0.002 + 100 * 524_288 / 100e9
    first_done = 0.11 + move + 4 * 0.011          # prefill, transfer, four decode steps
    assert abs(requests["completed_at"][0] - first_done) < 1e-9
    assert requests["arrived_at"][2] == requests["completed_at"][0] + 4.0
    transfers = pd.read_csv(tmp_path / "out" / "transfers.csv")
    assert sorted(transfers["request_id"]) == [0, 1, 2]
    assert sorted(transfers["target_replica"]) == [1, 1, 2]
