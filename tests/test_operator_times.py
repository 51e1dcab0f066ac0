"""The result says where stage time went, per cost-model operator, and it adds up exactly."""

import pytest

from sim_core import parse_config
from sim_core.engine.simulation import run_simulation
from sim_core.predictor import BatchShape, build_predictor

ONE_REQUEST = {
    "seed": 1, "model": "llama-2-7b", "device": "a100-80gb",
    "cluster": {"pipeline_parallel_size": 2, "tensor_parallel_size": 2},
    "scheduler": {"type": "vllm", "num_blocks": 64},
    "workload": {"num_requests": 1, "arrival": {"process": "static"},
                 "prompt_tokens": {"distribution": "fixed", "value": 300},
                 "output_tokens": {"distribution": "fixed", "value": 5}},
}


def test_one_request_is_its_prefill_and_four_decodes_summed_per_operator():
    # one 300-token prompt, 5 output tokens: iteration 0 prefills 300 tokens (and yields token 1),
    # iterations 1-4 decode one token each over a context of 301..304 tokens (as in Vidur, the
    # prefill iteration counts the first output token as processed)
    config = parse_config(ONE_REQUEST)
    predictor = build_predictor(config)
    shapes = [BatchShape(1, 300, ((300, 0),))] + [BatchShape(1, 1, (), 1, 301 + j) for j in range(4)]
    expected = {}
    for shape in shapes:
        for stage in (0, 1):
            for name, seconds in predictor.breakdown(shape, stage).items():
                expected[name] = expected.get(name, 0.0) + seconds
    result = run_simulation(config)
    assert result.batches["decode_context"].tolist() == [0, 301, 302, 303, 304]
    assert result.batches["num_decodes"].tolist() == [0, 1, 1, 1, 1]
    table = result.operator_times.set_index("operator")["seconds"]
    assert set(table.index) == {name for name, seconds in expected.items()}
    for name, seconds in expected.items():
        assert table[name] == pytest.approx(seconds, rel=1e-9, abs=1e-12), name


def test_shares_sum_to_one_and_seconds_to_the_total_stage_time():
    data = dict(ONE_REQUEST, workload={"num_requests": 60, "arrival": {"process": "poisson", "qps": 20.0}},
                scheduler={"type": "sarathi", "chunk_size": 128, "num_blocks": 400})
    result = run_simulation(parse_config(data))
    stages = result.batch_stages
    assert result.operator_times["seconds"].sum() == pytest.approx((stages["end"] - stages["start"]).sum(), rel=1e-9)
    assert result.operator_times["share"].sum() == pytest.approx(1.0)
    assert result.operator_times["seconds"].is_monotonic_decreasing


def test_linear_model_splits_into_its_base_and_per_token_parts():
    data = dict(ONE_REQUEST, cluster={}, predictor={"type": "linear", "base_s": 0.01, "per_token_s": 0.001})
    table = run_simulation(parse_config(data)).operator_times.set_index("operator")["seconds"]
    # 5 iterations: base 5 x 10 ms; tokens (300 + 4) x 1 ms
    assert table.to_dict() == pytest.approx({"base": 0.05, "tokens": 0.304})


def test_fast_forward_and_stepwise_runs_account_the_same_times():
    data = dict(ONE_REQUEST, workload={"num_requests": 40, "arrival": {"process": "poisson", "qps": 4.0}},
                cluster={})
    fast = run_simulation(parse_config(data)).operator_times
    slow = run_simulation(parse_config(dict(data, engine={"fast_forward": False}))).operator_times
    assert fast["operator"].tolist() == slow["operator"].tolist()
    assert fast["seconds"].to_numpy() == pytest.approx(slow["seconds"].to_numpy(), rel=1e-9)


def test_no_batch_tables_means_no_accounting():
    data = dict(ONE_REQUEST, engine={"record": "requests"})
    assert run_simulation(parse_config(data)).operator_times.empty


def test_disaggregated_pools_are_priced_by_their_own_parallelism():
    # prefill pool TP 2, decode pool TP 1 (its predictor has no all-reduce at all), and
    # every second of stage time of both pools is accounted
    data = dict(ONE_REQUEST, cluster={}, workload={"num_requests": 8, "arrival": {"process": "static"},
                                                   "prompt_tokens": {"distribution": "fixed", "value": 300},
                                                   "output_tokens": {"distribution": "fixed", "value": 5}},
                disaggregation={"enabled": True, "prefill": {"tensor_parallel_size": 2},
                                "decode": {"tensor_parallel_size": 1}})
    result = run_simulation(parse_config(data))
    stages = result.batch_stages
    table = result.operator_times.set_index("operator")["seconds"]
    assert table.sum() == pytest.approx((stages["end"] - stages["start"]).sum(), rel=1e-9)
    assert table["tp_all_reduce"] > 0 and table["attn_decode"] > 0 and table["attn_prefill"] > 0


