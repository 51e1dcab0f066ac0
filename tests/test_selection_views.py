"""Selecting a request drives the time views (issue 19 item 3): the Pipeline window opens on it,
the KV map opens where it holds most blocks, and "zoom to request" narrows the KV window."""

import json

import numpy as np
import pandas as pd
import pytest
from app_helpers import TINY, chart_specs, open_app

from sim_core import parse_config, run_simulation
from sim_core.viz.kv_blocks import SELECTED
from sim_core.viz.kv_map import selected_frame
from sim_core.viz.timeline import request_window


def test_a_request_window_spans_its_life_with_a_tenth_either_side_clipped_to_the_run():
    """#0 lives 8.25..13.05 s: the window is 7.77..13.53 s; one still running ends at the run's end."""
    requests = pd.DataFrame({"request_id": [0, 1, 2], "arrived_at": [8.25, 0.1, 3.0],
                             "completed_at": [13.05, 2.1, np.nan]})
    assert request_window(requests, 0, 60.0) == pytest.approx((7.77, 13.53))
    assert request_window(requests, 1, 60.0) == pytest.approx((0.0, 2.3))
    assert request_window(requests, 2, 10.0) == pytest.approx((2.3, 10.0))
    assert request_window(requests, 9, 10.0) is None


def test_the_selected_frame_is_where_the_request_holds_most_blocks():
    """Frames holding 0, 2 and 1 selected blocks: the second; none selected anywhere: None."""
    z = np.zeros((3, 2, 2), dtype=np.int8)
    z[1, 0, :] = SELECTED
    z[2, 1, 0] = SELECTED
    assert selected_frame(z) == 1
    assert selected_frame(np.zeros((3, 2, 2), dtype=np.int8)) is None


def test_selecting_a_request_moves_the_pipeline_window_and_the_kv_scrubber_to_it():
    """Request 30 of the tiny run: the Pipeline window becomes its window; the KV map's scrubber
    opens at a time inside its life; "zoom to request" narrows the KV window to it."""
    run = run_simulation(parse_config(TINY))
    row = run.requests.set_index("request_id").loc[30]
    app = open_app("pages/requests.py")
    app.number_input(key="rq_pick").set_value(30).run()
    app.switch_page("pages/pipeline.py").run()
    end = float(run.batch_stages["end"].max())
    assert app.slider(key="pp_window_30").value == pytest.approx(request_window(run.requests, 30, end))
    app.switch_page("pages/kv_cache.py").run()
    figure = json.loads(chart_specs(app)[0])
    slider = figure["layout"]["sliders"][0]
    opened = float(slider["steps"][slider["active"]]["label"])
    assert row["scheduled_at"] - 0.01 <= opened <= row["completed_at"] + 0.01
    assert app.slider(key="kv_window_30").value == pytest.approx((0.0, float(run.requests["completed_at"].max())))
    app.button(key="kv_zoom").click().run()
    kv_end = float(run.requests["completed_at"].max())
    assert app.slider(key="kv_window_30_zoom").value == pytest.approx(request_window(run.requests, 30, kv_end))
    assert not app.exception
