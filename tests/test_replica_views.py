"""Every view of a P/D run shows the replicas that ran: 1 prefill + 2 decode replicas, not the
scenario's `cluster` section (4 replicas here, which P/D disaggregation replaces).

The run: prefill replica 0 (TP 1, PP 2, 64 KV blocks) runs both 100-token prompts in one batch,
7 blocks each (ceil(100 / 16)), blocks 0-13; round robin hands request 0 to decode replica 1 and
request 1 to decode replica 2 (TP 2, PP 1, 100 blocks each), which take 7 blocks each at the
hand-off (the 102 tokens they reach fit in 7 blocks) and decode the 2 remaining tokens in 2
batches. The prefill replica lets each request's blocks go when its transfer ends.
"""

import json

import numpy as np
import pytest
from app_helpers import TINY, chart_specs, open_app
from test_disaggregation import disaggregated

from sim_core.export import chrome_trace
from sim_core.export.files import output_files
from sim_core.export.request_tracks import REQUESTS_PID
from sim_core.results.compare import comparison_table
from sim_core.results.report import format_summary
from sim_core.viz.compare import kv_overlay
from sim_core.viz.gantt import lanes, pipeline_gantt, stage_busy
from sim_core.viz.kv_blocks import touched_blocks, utilization
from sim_core.viz.kv_map import kv_map_figure
from sim_core.viz.overview import blocks_text, queue_figure, replica_load, replica_load_figure, replica_load_views
from sim_core.viz.timeline import pick_requests

NAMES = ["prefill 0", "decode 1", "decode 2"]


def pd_run():
    return disaggregated([(0.0, 100, 3), (0.0, 100, 3)], cluster={"num_replicas": 4},
                         prefill={"num_blocks": 64, "pipeline_parallel_size": 2},
                         decode={"num_replicas": 2, "tensor_parallel_size": 2, "num_blocks": 100})


def test_the_result_describes_each_replica_of_its_pools():
    """Three replica records in id order with their pool's shape; the pools and the largest
    pool's blocks follow from them."""
    result = pd_run()
    shapes = [(r.id, r.pool, r.tensor_parallel_size, r.pipeline_parallel_size, r.num_blocks, r.block_size)
              for r in result.replicas]
    assert shapes == [(0, "prefill", 1, 2, 64, 16), (1, "decode", 2, 1, 100, 16), (2, "decode", 2, 1, 100, 16)]
    assert [r.name for r in result.replicas] == NAMES
    assert [(p.name, list(p.replica_ids), p.num_blocks) for p in result.pools] == [("prefill", [0], 64),
                                                                                  ("decode", [1, 2], 100)]
    assert result.num_blocks == 100 == json.loads(b"".join(output_files(result)["summary.json"]()))["num_blocks"]
    assert blocks_text(result) == "prefill 64 / decode 100"


def test_the_overview_counts_load_and_queues_per_pool_replica():
    """Each decode replica ends one request (100 prompt + 3 output tokens) after 2 batches and
    holds 7 of its own 100 blocks from the hand-off to the end: 7%. The prefill replica ends
    none, forms 1 batch, and holds 14 of its 64 blocks until the first transfer ends, then 7
    until the second does."""
    result = pd_run()
    load = replica_load(result)
    assert load[["replica", "requests", "prompt_tokens", "output_tokens", "batches"]].values.tolist() == \
        [[0, 0, 0, 0, 1], [1, 1, 100, 3, 2], [2, 1, 100, 3, 2]]
    first, second = result.transfers["end"].tolist()
    assert load["kv_utilization_mean"].tolist() == pytest.approx(
        [(14 * first + 7 * (second - first)) / second / 64, 7 / 100, 7 / 100], abs=1e-12)
    figure = replica_load_figure(result)
    assert [list(trace.x) for trace in figure.data] == [NAMES] * 3
    assert [trace.name for trace in queue_figure(result).data] == [
        f"{name} {state}" for name in NAMES for state in ("waiting", "running")]


def test_the_overview_builds_its_load_table_once_for_the_table_and_the_chart():
    """`replica_load_views` (what the Overview page caches) gives the same table as
    `replica_load` and the same figure as `replica_load_figure` computing its own: the
    decode replicas' one request each of two is a share of 1/2, the prefill replica's 0."""
    result = pd_run()
    table, figure = replica_load_views(result)
    assert table.equals(replica_load(result))
    assert figure.to_json() == replica_load_figure(result).to_json()
    assert list(figure.data[0].y) == [0.0, 0.5, 0.5]


