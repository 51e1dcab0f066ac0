"""The roofline cost model: each operator priced by its FLOPs and bytes against the device.

Per transformer layer (TP-sharded) the operators follow Vidur's execution-time breakdown (see
operators.py): QKV projection, RoPE, KV-cache save, prefill and decode attention, output
projection, MLP up / activation / down (MoE: router and the top-k experts), two norms, two
residual adds and, with TP > 1, two all-reduces. A kernel takes

    sqrt((FLOPs / compute roof)^2 + (bytes / memory roof)^2) + launch

a smooth maximum of the two roofs (a GEMM near the ridge point is slower than either roof
alone), where the roofs are the device's peaks times its efficiency factors. A stage adds, on
the first stage, the embedding and the host's CPU overhead, on the last the LM head, and on
every other stage a pipeline send/recv.
"""

from __future__ import annotations

import math

import numpy as np

from sim_core.catalog import DeviceSpec, ModelSpec
from sim_core.config.predictor import CPU_PHASES, OperatorModelConfig
from sim_core.predictor import operators as ops
from sim_core.predictor.grid import GridPredictor
from sim_core.predictor.shape import Count

GEMM_LAUNCH_S = 5e-6          # launch and tail of a tensor-core kernel (fits A100/A30 profiles)
STREAM_LAUNCH_S = 2e-6        # launch of a small memory-bound kernel
COLLECTIVE_LATENCY_S = 8e-6   # NCCL latency of one small all-reduce or send/recv
LAYER_KERNEL_COUNT = {"add": 2}  # two residual adds per layer; every other operator runs once


class Roofs:
    """A device's effective compute, memory and link rates, and how a kernel is priced on them."""

    def __init__(self, device: DeviceSpec, compute_efficiency: float, memory_efficiency: float,
                 link_efficiency: float) -> None:
        self.flops = device.bf16_tflops * 1e12 * compute_efficiency
        self.bandwidth = device.memory_bandwidth_gbps * 1e9 * memory_efficiency
        self.link = device.link_bandwidth_gbps * 1e9 * link_efficiency

    def kernel(self, cost: ops.Cost) -> ops.Amount:
        """Seconds of one kernel (numpy arrays or floats)."""
        compute, memory = cost.flops / self.flops, cost.bytes / self.bandwidth
        launch = GEMM_LAUNCH_S if np.any(np.asarray(cost.flops) > 0) else STREAM_LAUNCH_S
        return np.sqrt(compute * compute + memory * memory) + launch

    def kernel_scalar(self, flops: float, nbytes: float) -> float:
        """kernel() for plain floats, without numpy (the same value)."""
        compute, memory = flops / self.flops, nbytes / self.bandwidth
        return math.sqrt(compute * compute + memory * memory) + (GEMM_LAUNCH_S if flops > 0 else STREAM_LAUNCH_S)

    def all_reduce(self, nbytes: ops.Amount, tp: int) -> ops.Amount:
        """Ring all-reduce: each GPU sends and receives 2 (tp - 1) / tp of the buffer."""
        return nbytes * 2 * (tp - 1) / tp / self.link + COLLECTIVE_LATENCY_S

    def send_recv(self, nbytes: ops.Amount) -> ops.Amount:
        return nbytes / self.link + COLLECTIVE_LATENCY_S


def roofs_for(device: DeviceSpec, cfg: OperatorModelConfig) -> Roofs:
    """The device's roofs with the scenario's efficiency overrides (else the device's own)."""
    return Roofs(device, cfg.compute_efficiency or device.compute_efficiency,
                 cfg.memory_efficiency or device.memory_efficiency, cfg.link_efficiency)


class RooflinePredictor(GridPredictor):
    """Closed-form per-operator times for `model` on `device` with the given TP/PP split."""

    def __init__(self, model: ModelSpec, device: DeviceSpec, tp: int, pp: int, cfg: OperatorModelConfig) -> None:
        self.model, self.tp, self.pp, self.cfg = model, tp, pp, cfg
        self.roofs = roofs_for(device, cfg)
        self.shape = ops.LayerShape.of(model, tp)
        # decode attention = sqrt((a C)^2 + (b C + c n)^2) + launch for n decodes over C cached
        # tokens (operators.decode_attention's FLOPs and bytes over the roofs, factored)
        unit = ops.decode_attention(self.shape, 0.0, 1.0)
        self._decode_compute = unit.flops / self.roofs.flops
        self._decode_kv = unit.bytes / self.roofs.bandwidth
        self._decode_query = ops.decode_attention(self.shape, 1.0, 0.0).bytes / self.roofs.bandwidth
        super().__init__(model.num_layers // pp, pp)

    def kernel_times(self, tokens: ops.Amount) -> dict[str, ops.Amount]:
        """Seconds of ONE kernel of each layer operator (what a profile row measures)."""
        return {name: self.roofs.kernel(cost) for name, cost in ops.layer_kernels(self.shape, tokens).items()}

    def layer_ops(self, tokens: np.ndarray) -> dict[str, np.ndarray]:
        share = self.shape.kernel_share        # 1 but for MoE models with dense layers or a shared expert
        times = {name: LAYER_KERNEL_COUNT.get(name, 1) * share(name) * t
                 for name, t in self.kernel_times(tokens).items()}
        if self.tp > 1:  # after the attention and after the MLP
            times["tp_all_reduce"] = 2 * self.roofs.all_reduce(ops.activation_bytes(self.model.embedding_dim, tokens),
                                                               self.tp)
        return times

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
        return self.roofs.kernel_scalar(cost.flops, cost.bytes)

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
