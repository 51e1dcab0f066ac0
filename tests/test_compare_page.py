"""AppTest of the Compare page: the current scenario against edits of it, their table and
figures, variants that do not validate, and edits that survive page switches."""

import json

from app_helpers import chart_specs, open_app, unescaped


def test_the_current_scenario_against_another_scheduler():
    app = open_app("pages/compare.py")
    table = app.dataframe[0].value
    assert list(table.columns) == ["metric", "A: vllm (current)", "B: type=sarathi", "winner"]
    assert table["metric"].tolist()[:4] == ["throughput (req/s)", "output tokens/s (tok/s)", "TTFT p50 (ms)",
                                            "TTFT p90 (ms)"]
    assert [s.value for s in app.subheader] == ["Differences", "Latency CDFs", "Throughput over time", "KV-cache use",
                                                "Waiting requests", "Preemptions", "Request timelines"]
    specs = [json.loads(spec) for spec in chart_specs(app)]
    assert len(specs) == 6
    cdf_names = {trace["name"] for trace in specs[0]["data"]}
    assert cdf_names == {"A: vllm (current)", "B: type=sarathi"}
    timelines = specs[5]
    assert [a["text"] for a in timelines["layout"]["annotations"]] == ["A: vllm (current)", "B: type=sarathi"]
    assert len(timelines["layout"]["yaxis"]["categoryarray"]) == 15


def test_a_third_scenario_and_an_invalid_one_explained():
    app = open_app("pages/compare.py")
    app.number_input(key="cmp_count").set_value(3).run()
    assert list(app.dataframe[0].value.columns)[1:4] == ["A: vllm (current)", "B: type=sarathi", "C: num_replicas=4"]
    app.selectbox(key="cmp_2:scheduler.type").set_value("lightllm").run()
    assert "C: num_replicas=4, pipeline_parallel_size=1, block_size=1, type=lightllm" in app.dataframe[0].value.columns
    app.selectbox(key="cmp_2:cluster.pipeline_parallel_size").set_value(4).run()
    assert unescaped(app.warning[0].value) == ("C is not run: scenario: cluster.pipeline_parallel_size: "
                                               "lightllm supports only 1 (got 4)")
    assert len(app.dataframe[0].value.columns) == 4


def test_edits_survive_a_page_switch_and_unedited_fields_follow_the_sidebar():
    app = open_app("pages/compare.py")
    app.number_input(key="cmp_count").set_value(3).run()
    app.selectbox(key="cmp_1:cluster.tensor_parallel_size").set_value(2).run()
    app.switch_page("pages/overview.py").run()
    app.switch_page("pages/compare.py").run()
    assert app.number_input(key="cmp_count").value == 3
    assert "B: tensor_parallel_size=2, type=sarathi" in app.dataframe[0].value.columns
    app.sidebar.slider(key="w:side:cluster.num_replicas").set_value(3).run()
    assert app.number_input(key="cmp_1:cluster.num_replicas").value == 3
    assert "C: num_replicas=4" in app.dataframe[0].value.columns        # an edit stays an edit
    assert not app.exception
