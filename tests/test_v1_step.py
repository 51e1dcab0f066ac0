"""vllm_v1's step as it is formed (`schedulers/v1_step.py`): the in-flight record and the
prompt-token count it keeps must be what a pass over the launched batch would give."""

from __future__ import annotations

from conftest import scenario, workload
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core import parse_config, run_simulation
from sim_core.entities import Batch, Request
from sim_core.schedulers.in_flight import InFlight
from sim_core.schedulers.v1_step import V1Step
from sim_core.schedulers.vllm_v1 import VllmV1Scheduler


def request(rid: int, prompt: int, processed: int = 0) -> Request:
    made = Request(rid, 0.0, prompt, 4, num_processed_tokens=processed)
    made.is_prefill_complete = processed > prompt
    return made


def test_a_step_keeps_each_requests_tokens_and_the_prompt_tokens_among_them():
    """Budget 100: a decode (1 token), a prompt chunk of 30 and a prompt's last 12: 57 left,
    tokens {1: 1, 2: 30, 3: 12}, 42 of them prompt tokens. The chunk of 30 is taken back out (a
    preemption): 87 left, 12 prompt tokens, and request 2 is no longer in the step."""
    decode, chunk, last = request(1, 8, processed=9), request(2, 64), request(3, 20, processed=8)
    step = V1Step(100)
    for member, tokens in ((decode, 1), (chunk, 30), (last, 12)):
        step.add(member, tokens)
    assert (step.budget, step.tokens, step.prefill) == (57, {1: 1, 2: 30, 3: 12}, 42)
    assert chunk in step and step.ids == set()
    step.remove(chunk)
    assert (step.budget, step.tokens, step.prefill, step.requests) == (87, {1: 1, 3: 12}, 12, [decode, last])
    assert chunk not in step


def test_a_launched_step_keeps_the_record_it_was_given():
    """InFlight.launch with the step's own record keeps that dict (no second pass): request 7's
    2 tokens count, and a preemption pops it from that record."""
    member = request(7, 4)
    flight = InFlight()
    record = {7: 2}
    flight.launch(Batch(0, 0, [member], [2], 2), record)
    assert flight.tokens(member) == 2 and flight.by_id is record
    flight.preempt(member, False)
    assert record == {}


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.tuples(st.floats(0.0, 0.2), st.integers(1, 90), st.integers(1, 12)), min_size=1, max_size=14),
       blocks=st.integers(8, 40), budget=st.integers(8, 64), threshold=st.sampled_from([0, 5, 16]),
       prefill_first=st.booleans(), caching=st.booleans())
def test_every_launched_step_has_the_prompt_tokens_and_record_of_its_members(rows, blocks, budget, threshold,
                                                                              prefill_first, caching):
    """Random async vllm_v1 runs (memory tight enough to preempt, chunked prompts, prefill
    first or not): each batch's prompt tokens, counted while it was formed, equal
    Batch.prefill_tokens_of its members, and its in-flight record equals {id: tokens}."""
    rows = sorted(rows)
    checked = []
    make_batch, launch = VllmV1Scheduler._make_batch, InFlight.launch

    def checked_make_batch(self, requests, num_tokens, num_prefill_tokens=None):
        if requests and num_prefill_tokens is not None:
            assert num_prefill_tokens == Batch.prefill_tokens_of(requests, num_tokens)
            checked.append(len(requests))
        return make_batch(self, requests, num_tokens, num_prefill_tokens)

    def checked_launch(self, batch, tokens=None):
        if tokens is not None:
            assert tokens == {r.id: n for r, n in zip(batch.requests, batch.num_tokens)}
        launch(self, batch, tokens)

    VllmV1Scheduler._make_batch, InFlight.launch = checked_make_batch, checked_launch   # type: ignore[method-assign]
    try:
        config = scenario("vllm_v1", max_model_len=256, scheduler={
            "num_blocks": blocks, "block_size": 4, "max_num_batched_tokens": budget,
            "long_prefill_token_threshold": threshold, "prioritize_prefill": prefill_first,
            "enable_prefix_caching": caching}, engine={"fast_forward": False})
        result = run_simulation(parse_config(config), workload(*rows))
    finally:
        VllmV1Scheduler._make_batch, InFlight.launch = make_batch, launch   # type: ignore[method-assign]
    assert bool(checked) == bool(len(result.batches))   # (every request may be too long to serve)
