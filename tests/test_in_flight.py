"""vllm_v1's steps in flight (async scheduling): each batch's tokens are kept apart and summed
per request; a batch that lands takes its tokens along; a preempted request's tokens stop
counting and its batches' outputs for it go stale. Hand-made batches, values by hand; a
hypothesis property against a plain per-request running total."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core.entities import Batch, Request
from sim_core.schedulers.in_flight import InFlight


def request(rid: int) -> Request:
    return Request(id=rid, arrived_at=0.0, num_prefill_tokens=100, num_decode_tokens=10)


def batch(bid: int, members: list[tuple[Request, int]]) -> Batch:
    return Batch(bid, 0, [r for r, _ in members], [n for _, n in members], 0)


def test_a_request_in_both_steps_counts_both_and_a_landed_step_stops_counting():
    """Step 0 runs request 1's prompt chunk of 64 and request 2's decode; step 1, formed while
    step 0 runs, a placeholder token for each: request 1 has 65 tokens in flight, request 2 has 2.
    Step 0 lands: 1 each, and the host may schedule again."""
    one, two = request(1), request(2)
    flight = InFlight()
    first, second = batch(0, [(one, 64), (two, 1)]), batch(1, [(one, 1), (two, 1)])
    flight.launch(first)
    assert flight.host_free is False and flight.by_id == {1: 64, 2: 1}
    flight.launch(second)
    assert (flight.tokens(one), flight.tokens(two)) == (65, 2)
    assert flight.by_id == {1: 65, 2: 2}
    flight.land(first)
    assert (flight.tokens(one), flight.tokens(two), flight.host_free) == (1, 1, True)
    flight.land(second)
    assert flight.tokens(one) == 0 and not flight and flight.by_id == {}


def test_a_preempted_request_leaves_every_batch_in_flight_stale_for_it():
    """Request 2 is in both steps and preempted: neither counts its tokens any more and both
    mark its output stale (its sampled token still comes: True); request 1 is untouched."""
    one, two = request(1), request(2)
    flight = InFlight()
    first, second = batch(0, [(one, 1), (two, 1)]), batch(1, [(two, 1)])
    flight.launch(first)
    flight.launch(second)
    flight.preempt(two, True)
    assert flight.tokens(two) == 0 and flight.tokens(one) == 1
    assert first.stale == {2: True} and second.stale == {2: True}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["launch", "land", "preempt"]),
                          st.lists(st.tuples(st.integers(0, 5), st.integers(1, 70)), min_size=1, max_size=6)),
                max_size=30))
def test_tokens_in_flight_are_a_running_total_per_request(script):
    """Launches (each request once a batch), landings (oldest first) and preemptions in any
    order: every request's tokens in flight equal a plain running total kept by hand."""
    requests = {rid: request(rid) for rid in range(6)}
    flight, launched, total = InFlight(), [], {}
    for number, (action, members) in enumerate(script):
        if action == "launch":
            unique = list(dict(members).items())
            made = batch(number, [(requests[rid], n) for rid, n in unique])
            flight.launch(made)
            launched.append(made)
            for rid, n in unique:
                total[rid] = total.get(rid, 0) + n
        elif action == "land" and launched:
            landed = launched.pop(0)
            flight.land(landed)
            for r, n in zip(landed.requests, landed.num_tokens):
                if landed.stale is None or r.id not in landed.stale:
                    total[r.id] -= n
        elif action == "preempt":
            rid = members[0][0]
            if total.get(rid, 0):
                flight.preempt(requests[rid], False)
                total[rid] = 0
        assert {rid: flight.tokens(r) for rid, r in requests.items()} == {rid: total.get(rid, 0) for rid in requests}
        assert {k: v for k, v in flight.by_id.items() if v} == {k: v for k, v in total.items() if v}
