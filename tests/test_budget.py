"""The run budget: figures estimated from the scenario (hand-computed here), limits that refuse
with one line naming the field, and runs stopped by their caller or their wall-clock limit."""

from pathlib import Path

import numpy as np
import pytest

from sim_core import SimCoreError, parse_config, run_simulation
from sim_core.engine.budget import BudgetError, Limits, check_budget, count_rows, estimate_cost
from sim_core.engine.cost_estimate import (
    BLOCK_EVENT_BYTES,
    BLOCK_ROW_BYTES,
    GAP_BYTES,
    GIB,
    POOL_BLOCK_BYTES,
    REPLICA_BYTES,
    REQUEST_BYTES,
    RUN_BYTES,
    RUN_STEP_BYTES,
    STAGE_ROW_BYTES,
    STEP_BYTES,
    TRACE_ROW_BYTES,
)
from sim_core.engine.run_watch import MemoryWatch, RunCancelled, RunTimeLimit, StopCheck
from sim_core.memory import plan_memory
from sim_core.results.record import Recorder
from sim_core.scenarios.defaults import DEFAULT_SCENARIO
from sim_core.scenarios.presets import PRESETS
from sim_core.workload import build_workload

ROOT = Path(__file__).resolve().parents[1]
LINEAR = {"type": "linear", "base_s": 0.005, "per_token_s": 0.0001}


def merged(base: dict, changes: dict) -> dict:
    """`base` with `changes` merged in; a length section that names its distribution replaces the
    base's (the knobs of another distribution are not read, so a scenario may not hold them)."""
    out = dict(base)
    for key, value in changes.items():
        deeper = isinstance(value, dict) and isinstance(out.get(key), dict) and "distribution" not in value
        out[key] = merged(out[key], value) if deeper else value
    return out


def scenario(**changes):
    """10 requests of 100 prompt + 20 output tokens, 2 vllm replicas of 100 blocks of 16 tokens."""
    return parse_config(merged({
        "predictor": LINEAR, "scheduler": {"type": "vllm", "num_blocks": 100}, "cluster": {"num_replicas": 2},
        "engine": {"record": "batches"},
        "workload": {"num_requests": 10, "prompt_tokens": {"distribution": "fixed", "value": 100},
                     "output_tokens": {"distribution": "fixed", "value": 20}}}, changes))


def trace(tmp_path: Path, rows: list[tuple], newline_at_end: bool = True) -> str:
    path = tmp_path / "t.csv"
    text = "\n".join(["arrived_at,num_prefill_tokens,num_decode_tokens", *(",".join(map(str, r)) for r in rows)])
    path.write_text(text + ("\n" if newline_at_end else ""))
    return str(path)


# ---- estimates -------------------------------------------------------------------------------


def test_figures_of_a_small_scenario_are_those_computed_by_hand():
    """Each request is 1 prompt step + 20 decode steps = 21 and takes ceil(100/16) + ceil(20/16)
    = 7 + 2 = 9 blocks: 210 steps, 90 blocks taken of the 200 configured (so at most 90 ids
    are ever handed out); events 3 x 210 + 2 x 10; rows: 10 request rows + 4 x 210 batch rows.
    Two replicas at 2 req/s (the sample's arrivals) see about 1 req/s each; a request's 21 steps
    take at least 21 x 5.1 ms (linear: 5 ms + 0.1 ms a token), so Little's law gives about 0.1
    requests at once: each batch likely holds one request, 210 batches, decode runs recording
    them in bulk (RUN_STEP_BYTES each)."""
    estimate = estimate_cost(scenario())
    assert (estimate.num_replicas, estimate.num_blocks_per_replica, estimate.num_kv_blocks) == (2, 100, 200)
    assert (estimate.num_requests, estimate.num_prompt_tokens, estimate.num_output_tokens) == (10, 1000, 200)
    assert (estimate.num_request_steps, estimate.num_block_allocations) == (210, 90)
    assert (estimate.num_events, estimate.num_recorded_rows, estimate.num_trace_rows) == (650, 850, 0)
    assert estimate.num_batches == 210
    assert estimate.peak_bytes == (RUN_BYTES + 2 * REPLICA_BYTES + 10 * REQUEST_BYTES + 210 * RUN_STEP_BYTES
                                   + 200 * GAP_BYTES + 90 * POOL_BLOCK_BYTES)
    assert not estimate.exact and estimate.record == "batches"


