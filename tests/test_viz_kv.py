"""KV-block frames: owners replayed from block events, states, super-cells, the map figure."""

import json

import numpy as np
import pandas as pd
from app_helpers import TINY

from sim_core import parse_config, run_simulation
from sim_core.results.replicas import COLOCATED, ReplicaInfo
from sim_core.viz.kv_blocks import CACHED, DECODE, FREE, PREFILL, SELECTED, owner_states, super_cells
from sim_core.viz.kv_map import MAX_VALUES, kv_layout, kv_map_figure, peak_frame


def test_states_say_prefill_before_the_first_token_decode_after_and_mark_the_selection():
    owners = np.array([[1, 2, -1], [1, 2, -1]], dtype=np.int32)
    requests = pd.DataFrame({"prefill_completed_at": [np.nan, 1.0, np.nan]})   # request 2 never got one
    states = owner_states(owners, np.array([0.5, 1.0]), requests)
    assert states.tolist() == [[PREFILL, PREFILL, FREE], [DECODE, PREFILL, FREE]]
    assert owner_states(owners, np.array([0.5, 1.0]), requests, selected=2).tolist() == \
        [[PREFILL, SELECTED, FREE], [DECODE, SELECTED, FREE]]


def test_super_cells_hold_the_percentage_of_their_blocks_in_use():
    states = np.array([[FREE, PREFILL, DECODE, FREE, DECODE]], dtype=np.int8)
    assert super_cells(states, 2).tolist() == [[50, 50, 100]]   # the last cell has one block
    assert super_cells(states, 5).tolist() == [[60]]


def test_layout_aggregates_big_pools_and_bounds_the_payload():
    assert kv_layout(768, 2, 60) == (1, 768, 64, 60)
    assert kv_layout(16384, 2, 60) == (16, 1024, 64, 60)
    group, cells, _, frames = kv_layout(5000, 16, 120)
    assert (group, cells, frames) == (5, 1000, 25) and cells * 16 * frames <= MAX_VALUES


def test_peak_frame_counts_used_blocks_not_state_codes():
    z = np.array([[[DECODE, DECODE, FREE]], [[PREFILL, PREFILL, PREFILL]]], dtype=np.int8)
    assert peak_frame(z, percent=False) == 1
    assert peak_frame(np.array([[[95, 0]], [[40, 50]]], dtype=np.int8), percent=True) == 0


def _tight_run():
    return run_simulation(parse_config({
        "model": "llama-2-7b", "device": "a100-80gb", "engine": {"record": "full"},
        "scheduler": {"type": "vllm", "num_blocks": 48, "block_size": 16},
        "predictor": {"type": "linear"},
        "workload": {"num_requests": 30, "arrival": {"process": "poisson", "qps": 20.0},
                     "prompt_tokens": {"distribution": "uniform", "min": 64, "max": 200},
                     "output_tokens": {"distribution": "uniform", "min": 64, "max": 200}}}))


def test_the_map_has_play_pause_a_frame_per_step_and_opens_on_the_fullest_frame():
    run = _tight_run()
    figure = json.loads(kv_map_figure(run, max_frames=30).to_json())
    assert len(figure["frames"]) == 30
    assert figure["data"][0]["type"] == figure["data"][1]["type"] == "heatmap"
    assert figure["data"][0]["customdata"]["dtype"] == "f4"     # owners as float32
    assert figure["data"][0]["z"]["dtype"] == figure["data"][1]["z"]["dtype"] == "f4"   # states, NaN: the other layer
    active = figure["layout"]["sliders"][0]["active"]
    assert figure["data"][0]["z"] == figure["frames"][active]["data"][0]["z"]
    assert figure["data"][1]["z"] == figure["frames"][active]["data"][1]["z"]
    names = [trace.get("name") for trace in figure["data"]]
    assert "replica 0 KV use" in names and "replica 0 preemption" in names
    assert {"free", "prefill", "decode"} <= set(names)


def test_shared_and_cached_blocks_get_their_own_states():
    """Request 1 takes blocks 0 1 and keys block 0; request 2 shares block 0 and takes 2. At 1.5
    block 0 has two holders (SHARED); once both let go (t=3) block 0 is CACHED and block 1
    (never keyed) FREE; at t=4 block 0 loses its key when request 3 takes it anew."""
    from sim_core.viz.kv_blocks import CACHED, SHARED, block_holders, replica_frames

    events = pd.DataFrame({
        "time":    [0.0, 0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0],
        "request": [1,   1,   -1,  2,   2,   1,   1,   2,   2,   -1,  3],
        "block":   [0,   1,   0,   0,   2,   0,   1,   0,   2,   0,   0],
        "delta":   [1,   1,   2,   1,   1,   -1,  -1,  -1,  -1,  -2,  1],
        "replica": [0] * 11})
    times = np.array([0.5, 1.5, 2.5, 3.5, 4.5])
    owners, holders, cached, by_two = block_holders(events, 3, times, selected=2)
    assert owners.tolist() == [[1, 1, -1], [2, 1, 2], [2, -1, 2], [-1, -1, -1], [3, -1, -1]]
    assert holders.tolist() == [[1, 1, 0], [2, 1, 1], [1, 0, 1], [0, 0, 0], [1, 0, 0]]
    assert cached[:, 0].tolist() == [True, True, True, True, False]
    assert by_two.tolist() == [[False] * 3, [True, False, True], [True, False, True], [False] * 3, [False] * 3]

    class Run:
        block_events, replicas = events, (ReplicaInfo(0, COLOCATED, 1, 1, 3, 16),)
        requests = pd.DataFrame({"prefill_completed_at": [np.nan, 0.0, 0.0, 0.0]})
    states = replica_frames(Run, 0, times).states
    assert states.tolist() == [[DECODE, DECODE, FREE], [SHARED, DECODE, DECODE], [DECODE, FREE, DECODE],
                               [CACHED, FREE, FREE], [DECODE, FREE, FREE]]
    assert super_cells(states, 3).tolist() == [[67], [100], [67], [0], [33]]


