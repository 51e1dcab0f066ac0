"""The silicon cost model: per-operator times read off vLLM kernels measured on the device.

Tables (silicon_tables.py, derived from AIConfigurator's perf_db by bench/derive_silicon.py)
give the latency of one call of each operator on one GPU; between and beyond grid points they
are interpolated in log space (LogGrid). Per layer, on the model's per-GPU shapes:

    attn_pre_proj    GEMM m = tokens, n = (q + 2 kv) x head_dim, k = hidden (in the model's
                     weight format: the bf16, fp8 or fp4 table; the LM head and router stay bf16)
    attn_post_proj   GEMM n = hidden, k = q x head_dim
    mlp_up_proj      GEMM n = 2 x inter / TP (gate and up fused; 1 x without a gate), k = hidden
    mlp_down_proj    GEMM n = hidden, k = inter / TP
    mlp_experts      16-bit MoE models whose shape the fused-MoE table (bf16) has: the whole
                     expert block (up, activation, down) by tokens; other MoE models use the
                     roofline
    tp_all_reduce    2 per layer with TP > 1: vLLM's custom all-reduce up to 8 MiB, NCCL above;
                     NCCL only on more than two GPUs without a peer link beyond PCIe (vLLM
                     disables its custom all-reduce there)
    attention        see `AttentionLookup`, `prefill_attention` and `decode_attention`; the
                     tables measured with the scenario's KV-cache format (bf16 or fp8)

RoPE, the activation, the KV-cache write, the embedding, PP send/recv and the host's CPU phases
are priced exactly as the roofline prices them (the same knobs); the norms too, each with the
residual add vLLM fuses into it (no separate adds).

Attention of one step is one varlen kernel in vLLM: its launch-bound floor (the measured time of
a one-token decode) is charged once per layer and step (`attn_launch`), and each prefill chunk
and the decodes add their measured time above that floor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim_core.catalog import DeviceSpec, ModelSpec
from sim_core.catalog.precision import SIXTEEN_BIT, kv_dtype
from sim_core.config.predictor import CPU_PHASES, OperatorModelConfig
from sim_core.errors import ConfigError
from sim_core.predictor import operators as ops
from sim_core.predictor.grid import GridPredictor
from sim_core.predictor.roofline import RooflinePredictor
from sim_core.predictor.shape import Count
from sim_core.predictor.silicon_tables import AttentionTable, DeviceTables, LogGrid, load_tables

CUSTOM_ALLREDUCE_MAX_BYTES = 8 * 1024 * 1024   # vLLM's custom all-reduce buffer; NCCL above it
PCIE_GEN5_X16_GBPS = 64.0                      # a peer link no faster than this is PCIe, not NVLink
PREFILL_CACHE_SIZE = 1 << 16                   # remembered (chunk, cached tokens) prices
CPU_CACHE_SIZE = 1 << 12                       # remembered host phases (by a step's request count)
DECODE_CACHE_SIZE = 1 << 16                    # remembered (decodes, cached tokens) prices
VECTOR_PAIRS = 256   # decode_attention prices this many pairs or more with array lookups
ELEMENTWISE = ("attn_rope", "attn_kv_cache_save")   # the roofline's price, one kernel each a layer


def custom_all_reduce_runs(device: DeviceSpec, tp: int) -> bool:
    """Whether vLLM runs its custom all-reduce across `tp` GPUs of `device`: always on two
    (peer-to-peer over PCIe is enough), on more only when a link beyond PCIe (NVLink) connects
    them all (vLLM's CustomAllreduce disables itself on "more than two PCIe-only GPUs" and every
    all-reduce goes through NCCL)."""
    return tp <= 2 or device.link_bandwidth_gbps > PCIE_GEN5_X16_GBPS


@dataclass(frozen=True)
class AttentionLookup:
    """Attention seconds of one head configuration (q, kv heads and head_dim on one GPU).

    The tables hold some (q, kv, head_dim) triples. Another is priced by, in turn:
      1. folding KV heads into the batch: kv = f x kv_t, with kv_t the largest measured KV
         head count dividing kv; the kernel's grid is batch x KV heads, so a batch b with kv
         heads runs like a batch f x b with kv_t heads and q / f query heads (on the decode
         tables, median error 1-6% against measured pairs);
      2. linear interpolation in q heads between the measured q neighbours at kv_t (time
         proportional to q beyond the largest, the smallest's below);
      3. head_dim: the nearest measured one, time scaled by head_dim / that.
    """

    terms: tuple[tuple[LogGrid, float], ...]   # grids and their weights (step 2)
    batch_factor: float                        # f (step 1)
    scale: float                               # head_dim ratio (step 3)

    @classmethod
    def of(cls, table: AttentionTable, q: int, kv: int, head_dim: int) -> AttentionLookup:
        dims = table.head_dims()
        measured_dim = min(dims, key=lambda d: (abs(d - head_dim), -d))
        kvs = [v for v in table.kv_heads() if any(k == v and d == measured_dim for _, k, d in table.grids)]
        fitting = [v for v in kvs if v <= kv and kv % v == 0] or [min(kvs)]
        base_kv = max(fitting)
        factor = kv / base_kv
        per_kv = sorted(qh for qh, k, d in table.grids if k == base_kv and d == measured_dim)
        grid = {qh: table.grids[(qh, base_kv, measured_dim)] for qh in per_kv}
        folded_q = q / factor
        return cls(_q_terms(grid, per_kv, folded_q), factor, head_dim / measured_dim)

    def at(self, batch: float, length: float) -> float:
        """Seconds of one call for `batch` sequences of `length` (tokens, or cached tokens)."""
        folded = batch * self.batch_factor
        total = 0.0
        for grid, weight in self.terms:
            total += weight * grid.at(folded, length)
        return total * self.scale

    def at_each(self, batch: np.ndarray, length: np.ndarray) -> np.ndarray:
        """`at` of each (batch, length) pair, bit for bit."""
        folded = batch * self.batch_factor
        total = np.zeros(len(folded))
        for grid, weight in self.terms:
            total = total + weight * grid.at_each(folded, length)
        return total * self.scale


def _q_terms(grid: dict[int, LogGrid], qs: list[int], q: float) -> tuple[tuple[LogGrid, float], ...]:
    if q >= qs[-1]:
        return ((grid[qs[-1]], q / qs[-1]),)
    if q <= qs[0]:
        return ((grid[qs[0]], 1.0),)
    above = next(i for i, v in enumerate(qs) if v >= q)
    low, high = qs[above - 1], qs[above]
    if high == q:
        return ((grid[high], 1.0),)
    weight = (q - low) / (high - low)
    return ((grid[low], 1.0 - weight), (grid[high], weight))


class SiliconPredictor(GridPredictor):
    """Measured per-operator times for `model` on a device with tables, TP/PP split as given.

    Args:
        tables: the device's tables (default: the shipped ones of `device_id`).
        kv_cache_dtype: the KV cache's format (default: `auto` resolved for the model, 16-bit).

    Raises:
        ConfigError: the tables lack GEMMs in the model's weight format or attention over a KV
            cache in its format (SimulationConfig refuses such scenarios first).
    """

    def __init__(self, model: ModelSpec, device_id: str, device: DeviceSpec, tp: int, pp: int,
                 cfg: OperatorModelConfig, tables: DeviceTables | None = None,
                 kv_cache_dtype: str | None = None) -> None:
        self.model, self.tp, self.pp = model, tp, pp
        self.custom_all_reduce = custom_all_reduce_runs(device, tp)
        self.tables = tables or load_tables(device_id)
        kv = kv_cache_dtype or kv_dtype("auto", model.weight_dtype)
        self.roofline = RooflinePredictor(model, device, tp, pp, cfg, kv)
        self.shape = shape = ops.LayerShape.of(model, tp)
        self.gemm = self.tables.gemm["bf16"]                 # the 16-bit GEMMs: LM head, router
        self.linear = self._linear_table(device_id)         # the linear layers, in the weight format
        attention = self.tables.attention(kv)
        if attention is None:
            raise ConfigError(f"predictor.type silicon: the tables of '{device_id}' have no attention over a KV "
                              f"cache in {kv}; use type roofline")
        self.context = AttentionLookup.of(attention[0], shape.q_heads, shape.kv_heads, shape.head_dim)
        self.generation = AttentionLookup.of(attention[1], shape.q_heads, shape.kv_heads, shape.head_dim)
        moe_key = (model.embedding_dim, model.mlp_hidden_dim, model.num_experts_per_token, model.num_experts, tp)
        bf16_experts = model.is_moe and model.weight_dtype in SIXTEEN_BIT
        self.moe = self.tables.moe.get(moe_key) if bf16_experts else None
        # the varlen attention kernel's floor: a one-token decode over one cached token
        self.attention_floor = min(self.generation.at(1, 1), self.context.at(1, 1))
        self._prefill_cache: dict[tuple[int, int], float] = {}
        self._cpu_cache: dict[int, dict[str, float]] = {}
        self._cpu_terms: tuple[tuple[str, float, float], ...] | None = None   # (phase, base, per request)
        self._decode_cache: dict[tuple[float, float], float] = {}
        super().__init__(model.num_layers // pp, pp)

    def _linear_table(self, device_id: str) -> LogGrid:
        """The GEMM table of the model's weight format (bf16 for both 16-bit formats)."""
        weight = self.model.weight_dtype
        table = self.tables.gemm.get("bf16" if weight in SIXTEEN_BIT else weight)
        if table is None:
            raise ConfigError(f"predictor.type silicon: the tables of '{device_id}' have no {weight} GEMMs "
                              f"(measured: {', '.join(sorted(self.tables.gemm))}); use type roofline")
        return table

    # ---- token-dependent operators --------------------------------------------------------------

    def layer_ops(self, tokens: np.ndarray) -> dict[str, np.ndarray]:
        s, e = self.shape, self.model.embedding_dim
        roof = self.roofline.layer_ops(tokens)   # the roofline's times, for what the tables lack
        times = {name: roof[name] for name in ELEMENTWISE}
        # vLLM adds each residual inside the RMSNorm that follows it (fused_add_rms_norm, or one
        # Inductor kernel): two kernels a layer that read the input and the residual and write
        # both, and no separate adds
        fused_norm = self.roofline.roofs.kernel(ops.streaming(4 * tokens * e))
        times["input_layernorm"] = times["post_attention_layernorm"] = fused_norm
        times["attn_pre_proj"] = self.linear.grid(tokens, (s.q_heads + 2 * s.kv_heads) * s.head_dim, e)
        times["attn_post_proj"] = self.linear.grid(tokens, e, s.q_heads * s.head_dim)
        if not self.model.is_moe:
            times["mlp_up_proj"] = self.linear.grid(tokens, s.gate * s.ffn, e)
            times["mlp_act"] = roof["mlp_act"]
            times["mlp_down_proj"] = self.linear.grid(tokens, e, s.ffn)
        elif self.moe is not None:
            times["moe_router"] = self.gemm.grid(tokens, s.num_experts, e)
            times["mlp_experts"] = self.experts(self.moe, tokens)
        else:   # a MoE shape the table lacks: the roofline's experts and router
            times.update({name: roof[name] for name in ("moe_router", "mlp_up_proj", "mlp_act", "mlp_down_proj")})
        if self.tp > 1:
            times["tp_all_reduce"] = 2 * self.all_reduce(ops.activation_bytes(e, tokens))
        return times

    def experts(self, moe: LogGrid, tokens: np.ndarray) -> np.ndarray:
        """Seconds of the fused-MoE kernel (table `moe`) for `tokens` routed uniformly. Its rows route
        evenly (balanced): t tokens read min(t x top_k, E) experts' weights, where uniform routing
        touches u(t) = E (1 - (1 - top_k / E)^t) (`operators.touched_experts`). Below E / top_k
        tokens the kernel is priced at the balanced row that reads u(t) experts, u(t) / top_k
        tokens; above, the row at t less what reading E instead of u(t) experts costs there:
        table(t) - table(min(t, E / top_k)) + table(u(t) / top_k), which is table(t) once u(t)
        reaches E."""
        s = self.shape
        all_read = s.num_experts / s.top_k
        touched = ops.touched_experts(tokens, s.num_experts, s.top_k, s.num_experts) / s.top_k
        return moe.grid(tokens) - moe.grid(np.minimum(tokens, all_read)) + moe.grid(touched)

    def all_reduce(self, nbytes: np.ndarray) -> np.ndarray:
        """Seconds of one all-reduce of `nbytes` across the TP group (measured where the tables
        have this TP degree, else the roofline's ring)."""
        custom = self.tables.allreduce.get(self.tp) if self.custom_all_reduce else None
        nccl = self.tables.nccl.get(self.tp)
        if custom is None and nccl is None:
            return self.roofline.roofs.all_reduce(nbytes, self.tp)
        small = (custom or nccl).grid(nbytes)      # type: ignore[union-attr]
        large = (nccl or custom).grid(nbytes)      # type: ignore[union-attr]
        return np.where(nbytes <= CUSTOM_ALLREDUCE_MAX_BYTES, small, large)

    def stage_token_ops(self, tokens: np.ndarray, stage: int) -> dict[str, np.ndarray]:
        return self.roofline.stage_token_ops(tokens, stage)

    def request_ops(self, requests: np.ndarray, stage: int) -> dict[str, np.ndarray]:
        extra = {"attn_launch": np.where(requests > 0, self.layers * self.attention_floor, 0.0)}
        if stage == 0:
            extra.update(self.cpu_times(requests))
        if stage == self.pp - 1:
            extra["lm_head"] = self.gemm.grid(requests, self.model.vocab_size / self.tp, self.model.embedding_dim)
        return extra

    def cpu_times(self, requests: Count) -> dict[str, Count]:
        """Host seconds per phase, exactly the roofline's (the same knobs); a step's count
        (a Python int: every stepwise iteration asks) is priced once and remembered."""
        if type(requests) is not int:   # a run's iterations: the roofline's sums, its knobs read once
            terms = self._cpu_terms
            if terms is None:
                cfg = self.roofline.cfg
                terms = self._cpu_terms = tuple((f"cpu_{phase}", getattr(cfg, f"cpu_{phase}_s"),
                                                 getattr(cfg, f"cpu_{phase}_per_request_s")) for phase in CPU_PHASES)
            return {name: base + per_request * requests for name, base, per_request in terms}
        times = self._cpu_cache.get(requests)
        if times is None:
            if len(self._cpu_cache) >= CPU_CACHE_SIZE:
                self._cpu_cache.clear()
            times = self._cpu_cache[requests] = self.roofline.cpu_times(requests)
        return dict(times)   # the caller's own

    # ---- attention ----------------------------------------------------------------------------

    def chunk_attention(self, chunk: int, context: int) -> float:
        """Seconds of one layer's attention of a prefill chunk of `chunk` new tokens over `context`
        cached ones, launch included. The tables measure whole prompts (nothing cached), so:

            no cache:  the context table at (batch 1, isl = chunk)
            cached:    the largest of
                       - the table at isl = chunk + context times the share of its (query, key)
                         pairs the chunk computes: (chunk x context + chunk (chunk + 1) / 2)
                         / ((chunk + context) (chunk + context + 1) / 2)   (compute-bound)
                       - a decode of one request over `context` cached tokens (the chunk reads
                         every cached K and V at least once: KV-read-bound)
                       - the chunk alone as a prompt (the floor of a kernel over its queries)
        """
        if context == 0:
            return self.context.at(1, chunk)
        total = chunk + context
        share = (chunk * context + chunk * (chunk + 1) / 2) / (total * (total + 1) / 2)
        return max(self.context.at(1, total) * share, self.generation.at(1, context), self.context.at(1, chunk))

    def prefill_attention(self, chunk: int, context: int) -> float:
        """Per-layer seconds the chunk adds above the step's attention launch."""
        key = (chunk, context)
        if key not in self._prefill_cache:
            if len(self._prefill_cache) >= PREFILL_CACHE_SIZE:   # bounded: a long run sees many shapes
                self._prefill_cache.clear()
            self._prefill_cache[key] = max(self.chunk_attention(chunk, context) - self.attention_floor, 0.0)
        return self._prefill_cache[key]

    def decode_scalar(self, num_decodes: int, context: int) -> float:
        """Per-layer seconds the decodes add above the launch: the generation table at batch
        `num_decodes` and the mean cached tokens per request."""
        key = (num_decodes, context)   # (5, 640) and (5.0, 640.0) price alike: one key
        seconds = self._decode_cache.get(key)
        if seconds is None:
            if len(self._decode_cache) >= DECODE_CACHE_SIZE:
                self._decode_cache.clear()
            seconds = 0.0 if num_decodes <= 0 else max(
                self.generation.at(num_decodes, context / num_decodes) - self.attention_floor, 0.0)
            self._decode_cache[key] = seconds
        return seconds

    def decode_attention(self, num_decodes: np.ndarray, context: np.ndarray) -> np.ndarray:
        """`decode_scalar` of each pair, bit for bit: a run's few iterations one by one (most
        were priced before), many at once (`at_each`)."""
        if len(num_decodes) < VECTOR_PAIRS:   # the remembered prices looked up in C, the others priced
            pairs = list(zip(num_decodes.tolist(), context.tolist()))
            known = list(map(self._decode_cache.get, pairs))
            if None in known:
                known = [self.decode_scalar(n, c) if t is None else t for t, (n, c) in zip(known, pairs)]
            return np.array(known, dtype=np.float64)
        decodes, context = np.asarray(num_decodes, dtype=np.float64), np.asarray(context, dtype=np.float64)
        times = np.zeros(len(decodes))
        some = decodes > 0
        if some.any():
            batch = decodes[some]
            above = self.generation.at_each(batch, context[some] / batch) - self.attention_floor
            times[some] = np.where(0.0 > above, 0.0, above)   # max(above, 0.0) as Python takes it
        return times