def test_record_full_adds_the_block_rows_and_record_requests_keeps_only_token_gaps():
    """full: 2 rows per block taken (90) and about 4 state rows per request on top of 850 rows;
    requests: one row per request, and of the steps only their token gaps."""
    full = estimate_cost(scenario(engine={"record": "full"}))
    requests = estimate_cost(scenario(engine={"record": "requests"}))
    assert full.num_recorded_rows == 850 + 2 * 90 + 4 * 10
    assert full.parts["block_events"] == 90 * BLOCK_EVENT_BYTES
    assert full.parts["request_steps"] == 210 * RUN_STEP_BYTES and full.parts["token_gaps"] == 200 * GAP_BYTES
    assert requests.num_recorded_rows == 10 and requests.parts["request_steps"] == 0
    assert requests.parts["token_gaps"] == 200 * GAP_BYTES


def test_chunked_prompts_count_one_step_per_chunk():
    """sarathi with 64-token chunks runs a 100-token prompt in ceil(100/64) = 2 steps: 10 x (2 + 20)."""
    assert estimate_cost(scenario(scheduler={"type": "sarathi", "chunk_size": 64})).num_request_steps == 220


def test_sglang_outputs_are_cut_where_requests_reach_max_model_len():
    """max_model_len 110 leaves 10 output tokens after a 100-token prompt: 10 x (1 + 10) steps,
    and 7 + ceil(10/16) = 8 blocks each."""
    estimate = estimate_cost(scenario(scheduler={"type": "sglang"}, max_model_len=110))
    assert (estimate.num_output_tokens, estimate.num_request_steps, estimate.num_block_allocations) == (100, 110, 80)


def test_vidur_policies_shorten_prompts_to_fit_max_model_len():
    """max_model_len 64: prompts become 64 - 20 = 44 tokens, ceil(44/16) = 3 blocks + 2 for the output."""
    estimate = estimate_cost(scenario(max_model_len=64))
    assert (estimate.num_prompt_tokens, estimate.num_block_allocations) == (440, 50)


def test_parallel_samples_multiply_the_output_blocks_of_vllm_v0():
    """n = 3 sequences share the prompt's 7 blocks and decode 2 blocks each: 7 + 3 x 2 = 13."""
    estimate = estimate_cost(scenario(scheduler={"type": "vllm_v0"}, workload={"parallel_samples": 3}))
    assert estimate.num_block_allocations == 130


def test_disaggregated_pools_count_both_pools_and_the_prompt_blocks_twice():
    """1 prefill replica of 50 blocks + 2 decode replicas of 80: 210 blocks; a request takes its
    prompt's 7 blocks in the prefill pool, then all its 9 in the decode pool: 10 x 16."""
    estimate = estimate_cost(scenario(disaggregation={"enabled": True, "prefill": {"num_replicas": 1, "num_blocks": 50},
                                                      "decode": {"num_replicas": 2, "num_blocks": 80}}))
    assert (estimate.num_replicas, estimate.num_blocks_per_replica, estimate.num_kv_blocks) == (3, 80, 210)
    assert estimate.num_block_allocations == 160


def test_pipeline_stages_add_stage_rows_and_events_per_step():
    """PP = 2: each batch records 2 stage rows (rows 10 + 5 x 210) and costs 2 + 4 x 2 = 10
    events (stage arrivals, schedules and ends on both stages) instead of 3; batches are recorded
    one by one (no decode runs with pipeline stages)."""
    estimate = estimate_cost(scenario(cluster={"pipeline_parallel_size": 2}))
    assert (estimate.num_recorded_rows, estimate.num_events) == (10 + 5 * 210, 10 * 210 + 2 * 10)
    assert estimate.parts["request_steps"] == 210 * (STEP_BYTES["batches"] + STAGE_ROW_BYTES)


