"""A batch's shape as the cost model sees it (`shape_of`): decodes counted with their context,
prompt chunks listed in batch order. Values by hand; a hypothesis property against the plain
per-member loop."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core.entities import Request
from sim_core.predictor.shape import BatchShape, shape_of


def member(processed: int, complete: bool) -> Request:
    request = Request(id=0, arrived_at=0.0, num_prefill_tokens=1000, num_decode_tokens=100)
    request.num_processed_tokens, request.is_prefill_complete = processed, complete
    return request


def test_decodes_only_sum_their_context():
    """Three decodes holding 100, 250 and 1,001 tokens: 3 requests, 3 tokens, context 1,351."""
    shape = shape_of([member(100, True), member(250, True), member(1001, True)], [1, 1, 1])
    assert shape == BatchShape(3, 3, (), 3, 1351)


def test_prompt_chunks_keep_their_order_beside_the_decodes():
    """A 512-token chunk over 64 cached, a decode holding 300, a 20-token chunk from scratch:
    2 chunks in batch order, 1 decode of context 300; 3 requests, 533 tokens."""
    shape = shape_of([member(64, False), member(300, True), member(0, False)], [512, 1, 20])
    assert shape == BatchShape(3, 533, ((512, 64), (20, 0)), 1, 300)


def plain(requests: list[Request], num_tokens: list[int]) -> BatchShape:
    chunks, decodes, context = [], 0, 0
    for request, tokens in zip(requests, num_tokens):
        if request.is_prefill_complete:
            decodes += tokens
            context += tokens * request.num_processed_tokens
        else:
            chunks.append((tokens, request.num_processed_tokens))
    return BatchShape(len(chunks) + decodes, sum(num_tokens), tuple(chunks), decodes, context)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 100_000), st.booleans(), st.integers(1, 4096)), min_size=1, max_size=80))
def test_the_shape_is_the_plain_loops(members):
    requests = [member(processed, complete) for processed, complete, _ in members]
    tokens = [n for _, _, n in members]
    assert shape_of(requests, tokens) == plain(requests, tokens)
