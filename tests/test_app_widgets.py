"""AppTests of bound widgets (`explorer/widgets.py`): a widget shows its home after a page switch
and after its home changed elsewhere; a page value follows its default until the user sets it;
values that go with the scenario are forgotten when it is replaced."""

from app_helpers import open_app

from sim_core.scenarios.presets import preset


def test_a_sidebar_knob_shows_a_change_made_on_another_page():
    """The Workload page's "Use" sets 120 requests; the sidebar's Requests slider, bound to the
    same field, shows 120 (no widget key was dropped by hand)."""
    app = open_app("pages/workload.py")
    assert app.sidebar.number_input(key="w:side:workload.num_requests").value == 40
    app.radio(key="wl_source").set_value("Generate").run()
    app.number_input(key="wl_count").set_value(120).run()
    app.button(key="wl_use").click().run()
    assert app.session_state["scenario"]["workload"]["num_requests"] == 120
    assert app.sidebar.number_input(key="w:side:workload.num_requests").value == 120


def test_a_page_value_survives_a_page_switch():
    """Streamlit forgets a widget when its page is left; the Workload generator's request count
    set to 77 is 77 again when the user comes back."""
    app = open_app("pages/workload.py")
    app.radio(key="wl_source").set_value("Generate").run()
    app.number_input(key="wl_count").set_value(77).run()
    app.switch_page("pages/overview.py").run()
    app.switch_page("pages/workload.py").run()
    assert app.number_input(key="wl_count").value == 77


def test_an_unset_page_value_follows_its_default_and_a_set_one_stays():
    """The Capacity page's TP list defaults to the scenario's TP: untouched, it follows the
    sidebar from 1 to 2; its PP list, set by the user to [1, 2], stays when the sidebar moves PP."""
    app = open_app("pages/capacity.py")
    assert app.multiselect(key="cap_tp").value == [1]
    app.multiselect(key="cap_pp").set_value([1, 2]).run()
    app.sidebar.selectbox(key="w:side:cluster.tensor_parallel_size").set_value(2).run()
    app.sidebar.selectbox(key="w:side:cluster.pipeline_parallel_size").set_value(1).run()
    assert app.multiselect(key="cap_tp").value == [2]
    assert app.multiselect(key="cap_pp").value == [1, 2]


def test_a_value_that_goes_with_the_scenario_is_forgotten_when_a_preset_replaces_it():
    """"Requests from: trace file" chosen on the Scenario page goes back to the synthetic
    generator when a preset (which has no trace) replaces the scenario."""
    app = open_app("pages/scenario.py")
    app.radio(key="w:sc_source").set_value("trace file").run()
    app.switch_page("pages/overview.py").run()
    app.switch_page("pages/scenario.py").run()
    assert app.radio(key="w:sc_source").value == "trace file"
    app.selectbox(key="sc_preset").set_value("Chunked prefill smooths TBT (Sarathi)").run()
    app.button(key="sc_load").click().run()
    assert app.session_state["scenario"] == preset("Chunked prefill smooths TBT (Sarathi)").scenario
    assert app.radio(key="w:sc_source").value == "synthetic generator"


def test_the_selected_request_is_one_value_for_the_number_box_the_chart_and_the_sidebar():
    """Picking request 7 in the Requests page's number box selects it for every page; clearing
    it in the sidebar empties the box."""
    app = open_app("pages/requests.py")
    app.number_input(key="rq_pick").set_value(7).run()
    assert app.session_state["selected_request"] == 7
    assert app.sidebar.info[0].value == "Selected request #7"
    app.sidebar.button[0].click().run()
    assert app.number_input(key="rq_pick").value is None


def test_the_rate_and_request_count_take_typed_values_up_to_20000():
    """Issue 19 item 12: the sidebar's rate and request count are number boxes (typed values,
    applied on Enter): 7.9 req/s is set exactly, and the request count reaches 20,000 in steps of 100."""
    app = open_app()
    rate = app.sidebar.number_input(key="w:side:workload.arrival.qps")
    assert (rate.min, rate.max, rate.step) == (0.25, 64.0, 0.25)
    rate.set_value(7.9).run()
    assert app.session_state["scenario"]["workload"]["arrival"]["qps"] == 7.9
    count = app.sidebar.number_input(key="w:side:workload.num_requests")
    assert (count.min, count.max, count.step) == (10, 20000, 100)