def test_busy_replicas_likely_batch_requests_together():
    """One replica, 10 requests of 21 steps arriving evenly at 100 or 20 req/s (9 gaps over 0.09
    or 0.45 s). Each request spends at least 21 x 5.1 ms in the replica, so Little's law gives
    100 x 21 x 0.0051 = 10.71 requests at once, capped at the 10 requests there are (the KV
    cache holds 100 x 16 / 120 = 13.3): 210 / 10 = 21 batches; at 20 req/s 2.142 at once:
    ceil(210 / 2.142) = ceil(98.04) = 99 batches. Arriving all at once (no rate), the cap: 21."""
    def batches(arrival: dict) -> int | None:
        config = scenario(cluster={"num_replicas": 1}, workload={"arrival": arrival})
        return estimate_cost(config, build_workload(config)).num_batches

    assert batches({"process": "constant", "qps": 100}) == 21
    assert batches({"process": "constant", "qps": 20}) == 99
    assert batches({"process": "constant", "qps": 1e6}) == 21


def test_the_memory_watch_prices_the_rows_the_recorder_holds():
    """record full: the scenario commits RUN + 2 replicas + 10 requests + 200 gaps + 90 block ids
    (its 90 x BLOCK_EVENT_BYTES of block rows are counted as they come instead). The recorder
    then holds 3 batch rows made one by one, 5 made in bulk and 4 block rows."""
    config = scenario(engine={"record": "full"})
    estimate = estimate_cost(config)
    recorder = Recorder("full", 2)
    for batch in range(3):
        recorder.on_batch_row(batch, 0, (0,), (1,), 0, 1, 100)
    recorder.on_run_batches(5, batch_id=np.arange(3, 8), replica_id=0, formed_at=np.zeros(5), num_requests=1,
                            num_tokens=1, num_prefill_tokens=0, num_decodes=1, decode_context=100,
                            request_ids=(0,), request_tokens=(1,), padded_size=1)
    recorder.on_allocate(0, 0, [0, 1, 2, 3])
    committed = RUN_BYTES + 2 * REPLICA_BYTES + 10 * REQUEST_BYTES + 200 * GAP_BYTES + 90 * POOL_BLOCK_BYTES
    rows = 3 * STEP_BYTES["full"] + 5 * RUN_STEP_BYTES + 4 * BLOCK_ROW_BYTES
    watch = MemoryWatch(config, estimate, Limits(max_peak_bytes=committed + rows), recorder.held_rows)
    assert recorder.held_rows() == (3, 5, 4)
    assert watch.held_bytes() == (committed + rows, 3 * STEP_BYTES["full"] + 5 * RUN_STEP_BYTES, 4 * BLOCK_ROW_BYTES)
    watch(" at simulated time 1.000 s")          # at the limit: goes on
    recorder.on_allocate(0, 1, [4])
    with pytest.raises(BudgetError) as error:
        watch(" at simulated time 2.000 s")
    assert str(error.value).startswith("workload.num_requests x workload.output_tokens: run stopped at simulated "
                                       "time 2.000 s: its records (8 batches, 5 block rows) need about 4 MiB")


def test_a_run_whose_records_outgrow_the_estimate_is_stopped_by_the_memory_watch():
    """10 requests of 100 + 100 tokens at once (1,000 req/s) on one replica of 30 blocks: the KV
    cache holds 30 x 16 / 200 = 2.4 of them, so the estimate counts 10 x 101 / 2.4 = 420.8 ->
    421 batches. Preempted requests start over and form more batches than that: with the limit
    at the estimated peak the scenario is accepted, and the run is stopped once its rows pass it."""
    config = scenario(cluster={"num_replicas": 1}, scheduler={"num_blocks": 30},
                      workload={"arrival": {"process": "constant", "qps": 1000}, "output_tokens": {"value": 100}})
    estimate = estimate_cost(config)
    assert estimate.num_batches == 421
    limits = Limits(max_peak_bytes=estimate.peak_bytes, how_to_raise="ask")
    assert check_budget(config, limits) == estimate
    with pytest.raises(BudgetError, match=r"^workload.num_requests x workload.output_tokens: run stopped: its records "
                                          r"\([0-9,]+ batches, 0 block rows\) need about 4 MiB, over the limit of 4 "
                                          r"MiB; fewer requests or shorter outputs, or engine.record 'requests', or "
                                          r"raise the limit: ask$"):
        run_simulation(config, limits=limits)
    assert run_simulation(config, limits=None).summary["num_batches"] > 421


def test_without_num_blocks_the_memory_planner_sizes_the_pool():
    config = scenario(scheduler={"num_blocks": None})
    assert estimate_cost(config).num_blocks_per_replica == plan_memory(config).num_blocks


