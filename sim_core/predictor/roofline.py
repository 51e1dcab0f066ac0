"""The roofline cost model: each operator priced by its FLOPs and bytes against the device.

Per transformer layer (TP-sharded) the operators follow Vidur's execution-time breakdown (see
operators.py): QKV projection, RoPE, KV-cache save, prefill and decode attention, output
projection, MLP up / activation / down (MoE: router and the top-k experts), two norms, two
residual adds and, with TP > 1, two all-reduces; a MoE layer under expert or data parallelism
adds its token dispatch and combine (docs/design/moe-parallelism.md). A kernel takes

    sqrt((FLOPs / compute roof)^2 + (bytes / memory roof)^2) + launch

a smooth maximum of the two roofs (a GEMM near the ridge point is slower than either roof
alone), where the roofs are the device's peaks times its efficiency factors; attention's reads
of the paged KV cache (decode and prefill) take the device's `attention_memory_efficiency` where
the catalog measures it apart from the weights' streaming (the RTX GPUs, `kv_roofs_for`). A stage adds, on
the first stage, the embedding and the host's CPU overhead, on the last the LM head, and on
every other stage a pipeline send/recv.

Number formats (docs/design/precision.md): a quantized model's linear layers stream their
weights at the weight format's bytes and run at its tensor throughput where the device has that
math (W8A8 FP8, W4A4 FP4; the input activations are then 1 or 0.5 bytes too), else at BF16
(weight-only); the router, embedding and LM head stay 16-bit. Attention reads K and V at the KV
cache format's bytes (its arithmetic stays 16-bit). A 16-bit model and cache take exactly the
16-bit path.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from sim_core.catalog import DeviceSpec, ModelSpec
from sim_core.catalog.moe_layout import MoeLayout
from sim_core.catalog.precision import DTYPE_BYTES, SIXTEEN_BIT, LinearFormat, kv_dtype, linear_format
from sim_core.config.predictor import CPU_PHASES, OperatorModelConfig
from sim_core.predictor import operators as ops
from sim_core.predictor.grid import GridPredictor
from sim_core.predictor.shape import Count

GEMM_LAUNCH_S = 5e-6          # launch and tail of a tensor-core kernel (fits A100/A30 profiles)
STREAM_LAUNCH_S = 2e-6        # launch of a small memory-bound kernel
COLLECTIVE_LATENCY_S = 8e-6   # NCCL latency of one small all-reduce or send/recv
LAYER_KERNEL_COUNT = {"add": 2}  # two residual adds per layer; every other operator runs once
SIXTEEN_BIT_GEMMS = ("moe_router",)  # quantized checkpoints keep the router 16-bit (memory/model_bytes.py)
# the layer operators that see a MoE group's tokens (every DP rank's) rather than one rank's
GROUP_OPS = ("mlp_up_proj", "mlp_act", "mlp_down_proj", "moe_dispatch_combine")
ATTENTION_GEMMS = ("attn_pre_proj", "attn_post_proj")  # in ModelSpec.attention_weight_dtype when it is set
BF16 = LinearFormat("bf16", "bf16")


class Roofs:
    """A device's effective compute, memory and link rates, and how a kernel is priced on them."""

    def __init__(self, device: DeviceSpec, compute_efficiency: float, memory_efficiency: float,
                 link_efficiency: float, linear: LinearFormat = BF16) -> None:
        self.flops = device.bf16_tflops * 1e12 * compute_efficiency
        self.bandwidth = device.memory_bandwidth_gbps * 1e9 * memory_efficiency
        self.link = device.link_bandwidth_gbps * 1e9 * link_efficiency
        self.step_latency = device.link_latency_s   # None: one COLLECTIVE_LATENCY_S a collective
        self.format = linear
        tflops = device.tensor_tflops(linear.compute)
        assert tflops is not None, "linear_format picks a compute format the device has"
        self.linear_flops = tflops * 1e12 * compute_efficiency

    def kernel(self, cost: ops.Cost) -> ops.Amount:
        """Seconds of one kernel (numpy arrays or floats)."""
        compute, memory = cost.flops / self.flops, cost.bytes / self.bandwidth
        launch = GEMM_LAUNCH_S if np.any(np.asarray(cost.flops) > 0) else STREAM_LAUNCH_S
        return np.sqrt(compute * compute + memory * memory) + launch

    def linear(self, cost: ops.Cost) -> ops.Amount:
        """Seconds of one linear layer's GEMM in the model's format: the weights moved at the
        weight format's bytes, the input activations at the compute format's, the output 16-bit;
        the FLOPs at the compute format's throughput. A 16-bit model: exactly kernel()."""
        if self.format.is_16bit:
            return self.kernel(cost)
        compute, memory = cost.flops / self.linear_flops, self.linear_bytes(cost) / self.bandwidth
        launch = GEMM_LAUNCH_S if np.any(np.asarray(cost.flops) > 0) else STREAM_LAUNCH_S
        return np.sqrt(compute * compute + memory * memory) + launch

    def linear_bytes(self, cost: ops.Cost) -> ops.Amount:
        """Bytes a linear layer's GEMM moves in the model's format (Cost counts 16-bit values)."""
        return (cost.bytes - cost.weight_values * (ops.BYTES - DTYPE_BYTES[self.format.weight])
                - cost.input_values * (ops.BYTES - DTYPE_BYTES[self.format.compute]))

    def kernel_scalar(self, flops: float, nbytes: float) -> float:
        """kernel() for plain floats, without numpy (the same value)."""
        compute, memory = flops / self.flops, nbytes / self.bandwidth
        return math.sqrt(compute * compute + memory * memory) + (GEMM_LAUNCH_S if flops > 0 else STREAM_LAUNCH_S)

    def latency(self, steps: int) -> float:
        """The latency of a collective of `steps` messages one after another: the device's link
        latency at each step where the catalog has one, else one generic collective latency."""
        return COLLECTIVE_LATENCY_S if self.step_latency is None else steps * self.step_latency

    def all_reduce(self, nbytes: ops.Amount, tp: int) -> ops.Amount:
        """Ring all-reduce: each GPU sends and receives 2 (tp - 1) / tp of the buffer, in 2 (tp - 1)
        steps (a reduce-scatter, then an all-gather)."""
        return nbytes * 2 * (tp - 1) / tp / self.link + self.latency(2 * (tp - 1))

    def send_recv(self, nbytes: ops.Amount) -> ops.Amount:
        return nbytes / self.link + self.latency(1)

    def exchange(self, nbytes: ops.Amount, steps: int = 1) -> ops.Amount:
        """An all-gather, reduce-scatter or all-to-all in which each GPU receives `nbytes` (and
        sends as many), all links busy at once: the bytes at one GPU's link rate plus the latency
        of its `steps` (a ring over n GPUs: n - 1; an all-to-all's messages go at once: 1)."""
        return nbytes / self.link + self.latency(steps)


