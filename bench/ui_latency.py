"""Slider-to-redraw time in a real browser: a real `streamlit run` server, Debian's chromium.

For each case (a scenario size and a page) the arrival-rate slider in the sidebar is moved one
step at a time; every step is a new scenario, so the app re-simulates and redraws. The time
from the key press until the page shows the new run (its caption or time range changed, the
script finished, the status widget left and the browser painted twice) is measured.

    python bench/ui_latency.py [--steps 8] [--sizes 1000 20000]

prints the median and 90th percentile per case (seconds).
"""

from __future__ import annotations

import argparse
import copy
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim_core.config.share import encode_scenario  # noqa: E402
from sim_core.scenarios.defaults import DEFAULT_SCENARIO  # noqa: E402

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
# the page's first caption names the run (its simulated length changes with the arrival rate)
MARKER = '[data-testid="stMain"] [data-testid="stCaptionContainer"]'


def start_server() -> tuple[subprocess.Popen, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless",
                                "true", "--server.port", str(port), "--server.address", "127.0.0.1",
                                "--browser.gatherUsageStats", "false"], cwd=ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(f"{url}/_stcore/health", timeout=1)
            return process, url
        except OSError:
            time.sleep(0.3)
    raise RuntimeError("streamlit did not start")


def scenario(num_requests: int, seed: int) -> dict:
    """The default scenario with more requests; each case has its own seed, so no case reuses
    another's cached runs."""
    data = copy.deepcopy(DEFAULT_SCENARIO)
    data["name"] = f"bench: {num_requests} requests"
    data["seed"] = seed
    data["workload"]["num_requests"] = num_requests
    return data


def settle(page) -> None:
    page.wait_for_selector(IDLE, timeout=600_000)
    page.wait_for_selector('[data-testid="stStatusWidget"]', state="detached", timeout=600_000)
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def measure(page, url: str, path: str, num_requests: int, steps: int, seed: int) -> list[float]:
    page.goto(f"{url}/{path}?s={encode_scenario(scenario(num_requests, seed))}")
    page.wait_for_timeout(500)
    settle(page)
    page.wait_for_selector(".js-plotly-plot", timeout=600_000)
    marker = page.locator(MARKER).first
    slider = page.get_by_test_id("stSidebar").get_by_role("slider", name="Arrival rate (req/s)")
    times = []
    for _ in range(steps):
        before = marker.inner_text()
        slider.focus()
        started = time.perf_counter()
        slider.press("ArrowRight")
        page.wait_for_function("([sel, old]) => { const e = document.querySelector(sel); "
                               "return e && e.innerText !== old; }",
                               arg=[MARKER, before], timeout=600_000, polling="raf")
        settle(page)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 20000])
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or sys.exit("needs Debian's chromium on PATH")
    process, url = start_server()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=FLAGS, headless=True)
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            print(f"{'requests':>9} {'page':>9} {'median s':>9} {'p90 s':>7}  (slider step -> redrawn)")
            for size in args.sizes:
                for seed, path in enumerate(("", "kv_cache"), start=1):
                    times = sorted(measure(page, url, path, size, args.steps, seed))
                    p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
                    print(f"{size:>9} {path or 'overview':>9} {statistics.median(times):>9.2f} {p90:>7.2f}", flush=True)
            browser.close()
    finally:
        process.terminate()


if __name__ == "__main__":
    main()