def test_a_large_synthetic_workload_is_estimated_from_a_sample_without_generating_it():
    """10^8 fixed-length requests: the sample's totals scale exactly (10^8 x 100 prompt tokens)."""
    estimate = estimate_cost(scenario(workload={"num_requests": 100_000_000}))
    assert (estimate.num_requests, estimate.num_prompt_tokens) == (100_000_000, 10_000_000_000)
    assert estimate.num_request_steps == 2_100_000_000


def test_a_built_workload_gives_exact_figures():
    config = scenario()
    estimate = estimate_cost(config, build_workload(config))
    assert estimate.exact and (estimate.num_request_steps, estimate.num_block_allocations) == (210, 90)


def test_a_trace_not_yet_read_contributes_its_row_count_only(tmp_path):
    """5 data rows (the last without a newline): 5 requests, no token figures until it is read;
    max_trace_requests and sample_fraction shrink the request count as the transforms would."""
    path = trace(tmp_path, [(0, 10, 5)] * 5, newline_at_end=False)
    estimate = estimate_cost(scenario(workload={"trace_file": path}))
    assert (estimate.num_requests, estimate.num_trace_rows, estimate.num_output_tokens) == (5, 5, None)
    assert estimate.peak_bytes == RUN_BYTES + 2 * REPLICA_BYTES + 5 * REQUEST_BYTES + 5 * TRACE_ROW_BYTES
    assert estimate_cost(scenario(workload={"trace_file": path, "max_trace_requests": 3})).num_requests == 3
    assert estimate_cost(scenario(workload={"trace_file": path, "sample_fraction": 0.4})).num_requests == 2


def test_rows_are_lines_less_the_csv_header_and_every_line_of_json_lines(tmp_path):
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text('{"timestamp": 0, "input_length": 5, "output_length": 3}\n' * 4)
    assert count_rows(trace(tmp_path, [(0, 10, 5)] * 3), 10**6) == 3
    assert count_rows(str(jsonl), 10**6) == 4
    assert count_rows(str(tmp_path / "missing.csv"), 10**6) == 0
    assert count_rows(str(jsonl), 10) == 0   # over the size limit: the reader refuses it itself


# ---- limits ----------------------------------------------------------------------------------


def test_app_limits_default_to_a_1_gib_class_run_and_follow_the_environment():
    defaults = Limits.app({})
    assert (defaults.max_peak_bytes, defaults.max_requests, defaults.max_request_steps) == (GIB, 200_000, 10_000_000)
    assert (defaults.max_blocks_per_replica, defaults.max_trace_rows, defaults.max_wall_s) == (4 * 2**20, 10**6, 300.0)
    custom = Limits.app({"SIM_EXPLORER_MAX_RUN_MB": "2048", "SIM_EXPLORER_MAX_REQUESTS": "none",
                         "SIM_EXPLORER_MAX_RUN_S": "90.5"})
    assert (custom.max_peak_bytes, custom.max_requests, custom.max_wall_s) == (2 * GIB, None, 90.5)


@pytest.mark.parametrize("value", ["lots", "-1", "0", "nan", "inf"])
def test_an_app_limit_that_is_not_a_positive_number_is_refused_naming_the_variable(value):
    with pytest.raises(BudgetError) as error:
        Limits.app({"SIM_EXPLORER_MAX_RUN_MB": value})
    assert str(error.value) == f"SIM_EXPLORER_MAX_RUN_MB: '{value}' is not a positive number or 'none'"


def test_a_figure_over_its_limit_is_refused_in_one_line_with_field_value_estimate_limit_and_remedy():
    with pytest.raises(BudgetError) as error:
        check_budget(scenario(), Limits(max_requests=5))
    assert str(error.value) == ("workload.num_requests: 10 requests, over the limit of 5 requests for one run "
                                "(estimated peak memory 4 MiB); generate fewer, or raise the limit: pass larger "
                                "limits to run_simulation (limits=None: no limits)")


