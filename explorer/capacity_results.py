"""The Capacity page's results: progress, the table at the current price, Pareto views, the best
configuration per objective, the fewest GPUs for a target rate, and one point in detail."""

from __future__ import annotations

import html

import streamlit as st

from explorer.capacity_inputs import PAGE
from explorer.safe_text import plain
from explorer.state import result_of, show_failure
from explorer.widgets import page_value, replace_scenario
from sim_core.sweep import sweep_table
from sim_core.sweep.pareto import best_per_objective, config_label, min_gpus_for
from sim_core.sweep.probe import probe_scenario
from sim_core.sweep.spec import set_path
from sim_core.viz.capacity import PARETO_VIEWS, pareto_figure, probe_figure
from sim_core.viz.overview import latency_cdfs, queue_figure, throughput_figure

OPEN_KEY = "capacity_opened"
SHOWN = ["max_qps", "uncertainty", "num_gpus", "cost_per_hour_usd", "usd_per_million_output_tokens", "qps_per_usd",
         "qps_per_gpu", "binding_slo", "qps_low", "qps_high", "ttft_p90_s", "tbt_p99_s", "slo_attainment",
         "non_monotonic", "num_probes"]


def progress(job) -> None:
    """A progress bar that refreshes itself every second while the job runs; the whole page
    reruns once when it ends (to show the results)."""
    state = job.snapshot()
    st.progress(state.done / max(state.total, 1), text=f"{state.done} of {state.total} configurations: {state.status}")
    if state.error:
        show_failure(state.error)
    for _, reason in job.grid.skipped[:10]:
        st.caption(f"skipped {plain(reason)}")
    for note in state.notes:
        st.warning(plain(note, 400), icon=":material/warning:")
    seen = st.session_state.get("cap_seen_status")
    st.session_state["cap_seen_status"] = (id(job), state.status)
    if state.status != "running" and seen == (id(job), "running"):
        st.rerun()


def results(job, records: list[dict], price: float) -> None:
    keys = list(job.spec.vary)
    table = sweep_table(job.spec, records, price)
    st.subheader("Configurations")
    failed = "error" in table and table["error"].notna().any()
    st.dataframe(table[[*keys, *SHOWN, *(["error"] if failed else [])]], hide_index=True, key="cap_table")
    left, right = st.columns([3, 2])
    with left:
        view = st.selectbox("Pareto view", list(PARETO_VIEWS), **page_value(PAGE, "view", "capacity vs cost"))
        st.plotly_chart(pareto_figure(table, keys, view), key="cap_pareto")
    with right:
        st.markdown("**Best configuration per objective**")
        st.dataframe(best_per_objective(table, keys)[["objective", "configuration", "value"]], hide_index=True,
                     key="cap_best")
        target = st.number_input("Target rate (req/s)", 0.01, 1e6, **page_value(PAGE, "target", 10.0))
        st.info(f"Fewest GPUs: {plain(min_gpus_for(table, target).text(target, keys), 400)}",
                icon=":material/memory:")
    point_detail(job, table, records, keys)


def point_detail(job, table, records: list[dict], keys: list[str]) -> None:
    """One configuration: how its search went, and its full simulation at its capacity."""
    st.subheader("One configuration in detail")
    labels = [config_label(row, keys) for _, row in table.iterrows()]
    index = st.selectbox("Configuration", range(len(labels)), format_func=lambda i: labels[i], key="cap_point")
    record = records[index]
    if record.get("error"):
        show_failure(f"This configuration failed: {record['error']}")
        return
    st.plotly_chart(probe_figure(record, job.spec.slo), key="cap_probes")
    if record["max_qps"] <= 0:
        st.caption(f"No rate meets the SLOs ({record['binding_slo']}).")
        return
    point = next(p for p in job.grid.points if p.key == record["key"])
    # the probes record `requests`; this scenario says `full` though the detail reads `series`:
    # the field only names the scenario (each page simulates its own level, state._simulate sets
    # it); `full` as in the app's default scenario, the cache key is the one the Overview looks
    # up after "Open this configuration in the explorer", so it reuses this run
    scenario = set_path(probe_scenario(point.scenario, record["max_qps"], job.spec.search.num_requests),
                        "engine.record", "full")
    run = result_of(scenario, "series")
    st.caption(f"Simulated at its capacity, {record['max_qps']:.3g} req/s; the SLO that binds just above: "
               f"{record['binding_slo']}.")
    st.plotly_chart(latency_cdfs({html.escape(labels[index]): run.requests}), key="cap_cdf")   # legends are HTML
    cols = st.columns(2)
    cols[0].plotly_chart(throughput_figure(run), key="cap_throughput")
    cols[1].plotly_chart(queue_figure(run), key="cap_queue")
    st.button("Open this configuration in the explorer", key="cap_open", on_click=_open, args=(scenario,))


def _open(scenario: dict) -> None:
    if replace_scenario(scenario):
        st.session_state[OPEN_KEY] = True


def leave_if_opened() -> None:
    """After "Open in the explorer", go to the Overview of the new scenario."""
    if st.session_state.pop(OPEN_KEY, False):
        st.switch_page("pages/overview.py")
