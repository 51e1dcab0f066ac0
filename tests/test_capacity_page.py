"""AppTest of the Capacity page: build a sweep around the current scenario, run it in the
background to the end, read its results at an edited price, open one point in the explorer."""

import json
import socket
import time

import yaml
from app_helpers import chart_specs, open_app, unescaped

from explorer.server import settings


def wait_until_done(app, timeout_s: float = 240.0):
    """Rerun the page (as its progress fragment does) until the sweep has ended."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        app.run()
        bars = [bar.proto.text for bar in app.get("progress")]
        if bars and not bars[0].endswith(": running"):
            return bars[0]
        time.sleep(0.5)
    raise AssertionError("the sweep did not end in time")


def small_sweep(app):
    app.multiselect(key="cap_types").set_value(["vllm", "sarathi"]).run()
    app.number_input(key="cap_num_requests").set_value(40).run()
    app.number_input(key="cap_tolerance").set_value(0.2).run()


def test_before_a_sweep_the_page_shows_the_spec_it_would_run():
    app = open_app("pages/capacity.py")
    assert app.info[0].value == "Choose what to vary and press Start sweep."
    small_sweep(app)
    spec = yaml.safe_load(app.code[0].value)
    assert spec["vary"] == {"scheduler.type": ["vllm", "sarathi"]}
    assert spec["slo"] == {"ttft_p90_s": 2.0, "tbt_p99_s": 0.2}
    assert spec["search"]["num_requests"] == 40 and spec["base"]["name"].startswith("tiny")
    app.text_input(key="cap_replicas").set_value("1, x").run()
    assert unescaped(app.error[0].value) == "Replicas: got '1, x'; expected whole numbers separated by commas"
    assert app.button(key="cap_start").disabled


def test_a_sweep_runs_to_the_end_and_its_results_follow_the_price():
    app = open_app("pages/capacity.py")
    small_sweep(app)
    app.button(key="cap_start").click().run()
    assert wait_until_done(app) == "2 of 2 configurations: finished"
    table = app.dataframe[0].value
    assert table["scheduler.type"].tolist() == ["vllm", "sarathi"]
    assert (table["max_qps"] > 0).all() and table["cost_per_hour_usd"].tolist() == [10.0, 10.0]
    pareto = json.loads(chart_specs(app)[0])
    assert {trace["name"] for trace in pareto["data"]} == {"dominated", "Pareto front"}
    assert app.dataframe[1].value["objective"].tolist()[0] == "highest capacity"
    assert app.info[0].value.startswith("Fewest GPUs: ")
    app.number_input(key="cap_price").set_value(5.0).run()
    assert app.dataframe[0].value["cost_per_hour_usd"].tolist() == [20.0, 20.0]
    assert app.dataframe[0].value["max_qps"].tolist() == table["max_qps"].tolist()
    assert app.subheader[-1].value == "One configuration in detail" and len(chart_specs(app)) == 5


def test_opening_a_point_makes_it_the_scenario_at_its_capacity():
    app = open_app("pages/capacity.py")
    small_sweep(app)
    app.button(key="cap_start").click().run()
    wait_until_done(app)
    capacity = app.dataframe[0].value["max_qps"].tolist()[1]
    app.selectbox(key="cap_point").set_value(1).run()
    app.button(key="cap_open").click().run()
    scenario = app.session_state["scenario"]
    assert scenario["scheduler"]["type"] == "sarathi" and scenario["workload"]["arrival"]["qps"] == capacity
    assert scenario["engine"]["record"] == "full" and scenario["workload"]["num_requests"] == 40
    assert app.title[0].value == "LLM serving scheduling explorer"      # the Overview of that scenario


def test_a_ray_address_where_nothing_listens_is_explained(monkeypatch):
    """An allowed cluster address where nothing listens fails at once, with the address named."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("SIM_EXPLORER_RAY_ADDRESSES", f"127.0.0.1:{port}")
    settings.clear()
    try:
        app = open_app("pages/capacity.py")
        app.radio(key="cap_backend").set_value("ray").run()
        assert app.selectbox(key="cap_address").options == [f"127.0.0.1:{port}"]
        app.button(key="cap_start").click().run()
        assert unescaped(app.error[0].value).startswith(f"--address: no Ray cluster answers at 127.0.0.1:{port}")
        assert app.info[0].value == "Choose what to vary and press Start sweep."
    finally:
        settings.clear()


def test_without_allowed_clusters_the_page_offers_only_the_local_pool():
    """No SIM_EXPLORER_RAY_ADDRESSES: no Ray choice and no address field at all."""
    settings.clear()
    app = open_app("pages/capacity.py")
    assert app.radio(key="cap_backend").options == ["local"]
    assert not [widget for widget in [*app.selectbox, *app.text_input] if widget.key == "cap_address"]


def test_stop_keeps_the_finished_points_and_start_resumes_from_them():
    app = open_app("pages/capacity.py")
    small_sweep(app)
    app.text_input(key="cap_replicas").set_value("1, 2, 3, 4, 5, 6, 7, 8").run()
    app.button(key="cap_start").click().run()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not app.get("progress")[0].proto.text.startswith(("1 of", "2 of", "3 of")):
        time.sleep(0.1)
        app.run()
    app.button(key="cap_stop").click().run()
    stopped = wait_until_done(app)
    done = int(stopped.split(" of ")[0])
    assert stopped.endswith("configurations: stopped") and 1 <= done < 16
    app.button(key="cap_start").click().run()
    resumed = int(app.get("progress")[0].proto.text.split(" of ")[0])
    assert resumed >= done
    assert wait_until_done(app) == "16 of 16 configurations: finished"
