"""A roofline cost model: each operator of a layer priced by FLOPs and bytes moved.

Per transformer layer (TP-sharded), the operator list follows Vidur's execution-time breakdown:
QKV projection, RoPE, KV-cache save, prefill attention, decode attention, output projection,
MLP up / activation / down (MoE: router and the top-k experts), two norms, two residual adds and,
with TP > 1, two all-reduces. Each operator takes max(FLOPs / compute roof, bytes / memory roof,
kernel floor). A stage is its layers plus, on the first stage, the embedding and the host's CPU
overhead, on the last the LM head, and on every other stage a pipeline send/recv.
"""

from __future__ import annotations

from math import ceil

import numpy as np

from sim_core.catalog import DeviceSpec, ModelSpec
from sim_core.config import PredictorConfig
from sim_core.predictor.shape import BatchShape

B = 2                      # bytes per bf16 value
KERNEL_FLOOR_S = 4e-6      # smallest time of one kernel launch
COLLECTIVE_LATENCY_S = 8e-6


class RooflinePredictor:
    """Closed-form per-operator times for `model` on `device` with the given TP/PP split."""

    needs_context = True

    def __init__(self, model: ModelSpec, device: DeviceSpec, tp: int, pp: int, cfg: PredictorConfig):
        self.model, self.tp, self.pp, self.cfg = model, tp, pp, cfg
        self.flops = device.bf16_tflops * 1e12 * cfg.compute_efficiency
        self.bandwidth = device.memory_bandwidth_gbps * 1e9 * cfg.memory_efficiency
        self.link = device.link_bandwidth_gbps * 1e9 * cfg.link_efficiency
        self.layers = model.num_layers // pp
        self.q_heads, self.kv_heads = model.num_q_heads // tp, ceil(model.num_kv_heads / tp)
        self.ffn = model.mlp_hidden_dim / tp
        hd = model.head_dim
        # decode attention is linear in the KV context read: seconds per context token per layer
        self.decode_coef = max(4 * hd * self.q_heads / self.flops, 2 * B * hd * self.kv_heads / self.bandwidth)

    def _roof(self, flops: float, nbytes: float) -> float:
        return max(flops / self.flops, nbytes / self.bandwidth, KERNEL_FLOOR_S)

    def _decode_attention(self, context):
        return np.maximum(context * self.decode_coef, KERNEL_FLOOR_S) if isinstance(context, np.ndarray) \
            else max(context * self.decode_coef, KERNEL_FLOOR_S)

    def layer_breakdown(self, shape: BatchShape) -> dict[str, float]:
        """Seconds per operator for ONE layer, decode attention excluded."""
        m, t, hd, e = self.model, shape.total_tokens, self.model.head_dim, self.model.embedding_dim
        qkv = (self.q_heads + 2 * self.kv_heads) * hd
        out = self.q_heads * hd
        gate = 2 if m.use_gated_mlp else 1
        experts = min(m.num_experts, t * m.num_experts_per_token)
        routed = t * m.num_experts_per_token
        ops = {
            "attn_pre_proj": self._roof(2 * t * e * qkv, B * (e * qkv + t * (e + qkv))),
            "attn_rope": self._roof(0, 2 * B * t * (self.q_heads + self.kv_heads) * hd),
            "attn_kv_cache_save": self._roof(0, B * 2 * t * self.kv_heads * hd),
            "attn_prefill": self._prefill_attention(shape.prefill_chunks),
            "attn_post_proj": self._roof(2 * t * out * e, B * (out * e + t * (out + e))),
            "mlp_up_proj": self._roof(2 * routed * e * self.ffn * gate, B * experts * e * self.ffn * gate),
            "mlp_act": self._roof(0, B * 3 * routed * self.ffn),
            "mlp_down_proj": self._roof(2 * routed * self.ffn * e, B * experts * self.ffn * e),
            "norms": 2 * self._roof(0, B * 2 * t * e),
            "residual_add": 2 * self._roof(0, B * 3 * t * e),
        }
        if m.is_moe:
            ops["moe_router"] = self._roof(2 * t * e * m.num_experts, B * e * m.num_experts)
        if self.tp > 1:
            ops["tp_all_reduce"] = 2 * self._collective(B * t * e * 2 * (self.tp - 1) / self.tp)
        return ops

    def _prefill_attention(self, chunks) -> float:
        if not chunks:
            return 0.0
        hd = self.model.head_dim
        flops = sum(4 * q * (c + (q + 1) / 2) for q, c in chunks) * hd * self.q_heads
        nbytes = sum(c + 2 * q for q, c in chunks) * B * 2 * hd * self.kv_heads
        return self._roof(flops, nbytes)

    def _collective(self, nbytes: float) -> float:
        return nbytes / self.link + COLLECTIVE_LATENCY_S

    def stage_extras(self, shape: BatchShape, stage_id: int) -> dict[str, float]:
        """Per-stage operators outside the layers: embedding, LM head, PP send, CPU overhead."""
        m, e, extras = self.model, self.model.embedding_dim, {}
        if stage_id == 0:
            extras["embedding"] = self._roof(0, B * 2 * shape.total_tokens * e)
            extras["cpu_overhead"] = (self.cfg.cpu_overhead_per_iteration_s
                                      + self.cfg.cpu_overhead_per_request_s * shape.num_requests)
        if stage_id == self.pp - 1:
            vocab = m.vocab_size / self.tp
            extras["lm_head"] = self._roof(2 * shape.num_requests * e * vocab, B * e * vocab)
        else:
            extras["pp_send_recv"] = self._collective(B * shape.total_tokens * e)
        return extras

    def breakdown(self, shape: BatchShape, stage_id: int) -> dict[str, float]:
        """Seconds per operator for the whole stage (layer operators times layers)."""
        ops = {name: self.layers * value for name, value in self.layer_breakdown(shape).items()}
        ops["attn_decode"] = self.layers * self._decode_attention(shape.decode_context) if shape.num_decodes else 0.0
        ops.update(self.stage_extras(shape, stage_id))
        return ops

    def _fixed_time(self, shape: BatchShape, stage_id: int) -> float:
        layer = sum(self.layer_breakdown(shape).values())
        return self.layers * layer + sum(self.stage_extras(shape, stage_id).values())

    def stage_time(self, shape: BatchShape, stage_id: int) -> float:
        fixed = self._fixed_time(shape, stage_id)
        if not shape.num_decodes:
            return fixed
        return fixed + self.layers * self._decode_attention(shape.decode_context)

    def decode_run_times(self, num_requests: np.ndarray, context: np.ndarray, stage_id: int) -> np.ndarray:
        """Stage times of consecutive decode-only iterations with `num_requests[j]` requests
        holding `context[j]` KV tokens in all (bitwise equal to stage_time of each)."""
        sizes, index = np.unique(num_requests, return_inverse=True)
        fixed = np.array([self._fixed_time(BatchShape(int(n), int(n), (), int(n), 0), stage_id) for n in sizes])
        return fixed[index] + self.layers * self._decode_attention(context.astype(np.float64))
