"""One real-browser test: a real Streamlit server, Debian's chromium driven by Playwright."""

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                break
        except OSError:
            time.sleep(0.3)
    else:
        process.kill()
        raise RuntimeError(f"streamlit did not start: {process.stdout.read().decode()[-2000:]}")
    yield url
    process.terminate()
    process.wait(timeout=20)


def test_the_app_renders_metrics_and_the_gantt_and_reacts_to_a_widget(server):
    assert Path(CHROMIUM).exists(), f"Debian chromium is required at {CHROMIUM} (apt-get install chromium)"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(server)
        expect(page.get_by_text("Throughput")).to_be_visible(timeout=60_000)
        expect(page.locator(".js-plotly-plot").first).to_be_visible(timeout=60_000)
        expect(page.get_by_text("Download Chrome trace (Perfetto)")).to_be_visible(timeout=60_000)
        if os.environ.get("SCREENSHOT"):  # how assets/screenshot.png is made
            page.wait_for_timeout(1500)
            page.screenshot(path=os.environ["SCREENSHOT"], full_page=True)
        policy = page.get_by_test_id("stSelectbox").first.get_by_role("combobox")
        policy.click()
        page.get_by_role("option", name="sarathi").click()
        expect(policy).to_have_value("sarathi", timeout=30_000)
        page.wait_for_timeout(500)
        expect(page.get_by_text("Throughput")).to_be_visible(timeout=60_000)
        expect(page.locator("[data-testid='stException']")).to_have_count(0)
        browser.close()
