"""A real browser walks every preset by its link (issue 19): each opens with its own name as the
title in the sidebar and the Overview, no error, and `?s=` kept on the Predictor page; turning a
knob marks the title "edited"."""

import re

import pytest
from browser_helpers import FLAGS, chromium, go_to, settle, streamlit_server

from sim_core.config.share import encode_scenario
from sim_core.scenarios.presets import PRESETS


@pytest.fixture(scope="module")
def server():
    with streamlit_server() as url:
        yield url


def test_every_preset_opens_by_link_with_its_name_and_keeps_its_link_on_every_page(server):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        for preset in PRESETS:
            token = encode_scenario(preset.scenario)
            page.goto(f"{server}/?s={token}")
            settle(page)
            sidebar = page.get_by_test_id("stSidebar")
            expect(sidebar.get_by_text(preset.scenario["name"], exact=True)).to_be_visible(timeout=60_000)
            expect(page.get_by_text("Throughput (req/s)")).to_be_visible(timeout=60_000)
            expect(page.locator("[data-testid='stException']")).to_have_count(0)
            assert f"s={token}" in page.url, preset.name
        go_to(page, "Predictor")
        assert f"s={token}" in page.url                     # the last preset's link, on a page that stops early
        rate = page.get_by_test_id("stSidebar").get_by_role("spinbutton", name="Arrival rate (req/s)")
        rate.fill("7.9")
        rate.press("Enter")
        settle(page)
        expect(page.get_by_test_id("stSidebar").get_by_text(re.compile(r"\(edited: .*7\.9 req/s"))).to_be_visible(
            timeout=60_000)
        browser.close()
