"""Stage paths: on a several-stage replica without pipeline runs, a batch is priced through
every stage when it forms (`Simulator.enter_stages`), with one event at its last stage's end;
the results equal those of the stage events simulated one by one (`engine.fast_forward: false`)."""

import numpy as np
import test_properties as random_scenarios
from conftest import column, simulate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from run_agreement import assert_runs_agree

from sim_core.workload import Workload

ONE_SECOND = {"type": "linear", "base_s": 1.0, "per_token_s": 0.0}   # every stage of every batch: 1 s


def test_routing_at_a_batch_end_sees_the_batch_still_running():
    """orca, 2 replicas of 2 stages, least_outstanding, every stage 1 s. Request 0 (one output
    token) arrives at 0 on replica 0: stage 0 runs 0-1, stage 1 runs 1-2, and it finishes at
    2. Request 1 arrives at 2, the instant of that batch end: an arrival is routed before the
    batch end of its instant (the last stage's end queues it behind the routing), so replica 0
    still has one outstanding request and request 1 goes to replica 1 (0-outstanding), where it
    runs 2-3 and 3-4. Both ways of simulating the stages agree."""
    rows = [(0.0, 10, 1), (2.0, 10, 1)]   # (max_model_len 256: orca reserves 16 of the 100 blocks a request)
    for fast_forward in (True, False):
        result = simulate(rows, "orca", predictor=ONE_SECOND, max_model_len=256,
                          cluster={"num_replicas": 2, "pipeline_parallel_size": 2,
                                   "global_scheduler": "least_outstanding"},
                          engine={"fast_forward": fast_forward})
        assert column(result, "replica_id") == [0, 1]
        assert column(result, "completed_at") == [2.0, 4.0]
        spans = sorted((r.replica_id, r.batch_id, r.stage_id, r.start, r.end) for r in result.batch_stages.itertuples())
        assert spans == [(0, 0, 0, 0.0, 1.0), (0, 0, 1, 1.0, 2.0), (1, 0, 0, 2.0, 3.0), (1, 0, 1, 3.0, 4.0)]


def test_a_batch_waits_for_each_busy_stage():
    """vllm, 1 replica of 2 stages, batch cap 2 (one request per micro-batch), every stage 1 s.
    Requests 0 and 1 arrive at 0 and form batches 0 and 1: batch 0 runs stage 0 0-1 and stage 1
    1-2; batch 1 waits for stage 0 until 1, then stage 1 runs it 2-3. Request 0's batch end at 2
    forms its decode (batch 2): stage 0 is free since 2 (2-3), stage 1 busy until 3 (3-4).
    Request 1's decode (batch 3) forms at 3: stage 0 3-4, stage 1 4-5."""
    result = simulate([(0.0, 10, 2), (0.0, 10, 2)], "vllm", predictor=ONE_SECOND,
                      cluster={"pipeline_parallel_size": 2}, scheduler={"batch_size_cap": 2})
    spans = sorted((r.batch_id, r.stage_id, r.start, r.end) for r in result.batch_stages.itertuples())
    assert spans == [(0, 0, 0.0, 1.0), (0, 1, 1.0, 2.0), (1, 0, 1.0, 2.0), (1, 1, 2.0, 3.0),
                     (2, 0, 2.0, 3.0), (2, 1, 3.0, 4.0), (3, 0, 3.0, 4.0), (3, 1, 4.0, 5.0)]
    assert column(result, "completed_at") == [4.0, 5.0]


@st.composite
def stage_path_scenarios(draw):
    """The random scenarios of test_properties on the policies without pipeline runs, on 2 or 4
    stages; half of them with every stage 0.25 s on 2-3 replicas and arrivals on multiples of
    0.25 s, so that batch ends of several replicas and arrivals share instants."""
    config, workload = draw(random_scenarios.scenarios(policies=("vllm", "sarathi", "orca", "vllm_v0")))
    config["cluster"]["pipeline_parallel_size"] = draw(st.sampled_from([2, 4]))
    if draw(st.booleans()):
        config["predictor"] = {"type": "linear", "base_s": 0.25, "per_token_s": 0.0}
        config["cluster"]["num_replicas"] = draw(st.integers(2, 3))
        arrived = np.round(workload.arrived_at * 4) / 4
        workload = Workload(arrived, workload.num_prefill_tokens, workload.num_decode_tokens, "h", n=workload.n)
    return config, workload


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stage_path_scenarios())
def test_stage_paths_agree_with_stage_events(case):
    """Priced paths and stage events simulated one by one, reruns and every record level agree
    (every table, the stage rows and the state events included)."""
    config, workload = case
    assert_runs_agree(config, workload, skip_when_stepwise_fails=True)
