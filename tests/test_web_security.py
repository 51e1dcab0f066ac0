"""Hostile input through the app (AppTest): a link or an upload can name no server file, write
nowhere but the private upload store, inject no Markdown, and see no traceback.
(The real-browser half is tests/test_browser_security.py.)"""

from __future__ import annotations

import copy
import logging
import re
from pathlib import Path

import yaml
from app_helpers import APP, TIMEOUT, TINY, open_app, unescaped
from streamlit.testing.v1 import AppTest

from explorer.server import uploads
from sim_core.config.share import encode_scenario
from sim_core.scenarios.defaults import DEFAULT_SCENARIO

GOOD_TRACE = b"arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,100,20\n0.5,200,10\n"
REFUSED = ("Not applied, the previous scenario stays in place: scenario: workload.trace_file: only uploaded "
           "traces and the shipped sample traces can be used here; upload the file on the Scenario or Workload page")


def open_link(scenario: dict) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=TIMEOUT)
    app.query_params["s"] = encode_scenario(scenario)
    app.run()
    assert not app.exception
    return app


def with_trace(path: str, section: str | None = None) -> dict:
    linked = copy.deepcopy(TINY)
    if section:
        linked["workload"][section] = {**linked["workload"][section], "trace_file": path}
    else:
        linked["workload"] = {"trace_file": path}
    return linked


def test_a_link_naming_a_server_file_is_refused_without_telling_whether_it_exists():
    """/etc/passwd exists and /etc/nothing-here does not: the same line for both, default kept."""
    messages = []
    for path in ("/etc/passwd", "/etc/nothing-here", "../../../../etc/passwd", "sample_traces/../app.py"):
        app = open_link(with_trace(path))
        assert app.session_state["scenario"] == DEFAULT_SCENARIO
        messages.append(unescaped(app.error[0].value))
    assert messages == [REFUSED] * 4


def test_length_and_arrival_traces_and_server_only_fields_are_refused_too():
    app = open_link({**with_trace("/etc/passwd", "prompt_tokens")})
    assert "workload.prompt_tokens.trace_file: only uploaded traces" in unescaped(app.error[0].value)
    for field, value, reason in (("predictor", {"cache_dir": "/tmp/x"}, "predictor.cache_dir: not accepted"),
                                 ("models", {"m": {"hf_config": "/etc/passwd"}}, "models.m.hf_config: not accepted")):
        app = open_link({**TINY, field: value})
        assert reason in unescaped(app.error[0].value)
        assert app.session_state["scenario"] == DEFAULT_SCENARIO


def test_a_shipped_sample_can_be_named_by_a_link():
    """The samples folder is one of the two the web may name."""
    app = open_link(with_trace("sample_traces/chat.csv"))
    assert not app.error and app.session_state["scenario"]["workload"]["trace_file"] == "sample_traces/chat.csv"


def test_an_uploaded_scenario_file_cannot_name_a_server_file():
    app = open_app("pages/scenario.py")
    text = yaml.safe_dump(with_trace("/etc/passwd")).encode()
    app.file_uploader(key="sc_import").set_value(("evil.yaml", text, "application/x-yaml")).run()
    assert unescaped(app.error[0].value) == REFUSED.replace("place: scenario:", "place: evil.yaml:")
    assert app.session_state["scenario"] == TINY


def test_a_trace_uploaded_under_an_absolute_or_dot_dot_name_is_stored_only_in_the_store(tmp_path):
    """The browser's name is display text: the bytes land in the store, under their hash."""
    app = open_app("pages/scenario.py")
    app.radio(key="w:sc_source").set_value("trace file").run()
    for name in (str(tmp_path / "planted.csv"), "../../../planted.csv"):
        app.file_uploader(key="sc_trace").set_value((name, GOOD_TRACE, "text/csv")).run()
        stored = Path(app.session_state["scenario"]["workload"]["trace_file"])
        assert stored.parent == uploads().root and stored.read_bytes() == GOOD_TRACE
        assert re.fullmatch(r"[0-9a-f]{64}\.csv", stored.name)
        assert unescaped(app.success[0].value) == f"Replaying {name}"
    assert not (tmp_path / "planted.csv").exists() and not Path("../../../planted.csv").exists()


def test_an_upload_that_fails_validation_is_not_kept():
    app = open_app("pages/scenario.py")
    app.radio(key="w:sc_source").set_value("trace file").run()
    before = set(uploads().root.iterdir())
    bad = b"arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,100,20\n0.5,lots,10\n0.75,7331,3\n"
    app.file_uploader(key="sc_trace").set_value(("bad.csv", bad, "text/csv")).run()
    assert unescaped(app.error[0].value).startswith("bad.csv, row 2 (line 3), column 'num_prefill_tokens'")
    assert set(uploads().root.iterdir()) == before


def test_a_profile_uploaded_under_an_absolute_name_is_read_from_the_store(tmp_path):
    """The Predictor page no longer writes an upload under the name the browser sends."""
    app = open_app("pages/predictor.py")
    profile = b"num_tokens,num_tensor_parallel_workers,time_stats.mlp_up_proj.median\n128,1,0.05\n256,1,0.09\n"
    app.file_uploader(key="pr_upload").set_value((str(tmp_path / "mlp.csv"), profile, "text/csv")).run()
    assert not app.exception
    assert not (tmp_path / "mlp.csv").exists()
    assert any(path.read_bytes() == profile for path in uploads().root.iterdir())


def test_a_phishing_name_in_a_link_shows_as_plain_shortened_text():
    """Links, images and icons in a scenario name are escaped; the name shows whole (a title lists
    the edits, so it is at most MAX_NAME_CHARS = 200 characters and never cut)."""
    name = "[Session expired, sign in](https://evil.example/login) ![x](https://evil.example/p.png) :material/lock:"
    app = open_link({**TINY, "name": name})
    caption = app.sidebar.caption[0].value
    assert unescaped(caption) == name
    assert "](" not in caption.replace("\\](", "") and "https://" not in caption
    overview = app.main.caption[0].value
    assert unescaped(overview).startswith(name + " · 40 requests")


def test_an_internal_error_shows_an_id_and_logs_the_traceback_under_it(monkeypatch, caplog):
    """With errors not propagated (as a visitor gets them): one line with an id, no traceback."""
    monkeypatch.setenv("SIM_EXPLORER_PROPAGATE_ERRORS", "0")
    app = AppTest.from_file(APP, default_timeout=TIMEOUT)
    app.session_state["scenario"] = ["not", "a", "mapping"]           # a state no page expects
    with caplog.at_level(logging.ERROR, logger="llm_explorer"):
        app.run()
    assert not app.exception
    shown = app.error[0].value
    error_id = re.search(r"error id ([0-9a-f]{12})", shown).group(1)
    assert "Traceback" not in shown and "/" not in shown.split("error id")[0]
    logged = [record for record in caplog.records if error_id in record.getMessage()]
    assert logged and logged[0].exc_info[0] is AttributeError


def test_a_huge_name_or_model_id_in_a_link_is_refused_with_the_field_and_the_limit():
    """A 100,000-character name (223 characters of link) no longer reaches any page."""
    app = open_link({**TINY, "name": "n" * 100_000})
    shown = unescaped(app.error[0].value)
    assert shown.startswith("Not applied, the previous scenario stays in place: scenario: name: got 'nnnn")
    assert shown.endswith("String should have at most 200 characters") and len(shown) < 300
    app = open_link({**TINY, "models": {"m" * 5000: {}}})
    assert "String should have at most 100 characters" in unescaped(app.error[0].value)
    assert app.session_state["scenario"] == DEFAULT_SCENARIO
