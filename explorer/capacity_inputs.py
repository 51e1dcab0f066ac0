"""The Capacity page's sweep builder: what to vary around the current scenario, the SLOs, the
search and the price; returns a sweep spec mapping (the same shape as a spec file)."""

from __future__ import annotations

import typing

import streamlit as st

from explorer.bind import field_info
from explorer.state import get_path
from explorer.widgets import page_value
from sim_core.catalog import DEVICES
from sim_core.sweep.spec import SearchSettings

SEARCH = SearchSettings.model_fields
PAGE = "cap"              # its widgets' keys start with cap_
DEGREES = [1, 2, 4, 8]


def sweep_spec(base: dict) -> tuple[dict, list[str]]:
    """Draw the builder; return (spec mapping with `base` inline, [problems with typed values])."""
    problems: list[str] = []
    st.markdown("**Vary** (the grid is every combination)")
    cols = st.columns(3)
    types = list(typing.get_args(field_info("scheduler.type").annotation))
    vary = {
        "scheduler.type": cols[0].multiselect("Schedulers", types,
                                              **page_value(PAGE, "types", [_at(base, "scheduler.type")])),
        "device": cols[1].multiselect("GPUs", sorted({*DEVICES, *base.get("devices", {})}),
                                      **page_value(PAGE, "devices", [_at(base, "device")])),
        "cluster.num_replicas": _numbers(cols[2], "Replicas", "replicas", _at(base, "cluster.num_replicas"),
                                         problems),
        "cluster.tensor_parallel_size": cols[0].multiselect(
            "TP", DEGREES, **page_value(PAGE, "tp", [_at(base, "cluster.tensor_parallel_size")])),
        "cluster.pipeline_parallel_size": cols[1].multiselect(
            "PP", DEGREES, **page_value(PAGE, "pp", [_at(base, "cluster.pipeline_parallel_size")])),
        "scheduler.chunk_size": _numbers(cols[2], "Chunk sizes (sarathi)", "chunks",
                                         _at(base, "scheduler.chunk_size"), problems),
    }
    st.markdown("**SLOs** (seconds; 0 = no limit) and **search**")
    cols = st.columns(4)
    limits = {"ttft_p90_s": cols[0].number_input("TTFT p90", 0.0, 3600.0, **page_value(PAGE, "ttft", 2.0)),
              "tbt_p99_s": cols[1].number_input("TBT p99", 0.0, 60.0, **page_value(PAGE, "tbt", 0.2)),
              "e2e_p99_s": cols[2].number_input("e2e p99", 0.0, 36000.0, **page_value(PAGE, "e2e", 0.0))}
    price = cols[3].number_input("USD per GPU-hour", 0.0, 1000.0, **page_value(PAGE, "price", 2.5))
    search = {name: _search_input(col, name, label) for col, (name, label) in zip(
        st.columns(4), (("qps_min", "Lowest rate"), ("qps_max", "Highest rate"), ("num_requests", "Requests per probe"),
                        ("tolerance", "Tolerance")))}
    vary = {key: values for key, values in vary.items() if len(values) > 1 or values and values[0] != _at(base, key)}
    spec = {"base": base, "vary": vary,
            "slo": {key: value for key, value in limits.items() if value > 0}, "search": search, "gpu_hour_usd": price}
    return spec, problems


def _at(base: dict, path: str):
    return get_path(base, path, field_info(path).get_default(call_default_factory=True))


def _numbers(column, label: str, name: str, current, problems: list[str]) -> list[int]:
    text = column.text_input(label, help="Whole numbers separated by commas", **page_value(PAGE, name, str(current)))
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        problems.append(f"{label}: got '{text}'; expected whole numbers separated by commas")
        return []


def _search_input(column, name: str, label: str):
    info = SEARCH[name]
    number = int if info.annotation is int else float
    return column.number_input(label, help=info.description, **page_value(PAGE, name, number(info.default)))