def test_super_cells_of_the_touched_blocks_count_the_rest_as_free():
    """States of the first 3 of 7 blocks: the cells past them are 0%, the last cell holds 1 block."""
    states = np.array([[DECODE, DECODE, PREFILL]], dtype=np.int8)
    assert super_cells(states, 2, num_blocks=7).tolist() == [[100, 50, 0, 0]]


def test_a_huge_pool_is_mapped_from_the_blocks_the_run_touched_only():
    """1,000,000 blocks per replica, a few dozen used: the map is the one a full-width replay
    gives (the same super-cells), built without arrays of 1,000,000 columns per frame."""
    from sim_core.viz.kv_blocks import block_holders, replica_frames, touched_blocks

    config = parse_config({"max_model_len": 512, "predictor": {"type": "linear"}, "engine": {"record": "full"},
                           "scheduler": {"num_blocks": 1_000_000, "block_size": 16},
                           "workload": {"num_requests": 12, "prompt_tokens": {"distribution": "fixed", "value": 64},
                                        "output_tokens": {"distribution": "fixed", "value": 40}}})
    run = run_simulation(config)
    touched = touched_blocks(run, 0)
    assert touched == int(run.block_events["block"].max()) + 1 < 100
    times = np.linspace(0, float(run.requests["completed_at"].max()), 5)
    frames = replica_frames(run, 0, times)
    assert frames.states.shape == (5, touched)
    owners, _, _, _ = block_holders(run.block_events, 1_000_000, times)      # the full-width replay
    full = owner_states(owners, times, run.requests)
    group, cells, _, _ = kv_layout(1_000_000, 1, 60)
    assert super_cells(frames.states, group, 1_000_000).tolist() == super_cells(full, group).tolist()
    z = kv_map_figure(run, max_frames=5).frames[-1].data[0].z
    assert np.asarray(z).size >= cells


def test_many_preemptions_are_binned_into_at_most_max_marks_markers():
    """Issue 19 item 5: 3 preemptions stay 3 markers; 1,000 evenly spread over 0..999 s with 200
    bins become 200 markers of 5 each, at each bin's first preemption (0, 5, 10, ...)."""
    from sim_core.viz.kv_map import preemption_marks

    xs, counts = preemption_marks(np.array([3.0, 1.0, 2.0]))
    assert xs.tolist() == [1.0, 2.0, 3.0] and counts.tolist() == [1, 1, 1]
    xs, counts = preemption_marks(np.arange(1000, dtype=np.float64), max_marks=200)
    assert len(xs) == 200 and counts.sum() == 1000
    assert xs[:3].tolist() == [0.0, 5.0, 10.0] and set(counts.tolist()) == {5}


def test_the_time_axis_below_the_map_spans_the_scrubbers_window():
    """Issue 19 item 5: the lower chart's time axis is the frames' window and the scrubber spans
    the plot's full width, so a frame's time sits over the same time below."""
    result = run_simulation(parse_config(TINY))
    figure = json.loads(kv_map_figure(result, 2.0, 6.0, max_frames=9).to_json())
    assert figure["layout"]["xaxis2"]["range"] == [2.0, 6.0]
    slider = figure["layout"]["sliders"][0]
    assert (slider["x"], slider["len"]) == (0.0, 1.0)
    assert [step["label"] for step in slider["steps"]][:2] == ["2.00", "2.50"]


def test_a_held_block_names_its_request_and_a_free_one_says_no_request_holds_it():
    """Issue 19 item 5: one block a cell, the map is two layers. Every cell a request holds is in
    the first (its state, its owner in the hover: "request N"), every block none holds (free or
    cached) in the second ("held by no request"); no cell is in both and no hover mentions NaN."""
    figure = kv_map_figure(_tight_run(), max_frames=10)
    held, unheld = figure.data[0], figure.data[1]
    assert held.hovertemplate == "block %{text}<br>request %{customdata:.0f}<extra></extra>"
    assert unheld.hovertemplate == "block %{text}<br>held by no request<extra></extra>"
    assert held.hoverongaps is False and unheld.hoverongaps is False
    for frame in figure.frames:
        states, free, owners = (np.asarray(a, dtype=np.float32) for a in
                                (frame.data[0].z, frame.data[1].z, frame.data[0].customdata))
        assert not (~np.isnan(states) & ~np.isnan(free)).any()               # a cell is in one layer
        assert (np.isnan(states) == np.isnan(owners)).all()                  # held cells have owners
        assert set(np.unique(free[~np.isnan(free)]).tolist()) <= {float(FREE), float(CACHED)}
        assert (states[~np.isnan(states)] > 0).all()
