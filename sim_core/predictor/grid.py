"""Shared pricing of a batch shape from per-operator tables precomputed on a token grid.

A stage time is the sum of four parts (seconds):

    token part    layers x (per-layer operators of the batch's total tokens, e.g. GEMMs, norms)
                  + stage operators of the tokens (embedding on stage 0, PP send on non-last)
    request part  stage operators of the number of requests (LM head on the last stage,
                  CPU overhead on stage 0)
    prefill       layers x attention of each prefill chunk (chunk tokens, cached tokens)
    decode        layers x attention of all decodes (number of decodes, total context)

The token and request parts are looked up in arrays indexed by the count (built once, grown
by doubling when a larger batch comes), so the hot loop does no model evaluation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sim_core.predictor.shape import BatchShape, Count

if TYPE_CHECKING:
    from sim_core.catalog import ModelSpec
    from sim_core.predictor.eager import EagerLaunch

INITIAL_GRID = 8192


class GridPredictor:
    """Base of the roofline and learned predictors: subclasses say how each operator costs."""

    needs_context = True

    def __init__(self, num_layers_per_stage: int, num_stages: int) -> None:
        self.layers, self.num_stages = num_layers_per_stage, num_stages
        # steps of more tokens than this run without a CUDA graph: their GPU work grows by
        # _eager_gaps[stage] seconds and is at least _eager_floors[stage] (eager.py); neither
        # until set_eager_launch
        self._graph_tokens = np.iinfo(np.int64).max
        self._eager_floors = [0.0] * num_stages
        self._eager_gaps = [0.0] * num_stages
        self._size = 0
        self._ensure(INITIAL_GRID)

    # ---- what a subclass provides (seconds; arrays in, arrays out) ---------------------------

    def layer_ops(self, tokens: np.ndarray) -> dict[str, np.ndarray]:
        """Per-layer seconds of each token-dependent operator (all its kernels in one layer)."""
        raise NotImplementedError

    def stage_token_ops(self, tokens: np.ndarray, stage: int) -> dict[str, np.ndarray]:
        """Seconds of the stage's operators outside the layers that depend on tokens."""
        raise NotImplementedError

    def request_ops(self, requests: np.ndarray, stage: int) -> dict[str, np.ndarray]:
        """Seconds of the stage's operators that depend on the number of requests."""
        raise NotImplementedError

    def prefill_attention(self, chunk: int, context: int) -> float:
        """Per-layer seconds of the prefill attention of one request's chunk."""
        raise NotImplementedError

    def decode_attention(self, num_decodes: np.ndarray, context: np.ndarray) -> np.ndarray:
        """Per-layer seconds of decode attention for batches of `num_decodes` holding `context`
        KV tokens in all (element-wise over the arrays)."""
        raise NotImplementedError

    def cpu_times(self, requests: Count) -> dict[str, Count]:
        """Host seconds per phase (`cpu_<phase>`) that request_ops charges on the first stage
        (none unless a subclass prices them)."""
        return {}

    def set_eager_launch(self, eager: EagerLaunch, model: ModelSpec) -> None:
        """Price every step of more than `eager.graph_tokens` tokens as run without a CUDA graph:
        its GPU work plus the gaps of the stage's layers, floored by the host's launch time of
        them (eager.py)."""
        self._graph_tokens = eager.graph_tokens
        self._eager_floors = eager.stage_floors(model, self.num_stages)
        self._eager_gaps = eager.stage_gaps(model, self.num_stages)

    def decode_scalar(self, num_decodes: int, context: int) -> float:
        """decode_attention of one batch; subclasses may give a faster scalar path, which must
        equal the array path bit for bit."""
        return float(self.decode_attention(np.array([num_decodes], dtype=np.float64),
                                           np.array([context], dtype=np.float64))[0])

    # ---- the tables ---------------------------------------------------------------------------

    def _ensure(self, count: int) -> None:
        if count < self._size:
            return
        size = max(2 * self._size, count + 1, INITIAL_GRID)
        grid = np.arange(size, dtype=np.float64)
        layer = self.layer_ops(grid)
        per_layer = sum(layer.values()) if layer else np.zeros(size)
        self._token_total = [self.layers * per_layer + _total(self.stage_token_ops(grid, s), size)
                             for s in range(self.num_stages)]
        self._request_total = [_total(self.request_ops(grid, s), size) for s in range(self.num_stages)]
        self._size = size

    # ---- pricing --------------------------------------------------------------------------------

    def stage_time(self, shape: BatchShape, stage_id: int) -> float:
        """Seconds that pipeline stage `stage_id` takes for a batch of this shape."""
        self._ensure(max(shape.total_tokens, shape.num_requests))
        time = self._token_total[stage_id][shape.total_tokens] + self._request_total[stage_id][shape.num_requests]
        for chunk, context in shape.prefill_chunks:
            time += self.layers * self.prefill_attention(chunk, context)
        if shape.num_decodes:
            time += self.layers * self.decode_scalar(shape.num_decodes, shape.decode_context)
        if shape.total_tokens > self._graph_tokens:
            time = self._launch_floored(float(time), shape.num_requests, stage_id)
        return float(time)

    def _host_seconds(self, requests: int, stage_id: int) -> float:
        """The host phases a stage time holds (request_ops charges them on the first stage)."""
        return float(sum(self.cpu_times(requests).values())) if stage_id == 0 else 0.0

    def _launch_floored(self, time: float, requests: int, stage_id: int) -> float:
        """`time` of a step too large for a CUDA graph: its GPU side plus the layers' gaps, raised
        to the launch floor (`time` + the gaps, bit for bit, when that GPU side is the longer)."""
        host = self._host_seconds(requests, stage_id)
        floor, gaps = self._eager_floors[stage_id], self._eager_gaps[stage_id]
        return floor + host if time - host + gaps < floor else time + gaps

    def decode_run_times(self, num_requests: np.ndarray, context: np.ndarray, stage_id: int) -> np.ndarray:
        """Stage times of consecutive decode-only iterations with `num_requests[j]` requests
        holding `context[j]` KV tokens in all (bitwise equal to stage_time of each)."""
        self._ensure(int(num_requests.max()))
        fixed = self._token_total[stage_id][num_requests] + self._request_total[stage_id][num_requests]
        decode = self.decode_attention(num_requests.astype(np.float64), context.astype(np.float64))
        times = fixed + self.layers * decode
        eager = np.flatnonzero(num_requests > self._graph_tokens)   # decode-only steps past the largest graph
        for j in eager.tolist():
            times[j] = self._launch_floored(float(times[j]), int(num_requests[j]), stage_id)
        return times

    def fixed_times(self, tokens: np.ndarray, requests: np.ndarray, stage_id: int) -> np.ndarray:
        """Per row, the stage time without attention (token and request parts) of batches with
        `tokens[j]` tokens and `requests[j]` requests."""
        self._ensure(int(max(tokens.max(initial=0), requests.max(initial=0))))
        return self._token_total[stage_id][tokens] + self._request_total[stage_id][requests]

    def breakdown(self, shape: BatchShape, stage_id: int) -> dict[str, float]:
        """Seconds per operator for the whole stage (layer operators times the stage's layers);
        the values sum to stage_time."""
        tokens = np.array([float(shape.total_tokens)])
        parts = {name: self.layers * float(v[0]) for name, v in self.layer_ops(tokens).items()}
        parts["attn_prefill"] = self.layers * sum(self.prefill_attention(q, c) for q, c in shape.prefill_chunks)
        decode = self.decode_attention(np.array([float(shape.num_decodes)]), np.array([float(shape.decode_context)]))
        parts["attn_decode"] = self.layers * float(decode[0]) if shape.num_decodes else 0.0
        parts.update({name: float(v[0]) for name, v in self.stage_token_ops(tokens, stage_id).items()})
        requests = np.array([float(shape.num_requests)])
        parts.update({name: float(v[0]) for name, v in self.request_ops(requests, stage_id).items()})
        if shape.total_tokens > self._graph_tokens:   # what running without a graph adds (eager.py)
            parts.update(self._eager_parts(float(sum(parts.values())), shape.num_requests, stage_id))
        return parts

    def _eager_parts(self, time: float, requests: int, stage_id: int) -> dict[str, float]:
        """What running without a CUDA graph adds to a step priced `time`: the layers' gaps
        (`eager_gaps`, when there are any) and what the launch floor adds beyond them
        (`eager_launch`, only when the floor binds); the Predictor page's overheads have the
        same two names (overheads.py)."""
        gaps = self._eager_gaps[stage_id]
        parts = {"eager_gaps": gaps} if gaps else {}
        floored = self._launch_floored(time, requests, stage_id)
        if floored != time + gaps:   # the floor binds: floor + host, above the GPU work and its gaps
            parts["eager_launch"] = floored - time - gaps
        return parts

    def eager_gap_times(self, tokens: np.ndarray, stage_id: int) -> np.ndarray:
        """Per row, the seconds the layers' gaps add to a step of `tokens[j]` tokens on stage
        `stage_id` (zero for a step that fits a CUDA graph); what the accounting books as
        `eager_gaps`."""
        return np.where(tokens > self._graph_tokens, self._eager_gaps[stage_id], 0.0)


def _total(ops: dict[str, np.ndarray], size: int) -> np.ndarray:
    total = np.zeros(size)
    for values in ops.values():
        total = total + values
    return total
