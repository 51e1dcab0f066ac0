"""LLM-serving scheduling explorer: Streamlit entry point (page config, navigation, state)."""

import streamlit as st

st.set_page_config(page_title="LLM serving scheduling explorer", page_icon=":material/schedule:", layout="wide")

navigation = st.navigation([
    st.Page("pages/overview.py", title="Overview", icon=":material/monitoring:", default=True),
])
navigation.run()
