"""Overview: headline metrics, latency CDFs, throughput and queues over time, load per replica."""

import streamlit as st

from explorer.capacity_hint import show_capacity
from explorer.frame import through_app
from explorer.safe_text import plain
from explorer.state import result, scenario
from explorer.views import derived
from sim_core.config.simulation import MAX_NAME_CHARS
from sim_core.results.overload import queue_trend
from sim_core.viz.overview import (
    blocks_text,
    queue_figure,
    replica_load_views,
    run_latency_cdfs,
    throughput_figure,
)
from sim_core.viz.units import duration_text

through_app()

st.title("LLM serving scheduling explorer")
run = result("series")  # the requests, time series and batch summaries: all its views read
summary = run.summary
st.caption(f"{plain(run.config.name or 'scenario', MAX_NAME_CHARS)} · {summary['num_requests']:,} requests, "
           f"{summary['num_batches']:,} batches, {summary['makespan_s']:.1f} s simulated")

trend = derived(run, queue_trend)
if trend.over_capacity:
    st.warning(f"Over capacity: the waiting queue grew from {trend.waiting_mid:,} to {trend.waiting_end:,} requests "
               f"while the second half of the requests arrived (+{trend.growth_per_s:,.1f} requests/s); this "
               "cluster does not keep up with the arrival rate. Lower the rate or add replicas (the Capacity page "
               "finds the highest rate it sustains).", icon=":material/warning:")
show_capacity(scenario(), run.requests["arrived_at"].to_numpy())


def pair(low: float, high: float) -> str:
    """Two latencies, each in the unit it reads best in."""
    return f"{duration_text(low)} / {duration_text(high)}"


metrics = [  # four to a row, units that switch: a value never has to be cut off
    ("Throughput (req/s)", f"{summary['throughput_rps']:.2f}", f"{summary['output_tokens_per_s']:.0f} output tokens/s"),
    ("Output tokens/s", f"{summary['output_tokens_per_s']:,.0f}", None),
    ("TTFT p50 / p99", pair(summary["ttft_p50_s"], summary["ttft_p99_s"]), "time to first token"),
    ("TBT p50 / p99", pair(summary["tbt_p50_s"], summary["tbt_p99_s"]), "time between tokens"),
    ("E2E p50 / p99", pair(summary["e2e_p50_s"], summary["e2e_p99_s"]), "arrival to last token"),
    ("TTFT p90", duration_text(summary["ttft_p90_s"]), None),
    ("TBT p90", duration_text(summary["tbt_p90_s"]), None),
    ("Scheduling delay p99", duration_text(summary["scheduling_delay_p99_s"]), None),
    ("Preemptions", f"{summary['num_preemptions']:,}",
     f"{summary['num_requests_preempted']} request(s) restarted at least once"),
    ("KV use mean / peak", f"{summary['kv_utilization_mean']:.0%} / {summary['kv_utilization_peak']:.0%}", None),
    ("Rejected", f"{summary['num_rejected']:,}", None),
    ("KV blocks / replica", blocks_text(run), None),
]
if run.config.scheduler.traits.has_prefix_cache:
    caching = run.config.scheduler.prefix_caching()
    metrics += [
        ("Prefix hit rate", f"{summary['prefix_hit_rate']:.0%}" if caching else "off",
         f"{summary['prefix_cached_tokens']:,} prompt tokens served from the prefix cache "
         "(not computed, still counted in prompt throughput)"),
        ("Prompt tokens/s", f"{summary['prompt_tokens_per_s']:,.0f}", "cached tokens included"),
        ("Truncated at max_model_len", f"{summary['num_truncated']:,}", None),
    ]
for start in range(0, len(metrics), 4):
    for column, (label, value, note) in zip(st.columns(4), metrics[start:start + 4]):
        column.metric(label, value, help=note)

st.subheader("Latency CDFs")
st.plotly_chart(derived(run, run_latency_cdfs), key="ov_cdf")
left, right = st.columns(2)
with left:
    st.subheader("Throughput over time")
    st.plotly_chart(derived(run, throughput_figure), key="ov_throughput")
with right:
    st.subheader("Queue length over time")
    st.plotly_chart(derived(run, queue_figure), key="ov_queues")
st.subheader("Load per replica")
load, load_figure = derived(run, replica_load_views)
st.plotly_chart(load_figure, key="ov_load")
with st.expander("Per-replica table"):
    st.dataframe(load, hide_index=True)
for note in run.notes:
    st.caption(note)
