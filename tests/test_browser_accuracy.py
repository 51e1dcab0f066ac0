"""The Accuracy page in a real browser: a real `streamlit run` server on 127.0.0.1 and Debian's
chromium driven by Playwright. A user uploads a per-request log of a vLLM server (two files
through the page's uploader), presses Replay and reads the comparison and the CDFs.

Without a chromium on PATH the test skips, except in CI (CI=true), where a missing browser fails it.
"""

from pathlib import Path

import pytest
from browser_helpers import FLAGS, chromium, go_to, settle, streamlit_server
from test_accuracy_readers import log_files


@pytest.fixture(scope="module")
def server():
    with streamlit_server() as url:
        yield url


def test_an_uploaded_request_log_replays_and_shows_measured_against_simulated(server, tmp_path):
    """requests.jsonl and meta.json of 4 requests on an RTX 4090: the page names nothing to pick
    (the GPU comes from meta.json); Replay shows the median errors, the comparison table and the
    TTFT/E2E CDF chart, with no error and no exception. (The figures themselves are checked by the
    page's AppTests: the browser draws tables on a canvas.)"""
    from playwright.sync_api import expect, sync_playwright

    paths = []
    for name, data in log_files().items():
        path = Path(tmp_path / name)
        path.write_bytes(data)
        paths.append(str(path))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.goto(server)
        settle(page)
        go_to(page, "Accuracy")
        expect(page.get_by_text("Upload a measured run, then press Replay.")).to_be_visible(timeout=60_000)
        uploader = page.get_by_test_id("stFileUploader").filter(has_text="Measured run")
        uploader.locator("input[type=file]").set_input_files(paths)
        # the uploads reach the server before the rerun that enables Replay: wait for both, not
        # only for the page to go idle (it can be idle before the upload's rerun begins)
        for path in paths:
            expect(uploader.get_by_text(Path(path).name)).to_be_visible(timeout=60_000)
        settle(page)
        replay = page.get_by_role("button", name="Replay")
        expect(replay).to_be_enabled(timeout=60_000)
        replay.click()
        settle(page)
        expect(page.get_by_text("Median absolute error (whole run)")).to_be_visible(timeout=60_000)
        expect(page.get_by_text("Measured against simulated")).to_be_visible()
        expect(page.locator(".js-plotly-plot").first).to_be_visible(timeout=60_000)
        table = page.get_by_test_id("stDataFrame").nth(1)
        expect(table).to_be_visible()
        expect(page.locator("[data-testid='stException']")).to_have_count(0)
        expect(page.locator("[data-testid='stAlertContentError']")).to_have_count(0)
        browser.close()
