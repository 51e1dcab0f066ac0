"""One real-browser test: a real `streamlit run` server on 127.0.0.1 and Debian's chromium
driven by Playwright. It moves a slider, uploads a trace, plays the KV animation, switches pages,
downloads the Chrome trace and parses it, and takes a screenshot of every view. Another opens a
fresh server on a deep link.

Screenshots go to a temporary folder; with UPDATE_SCREENSHOTS=1 they replace the ones in
assets/ that the README shows. Without a chromium on PATH the test skips, except in CI
(CI=true), where a missing browser fails it.
"""

import gzip
import json
import os
from pathlib import Path

import pytest
from browser_helpers import FLAGS, ROOT, choose_until_shown, chromium, go_to, settle, streamlit_server

TRACE = "arrived_at,num_prefill_tokens,num_decode_tokens\n" + "".join(
    f"{i * 0.25},{100 + 37 * i % 400},{20 + 13 * i % 90}\n" for i in range(60))


@pytest.fixture(scope="module")
def server():
    with streamlit_server() as url:
        yield url


def shoot(page, folder: Path, name: str) -> None:
    page.wait_for_timeout(800)          # let plotly finish drawing
    page.screenshot(path=str(folder / f"{name}.png"))


def test_a_user_session_end_to_end(server, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    shots = ROOT / "assets" if os.environ.get("UPDATE_SCREENSHOTS") else tmp_path
    trace_file = tmp_path / "my_trace.csv"
    trace_file.write_text(TRACE)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1500, "height": 1100}, accept_downloads=True)
        page.goto(server)
        settle(page)
        expect(page.get_by_text("Throughput (req/s)")).to_be_visible(timeout=60_000)
        expect(page.locator(".js-plotly-plot").first).to_be_visible(timeout=60_000)
        shoot(page, shots, "overview")

        # move the Replicas slider in the sidebar: 2 -> 3, the view stays on Overview
        slider = page.get_by_test_id("stSidebar").get_by_role("slider").first
        slider.focus()
        slider.press("ArrowRight")
        settle(page)
        expect(slider).to_have_value("3")
        expect(page.get_by_text("Replica 2").first).to_be_attached(timeout=60_000)
        assert "s=" in page.url                                  # the link carries the scenario

        # KV cache: press play; the animation's time label moves on
        go_to(page, "KV cache")
        label = page.locator(".slider-container .slider-current-value, g.slider-container text").first
        play = page.locator(".updatemenu-button").filter(has_text="Play")
        expect(play).to_be_visible(timeout=60_000)
        page.wait_for_timeout(500)                             # plotly binds the buttons after drawing
        before = label.text_content()
        play.click()
        expect(label).not_to_have_text(before, timeout=15_000)
        page.locator(".updatemenu-button").filter(has_text="Pause").click()
        shoot(page, shots, "kv_cache")

        # Scenario: upload a trace; the run now replays its 60 requests
        go_to(page, "Scenario")
        page.get_by_role("tab", name="Workload").click()
        uploader = page.get_by_test_id("stFileUploader").filter(has_text="Upload a trace CSV")
        choose_until_shown(page, "trace file", uploader.locator("input[type=file]"))
        uploader.locator("input[type=file]").set_input_files(str(trace_file))
        settle(page)
        expect(page.get_by_text("my_trace.csv: 60 requests over 14.8 s")).to_be_visible(timeout=60_000)
        shoot(page, shots, "scenario")

        go_to(page, "Requests")
        expect(page.get_by_text("Showing 60 of 60 requests")).to_be_visible(timeout=60_000)
        shoot(page, shots, "requests")
        go_to(page, "Memory")
        shoot(page, shots, "memory")

        # Pipeline: download the Chrome trace and check it holds the run
        go_to(page, "Pipeline")
        shoot(page, shots, "pipeline")
        with page.expect_download(timeout=60_000) as download:
            page.get_by_test_id("stDownloadButton").filter(has_text="Chrome trace (Perfetto)").click()
        trace = json.loads(Path(download.value.path()).read_text())
        with page.expect_download(timeout=60_000) as packed:      # the gzip'd one: the same trace
            page.get_by_test_id("stDownloadButton").filter(has_text="Chrome trace, gzip").click()
        assert packed.value.suggested_filename.endswith(".trace.json.gz")
        assert json.loads(gzip.decompress(Path(packed.value.path()).read_bytes())) == trace
        events = trace["traceEvents"]
        names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
        assert names == {"Replica 0", "Replica 1", "Replica 2", "Requests"}
        batches = [e for e in events if e["ph"] == "X" and e["cat"] == "batch"]
        assert batches and all(e["dur"] > 0 for e in batches)
        assert sum(len(e["args"]["request_ids"]) for e in batches if e["tid"] == 0) >= 60
        assert {e["name"] for e in events if e["ph"] == "C"} == {"KV blocks", "Requests"}
        expect(page.locator("[data-testid='stException']")).to_have_count(0)
        browser.close()


