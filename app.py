"""LLM-serving scheduling explorer: Streamlit entry point (page config, navigation, shared state).

Every page shares one scenario (`explorer/state.py`), the sidebar's quick knobs (so the view you
are on stays while you change the scenario) and a URL that encodes the scenario; pages run inside
this frame (`explorer/frame.py`). An unexpected error shows one line with an id; the traceback
goes to the server's log under that id.
"""

from pathlib import Path

import streamlit as st

from explorer.failures import report_internal_error
from explorer.frame import framed, pages
from explorer.sidebar import quick_knobs
from explorer.state import show_error
from explorer.url import read_url, write_url

ICON = Path(__file__).resolve().parent / "assets" / "icon.png"     # served by this server: nothing fetched elsewhere
st.set_page_config(page_title="LLM serving scheduling explorer", page_icon=ICON, layout="wide")

try:
    read_url()
    navigation = st.navigation(pages())
    quick_knobs()
    show_error()
    write_url()         # before the page: one that ends early (st.stop) still leaves `?s=` right
    with framed():
        navigation.run()
    write_url()         # a page may have replaced the scenario
except Exception as error:  # noqa: BLE001 - a bug: one line with an id here, the traceback in the log
    report_internal_error(error)
