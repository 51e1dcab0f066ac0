"""Hostile input through a real browser against a real server: a multipart upload whose file
name is an absolute or a `../` path writes nothing outside the server's private upload store,
and a phishing scenario name in a link shows no link or image. (AppTest probes of the same
threats: tests/test_web_security.py.)"""

from __future__ import annotations

import copy

import pytest
from app_helpers import TINY
from browser_helpers import FLAGS, ROOT, choose_until_shown, chromium, go_to, settle, streamlit_server

from sim_core.config.share import encode_scenario

TRACE = b"arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,120,20\n0.5,240,10\n1.0,60,5\n"
PHISH = "[Session expired: sign in](https://evil.example/login) ![p](https://evil.example/p.png) www.evil.example"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The app with its temporary folder (where mkdtemp puts the upload store) under the test's."""
    temp = tmp_path_factory.mktemp("server-tmp")
    with streamlit_server({"TMPDIR": str(temp)}) as url:
        yield url, temp


def renaming_to(hostile: str):
    """A route handler (Playwright passes one argument to a one-parameter handler)."""
    return lambda route: renamed_upload(route, hostile)


def renamed_upload(route, hostile: str) -> None:
    """Send the browser's upload request on, its multipart body rebuilt with the file name
    `hostile` (Playwright does not expose the bytes of a file part, so the body is written anew
    with the same boundary, field and content). Other requests (the DELETE of a replaced file) go on
    unchanged."""
    if route.request.method != "PUT":
        route.continue_()
        return
    boundary = route.request.headers["content-type"].split("boundary=")[1].encode()
    part = (f'Content-Disposition: form-data; name="trace.csv"; filename="{hostile}"\r\n'
            "Content-Type: text/csv\r\n\r\n").encode()
    route.continue_(post_data=b"--" + boundary + b"\r\n" + part + TRACE + b"\r\n--" + boundary + b"--\r\n")


def test_a_multipart_upload_named_with_an_absolute_or_dot_dot_path_lands_only_in_the_store(server, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    url, server_tmp = server
    absolute = tmp_path / "planted" / "abs.csv"
    absolute.parent.mkdir()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.goto(url)
        settle(page)
        go_to(page, "Scenario")
        page.get_by_role("tab", name="Workload").click()
        uploader = page.get_by_test_id("stFileUploader").filter(has_text="Upload a trace CSV")
        choose_until_shown(page, "trace file", uploader.locator("input[type=file]"))
        for number, hostile in enumerate((str(absolute), "../../planted-dotdot.csv")):
            local = tmp_path / f"trace{number}.csv"          # a new file each time, so the browser sends it
            local.write_bytes(TRACE)
            page.route("**/_stcore/upload_file/**", renaming_to(hostile))
            uploader.locator("input[type=file]").set_input_files(str(local))
            settle(page)
            expect(page.get_by_text(f"Replaying {hostile}")).to_be_visible(timeout=60_000)
            page.unroute("**/_stcore/upload_file/**")
        expect(page.locator("[data-testid='stException']")).to_have_count(0)
        browser.close()
    assert not absolute.exists() and not (ROOT.parent.parent / "planted-dotdot.csv").exists()
    stores = list(server_tmp.glob("llm-explorer-uploads-*"))
    assert len(stores) == 1 and [p.read_bytes() for p in stores[0].iterdir()] == [TRACE]


def test_a_phishing_name_in_a_link_renders_no_link_or_image(server):
    from playwright.sync_api import expect, sync_playwright

    url, _ = server
    linked = copy.deepcopy(TINY)
    linked["name"] = PHISH
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.goto(f"{url}/?s={encode_scenario(linked)}")
        settle(page)
        expect(page.get_by_test_id("stSidebar").get_by_text("[Session expired")).to_be_visible(timeout=60_000)
        assert page.locator("a[href*='evil']").count() == 0
        assert page.locator("img[src*='evil']").count() == 0
        browser.close()