def test_each_figure_names_its_own_field():
    pools = {"enabled": True, "prefill": {"num_blocks": 50}, "decode": {"num_replicas": 2}}
    cases = [(scenario(), Limits(max_replicas=1), "cluster.num_replicas: 2 replicas, over the limit of 1 replicas"),
             (scenario(disaggregation=pools), Limits(max_blocks_per_replica=60),
              "disaggregation.prefill.num_blocks: 100 KV blocks per replica, over the limit of 60"),
             (scenario(), Limits(max_request_steps=100),
              "workload.num_requests x workload.output_tokens: 10 requests x 20 output tokens on average "
              "(210 request steps, recorded at engine.record 'batches'), over the limit of 100 request steps")]
    for config, limits, start in cases:
        with pytest.raises(BudgetError) as error:
            check_budget(config, limits)
        assert str(error.value).startswith(start)


def test_a_step_limit_is_about_time_so_recording_less_is_not_offered():
    with pytest.raises(BudgetError) as error:
        check_budget(scenario(), Limits(max_request_steps=100, how_to_raise="ask"))
    assert str(error.value).endswith("(estimated peak memory 4 MiB); fewer requests or shorter outputs, or raise the "
                                     "limit: ask")


def test_the_memory_limit_names_the_figure_that_costs_most():
    """Blocks of one token make block rows the largest part of a record-full run: engine.record is named."""
    config = scenario(scheduler={"block_size": 1, "num_blocks": 1000}, engine={"record": "full"})
    with pytest.raises(BudgetError) as error:
        check_budget(config, Limits(max_peak_bytes=RUN_BYTES, how_to_raise="ask"))
    message = str(error.value)
    assert message.startswith("engine.record: 'full' keeps every KV block allocation (1,200)")
    assert message.endswith("over the limit of 4 MiB); use engine.record 'batches', or raise the limit: ask")


def test_a_trace_over_the_row_limit_is_refused_before_it_is_read(tmp_path):
    path = trace(tmp_path, [(0, 10, 5)] * 5)
    with pytest.raises(BudgetError, match=r"^workload.trace_file: 5 rows in .*t.csv, over the limit of 3 rows"):
        check_budget(scenario(workload={"trace_file": path}), Limits(max_trace_rows=3))


def test_a_trace_that_a_synthetic_workload_resamples_is_counted_before_it_is_read(tmp_path):
    path = trace(tmp_path, [(0, 10, 5)] * 5)
    config = scenario(workload={"prompt_tokens": {"distribution": "empirical", "trace_file": path}})
    with pytest.raises(BudgetError, match=r"^workload.prompt_tokens.trace_file: 5 rows in .*t.csv, over the limit"):
        check_budget(config, Limits(max_trace_rows=3))


def test_the_issue_probes_are_refused_by_the_app_limits_before_anything_is_built():
    """The probes that grew the server without bound, against the default app limits."""
    app, base = Limits.app({}), dict(DEFAULT_SCENARIO)
    probes = [(merged(base, {"scheduler": {"num_blocks": 1_000_000_000}}),
               "scheduler.num_blocks: 1,000,000,000 KV blocks per replica, over the limit of 4,194,304",
               "SIM_EXPLORER_MAX_BLOCKS_PER_REPLICA"),
              (merged(base, {"workload": {"num_requests": 100_000_000}}),
               "workload.num_requests: 100,000,000 requests, over the limit of 200,000", "SIM_EXPLORER_MAX_REQUESTS"),
              (merged(base, {"scheduler": {"type": "sglang", "num_blocks": 1_000_000}, "max_model_len": 10_000_000,
                             "workload": {"output_tokens": {"distribution": "fixed", "value": 10_000_000}}}),
               "workload.num_requests x workload.output_tokens: 300 requests x ", "SIM_EXPLORER_MAX_REQUEST_STEPS"),
              (merged(base, {"cluster": {"num_replicas": 1024}, "workload": {"num_requests": 20_000}}),
               "workload.num_requests x workload.output_tokens: 20,000 requests x ", "SIM_EXPLORER_MAX_RUN_MB")]
    for spec, start, variable in probes:
        with pytest.raises(BudgetError) as error:
            check_budget(parse_config(spec), app)
        assert str(error.value).startswith(start)
        assert str(error.value).endswith(f"whoever starts the server can raise {variable}")


