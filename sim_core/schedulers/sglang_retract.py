"""SGLang's decode-memory guard (v0.4 `ScheduleBatch.retract_decode`) and `new_token_ratio`, the
share of their remaining outputs that running requests are expected to still need."""

from __future__ import annotations

from sim_core.entities import Request

INIT_NEW_TOKEN_RATIO = 0.7
MIN_NEW_TOKEN_RATIO = INIT_NEW_TOKEN_RATIO * 0.14
NEW_TOKEN_RATIO_DECAY = (INIT_NEW_TOKEN_RATIO - MIN_NEW_TOKEN_RATIO) / 600   # per decode batch
RETRACT_DECODE_STEPS = 20   # free tokens per remaining request a retraction aims for


def outputs(request: Request) -> int:
    """Output tokens the request has (kept through retractions)."""
    return request.num_known_tokens - request.initial_prefill_tokens


def retract_order(requests: list[Request]) -> list[Request]:
    """Requests by (outputs, -prompt length), descending (stable): SGLang retracts from the end,
    so the fewest outputs go first and, among equals, the longest prompt."""
    return sorted(requests, key=lambda r: (outputs(r), -r.initial_prefill_tokens), reverse=True)


def ratio_after_retract(kept: list[Request]) -> float:
    """new_token_ratio after a retraction: (outputs + 20 per request) / their output budgets."""
    decoded = sum(outputs(r) for r in kept)
    budget = sum(r.initial_decode_tokens for r in kept)
    return min(1.0, (decoded + RETRACT_DECODE_STEPS * len(kept)) / budget)


def decayed(ratio: float) -> float:
    """new_token_ratio after a decode batch that retracted nobody."""
    return max(ratio - NEW_TOKEN_RATIO_DECAY, MIN_NEW_TOKEN_RATIO)


def decayed_times(ratio: float, num_batches: int) -> float:
    """new_token_ratio after `num_batches` decode batches that retracted nobody: `decayed`
    applied that many times (the same float steps; it stays put once at the floor)."""
    for _ in range(num_batches):
        if ratio == MIN_NEW_TOKEN_RATIO:
            break
        ratio = decayed(ratio)
    return ratio