def test_kv_swaps_are_their_own_rows_and_everything_still_adds_up():
    # vllm_v0 swapping under a tight cache: each swap's seconds are added to every stage of the
    # batch that runs it; the accounting lists them apart from what the predictor priced
    data = dict(ONE_REQUEST, cluster={}, scheduler={"type": "vllm_v0", "num_blocks": 160, "preemption_mode": "swap"},
                workload={"num_requests": 40, "arrival": {"process": "poisson", "qps": 8.0},
                          "prompt_tokens": {"distribution": "uniform", "min": 256, "max": 1024},
                          "output_tokens": {"distribution": "uniform", "min": 256, "max": 768}})
    result = run_simulation(parse_config(data))
    table = result.operator_times.set_index("operator")["seconds"]
    swaps = result.cache_ops.groupby(result.cache_ops["kind"].astype(str))["seconds"].sum()
    assert table["kv_swap_out"] == pytest.approx(swaps["swap_out"]) and swaps["swap_out"] > 0
    assert table["kv_swap_in"] == pytest.approx(swaps["swap_in"])
    stages = result.batch_stages
    assert table.sum() == pytest.approx((stages["end"] - stages["start"]).sum(), rel=1e-9)


def test_sglang_padding_and_overlap_are_accounted_and_everything_adds_up():
    # decode batches padded to CUDA-graph sizes are priced as the GPU runs them; the CPU time
    # overlap scheduling hides is one negative row, so the rows still sum to the stage time
    data = dict(ONE_REQUEST, cluster={}, scheduler={"type": "sglang", "num_blocks": 400},
                workload={"num_requests": 30, "arrival": {"process": "poisson", "qps": 6.0},
                          "prompt_tokens": {"distribution": "uniform", "min": 64, "max": 512},
                          "output_tokens": {"distribution": "uniform", "min": 16, "max": 128}})
    result = run_simulation(parse_config(data))
    assert (result.batches["padded_size"] > result.batches["num_requests"]).any()
    table = result.operator_times.set_index("operator")["seconds"]
    assert table["cpu_hidden_by_overlap"] < 0
    stages = result.batch_stages
    assert table.sum() == pytest.approx((stages["end"] - stages["start"]).sum(), rel=1e-9)
    assert table["attn_prefill"] > 0


def _v1_static(num_requests: int, prompt: int, output: int, **scheduler: object) -> dict:
    """Llama-2-7B (32 layers) on one H100 under vllm_v1 (a layer's eager gap 0.05 ms, no launch
    floor for a dense layer): `num_requests` at once, fixed prompt and output lengths."""
    return {"seed": 0, "model": "llama-2-7b", "device": "h100-sxm",
            "scheduler": {"type": "vllm_v1", **scheduler},
            "workload": {"num_requests": num_requests, "arrival": {"process": "static"},
                         "prompt_tokens": {"distribution": "fixed", "value": prompt},
                         "output_tokens": {"distribution": "fixed", "value": output}}}


def test_a_prompt_too_large_for_a_cuda_graph_books_its_gaps_on_their_own_row():
    # one 1,000-token prompt (more than the largest graph, 2 x 256 = 512 tokens) then two
    # one-token decodes (graphed): one eager step, whose layers' gaps add 32 x 0.05 ms = 1.6 ms;
    # that is `eager_gaps`, and prefill attention is the prompt's own (32 layers x its
    # attention), no longer inflated by the gaps. Without async scheduling nothing is hidden,
    # so every operator is the sum of the three steps' breakdowns.
    config = parse_config(_v1_static(1, 1000, 3, async_scheduling=False))
    predictor = build_predictor(config)
    shapes = [BatchShape(1, 1000, ((1000, 0),))] + [BatchShape(1, 1, (), 1, 1001 + j) for j in range(2)]
    expected: dict[str, float] = {}
    for shape in shapes:
        for name, seconds in predictor.breakdown(shape, 0).items():
            expected[name] = expected.get(name, 0.0) + seconds
    table = run_simulation(config).operator_times.set_index("operator")["seconds"]
    assert table["eager_gaps"] == pytest.approx(0.0016, rel=1e-12)
    assert table["attn_prefill"] == pytest.approx(32 * predictor.prefill_attention(1000, 0), rel=1e-9)
    assert set(table.index) == set(expected)
    for name, seconds in expected.items():
        assert table[name] == pytest.approx(seconds, rel=1e-9, abs=1e-12), name


def test_decode_only_steps_past_the_largest_graph_book_their_gaps_too():
    # 600 two-token prompts at once, unbounded max_num_seqs (largest graph min(512, 2,048) =
    # 512 tokens): three steps of 1,200, 600 and 600 tokens, the last decode-only, all eager:
    # 3 x 1.6 ms = 4.8 ms of gaps (the decode-only step's among them, not left in its
    # remainder), and the rows still sum to the total stage time
    result = run_simulation(parse_config(_v1_static(600, 2, 3, max_num_seqs=0)))
    assert result.batches["num_tokens"].tolist() == [1200, 600, 600]
    assert result.batches["num_decodes"].tolist()[-1] == 600
    table = result.operator_times.set_index("operator")["seconds"]
    assert table["eager_gaps"] == pytest.approx(0.0048, rel=1e-12)
    stages = result.batch_stages
    assert table.sum() == pytest.approx((stages["end"] - stages["start"]).sum(), rel=1e-12)


def test_runs_with_no_eager_step_have_no_eager_rows():
    # two 100-token prompts at once (a 200-token step, then two-request decodes): every step
    # fits the 512-token graph, nothing runs eager
    table = run_simulation(parse_config(_v1_static(2, 100, 3))).operator_times
    assert not {"eager_gaps", "eager_launch"} & set(table["operator"])