def test_a_deep_link_as_the_first_request_to_a_fresh_server_shows_the_sidebar_knobs():
    """A new server starts in Streamlit's pages-folder mode, where /kv_cache would run the page
    script alone; the page reruns through app.py: the sidebar has its knobs and the URL the scenario."""
    from playwright.sync_api import expect, sync_playwright

    with streamlit_server() as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.goto(f"{url}/kv_cache")
        settle(page)
        expect(page.get_by_role("heading", name="KV cache")).to_be_visible(timeout=60_000)
        sidebar = page.get_by_test_id("stSidebar")
        expect(sidebar.get_by_text("Replica scheduler")).to_be_visible(timeout=60_000)
        expect(sidebar.get_by_role("slider").first).to_be_visible()
        assert "/kv_cache" in page.url and "s=" in page.url
        expect(page.locator("[data-testid='stException']")).to_have_count(0)
        browser.close()


def test_a_session_fetches_nothing_from_another_host_and_the_scheduler_choice_is_not_cut(server):
    """Issue 19 item 13: the page icon is served by the app's own server (no font or emoji CDN),
    so a session offline has no failed request; the sidebar's scheduler box shows the policy's
    short name and what it mirrors in a caption below it."""
    from playwright.sync_api import expect, sync_playwright

    elsewhere = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.on("request", lambda request: None if request.url.startswith(("http://127.0.0.1", "data:", "blob:"))
                else elsewhere.append(request.url))
        page.goto(server)
        settle(page)
        expect(page.get_by_text("Throughput (req/s)")).to_be_visible(timeout=60_000)
        page.wait_for_timeout(1500)
        icon = page.locator("link[rel='shortcut icon'], link[rel='icon']").first.get_attribute("href")
        assert icon.startswith(("/media/", "./media/", server)), icon
        sidebar = page.get_by_test_id("stSidebar")
        expect(sidebar.get_by_text("vllm · vLLM v0 as modelled by Vidur")).to_be_visible()
        expect(sidebar.get_by_role("combobox", name="Replica scheduler")).to_have_value("vllm")
        assert elsewhere == []
        browser.close()


# every chart's margins as plotly laid them out, and as the figure asked for them
MARGINS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(el => {
    const size = el._fullLayout._size, asked = el.layout.margin || {};
    return [['l', 'r', 't', 'b'].map(side => size[side]), ['l', 'r', 't', 'b'].map(side => asked[side])];
})"""


# the charts each page draws with the app's default scenario
CHARTS = {"Overview": 4, "KV cache": 1, "Workload": 3, "Requests": 1, "Pipeline": 2, "Memory": 1, "Compare": 6}


def test_every_chart_is_laid_out_once(server):
    """Issue 20 item 4: each chart's margins already hold its labels, titles and legend, so
    plotly's automargin grows none of them (growing one draws the whole chart a second time):
    on every page with charts, every margin as drawn is the one the figure asked for."""
    from playwright.sync_api import expect, sync_playwright

    drawn = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.goto(server)
        settle(page)
        for title, count in CHARTS.items():
            if title != "Overview":
                go_to(page, title)
            expect(page.locator(".js-plotly-plot")).to_have_count(count, timeout=60_000)
            page.wait_for_timeout(800)                          # let plotly finish drawing
            drawn[title] = page.evaluate(MARGINS)
        browser.close()
    assert {title: len(charts) for title, charts in drawn.items()} == CHARTS
    for title, charts in drawn.items():
        for index, (as_drawn, asked) in enumerate(charts):
            assert as_drawn == asked, (title, index)
