"""Pipeline: Chrome-trace-style Gantt of batch stages per replica x stage, with the exports."""

import streamlit as st

from explorer.frame import through_app
from explorer.selection import time_window, zoom_button
from explorer.state import result, scenario, selected_request, web_config
from explorer.views import derived
from sim_core.config import config_to_yaml
from sim_core.export import chrome_trace_bytes, requests_csv, trace_file_name
from sim_core.viz.gantt import pipeline_gantt, stage_busy
from sim_core.viz.operators import operator_time_figure

through_app()


def operator_view(run):
    """The cost-model operator figure of a run (a view of the run, cached with it)."""
    return operator_time_figure(run.operator_times)


st.title("Pipeline")
run = result("batches")  # the whole batch and stage tables (Gantt, operator times), no block events
end = float(run.batch_stages["end"].max()) if len(run.batch_stages) else 1.0
window = time_window("pp", run, end, (0.0, min(end, 5.0)), follow=True,
                     help="Bars are batch stages; a gap on a stage row is a pipeline bubble (the stage idles). "
                          "It opens on the selected request.")
zoom_button("pp")
st.plotly_chart(derived(run, pipeline_gantt, *window, selected=selected_request()), key="pp_gantt")
busy = derived(run, stage_busy, *window)
st.caption("Busy share per stage in the window (1 - busy = bubbles and idle time): "
           + ", ".join(f"{run.replicas[r].name} stage {s}: {share:.0%}" for (r, s), share in busy.items()))

st.subheader("Where the stage time goes")
if run.operator_times.empty:
    st.caption("This run kept no batch tables (engine.record: requests).")
else:
    st.caption(f"Seconds per {run.config.predictor.type} cost-model operator over the whole run, all replicas "
               "and stages (layer operators times the layers of each stage; CPU = host time per iteration).")
    st.plotly_chart(derived(run, operator_view), key="pp_operators")

st.subheader("Downloads")
cols = st.columns(4)
# data are callables: each file is built only when its button is pressed
trace_name = trace_file_name(run.config.name)
cols[0].download_button("Chrome trace (Perfetto)", lambda: chrome_trace_bytes(run),
                        file_name=trace_name, mime="application/json", key="pp_trace",
                        on_click="ignore", help="Open in https://ui.perfetto.dev or chrome://tracing")
cols[1].download_button("Chrome trace, gzip", lambda: chrome_trace_bytes(run, gzip=True),
                        file_name=f"{trace_name}.gz", mime="application/gzip", key="pp_trace_gz",
                        on_click="ignore", help="The same trace, about a tenth of the size: Perfetto opens it as is")
cols[2].download_button("Per-request CSV", lambda: requests_csv(run), file_name="requests.csv",
                        mime="text/csv", key="pp_requests", on_click="ignore",
                        help="The requests.csv the command line writes for this run")
yaml_text = config_to_yaml(web_config(scenario()))
cols[3].download_button("Scenario YAML", yaml_text, file_name="scenario.yaml", mime="application/x-yaml",
                        key="pp_yaml", on_click="ignore")
