"""LLM-serving scheduling explorer: Streamlit entry point (page config, navigation, shared state).

Every page shares one scenario (`explorer/state.py`), the sidebar's quick knobs (so the view you
are on stays while you change the scenario) and a URL that encodes the scenario. An unexpected
error shows one line with an id; the traceback goes to the server's log under that id.
"""

import streamlit as st

from explorer.failures import report_internal_error
from explorer.sidebar import quick_knobs
from explorer.state import show_error
from explorer.url import read_url, write_url

st.set_page_config(page_title="LLM serving scheduling explorer", page_icon=":material/schedule:", layout="wide")

PAGES = [
    st.Page("pages/overview.py", title="Overview", icon=":material/monitoring:", default=True),
    st.Page("pages/scenario.py", title="Scenario", icon=":material/tune:"),
    st.Page("pages/workload.py", title="Workload", icon=":material/dataset:"),
    st.Page("pages/kv_cache.py", title="KV cache", icon=":material/grid_view:"),
    st.Page("pages/requests.py", title="Requests", icon=":material/view_timeline:"),
    st.Page("pages/pipeline.py", title="Pipeline", icon=":material/view_kanban:"),
    st.Page("pages/memory.py", title="Memory", icon=":material/memory:"),
    st.Page("pages/predictor.py", title="Predictor", icon=":material/speed:"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
    st.Page("pages/capacity.py", title="Capacity", icon=":material/query_stats:"),
]

try:
    read_url()
    navigation = st.navigation(PAGES)
    quick_knobs()
    show_error()
    navigation.run()
    write_url()
except Exception as error:  # noqa: BLE001 - a bug: one line with an id here, the traceback in the log
    report_internal_error(error)
