"""Pipeline runs (engine/pipeline_run.py): FasterTransformer's static batches on two pipeline
stages, fast-forwarded, narrated by hand.

Every case runs one replica with the linear cost model at 0.25 s per stage whatever the batch
(exact in binary, so every instant below is exact), static batches of one request
(`batch_size_cap: 1`), prompts of 4 tokens. Two static batches A (request 0) and B (request 1)
formed at 0 run interleaved: A's iteration j takes stage 0 over [0.5j, 0.5j + 0.25] and stage 1
over [0.5j + 0.25, 0.5j + 0.5]; B's, formed 0.25 s later each time, [0.5j + 0.25, 0.5j + 0.5] and
[0.5j + 0.5, 0.5j + 0.75]. The prompt iteration gives the first output token, so a request with
D output tokens finishes at the end of its iteration D - 1.
"""

from __future__ import annotations

import numpy as np
from run_agreement import assert_runs_agree

from sim_core import parse_config, run_simulation
from sim_core.workload import Workload

CONFIG = {"seed": 0, "max_model_len": 256, "predictor": {"type": "linear", "base_s": 0.25, "per_token_s": 0.0},
          "model": "llama-2-7b", "device": "a100-80gb",
          "cluster": {"num_replicas": 1, "pipeline_parallel_size": 2},
          "scheduler": {"type": "faster_transformer", "block_size": 16, "num_blocks": 64, "batch_size_cap": 1}}


def _run(workload: Workload, fast_forward: bool):
    """The result and how many events the kernel handled."""
    events = [0]

    def count(_simulator) -> None:
        events[0] += 1
    config = parse_config({**CONFIG, "engine": {"fast_forward": fast_forward, "record": "full"}})
    return run_simulation(config, workload, after_event=count), events[0]


def test_full_pipeline_runs_past_an_arrival_and_counts_it_waiting():
    """Requests 0 and 1 (41 and 21 output tokens) arrive at 0; request 2 (3 tokens) at 5.1.

    A ends iteration j at 0.5j + 0.5, so request 0 finishes at 0.5 * 40 + 0.5 = 20.5; B ends
    iteration j at 0.5j + 0.75: request 1 finishes at 10.75. With the pipeline full, request 2
    waits: the run formed at 0.75 (A on stage 1, B's first decode batch entering stage 0) goes on
    past 5.1 to B's last iteration, and the time series counts one waiting request at every batch
    end from 5.25 to 10.5 (after B's end at 10.75 request 2 forms a static batch: its prompt over
    [10.75, 11.0] and [11.0, 11.25], then two decode iterations, finishing at 12.25). Fast-forward
    handles far fewer events than stepwise simulation, with identical tables."""
    workload = Workload(np.array([0.0, 0.0, 5.1]), np.array([4, 4, 4]), np.array([41, 21, 3]), "h")
    fast, fast_events = _run(workload, True)
    _, stepwise_events = _run(workload, False)
    requests = fast.requests.set_index("request_id")
    assert requests["completed_at"].tolist() == [20.5, 10.75, 12.25]
    assert requests["prefill_completed_at"].tolist() == [0.5, 0.75, 11.25]
    assert requests["tbt_max"].tolist() == [0.5, 0.5, 0.5]
    assert requests["scheduled_at"].tolist() == [0.0, 0.0, 10.75]
    series = fast.timeseries
    during = series[(series["time"] > 5.1) & (series["time"] < 10.75)]
    # A and B end a batch every 0.25 s from 5.25 to 10.5: 22 batch ends, two rows each (after the
    # batch end, after the formation)
    assert len(during) == 2 * 22 and (during["num_waiting"] == 1).all()
    assert fast_events * 5 < stepwise_events
    assert_runs_agree(CONFIG, workload)


def test_an_arrival_with_room_in_the_pipeline_cuts_the_run():
    """Request 0 (41 tokens) alone, request 1 (5 tokens) arrives at 3.1: the pipeline has room,
    so request 1 forms a static batch at once and the run of A is cut at 3.1. A's iteration 6
    holds stage 0 over [3.0, 3.25], so the new batch (id 7, after A's iterations 0-6) waits and
    runs its prompt over [3.25, 3.5] and [3.5, 3.75]; A's iteration 7, formed at 3.5, takes
    stage 0 as it frees. Request 1 then ends an iteration every 0.5 s: it finishes at 3.75 +
    4 * 0.5 = 5.75; request 0 still at 20.5."""
    workload = Workload(np.array([0.0, 3.1]), np.array([4, 4]), np.array([41, 5]), "h")
    fast, _ = _run(workload, True)
    requests = fast.requests.set_index("request_id")
    assert requests["completed_at"].tolist() == [20.5, 5.75]
    assert requests["prefill_completed_at"].tolist() == [0.5, 3.75]
    stages = fast.batch_stages
    new = stages[stages["batch_id"] == 7]
    assert new[["stage_id", "start", "end"]].values.tolist() == [[0, 3.25, 3.5], [1, 3.5, 3.75]]
    batches = fast.batches.set_index("batch_id")
    assert batches.loc[7, "formed_at"] == 3.1 and batches.loc[7, "request_ids"] == (1,)
    assert batches.loc[8, "formed_at"] == 3.5 and batches.loc[8, "request_ids"] == (0,)
    assert_runs_agree(CONFIG, workload)


def test_four_stages_with_two_static_batches_of_different_sizes():
    """Four stages, static batches of two (`batch_size_cap: 2`) whose members finish at
    different iterations: A (requests 0, 1) and B (2, 3), formed at 0, leave two stages idle at
    any time. A's iteration j runs stage k over [j + 0.25k, j + 0.25(k + 1)] (the pipeline is
    1 s deep), B's 0.25 s behind, so A ends iteration j at j + 1 and B at j + 1.25: request 0 (3
    tokens) finishes at 3.0, request 1 (30) at 30.0, requests 2 (20) and 3 (7) at 20.25 and
    7.25. The four requests reserve all 64 blocks, so no arrival could join: the run goes on
    until A's last iteration. Stepwise and fast-forwarded tables are identical."""
    config = {**CONFIG, "cluster": {"num_replicas": 1, "pipeline_parallel_size": 4},
              "scheduler": {**CONFIG["scheduler"], "batch_size_cap": 2}}
    workload = Workload(np.zeros(4), np.array([4, 4, 4, 4]), np.array([3, 30, 20, 7]), "h")
    result = run_simulation(parse_config({**config, "engine": {"record": "full"}}), workload)
    assert result.requests.set_index("request_id")["completed_at"].tolist() == [3.0, 30.0, 20.25, 7.25]
    assert_runs_agree(config, workload)
