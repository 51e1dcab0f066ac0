"""Steps too large for vLLM's CUDA graphs: each layer adds a gap to their GPU work, and the host's
launch time floors them (predictor/eager.py)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core import parse_config
from sim_core.predictor import BatchShape, build_predictor
from sim_core.predictor.eager import EagerLaunch


def v1(**knobs):
    """Llama-2-7B (32 layers) on one A100-80GB under vllm_v1 with these scheduler knobs."""
    return parse_config({"scheduler": {"type": "vllm_v1", **knobs}})


def test_the_floor_is_the_launch_time_of_the_stage_layers_dense_and_moe_apart():
    """DeepSeek-V3: 61 layers, the first 3 with a dense MLP. At 0.2 ms a dense layer and 1 ms a
    MoE layer one stage launches 3 x 0.2 + 58 x 1 = 58.6 ms; over two stages of 30 layers each
    (the planners' split, the 61st layer dropped) stage 0 holds the 3 dense layers and 27 MoE
    ones (0.6 + 27 = 27.6 ms), stage 1 30 MoE ones (30 ms)."""
    model = parse_config({"model": "deepseek-v3", "device": "h100-sxm"}).model_spec()
    eager = EagerLaunch(graph_tokens=256, layer_s=0.0002, moe_layer_s=0.001)
    assert eager.stage_floors(model, 1) == pytest.approx([0.0586])
    assert eager.stage_floors(model, 2) == pytest.approx([0.0276, 0.030])


def test_vllm_v1s_largest_graph_is_twice_max_num_seqs_capped_at_512_and_the_budget():
    """vLLM's default max_cudagraph_capture_size: min(2 x max_num_seqs, 512), no more than the
    token budget (vllm_v1's default budget 2,048; max_num_seqs 0 = unbounded: the cap)."""
    assert v1(max_num_seqs=128).scheduler.eager_launch() == (256, 0.0, 0.0016, 0.00005)
    assert v1(max_num_seqs=1024).scheduler.eager_launch()[0] == 512
    assert v1(max_num_seqs=128, max_num_batched_tokens=200).scheduler.eager_launch()[0] == 200
    assert v1(max_num_seqs=0).scheduler.eager_launch()[0] == 512
    assert v1(eager_moe_layer_s=0.0).scheduler.eager_launch() == (512, 0.0, 0.0, 0.00005)   # max_num_seqs 256
    assert v1(eager_moe_layer_s=0.0, eager_gap_layer_s=0.0).scheduler.eager_launch() is None   # all 0: none
    assert parse_config({"scheduler": {"type": "vllm"}}).scheduler.eager_launch() is None


def test_a_prompt_one_token_past_the_largest_graph_waits_for_the_hosts_launches():
    """At 1 ms a dense layer, a step past 256 tokens takes at least 32 x 1 = 32 ms on the GPU
    side. One request's host phases at vllm_v1's host_scale 0.44: (0.5 + 1.5 + 1 + 1 ms + 4 x
    5 us) x 0.44 = 1.7688 ms. A 257-token prompt's kernels take well under 32 ms on an A100, so
    the step takes 32 + 1.7688 = 33.7688 ms; a 256-token one (graphed) and an 8,192-token one
    (its kernels longer than the launches) are priced as without the floor, to the bit."""
    floored = build_predictor(v1(max_num_seqs=128, eager_layer_s=0.001, eager_moe_layer_s=0.0, eager_gap_layer_s=0.0))
    plain = build_predictor(v1(max_num_seqs=128, eager_layer_s=0.0, eager_moe_layer_s=0.0, eager_gap_layer_s=0.0))
    prompt = BatchShape(1, 257, ((257, 0),))
    assert plain.stage_time(prompt, 0) < 0.032
    assert floored.stage_time(prompt, 0) == pytest.approx(0.0337688, rel=1e-12)
    for tokens in (256, 8192):
        shape = BatchShape(1, tokens, ((tokens, 0),))
        assert floored.stage_time(shape, 0) == plain.stage_time(shape, 0)
    assert plain.stage_time(BatchShape(1, 8192, ((8192, 0),)), 0) > 0.032 + 0.0017688
    # the breakdown names what the launches add (no gaps here: no `eager_gaps`), and still sums
    # to the stage time; a graphed step and one whose kernels outlast the launches have neither
    parts = floored.breakdown(prompt, 0)
    assert parts["eager_launch"] == pytest.approx(0.0337688 - plain.stage_time(prompt, 0), rel=1e-9)
    assert "eager_gaps" not in parts
    assert sum(parts.values()) == pytest.approx(0.0337688, rel=1e-12)
    for tokens in (256, 8192):
        assert not {"eager_launch", "eager_gaps"} & set(floored.breakdown(BatchShape(1, tokens, ((tokens, 0),)), 0))


def test_decode_only_steps_past_the_largest_graph_are_floored_in_runs_as_one_at_a_time():
    """max_num_seqs 4: graphs up to 8 tokens. Decode-only steps of 9 and 12 requests run without
    one: at 10 ms a layer they take 320 ms plus their host phases ((4 ms + 4 x 5 us x n) x 0.44:
    1.8392 ms at 9, 1.8656 ms at 12); fast-forward's run prices equal the one-at-a-time prices
    to the bit."""
    predictor = build_predictor(v1(max_num_seqs=4, eager_layer_s=0.01, eager_moe_layer_s=0.0, eager_gap_layer_s=0.0))
    counts, context = np.array([5, 8, 9, 12]), np.array([500, 800, 900, 1200])
    run = predictor.decode_run_times(counts, context, 0)
    single = [predictor.stage_time(BatchShape(int(n), int(n), (), int(n), int(c)), 0) for n, c in zip(counts, context)]
    assert run.tolist() == single
    assert run[2:] == pytest.approx([0.3218392, 0.3218656], rel=1e-12)
    assert run[1] < 0.3


def test_the_predictor_pages_overheads_show_the_launch_floor_of_the_first_stage():
    """Mixtral-8x7B (32 MoE layers) at vllm_v1's default 1.6 ms a MoE layer: 51.2 ms for a step
    of more than 2 x 64 = 128 tokens, and at its default gap of 0.05 ms a layer 32 x 0.05 = 1.6 ms
    added to such a step's GPU work; Vidur's vllm policy has neither row."""
    from sim_core.predictor.overheads import overhead_rows

    config = parse_config({"model": "mixtral-8x7b", "device": "h100-sxm", "cluster": {"tensor_parallel_size": 2},
                           "scheduler": {"type": "vllm_v1", "max_num_seqs": 64}})
    rows = {row["term"]: row for row in overhead_rows(config, build_predictor(config), 8)}
    assert rows["eager_launch"]["seconds"] == pytest.approx(0.0512)
    assert "more than 128 tokens" in rows["eager_launch"]["where"]
    assert rows["eager_gaps"]["seconds"] == pytest.approx(0.0016)
    assert "more than 128 tokens" in rows["eager_gaps"]["where"]
    plain = parse_config({"model": "mixtral-8x7b", "device": "h100-sxm", "cluster": {"tensor_parallel_size": 2}})
    terms = {row["term"] for row in overhead_rows(plain, build_predictor(plain), 8)}
    assert not terms & {"eager_launch", "eager_gaps"}


def test_floored_steps_give_the_same_run_fast_forwarded_as_stepwise():
    """700 requests at once on an unbounded max_num_seqs (graphs up to min(512, 2,048) = 512
    tokens) at 3 ms a dense layer: the prompt steps and the decode-only steps of more than 512
    requests take at least 32 x 3 = 96 ms (a 600-decode step: 96 ms plus its host phases, (4 ms +
    4 x 5 us x 600) x 0.44 = 7.04 ms), a 500-decode step runs as priced (about 54 ms); fast-forward's
    runs of decode steps cross that boundary as requests finish, and must agree with stepwise
    simulation."""
    from run_agreement import assert_runs_agree

    from sim_core.workload import Workload

    config = {"model": "llama-2-7b", "device": "a100-80gb", "seed": 0, "cluster": {"num_replicas": 1},
              "scheduler": {"type": "vllm_v1", "max_num_seqs": 0, "eager_layer_s": 0.003}}
    predictor = build_predictor(parse_config(config))
    assert predictor.stage_time(BatchShape(600, 600, (), 600, 600 * 40), 0) == pytest.approx(0.10304, rel=1e-12)
    assert predictor.stage_time(BatchShape(500, 500, (), 500, 500 * 40), 0) < 0.096
    outputs = 20 + np.arange(700) % 40
    assert_runs_agree(config, Workload(np.zeros(700), np.full(700, 16), outputs, "test"))


@settings(max_examples=60, deadline=None)
@given(decodes=st.integers(0, 200), chunk=st.integers(0, 1500), cached=st.integers(0, 3000),
       layer_ms=st.sampled_from([0.0, 0.2, 1.0, 5.0]))
def test_the_floor_only_ever_raises_a_step_to_the_launch_time(decodes, chunk, cached, layer_ms):
    """Any step: priced as without the floor when it fits a graph (256 tokens) or its GPU work is
    the longer; else exactly the launch time plus its host phases. Never lower."""
    prefill = ((chunk, cached),) if chunk else ()
    requests = decodes + (1 if chunk else 0)
    if requests == 0:
        return
    shape = BatchShape(requests, decodes + chunk, prefill, decodes, decodes * 500)
    floored = _PREDICTORS[layer_ms]
    plain = _PREDICTORS[0.0]
    with_floor, without = floored.stage_time(shape, 0), plain.stage_time(shape, 0)
    host = sum(plain.cpu_times(requests).values())
    if shape.total_tokens <= 256 or without - host >= 0.032 * layer_ms:
        assert with_floor == without
    else:
        assert with_floor == pytest.approx(0.032 * layer_ms + host, rel=1e-12)
    assert with_floor >= without


_PREDICTORS = {ms: build_predictor(v1(max_num_seqs=128, eager_layer_s=ms / 1000, eager_moe_layer_s=0.0,
                                      eager_gap_layer_s=0.0)) for ms in (0.0, 0.2, 1.0, 5.0)}


def test_a_step_past_the_largest_graph_adds_the_gap_of_each_of_its_layers():
    """At 0.1 ms a layer and no launch floor, a 257-token prompt on Llama-2-7B (32 layers) takes
    32 x 0.1 = 3.2 ms more than its kernels and host phases; a 256-token one (graphed) takes
    none more, to the bit; the breakdown names the 3.2 ms and still sums to the stage time."""
    gapped = build_predictor(v1(max_num_seqs=128, eager_layer_s=0.0, eager_moe_layer_s=0.0, eager_gap_layer_s=0.0001))
    plain = build_predictor(v1(max_num_seqs=128, eager_layer_s=0.0, eager_moe_layer_s=0.0, eager_gap_layer_s=0.0))
    prompt = BatchShape(1, 257, ((257, 0),))
    assert gapped.stage_time(prompt, 0) == pytest.approx(plain.stage_time(prompt, 0) + 0.0032, rel=1e-12)
    graphed = BatchShape(1, 256, ((256, 0),))
    assert gapped.stage_time(graphed, 0) == plain.stage_time(graphed, 0)
    parts = gapped.breakdown(prompt, 0)
    assert parts["eager_gaps"] == 32 * 0.0001
    assert "eager_launch" not in parts   # no floor: the launches add nothing beyond the gaps
    assert sum(parts.values()) == pytest.approx(gapped.stage_time(prompt, 0), rel=1e-12)


def test_the_gaps_add_to_the_gpu_work_and_the_floor_still_bounds_it():
    """1 ms a layer of launch floor (32 ms) and 0.1 ms a layer of gap (3.2 ms): a 257-token
    prompt's kernels plus 3.2 ms stay under 32 ms, so the step is the floor plus its host phases,
    32 + 1.7688 = 33.7688 ms, as without the gap; an 8,192-token prompt's kernels are longer than
    the floor, so it takes them plus 3.2 ms."""
    both = build_predictor(v1(max_num_seqs=128, eager_layer_s=0.001, eager_moe_layer_s=0.0, eager_gap_layer_s=0.0001))
    plain = build_predictor(v1(max_num_seqs=128, eager_layer_s=0.0, eager_moe_layer_s=0.0, eager_gap_layer_s=0.0))
    prompt = BatchShape(1, 257, ((257, 0),))
    assert both.stage_time(prompt, 0) == pytest.approx(0.0337688, rel=1e-12)
    long = BatchShape(1, 8192, ((8192, 0),))
    assert both.stage_time(long, 0) == pytest.approx(plain.stage_time(long, 0) + 0.0032, rel=1e-12)
    # the breakdown splits what running eager adds as the Predictor page's overheads do: the
    # gaps (3.2 ms) and what the floor adds beyond the kernels and the gaps (33.7688 ms - the
    # plain price - 3.2 ms); the long prompt has only the gaps
    parts = both.breakdown(prompt, 0)
    assert parts["eager_gaps"] == 32 * 0.0001
    assert parts["eager_launch"] == pytest.approx(0.0337688 - plain.stage_time(prompt, 0) - 0.0032, rel=1e-9)
    assert sum(parts.values()) == pytest.approx(0.0337688, rel=1e-12)
    long_parts = both.breakdown(long, 0)
    assert long_parts["eager_gaps"] == 32 * 0.0001 and "eager_launch" not in long_parts


def test_decode_only_steps_past_the_largest_graph_carry_the_gaps_in_runs_as_one_at_a_time():
    """max_num_seqs 4 (graphs up to 8 tokens), 1 ms of gap a layer, no floor: decode-only steps
    of 9 and 12 requests take 32 ms more than without the gap, those of 5 and 8 none more, and
    fast-forward's run prices equal the one-at-a-time prices to the bit."""
    gapped = build_predictor(v1(max_num_seqs=4, eager_layer_s=0.0, eager_moe_layer_s=0.0, eager_gap_layer_s=0.001))
    plain = build_predictor(v1(max_num_seqs=4, eager_layer_s=0.0, eager_moe_layer_s=0.0, eager_gap_layer_s=0.0))
    counts, context = np.array([5, 8, 9, 12]), np.array([500, 800, 900, 1200])
    run = gapped.decode_run_times(counts, context, 0)
    single = [gapped.stage_time(BatchShape(int(n), int(n), (), int(n), int(c)), 0) for n, c in zip(counts, context)]
    assert run.tolist() == single
    without = plain.decode_run_times(counts, context, 0)
    assert run[:2].tolist() == without[:2].tolist()
    assert run[2:] == pytest.approx(without[2:] + 0.032, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(decodes=st.integers(0, 200), chunk=st.integers(0, 1500), cached=st.integers(0, 3000),
       gap_us=st.sampled_from([10.0, 50.0, 400.0]))
def test_the_gap_adds_exactly_the_layers_gaps_past_the_largest_graph_and_nothing_below(decodes, chunk, cached, gap_us):
    """Any step without a launch floor: 32 x the gap more when it holds more than 256 tokens,
    exactly the same price when it fits a graph."""
    prefill = ((chunk, cached),) if chunk else ()
    requests = decodes + (1 if chunk else 0)
    if requests == 0:
        return
    shape = BatchShape(requests, decodes + chunk, prefill, decodes, decodes * 500)
    with_gap, without = _GAPPED[gap_us].stage_time(shape, 0), _PREDICTORS[0.0].stage_time(shape, 0)
    if shape.total_tokens <= 256:
        assert with_gap == without
    else:
        assert with_gap == pytest.approx(without + 32 * gap_us * 1e-6, rel=1e-12)


_GAPPED = {us: build_predictor(v1(max_num_seqs=128, eager_layer_s=0.0, eager_moe_layer_s=0.0,
                                  eager_gap_layer_s=us * 1e-6)) for us in (10.0, 50.0, 400.0)}
