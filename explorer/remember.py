"""Widget values that survive page switches.

Streamlit forgets the state of a page's widgets when the user goes to another page. A widget
created with `**remember(key, default)` starts from the value it last had (kept under a plain,
non-widget session key) or from `default`, and saves every change there.
"""

from __future__ import annotations

import streamlit as st

STORE_KEY = "remembered_widgets"


def remember(key: str, default) -> dict:
    """Keyword arguments (key, on_change, args) for a widget; sets its value before it is drawn."""
    store = st.session_state.setdefault(STORE_KEY, {})
    if key not in st.session_state:
        st.session_state[key] = store.get(key, default)
    return {"key": key, "on_change": _save, "args": (key,)}


def _save(key: str) -> None:
    st.session_state[STORE_KEY][key] = st.session_state[key]

