"""Overview: headline metrics, latency CDFs, throughput and queues over time, load per replica."""

import streamlit as st

from explorer.frame import through_app
from explorer.safe_text import plain
from explorer.state import result
from sim_core.config.simulation import MAX_NAME_CHARS
from sim_core.viz.overview import (
    blocks_text,
    latency_cdfs,
    queue_figure,
    replica_load,
    replica_load_figure,
    throughput_figure,
)

through_app()

st.title("LLM serving scheduling explorer")
run = result(events=False)  # no block or state events needed here
summary = run.summary
st.caption(f"{plain(run.config.name or 'scenario', MAX_NAME_CHARS)} · {summary['num_requests']:,} requests, "
           f"{summary['num_batches']:,} batches, {summary['makespan_s']:.1f} s simulated")

row = st.columns(6)
row[0].metric("Throughput (req/s)", f"{summary['throughput_rps']:.2f}",
              help=f"{summary['output_tokens_per_s']:.0f} output tokens/s")
row[1].metric("Output tokens/s", f"{summary['output_tokens_per_s']:.0f}")
row[2].metric("TTFT p50 / p99 (ms)", f"{summary['ttft_p50_s'] * 1e3:.0f} / {summary['ttft_p99_s'] * 1e3:.0f}")
row[3].metric("TBT p50 / p99 (ms)", f"{summary['tbt_p50_s'] * 1e3:.0f} / {summary['tbt_p99_s'] * 1e3:.0f}")
row[4].metric("Preemptions", f"{summary['num_preemptions']:,}",
              help=f"{summary['num_requests_preempted']} request(s) restarted at least once")
row[5].metric("KV use mean / peak", f"{summary['kv_utilization_mean']:.0%} / {summary['kv_utilization_peak']:.0%}")
row = st.columns(6)
row[0].metric("E2E p50 / p99 (s)", f"{summary['e2e_p50_s']:.2f} / {summary['e2e_p99_s']:.2f}")
row[1].metric("TTFT p90 (ms)", f"{summary['ttft_p90_s'] * 1e3:.0f}")
row[2].metric("TBT p90 (ms)", f"{summary['tbt_p90_s'] * 1e3:.0f}")
row[3].metric("Scheduling delay p99 (s)", f"{summary['scheduling_delay_p99_s']:.2f}")
row[4].metric("Rejected", f"{summary['num_rejected']:,}")
row[5].metric("KV blocks / replica", blocks_text(run))
if run.config.scheduler.traits.has_prefix_cache:
    row = st.columns(6)
    caching = run.config.scheduler.prefix_caching()
    row[0].metric("Prefix hit rate", f"{summary['prefix_hit_rate']:.0%}" if caching else "off",
                  help=f"{summary['prefix_cached_tokens']:,} prompt tokens served from the prefix cache "
                       "(not computed, still counted in prompt throughput)")
    row[1].metric("Prompt tokens/s", f"{summary['prompt_tokens_per_s']:.0f}", help="cached tokens included")
    row[2].metric("Truncated at max_model_len", f"{summary['num_truncated']:,}")

st.subheader("Latency CDFs")
st.plotly_chart(latency_cdfs({run.config.name or "scenario": run.requests}), key="ov_cdf")
left, right = st.columns(2)
with left:
    st.subheader("Throughput over time")
    st.plotly_chart(throughput_figure(run), key="ov_throughput")
with right:
    st.subheader("Queue length over time")
    st.plotly_chart(queue_figure(run), key="ov_queues")
st.subheader("Load per replica")
st.plotly_chart(replica_load_figure(run), key="ov_load")
with st.expander("Per-replica table"):
    st.dataframe(replica_load(run), hide_index=True)
for note in run.notes:
    st.caption(note)