def test_the_kv_map_stacks_each_replica_at_its_own_size():
    """Grids of the largest replica's 100 blocks, 64 per row (two rows each, a gap row between
    replicas): the prefill replica's second row has no block; a decode replica's has 36 blocks
    then 28 empty cells. The KV-use lines peak at 14 / 64 and 7 / 100."""
    result = pd_run()
    figure = kv_map_figure(result, max_frames=5)
    assert list(figure.layout.yaxis.ticktext) == NAMES
    for frame in figure.frames:   # two layers (held / held by none); a cell with no block is in neither
        held, unheld = (np.asarray(layer.z, dtype=np.float64) for layer in frame.data[:2])
        z = np.where(np.isnan(held), unheld, held)
        assert z.shape == (3 * 2 + 2, 64)
        assert np.isnan(z[1]).all()                                 # prefill 0: blocks 64.. do not exist
        for row in (4, 7):                                          # decode 1 and 2: blocks 64..99
            assert (z[row][:36] >= 0).all() and np.isnan(z[row][36:]).all()
    use = [trace for trace in figure.data if str(trace.name).endswith("KV use")]
    assert [(trace.name, max(trace.y)) for trace in use] == [
        ("prefill 0 KV use", 14 / 64), ("decode 1 KV use", 7 / 100), ("decode 2 KV use", 7 / 100)]
    assert list(kv_map_figure(result, max_frames=5, replicas=2).layout.yaxis.ticktext) == NAMES[:2]
    assert [touched_blocks(result, r) for r in range(3)] == [14, 7, 7]
    assert utilization(result, 1)["fraction"].max() == 7 / 100


def test_the_requests_timeline_filters_by_the_replica_a_request_ended_on():
    """Request 0 ended on decode 1, request 1 on decode 2, none on the prefill replica."""
    requests = pd_run().requests
    assert [pick_requests(requests, replica=r)["request_id"].tolist() for r in range(3)] == [[], [0], [1]]


def test_the_gantt_has_each_replicas_own_stages_and_the_prefill_link():
    """Prefill 0 has 2 stages and the KV link; each decode replica 1 stage."""
    result = pd_run()
    assert lanes(result) == ["prefill 0 / stage 0", "prefill 0 / stage 0 / KV copies", "prefill 0 / stage 1",
                             "prefill 0 / stage 1 / KV copies", "prefill 0 / KV link",
                             "decode 1 / stage 0", "decode 1 / stage 0 / KV copies",
                             "decode 2 / stage 0", "decode 2 / stage 0 / KV copies"]
    assert list(pipeline_gantt(result).layout.yaxis.categoryarray) == [
        "decode 2 / stage 0", "decode 1 / stage 0", "prefill 0 / KV link", "prefill 0 / stage 1",
        "prefill 0 / stage 0"]
    assert sorted(stage_busy(result, 0.0, 1.0)) == [(0, 0), (0, 1), (1, 0), (2, 0)]


def test_the_chrome_trace_has_each_replicas_stages_link_and_blocks():
    """Thread per stage (prefill 0: 2, and its link on tid 2); free + used KV blocks add up to
    each replica's own blocks."""
    events = [e for e in chrome_trace(pd_run())["traceEvents"] if e["pid"] != REQUESTS_PID]   # replicas only
    assert [e["args"]["name"] for e in events if e["name"] == "process_name"] == [
        "Prefill replica 0", "Decode replica 1", "Decode replica 2"]
    threads = [(e["pid"], e["tid"], e["args"]["name"]) for e in events if e["name"] == "thread_name"]
    assert threads == [(0, 0, "Stage 0"), (0, 1, "Stage 1"), (0, 2, "KV link"), (1, 0, "Stage 0"), (2, 0, "Stage 0")]
    assert [(e["tid"], e["args"]["to"]) for e in events if e.get("cat") == "kv_transfer"] == [
        (2, "decode 1"), (2, "decode 2")]
    totals = {(e["pid"], e["args"]["used"] + e["args"]["free"]) for e in events if e["name"] == "KV blocks"}
    assert totals == {(0, 64), (1, 100), (2, 100)}