def test_the_default_scenario_every_preset_and_every_sample_trace_fit_the_app_limits():
    """...and the default scenario at 20,000 requests (two replicas at 5 req/s batch about 6
    requests each: its likely batches, not one per request step, are priced)."""
    app = Limits.app({})
    check_budget(parse_config(merged(DEFAULT_SCENARIO, {"workload": {"num_requests": 20_000}})), app)
    for spec in [DEFAULT_SCENARIO, *(preset.scenario for preset in PRESETS)]:
        check_budget(parse_config(spec), app)
    from sim_core import load_config
    for path in sorted((ROOT / "sample_traces").glob("*.yaml")):
        check_budget(load_config(path), app)


# ---- run_simulation --------------------------------------------------------------------------


def test_run_simulation_refuses_before_generating_anything_by_default():
    """The CLI's default limits stop 10^8 requests (about 100 GB) before the workload exists."""
    with pytest.raises(BudgetError, match=r"^workload.num_requests: 100,000,000 requests, over the limit of "
                                          r"20,000,000 .* run with --no-limits$"):
        run_simulation(scenario(workload={"num_requests": 100_000_000}))


def test_no_limits_runs_what_a_limit_refuses_with_the_same_result():
    config = scenario()
    with pytest.raises(BudgetError):
        run_simulation(config, limits=Limits(max_requests=5))
    assert run_simulation(config, limits=None).summary == run_simulation(config).summary


def test_a_trace_is_checked_again_on_its_exact_lengths_once_read(tmp_path):
    """Row count passes; 3 rows of 1,000 output tokens are 3 x (1 + 1000) steps once read."""
    path = trace(tmp_path, [(0, 10, 1000)] * 3)
    config = scenario(workload={"trace_file": path})
    assert check_budget(config, Limits(max_request_steps=100)).num_request_steps is None
    with pytest.raises(BudgetError, match=r"^workload.trace_file \(num_decode_tokens\): 3 requests x 1,000 output "
                                          r"tokens on average \(3,003 request steps"):
        run_simulation(config, limits=Limits(max_request_steps=100))


def light_load():
    """50 requests of 200 output tokens arriving 10 s apart: each runs alone, iteration by
    iteration (well over 2 x 4096 distinct instants)."""
    return scenario(cluster={"num_replicas": 1}, engine={"fast_forward": False},
                    workload={"num_requests": 50, "arrival": {"process": "poisson", "qps": 0.1},
                              "output_tokens": {"value": 200}})


def test_should_stop_is_polled_and_cancels_the_run():
    """The hook is asked every 4,096 instants (and between phases); True stops the run there."""
    calls = []

    def should_stop() -> bool:
        calls.append(1)
        return len(calls) == 4

    with pytest.raises(RunCancelled, match=r"^run cancelled at simulated time [0-9,.]+ s: its caller asked it to "
                                           r"stop \(Stop pressed or the session ended\)$"):
        run_simulation(light_load(), should_stop=should_stop)
    assert len(calls) == 4


def test_a_run_past_its_deadline_stops_with_a_time_limit_error():
    with pytest.raises(RunTimeLimit, match=r"over its wall-clock limit of 1e-09 s; simulate less"):
        run_simulation(light_load(), deadline_s=1e-9)
    with pytest.raises(RunTimeLimit, match=r"or raise the limit: whoever starts the server can raise "
                                           r"SIM_EXPLORER_MAX_RUN_S$"):
        run_simulation(light_load(), limits=Limits.app({"SIM_EXPLORER_MAX_RUN_S": "1e-9"}))
    assert issubclass(RunTimeLimit, RunCancelled) and issubclass(RunCancelled, SimCoreError)


def test_hooks_that_never_fire_change_nothing():
    config = light_load()
    plain = run_simulation(config)
    watched = run_simulation(config, should_stop=lambda: False, deadline_s=1e6)
    assert watched.summary == plain.summary and watched.requests.equals(plain.requests)


def test_stop_check_measures_wall_time_from_its_creation():
    """Deadline 10 s: at 5 s nothing happens, at 11 s the run stops (fake clock)."""
    times = iter([100.0, 105.0, 111.0])
    check = StopCheck(deadline_s=10, how_to_raise="ask", clock=lambda: next(times))
    check(1.0)
    with pytest.raises(RunTimeLimit) as error:
        check(2.5)
    assert str(error.value) == ("run stopped at simulated time 2.500 s: over its wall-clock limit of 10 s; simulate "
                                "less (fewer requests, shorter outputs), or raise the limit: ask")
    assert not StopCheck().active
