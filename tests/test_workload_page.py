"""AppTest of the Workload page: renders, reports a good upload, rejects a bad one."""

from pathlib import Path

from app_helpers import unescaped
from streamlit.testing.v1 import AppTest

from sim_core.scenarios.defaults import DEFAULT_SCENARIO

ROOT = Path(__file__).resolve().parents[1]
PAGE = str(ROOT / "pages" / "workload.py")
AZURE = (ROOT / "tests" / "data" / "traces" / "azure_2023.csv").read_bytes()


def page() -> AppTest:
    """The page with its generator shown."""
    app = AppTest.from_file(PAGE, default_timeout=30).run()
    return app.radio(key="wl_source").set_value("Generate").run()


def upload(app: AppTest, name: str, content: bytes) -> AppTest:
    app.radio(key="wl_source").set_value("Upload a trace").run()
    app.file_uploader(key="wl_upload").upload(name, content, "text/csv")
    return app.run()


def report(app: AppTest) -> dict:
    table = app.table[0].value
    return dict(zip(table["item"], (unescaped(value) for value in table["value"])))


def test_the_page_renders_a_generated_workload_with_its_report():
    app = page()
    assert not app.exception
    assert app.title[0].value == "Workload"
    assert report(app)["format"] == "synthetic" and report(app)["requests"] == "500"


def test_the_page_opens_on_the_current_scenarios_workload():
    """Issue 19 item 7: not a generator's 500 requests at 4 req/s but the scenario's workload, with
    nothing to "use"."""
    app = AppTest.from_file(PAGE, default_timeout=30).run()
    assert app.radio(key="wl_source").value == "Current scenario"
    assert report(app)["requests"] == f"{DEFAULT_SCENARIO['workload']['num_requests']:,}"
    assert len(app.button) == 0


def test_an_error_names_the_uploaded_file_not_the_servers_copy():
    """A trace read as the wrong format fails while previewed; the message names "t.csv", the
    user's file, not the store's hash-named path."""
    app = upload(page(), "t.csv", b"arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,2\n")
    app.selectbox(key="wl_format").set_value("azure").run()
    message = unescaped(app.error[0].value)
    assert message.startswith("t.csv: missing column(s) TIMESTAMP, ContextTokens, GeneratedTokens"), message
    assert "upload" not in message and "/" not in message


def test_a_good_upload_shows_its_report_and_can_become_the_scenarios_workload():
    app = upload(page(), "azure.csv", AZURE)
    assert not app.exception and not app.error
    rows = report(app)
    assert rows["format"] == "azure" and rows["requests"] == "4"
    app.button(key="wl_use").click().run()
    workload = app.session_state["scenario"]["workload"]
    assert workload["trace_file"].endswith(".csv") and Path(workload["trace_file"]).read_bytes() == AZURE
    assert app.success[0].value == "The scenario now uses this workload (4 requests)."


def test_a_bad_upload_names_row_and_column_and_keeps_the_old_scenario():
    app = page()
    before = app.session_state["scenario"]
    app = upload(app, "bad.csv", b"arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,2\n1,ten,2\n")
    assert not app.exception
    assert unescaped(app.error[0].value).endswith(
        "bad.csv, row 2 (line 3), column 'num_prefill_tokens': value 'ten' is not a number")
    assert len(app.button) == 0   # nothing to use
    assert app.session_state["scenario"] == before


def test_after_an_upload_the_generator_can_resample_its_lengths_and_replay_its_arrivals():
    app = upload(page(), "azure.csv", AZURE)
    app.radio(key="wl_source").set_value("Generate").run()
    app.selectbox(key="wl_process").set_value("replay").run()
    app.number_input(key="wl_count").set_value(3).run()
    app.selectbox(key="wl_prompt_dist").set_value("empirical").run()
    assert not app.exception and not app.error
    rows = report(app)
    assert rows["requests"] == "3" and rows["span"] == "4.315 s"


def test_sessions_toggle_generates_conversations():
    app = page()
    app.toggle(key="wl_sessions").set_value(True).run()
    assert not app.exception
    assert report(app)["extra columns"] == "session_id, turn, prefix_group, prefix_len"


def test_new_content_under_the_same_name_gets_a_new_path():
    """The scenario names the uploaded file by path; a changed file must not reuse it."""
    app = upload(page(), "t.csv", b"arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,2\n")
    app.button(key="wl_use").click().run()
    first = app.session_state["scenario"]["workload"]["trace_file"]
    app.file_uploader(key="wl_upload").upload("t.csv", b"arrived_at,num_prefill_tokens,num_decode_tokens\n0,20,2\n")
    app.run()
    assert report(app)["prompt tokens"] == "20 .. 20 (mean 20)"
    app.button(key="wl_use").click().run()
    assert app.session_state["scenario"]["workload"]["trace_file"] != first


def test_the_generator_hands_over_only_the_knobs_of_the_chosen_process_and_distributions():
    """Poisson takes the rate but not the gamma CV widget's value; fixed prompts take the typical
    value, not the range; gamma takes its CV."""
    app = page()
    app.selectbox(key="wl_prompt_dist").set_value("fixed").run()
    app.button(key="wl_use").click().run()
    workload = app.session_state["scenario"]["workload"]
    assert workload["arrival"] == {"process": "poisson", "qps": 4.0}
    assert workload["prompt_tokens"] == {"distribution": "fixed", "value": 256}
    assert workload["output_tokens"] == {"distribution": "uniform", "min": 16, "max": 512}
    app.selectbox(key="wl_process").set_value("gamma").run()
    app.button(key="wl_use").click().run()
    assert app.session_state["scenario"]["workload"]["arrival"] == {"process": "gamma", "qps": 4.0, "cv": 2.0}


def test_the_generator_offers_a_constant_rate():
    """`constant` is in the process list and takes only the rate: the scenario's arrival becomes
    {constant, 4 req/s}, without the CV widget's value."""
    app = page()
    assert "constant" in app.selectbox(key="wl_process").options
    app.selectbox(key="wl_process").set_value("constant").run()
    app.button(key="wl_use").click().run()
    assert not app.exception
    assert app.session_state["scenario"]["workload"]["arrival"] == {"process": "constant", "qps": 4.0}
