"""A real `streamlit run` server on 127.0.0.1 and Debian's chromium for the browser tests.

Without a chromium on PATH a browser test skips, except in CI (CI=true), where a missing browser
fails it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but no chromium on PATH (apt-get install chromium)")
        pytest.skip("no chromium on PATH: install Debian's chromium to run the browser test")
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(env: dict[str, str] | None = None) -> Iterator[str]:
    """Start the app on a free loopback port (with extra environment `env`); yields its URL."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
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
    try:
        yield url
    finally:
        process.terminate()
        process.wait(timeout=20)


def settle(page) -> None:
    """Wait until the rerun a click caused has finished and the page is drawn."""
    page.wait_for_timeout(200)
    page.wait_for_selector(IDLE, timeout=60_000)
    page.wait_for_selector('[data-testid="stStatusWidget"]', state="detached", timeout=60_000)


def go_to(page, title: str) -> None:
    page.get_by_test_id("stSidebarNav").get_by_text(title, exact=True).click()
    settle(page)
    page.get_by_role("heading", name=title).first.wait_for(timeout=60_000)


def choose_until_shown(page, option: str, shown) -> None:
    """Click the radio `option` until the locator `shown` (what choosing it draws) is attached: a
    click that lands while an earlier rerun still draws the page can be lost, and `settle` may
    return before the rerun the click starts."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(3):
        page.get_by_text(option, exact=True).click()
        settle(page)
        try:
            shown.wait_for(state="attached", timeout=20_000)
            return
        except PlaywrightTimeout:   # the click was lost: click again
            continue
    shown.wait_for(state="attached", timeout=20_000)
