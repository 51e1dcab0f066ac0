"""Slider-to-redraw time in a real browser: a real `streamlit run` server, Debian's chromium.

For each case (a scenario size and a page) the sidebar's arrival-rate box is stepped up one
step (its + button) at a time; every step is a new scenario, so the app re-simulates and
redraws. A run estimated above the server's `apply_above_s` waits for Apply: the bench then
presses Apply as soon as it shows, and that is part of the change. The time from the click until
the page shows the new run (its caption changed, the script finished, the status widget left and
the browser painted twice) is measured. Then, with both runs of the size's last case cached, it
switches between the Overview and the KV cache page (`switch`: each switch until the page is
drawn; nothing is simulated).

    python bench/ui_latency.py [--steps 8] [--sizes 1000 20000] [--switches 4]

prints per case the median and 90th percentile of the wall time (seconds), the medians of
the CPU seconds the server (the streamlit process) and the browser (its chromium processes)
spent per step (on a shared machine the wall time stretches with the load, the CPU seconds
much less), and the median number of times plotly drew a chart per step (`plotly_afterplot`
events on the page's charts: Streamlit 1.67 draws each new figure twice, bench/README.md).
The server runs with the app's default limits (the 20,000-request default scenario is
estimated at 856 MiB, under the 1 GiB run budget; its measured peak is about 0.42 GiB).
"""

from __future__ import annotations

import argparse
import copy
import os
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
# checking the page every 20 ms, not every animation frame: polling by frame keeps the browser
# drawing 60 frames a second while the server simulates (1-4 CPU-s a step on a 2-core machine
# that both share); the 20 ms it may add is under the figures' precision
POLL_MS = 20
# counts plotly's draws: each chart element, once plotly has started on it (its event methods
# exist and it has children), gets a listener on its `plotly_afterplot` event
COUNT_DRAWS = """
window.__draws = 0;
const hooked = new WeakSet();
new MutationObserver(() => {
  for (const chart of document.querySelectorAll('.js-plotly-plot')) {
    if (!hooked.has(chart) && typeof chart.on === 'function') {
      hooked.add(chart);
      chart.on('plotly_afterplot', () => { window.__draws += 1; });
    }
  }
}).observe(document, {subtree: true, childList: true});
"""


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


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds the processes have used so far (Linux /proc; gone ones count 0)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def browser_pids() -> list[int]:
    """This process's chromium descendants."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            name, rest = stat.split("(", 1)[1].rsplit(")", 1)
            parents[int(entry.name)] = (int(rest.split()[1]), name)
    mine = []
    for pid, (_, name) in parents.items():
        ancestor = pid
        while ancestor in parents and ancestor != os.getpid():
            ancestor = parents[ancestor][0]
        if ancestor == os.getpid() and name.startswith("chrom"):
            mine.append(pid)
    return mine


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


Step = tuple[float, float, float, int]     # wall seconds, server CPU seconds, browser CPU seconds, chart draws


def timed(server: int, page, action) -> Step:
    """Run `action()` and return what it took."""
    browsers = browser_pids()
    cpu = cpu_seconds([server]), cpu_seconds(browsers)
    draws = page.evaluate("window.__draws")
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started, cpu_seconds([server]) - cpu[0], cpu_seconds(browsers) - cpu[1],
            page.evaluate("window.__draws") - draws)


def measure(page, url: str, path: str, num_requests: int, steps: int, seed: int, server: int) -> list[Step]:
    """Each knob step of one case: from the click until the new run is drawn."""
    page.goto(f"{url}/{path}?s={encode_scenario(scenario(num_requests, seed))}")
    page.wait_for_timeout(500)
    settle(page)
    page.wait_for_selector(".js-plotly-plot", timeout=600_000)
    marker = page.locator(MARKER).first
    sidebar = page.get_by_test_id("stSidebar")
    step_up = sidebar.get_by_test_id("stNumberInput").filter(has_text="Arrival rate (req/s)") \
        .get_by_test_id("stNumberInputStepUp")
    apply = sidebar.get_by_role("button", name="Apply")

    def step() -> None:
        before = marker.inner_text()
        step_up.click()
        changed_or_held(page, before)
        if apply.count():            # a big run waits for Apply: pressing it is part of the change
            apply.click()
        page.wait_for_function("([sel, old]) => { const e = document.querySelector(sel); "
                               "return e && e.innerText !== old; }",
                               arg=[MARKER, before], timeout=600_000, polling=POLL_MS)
        settle(page)
    return [timed(server, page, step) for _ in range(steps)]


def switches(page, count: int, server: int) -> list[Step]:
    """Switching between the Overview and the KV cache page of the scenario last measured (both
    runs cached after one untimed round trip): each switch until the page is drawn."""
    def switch(title: str, heading: str):
        def go() -> None:
            page.get_by_test_id("stSidebarNav").get_by_role("link", name=title).click()
            page.wait_for_function("h => { const e = document.querySelector('[data-testid=stMain] h1'); "
                                   "return e && e.innerText.trim() === h; }", arg=heading, timeout=600_000,
                                   polling=POLL_MS)
            settle(page)
            page.wait_for_selector(".js-plotly-plot", timeout=600_000)
        return go
    to_overview, to_kv = switch("Overview", "LLM serving scheduling explorer"), switch("KV cache", "KV cache")
    to_overview()
    to_kv()
    times = []
    for _ in range(count):
        times += [timed(server, page, to_overview), timed(server, page, to_kv)]
    return times


def changed_or_held(page, before: str) -> None:
    """Wait until the page shows the new run or the sidebar offers Apply (the edit is held)."""
    page.wait_for_function("([sel, old]) => { const e = document.querySelector(sel); "
                           "if (e && e.innerText !== old) return true; "
                           "return [...document.querySelectorAll('[data-testid=stSidebar] button')]"
                           ".some(b => b.innerText.trim() === 'Apply'); }",
                           arg=[MARKER, before], timeout=600_000, polling=POLL_MS)


def report(size: int, case: str, steps: list[Step]) -> None:
    times = sorted(step[0] for step in steps)
    p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
    print(f"{size:>9} {case:>9} {statistics.median(times):>9.2f} {p90:>7.2f} "
          f"{statistics.median(step[1] for step in steps):>13.2f} "
          f"{statistics.median(step[2] for step in steps):>14.2f} "
          f"{statistics.median(step[3] for step in steps):>6g}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 20000])
    parser.add_argument("--switches", type=int, default=4, help="round trips Overview <-> KV cache timed per size")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or sys.exit("needs Debian's chromium on PATH")
    process, url = start_server()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=FLAGS, headless=True)
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            page.add_init_script(COUNT_DRAWS)
            print(f"{'requests':>9} {'page':>9} {'median s':>9} {'p90 s':>7} {'server CPU s':>13} "
                  f"{'browser CPU s':>14} {'draws':>6}  (knob step -> redrawn; medians)")
            for size in args.sizes:
                for seed, path in enumerate(("", "kv_cache"), start=1):
                    report(size, path or "overview", measure(page, url, path, size, args.steps, seed, process.pid))
                if args.switches:
                    report(size, "switch", switches(page, args.switches, process.pid))
            browser.close()
    finally:
        process.terminate()


if __name__ == "__main__":
    main()
