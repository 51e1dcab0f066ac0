"""Shared set-up for the AppTests: a tiny scenario and an AppTest opened on a page."""

from __future__ import annotations

import copy
import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
TIMEOUT = 60

TINY = {
    "name": "tiny: 40 requests, 64 KV blocks",
    "seed": 7, "model": "llama-2-7b", "device": "a100-80gb", "max_model_len": 2048,
    "cluster": {"num_replicas": 2, "tensor_parallel_size": 1, "pipeline_parallel_size": 2},
    "scheduler": {"type": "vllm", "batch_size_cap": 32, "block_size": 16, "num_blocks": 64},
    "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.0001},
    "engine": {"record": "full"},
    "workload": {"num_requests": 40, "arrival": {"process": "poisson", "qps": 6.0},
                 "prompt_tokens": {"distribution": "uniform", "min": 32, "max": 256},
                 "output_tokens": {"distribution": "uniform", "min": 16, "max": 128}},
}


def open_app(page: str | None = None, scenario: dict | None = None) -> AppTest:
    """The app after its first run with `scenario` (default TINY), switched to `page`."""
    app = AppTest.from_file(APP, default_timeout=TIMEOUT)
    app.session_state["scenario"] = copy.deepcopy(TINY if scenario is None else scenario)
    app.run()
    if page:
        app.switch_page(page).run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def has_widget(app: AppTest, kind: str, key: str) -> bool:
    """Whether a widget of this kind (e.g. "number_input") with this key is on the page."""
    try:
        getattr(app, kind)(key=key)
    except KeyError:
        return False
    return True


def chart_specs(app: AppTest) -> list[str]:
    """The plotly figure JSON of every chart on the page, in order."""
    return [chart.proto.spec for chart in app.get("plotly_chart")]


def unescaped(markdown: str) -> str:
    """The text a user sees for Markdown made by `explorer.safe_text.plain` (escapes and word
    joiners removed)."""
    return re.sub(r"\\(.)", r"\1", markdown).replace("\u2060", "")
