"""The paged policies' decode walk (`PagedScheduler.take_decodes`, vllm and sarathi): requests are
taken in order while fewer than the limit are, each decode takes one more block when its tokens
outgrow its blocks, prompts still in progress are set aside, and when the pool has no free block
the last request not reached yet is restarted (or the candidate itself when none is left). When
every request fits (no more than the limit, at most one block each from the free ones) the walk
takes a shorter path that cannot restart anyone; both must give the same batch."""

from __future__ import annotations

from conftest import scenario
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core import parse_config
from sim_core.entities import Request
from sim_core.results.record import Recorder
from sim_core.schedulers import SCHEDULERS, ReplicaLimits
from sim_core.schedulers.paged import PagedScheduler

BLOCK = 16


def _build(num_blocks: int) -> PagedScheduler:
    config = parse_config(scenario("vllm", scheduler={"num_blocks": num_blocks}))
    limits = ReplicaLimits(num_blocks, 8, config.max_model_len // BLOCK, config.max_model_len, 0)
    scheduler = SCHEDULERS["vllm"](0, 1, config.scheduler, limits, Recorder("full", 1))
    assert isinstance(scheduler, PagedScheduler)
    return scheduler


def _blocks(processed: int, decoding: bool) -> int:
    return max(1, -(-(processed - 1) // BLOCK)) if decoding else -(-processed // BLOCK)


def _requests(scheduler: PagedScheduler, drawn: list[tuple[int, bool]]) -> list[Request]:
    """Requests with `processed` tokens each, decoding (holding the blocks of all but the last
    token, which the iteration that just ended made) or a prompt in progress."""
    out = []
    for rid, (processed, decoding) in enumerate(drawn):
        request = Request(rid, float(rid), 2000, 100)
        request.num_processed_tokens, request.is_prefill_complete = processed, decoding
        scheduler.pool.allocate(request, _blocks(processed, decoding))
        out.append(request)
    return out


def test_every_request_fits():
    """Three requests, 10 blocks, limit 4: A has 33 tokens in 2 blocks (blocks 0-1), its last
    token made by the iteration that just ended, so it takes a 3rd block; B (20 tokens, blocks
    2-3) does not need one; C is a prompt in progress (10 tokens, block 4) and is set aside. A's
    new block is the next free id, 5: the batch is A, B; nothing is left; 4 blocks stay free."""
    scheduler = _build(10)
    a, b, c = _requests(scheduler, [(33, True), (20, True), (10, False)])
    taken, partial, remaining = scheduler.take_decodes([a, b, c], 4)
    assert (taken, partial, remaining) == ([a, b], [c], [])
    assert a.blocks == [0, 1, 5] and b.blocks == [2, 3] and c.blocks == [4] and scheduler.pool.num_free == 4


def _reference(scheduler: PagedScheduler, order: list[Request], limit: int) -> tuple[list, list, list]:
    """The walk as its docstring says, one request at a time."""
    taken: list[Request] = []
    partial: list[Request] = []
    pool, i, end = scheduler.pool, 0, len(order)
    while i < end and len(taken) < limit:
        request = order[i]
        i += 1
        if not request.is_prefill_complete:
            partial.append(request)
            continue
        restarted_self = False
        while not pool.num_free:
            if end > i:
                end -= 1
                scheduler._restart(order[end])
            else:
                scheduler._restart(request)
                restarted_self = True
                break
        if restarted_self:
            continue
        if request.num_processed_tokens > BLOCK * request.num_blocks:
            pool.allocate_one(request)
        taken.append(request)
    return taken, partial, order[i:end]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 100), st.booleans()), min_size=1, max_size=10), st.integers(0, 6),
       st.integers(1, 12))
def test_the_walk_is_the_reference_walk(drawn, spare, limit):
    """Any mix of decodes and prompts in progress, a pool with `spare` blocks beyond what they
    hold (so some walks fit, some restart requests), any limit: the same batch, the same
    blocks, the same restarts as the one-at-a-time walk."""
    held = sum(_blocks(processed, decoding) for processed, decoding in drawn)
    walked, reference = _build(held + spare), _build(held + spare)
    order_a, order_b = _requests(walked, drawn), _requests(reference, drawn)
    got = walked.take_decodes(order_a, limit)
    want = _reference(reference, order_b, limit)
    assert [[r.id for r in part] for part in got] == [[r.id for r in part] for part in want]
    assert [r.blocks for r in order_a] == [r.blocks for r in order_b]
    assert [r.id for r in walked.waiting] == [r.id for r in reference.waiting]
    assert walked.pool.num_free == reference.pool.num_free