def test_the_report_and_the_comparison_count_the_pools():
    """1 prefill + 2 decode replicas; GPUs: 1 x (TP 1 x PP 2) + 2 x (TP 2 x PP 1) = 6; at the
    hand-off 14 + 7 + 7 of the 264 blocks are in use."""
    result = pd_run()
    lines = format_summary(result).splitlines()
    assert lines[0] == "scenario: unnamed | vllm | P/D disaggregated: 1 prefill + 2 decode x llama-2-7b on a100-80gb"
    pools = lines[3]
    assert pools.startswith("pools: prefill 1 x (TP=1, PP=2, 64 KV blocks, busy ")
    assert ", decode 2 x (TP=2, PP=1, 100 KV blocks, busy " in pools
    table = comparison_table({"a": result, "b": result})
    assert table.loc[table["metric"] == "GPUs", "a"].tolist() == [6.0]
    assert max(kv_overlay({"a": result}).data[0].y) == 28 / 264


PD_TINY = {**TINY, "disaggregation": {"enabled": True, "prefill": {"num_blocks": 64, "pipeline_parallel_size": 2},
                                      "decode": {"num_replicas": 2, "tensor_parallel_size": 2, "num_blocks": 100}}}
PD_NAMES = ["prefill 0", "decode 1", "decode 2"]


def test_the_overview_page_shows_each_pools_blocks_and_replica():
    """TINY's cluster section says 2 replicas of PP 2; the pools ran 3 replicas."""
    app = open_app("pages/overview.py", PD_TINY)
    assert {m.label: m.value for m in app.metric}["KV blocks / replica"] == "prefill 64 / decode 100"
    load = json.loads(chart_specs(app)[3])
    assert [trace["x"] for trace in load["data"]] == [PD_NAMES] * 3


def test_with_p_d_the_sidebar_sizes_the_pools_and_the_replica_table_names_them():
    """Issue 19 item 6: the sidebar's replica sliders are the pools' (the cluster's Replicas slider,
    which the pools replace, is gone), and moving one changes the run; the table names each replica."""
    app = open_app("pages/overview.py", PD_TINY)
    keys = [slider.key for slider in app.sidebar.slider]
    assert "w:side:cluster.num_replicas" not in keys
    app.sidebar.slider(key="w:side:disaggregation.prefill.num_replicas").set_value(2).run()
    assert not app.exception
    assert app.session_state["scenario"]["disaggregation"]["prefill"]["num_replicas"] == 2
    assert app.dataframe[0].value["name"].tolist() == ["prefill 0", "prefill 1", "decode 2", "decode 3"]


def test_the_kv_cache_and_requests_pages_offer_the_pool_replicas():
    app = open_app("pages/kv_cache.py", PD_TINY)
    assert app.caption[0].value.startswith("prefill 64 / decode 100 blocks per replica of 16 tokens")
    assert app.number_input(key="kv_replicas").max == 3
    assert json.loads(chart_specs(app)[0])["layout"]["yaxis"]["ticktext"] == PD_NAMES
    app.switch_page("pages/requests.py").run()
    assert app.selectbox(key="rq_replica").options == ["all", *PD_NAMES]


def test_the_pipeline_page_names_the_busy_stages_by_pool():
    app = open_app("pages/pipeline.py", PD_TINY)
    busy = app.caption[0].value
    for stage in ("prefill 0 stage 0", "prefill 0 stage 1", "decode 1 stage 0", "decode 2 stage 0"):
        assert stage in busy
    assert "replica" not in busy.split(":", 1)[1]


def test_the_memory_page_plans_the_chosen_pools_gpus():
    """The prefill pool's replica has 2 pipeline stages on 1 GPU each; the decode pool's 1
    stage split over 2 GPUs; each pool's num_blocks overrides the planner."""
    app = open_app("pages/memory.py", PD_TINY)
    assert app.selectbox(key="mem_pool").options == ["prefill", "decode"]
    assert "(1 x TP, 2 x PP)" in app.caption[0].value
    assert json.loads(chart_specs(app)[0])["data"][0]["y"] == ["stage 0 (a100-80gb)", "stage 1 (a100-80gb)"]
    assert app.info[0].value.startswith("the prefill pool's num_blocks = 64 overrides the planner's ")
    app.selectbox(key="mem_pool").set_value("decode").run()
    assert "(2 x TP, 1 x PP)" in app.caption[0].value
    assert json.loads(chart_specs(app)[0])["data"][0]["y"] == ["stage 0 (a100-80gb)"]
    assert app.info[0].value.startswith("the decode pool's num_blocks = 100 overrides the planner's ")
