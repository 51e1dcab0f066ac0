"""Multi-turn conversations.

A conversation has k turns (uniform in [min_turns, max_turns]). Turn j's prompt is the system
prompt, everything said so far (earlier inputs and answers) and its new input. Open loop, it
arrives at turn j-1's arrival + (j-1's output tokens x response_s_per_token) + an exponential
think time: that estimate stands in for the real answer time. With `closed_loop` the estimate
is left out, so the gap between consecutive turns' arrival times is exactly the think time; the
simulator then releases turn j that long after turn j-1 actually completes
(`sim_core/cluster/sessions.py`). Conversations start as the arrival process says; the first
num_requests turns in arrival order are kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sim_core.workload.arrivals import generate_arrivals
from sim_core.workload.lengths import generate_lengths

if TYPE_CHECKING:
    from sim_core.config.workload import WorkloadConfig


def generate_sessions(spec: WorkloadConfig, num_requests: int, rng: np.random.Generator, observed: dict) -> dict:
    """Columns of the first `num_requests` turns: arrived_at, num_prefill_tokens,
    num_decode_tokens, session_id, turn, prefix_group, prefix_len."""
    cfg = spec.sessions
    num_sessions = -(-num_requests // cfg.min_turns)   # enough conversations for num_requests turns
    starts = generate_arrivals(spec.arrival, num_sessions, rng, observed.get("arrivals"))
    turns = rng.integers(cfg.min_turns, cfg.max_turns + 1, num_sessions)
    session = np.repeat(np.arange(num_sessions, dtype=np.int64), turns)
    first = np.concatenate(([0], np.cumsum(turns)[:-1]))
    turn = np.arange(len(session), dtype=np.int64) - first[session]
    new_input = generate_lengths(spec.prompt_tokens, len(session), rng, observed.get("prompt"))
    output = generate_lengths(spec.output_tokens, len(session), rng, observed.get("output"))
    think = rng.exponential(cfg.think_time_s, len(session)) if cfg.think_time_s > 0 else np.zeros(len(session))
    group = rng.integers(0, cfg.num_system_prompts, num_sessions)[session]
    said = _exclusive_segment_sum(new_input + output, first, session)     # tokens of earlier turns
    previous_output = np.where(turn > 0, np.roll(output, 1), 0)
    response_s_per_token = 0.0 if cfg.closed_loop else cfg.response_s_per_token
    step = np.where(turn > 0, previous_output * response_s_per_token + think, 0.0)
    arrived = starts[session] + _exclusive_segment_sum(step, first, session) + step
    system = cfg.system_prompt_tokens
    columns = {"arrived_at": arrived, "num_prefill_tokens": system + said + new_input,
               "num_decode_tokens": output, "session_id": session, "turn": turn,
               "prefix_group": group if system else np.full(len(session), -1, dtype=np.int64),
               "prefix_len": system + said}
    order = np.argsort(arrived, kind="stable")[:num_requests]
    return {name: np.asarray(values)[order] for name, values in columns.items()}


def _exclusive_segment_sum(values: np.ndarray, first: np.ndarray, segment: np.ndarray) -> np.ndarray:
    """For each element, the sum of the earlier elements of its segment."""
    total = np.cumsum(values) - values
    return total - total[first][segment]
