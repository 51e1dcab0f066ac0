"""Predictor: where a batch's time goes, roofline vs learned or silicon vs an uploaded profile, accuracy."""

import numpy as np
import streamlit as st

from explorer.frame import through_app
from explorer.safe_text import plain
from explorer.state import scenario, show_failure, web_config
from explorer.uploads import read_uploaded_profile
from sim_core import SimCoreError
from sim_core.config.predictor import as_roofline
from sim_core.predictor import build_predictor
from sim_core.predictor.accuracy import (
    learned_accuracy,
    operator_comparison,
    pooled,
    roofline_accuracy,
)
from sim_core.predictor.overheads import overhead_rows
from sim_core.viz import (
    decode_frame,
    decode_lines,
    error_bars,
    measured_vs_predicted,
    operator_lines,
    prefill_frame,
)

through_app()

st.title("Execution-time predictor")
try:
    config = web_config(scenario())
    roofline_config = as_roofline(config.predictor)   # the roofline under the scenario's settings
    predictors = {"roofline": build_predictor(config.model_copy(update={"predictor": roofline_config}))}
    if config.predictor.type in ("learned", "silicon"):
        predictors[config.predictor.type] = build_predictor(config)
except SimCoreError as error:
    show_failure(str(error))
    st.stop()
st.caption(f"{plain(config.model, 80)} on {plain(config.device, 80)}, TP={config.cluster.tensor_parallel_size}, "
           f"PP={config.cluster.pipeline_parallel_size}; stage 0 of the scenario")

left, right = st.columns(2)
with left:
    st.subheader("Prefill: time per operator vs tokens")
    tokens = np.unique(np.geomspace(16, st.select_slider("Largest prompt", [512, 1024, 2048, 4096, 8192], 4096,
                                                         key="pr_tokens"), 24).astype(int))
    st.plotly_chart(operator_lines(prefill_frame(predictors, tokens)), key="pr_prefill")
with right:
    st.subheader("Decode: stage time vs batch and context")
    contexts = st.multiselect("Context per request", [256, 1024, 2048, 4096, 8192], [1024, 4096], key="pr_ctx")
    st.plotly_chart(decode_lines(decode_frame(predictors, [1, 2, 4, 8, 16, 32, 64, 128, 256], contexts)),
                    key="pr_decode")

st.subheader("Host and engine overheads")
batch = st.select_slider("Requests in the iteration", [1, 8, 32, 64, 128, 256], 32, key="pr_host_batch")
host = overhead_rows(config, predictors["roofline"], batch)
st.caption("The engine's Python time per iteration, by phase, and the API server's time per request. "
           "With async scheduling (vllm_v1) or SGLang's overlap loop, the phases marked hidden run while the "
           "GPU works on the previous iteration (when it is longer). Set them under the predictor; "
           "`python -m sim_core calibrate` fits them to your own benchmark runs.")
st.dataframe({"term": [row["term"] for row in host], "ms": [round(float(row["seconds"]) * 1000, 3) for row in host],
              "where": [row["where"] for row in host]}, key="pr_host")

st.subheader("Against a measured profile")
upload = st.file_uploader("Vidur-format mlp.csv or attention.csv (of the scenario's model)", type="csv",
                          key="pr_upload")
estimator = st.radio("Learned estimator", ["random_forest", "polynomial"], horizontal=True, key="pr_estimator")
if upload is None:
    st.info("Upload a profile to compare the roofline and a learned model with measurements.")
    st.stop()
try:
    profiles = read_uploaded_profile(config, upload.name, upload.getvalue())
except SimCoreError as error:
    show_failure(str(error))
    st.stop()
model, device = config.model_spec(), config.device_spec()
operator = st.selectbox("Operator", list(profiles.operators), key="pr_operator")
degrees = sorted(int(t) for t in profiles.operators[operator]["tp"].unique())
tp = st.selectbox("TP degree of the rows", degrees, key="pr_tp")
x, measured, predicted = operator_comparison(profiles, operator, tp, model, device, roofline_config, estimator)
st.plotly_chart(measured_vs_predicted(x, measured, predicted, operator), key="pr_measured")

st.subheader("Accuracy report")
learned = pooled(learned_accuracy(profiles, estimator), "mape")
roofline = pooled(roofline_accuracy(profiles, model, device, roofline_config), "median")
st.plotly_chart(error_bars({"learned: held-out MAPE": learned, "roofline: median error": roofline}), key="pr_errors")
st.dataframe({"operator": list(learned), "learned MAPE %": list(learned.values()),
              "roofline median error %": [roofline.get(op) for op in learned]}, key="pr_table")