def roofs_for(device: DeviceSpec, cfg: OperatorModelConfig, weight_dtype: str = "bf16") -> Roofs:
    """The device's roofs with the scenario's efficiency overrides (else the device's own), its
    linear layers in `weight_dtype`."""
    return Roofs(device, cfg.compute_efficiency or device.compute_efficiency,
                 cfg.memory_efficiency or device.memory_efficiency, cfg.link_efficiency,
                 linear_format(weight_dtype, device))


def kv_roofs_for(device: DeviceSpec, cfg: OperatorModelConfig) -> Roofs:
    """The roofs attention reads the paged KV cache on: the device's `attention_memory_efficiency`
    where it has one, moved by a scenario's `memory_efficiency` in proportion (a calibration that
    scales the GEMMs' streaming scales the cache reads alike, their measured ratio kept; capped at
    1). Only called for such a device: without one attention runs on roofs_for's roofs."""
    assert device.attention_memory_efficiency is not None
    if cfg.memory_efficiency is None:
        memory = device.attention_memory_efficiency
    else:
        memory = min(1.0, cfg.memory_efficiency * device.attention_memory_efficiency / device.memory_efficiency)
    return Roofs(device, cfg.compute_efficiency or device.compute_efficiency, memory, cfg.link_efficiency)


class RooflinePredictor(GridPredictor):
    """Closed-form per-operator times for `model` on `device` with the given TP/PP split.

    Args:
        kv_cache_dtype: the KV cache's format (default: `auto` resolved for the model, 16-bit).
    """

    def __init__(self, model: ModelSpec, device: DeviceSpec, tp: int, pp: int, cfg: OperatorModelConfig,
                 kv_cache_dtype: str | None = None, layout: MoeLayout | None = None) -> None:
        self.model, self.tp, self.pp, self.cfg = model, tp, pp, cfg
        self.roofs = roofs_for(device, cfg, model.weight_dtype)
        # attention projections a quantization left out (e.g. Llama-4-Scout FP8: 16-bit attention)
        self.attention_roofs = (roofs_for(device, cfg, model.attention_weight_dtype)
                                if model.attention_weight_dtype else self.roofs)
        # decode and prefill attention's KV-cache reads (the same roofs unless the device measures them apart)
        self.kv_roofs = self.roofs if device.attention_memory_efficiency is None else kv_roofs_for(device, cfg)
        self.layout = layout or MoeLayout(tp)
        self.shape = ops.LayerShape.of(model, tp, layout, cfg.expert_load_imbalance)
        self.kv_cache_dtype = kv_cache_dtype or kv_dtype("auto", model.weight_dtype)
        self.kv_ratio = DTYPE_BYTES[self.kv_cache_dtype] / ops.BYTES   # 1 for a 16-bit cache
        # decode attention = sqrt((a C)^2 + (b C + c n)^2) + launch for n decodes over C attended
        # tokens (operators.decode_attention's FLOPs and bytes over the roofs, factored; the
        # cached K and V at the KV format's bytes). C is attended_context's, the local layers'
        # window cap already applied, so the per-token unit is a layer's without one.
        unit = ops.decode_attention(replace(self.shape, local_share=0.0), 0.0, 1.0)
        self._decode_compute = unit.flops / self.roofs.flops
        self._decode_kv = unit.bytes * self.kv_ratio / self.kv_roofs.bandwidth
        self._decode_query = ops.decode_attention(self.shape, 1.0, 0.0).bytes / self.kv_roofs.bandwidth
        self._group_total: np.ndarray = np.zeros(0)   # group_correction: the GROUP_OPS of the stage by group tokens
        super().__init__(model.num_layers // pp, pp)

    def kernel_times(self, tokens: ops.Amount) -> dict[str, ops.Amount]:
        """Seconds of ONE kernel of each layer operator (what a profile row measures)."""
        return {name: self._kernel(name, cost) for name, cost in ops.layer_kernels(self.shape, tokens).items()}

    def _kernel(self, name: str, cost: ops.Cost) -> ops.Amount:
        """One layer kernel in the model's formats: linear layers by Roofs.linear (the attention
        projections in attention_weight_dtype when set), the KV-cache write with its stores in the
        KV format, everything else 16-bit."""
        if name == "attn_kv_cache_save" and self.kv_cache_dtype not in SIXTEEN_BIT:
            # it reads K and V in 16 bits and writes as many values to the cache: half its bytes
            return self.roofs.kernel(ops.Cost(cost.flops, cost.bytes * (1.0 + self.kv_ratio) / 2))
        roofs = self.attention_roofs if name in ATTENTION_GEMMS else self.roofs
        if name not in SIXTEEN_BIT_GEMMS and np.any(np.asarray(cost.weight_values) > 0):
            return roofs.linear(cost)
        return roofs.kernel(cost)

    def layer_ops(self, tokens: np.ndarray) -> dict[str, np.ndarray]:
        share = self.shape.kernel_share        # 1 but for MoE models with dense layers or a shared expert
        times = {name: LAYER_KERNEL_COUNT.get(name, 1) * share(name) * t
                 for name, t in self.kernel_times(tokens).items()}
        if self.tp > 1:  # after the attention and after the MLP
            times["tp_all_reduce"] = 2 * self.roofs.all_reduce(ops.activation_bytes(self.model.embedding_dim, tokens),
                                                               self.tp)
        if self.model.is_moe and self.layout.exchanges:  # dispatch before the experts, combine after
            exchange = self.roofs.exchange(ops.moe_exchange_bytes(self.shape, self.layout, tokens),
                                           ops.moe_exchange_steps(self.shape, self.layout))
            times["moe_dispatch_combine"] = 2 * self.shape.kernel_share("mlp_up_proj") * exchange
        return times

    def group_correction(self, tokens: int, group_tokens: int) -> float:
        """Seconds to add to a DP rank's stage time for `tokens` tokens (one stage: PP 1) when
        its MoE group runs `group_tokens` in all: the experts and their dispatch / combine priced
        for the group's tokens, i.e. as if every rank had group_tokens / DP, instead of DP x
        `tokens` (engine/dp_group.py). 0 without DP, and when group_tokens = DP x tokens. Looked
        up in a table of those operators' stage time by group tokens (rank tokens = index / DP)."""
        dp = self.layout.dp
        if dp == 1 or not self.model.is_moe:
            return 0.0
        if len(self._group_total) <= max(group_tokens, dp * tokens):   # grown by doubling, like the grid
            size = max(2 * len(self._group_total), group_tokens + 1, dp * tokens + 1, 8192)
            layer = self.layer_ops(np.arange(size, dtype=np.float64) / dp)
            self._group_total = self.layers * np.sum([layer[name] for name in GROUP_OPS if name in layer], axis=0)
        return float(self._group_total[group_tokens] - self._group_total[dp * tokens])

    def stage_token_ops(self, tokens: np.ndarray, stage: int) -> dict[str, np.ndarray]:
        extra = {}
        if stage == 0:
            extra["emb"] = self.roofs.kernel(ops.embedding(self.model.embedding_dim, tokens))
        if stage != self.pp - 1:
            extra["pp_send_recv"] = self.roofs.send_recv(ops.activation_bytes(self.model.embedding_dim, tokens))
        return extra

    def request_ops(self, requests: np.ndarray, stage: int) -> dict[str, np.ndarray]:
        extra = {}
        if stage == 0:
            extra.update(self.cpu_times(requests))
        if stage == self.pp - 1:
            extra["lm_head"] = self.roofs.kernel(ops.lm_head(self.model, self.tp, requests))
        return extra

    def cpu_times(self, requests: Count) -> dict[str, Count]:
        """Host seconds of an iteration with `requests` requests, per phase (`cpu_<phase>`):
        schedule, prepare inputs, sample, process outputs. Charged on the first stage."""
        cfg = self.cfg
        return {f"cpu_{phase}": getattr(cfg, f"cpu_{phase}_s") + getattr(cfg, f"cpu_{phase}_per_request_s") * requests
                for phase in CPU_PHASES}

    def prefill_attention(self, chunk: int, context: int) -> float:
        cost = ops.prefill_attention(self.shape, chunk, context)
        if self.kv_cache_dtype in SIXTEEN_BIT:
            return self.kv_roofs.kernel_scalar(cost.flops, cost.bytes)
        # the chunk reads K and V of the keys it sees from the cache in the KV format: context +
        # chunk in a global layer, min(context, window) + chunk in a local one (as _prefill)
        kv_reads = ops.BYTES * self.shape.values_per_token * ops.prefill_keys(self.shape, chunk, context)
        return self.kv_roofs.kernel_scalar(cost.flops, cost.bytes - (1.0 - self.kv_ratio) * kv_reads)

    def decode_attention(self, num_decodes: np.ndarray, context: np.ndarray) -> np.ndarray:
        context = ops.attended_context(self.shape, num_decodes, context)    # local layers' window cap
        compute = self._decode_compute * context
        memory = self._decode_kv * context + self._decode_query * num_decodes
        return np.sqrt(compute * compute + memory * memory) + GEMM_LAUNCH_S

    def decode_scalar(self, num_decodes: int, context: int) -> float:
        context = ops.attended_context(self.shape, num_decodes, context)
        compute = self._decode_compute * context
        memory = self._decode_kv * context + self._decode_query * num_decodes
        return math.sqrt(compute * compute + memory * memory) + GEMM_LAUNCH_S
