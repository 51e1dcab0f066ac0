"""The Overview and the sidebar's rate box show the configuration's capacity once a sweep has
found it, and the Overview can start a search of this configuration alone (issue 18, item 4)."""

import time

from app_helpers import open_app

from explorer.capacity_hint import KnownCapacity, configuration
from sim_core import parse_config

ONE_REPLICA = {
    "name": "one replica", "seed": 3, "model": "llama-2-7b", "device": "a100-80gb", "max_model_len": 2048,
    "scheduler": {"type": "vllm", "batch_size_cap": 32, "block_size": 16, "num_blocks": 400},
    "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.0001},
    "engine": {"record": "full"},
    "workload": {"num_requests": 60, "arrival": {"process": "poisson", "qps": 2.0},
                 "prompt_tokens": {"distribution": "uniform", "min": 32, "max": 256},
                 "output_tokens": {"distribution": "uniform", "min": 16, "max": 128}},
}


def test_a_configuration_is_the_scenario_without_what_the_search_sets():
    """Rate, request count, record level and label do not make another configuration; the
    scheduler does."""
    base = parse_config(ONE_REPLICA).model_dump(mode="json")
    probed = parse_config({**ONE_REPLICA, "name": "x", "engine": {"record": "requests"},
                           "workload": {**ONE_REPLICA["workload"], "num_requests": 400,
                                        "arrival": {"process": "poisson", "qps": 9.0}}}).model_dump(mode="json")
    other = parse_config({**ONE_REPLICA, "scheduler": {"type": "sarathi"}}).model_dump(mode="json")
    assert configuration(probed) == configuration(base) != configuration(other)


def test_slo_and_share_texts():
    known = KnownCapacity(8.0, (8.0, 8.4), "tbt_p99_s", {"ttft_p90_s": 2.0, "tbt_p99_s": 0.2})
    assert known.slo_text() == "TTFT p90 <= 2 s, TBT p99 <= 0.2 s"
    assert known.share_text(6.0) == "6 req/s is 75% of it"
    assert known.share_text(10.0) == "10 req/s is 125% of it: over capacity"


def wait_for_capacity(app, timeout_s: float = 240.0) -> str:
    """Rerun the Overview (as its waiting fragment does) until it shows the capacity."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        app.run()
        shown = [info.value for info in app.info if info.value.startswith("Capacity of this configuration")]
        if shown:
            return shown[0]
        time.sleep(0.5)
    raise AssertionError("the capacity search did not end in time")


def test_the_overview_finds_the_capacity_and_the_rate_box_shows_it():
    """Before a search the Overview offers one; after it, the Overview and the sidebar give the
    capacity, and the rate of 2 req/s as a share of it."""
    app = open_app("pages/overview.py", ONE_REPLICA)
    assert not [info for info in app.info if info.value.startswith("Capacity")]
    app.button(key="ov_capacity").click().run()
    shown = wait_for_capacity(app)
    assert "within TTFT p90 <= 2 s, TBT p99 <= 0.2 s; 2 req/s is " in shown
    capacity = float(shown.removeprefix("Capacity of this configuration: ").split(" req/s")[0])
    share = round(2.0 / capacity * 100)
    assert shown.endswith(f"is {share}% of it.")
    captions = [caption.value for caption in app.sidebar.caption if caption.value.startswith("Capacity")]
    assert captions == [f"Capacity of this configuration: {capacity:.3g} req/s (TTFT p90 <= 2 s, TBT p99 <= 0.2 s)"
                        f"; 2 req/s is {share}% of it"]
    app.number_input(key="w:side:workload.arrival.qps").set_value(3.0).run()    # another rate: the same configuration
    assert any(info.value.startswith("Capacity of this configuration") for info in app.info)
    app.selectbox(key="w:side:scheduler.type").set_value("sarathi").run()       # another configuration
    assert not [info for info in app.info if info.value.startswith("Capacity")]
    assert app.button(key="ov_capacity")
