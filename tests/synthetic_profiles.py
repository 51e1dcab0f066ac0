"""Small Vidur-layout profiles of our own making: the roofline's prices times a known factor,
with a deterministic 1% ripple, written by the profiler's own CSV writer."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sim_core.catalog import DEVICES, MODELS
from sim_core.config.predictor import RooflinePredictorConfig
from sim_core.predictor.roofline import RooflinePredictor
from sim_core.profile.plan import decode_shapes, prefill_shapes, token_grid
from sim_core.profile.writer import attention_row, mlp_row, profile_folder, write_rows

FACTOR = 1.25


def _samples(seconds: float, i: int) -> list[float]:
    ms = seconds * 1e3 * FACTOR * (1 + 0.01 * np.sin(i))
    return [ms * 0.99, ms, ms * 1.01]


def make_profiles(root: Path, model_id: str = "llama-2-7b", device_id: str = "a100-80gb", tps=(1, 2),
                  max_tokens: int = 1024, network: bool = True) -> Path:
    """Write compute (and network) CSVs under `root`; returns root."""
    model, device = MODELS[model_id], DEVICES[device_id]
    mlp, attention = [], []
    for tp in tps:
        roof = RooflinePredictor(model, device, tp, 1, RooflinePredictorConfig())
        for i, t in enumerate(token_grid(max_tokens)):
            kernels = roof.kernel_times(np.array([float(t)]))
            kernels["emb"] = roof.stage_token_ops(np.array([float(t)]), 0)["emb"]
            ops = {op: _samples(float(kernels[op][0]), i) for op in
                   ("emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
                    "post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj", "add")}
            mlp.append(mlp_row(model, tp, t, ops))
        for i, (q, c) in enumerate(prefill_shapes(2048, (64, 128, 256, 512, 1024), 256)):
            save = roof.kernel_times(np.array([float(q)]))["attn_kv_cache_save"][0]
            attention.append(attention_row(model, tp, 1, q, c, True, 16, 2048, {
                "attn_prefill": _samples(roof.prefill_attention(q, c), i), "attn_kv_cache_save": _samples(save, i)}))
        for i, (b, c) in enumerate(decode_shapes(2048, 64)):
            decode = roof.decode_attention(np.array([float(b)]), np.array([float(b * c)]))[0]
            save = roof.kernel_times(np.array([float(b)]))["attn_kv_cache_save"][0]
            attention.append(attention_row(model, tp, b, 1, c, False, 16, 2048, {
                "attn_decode": _samples(decode, i), "attn_kv_cache_save": _samples(save, i)}))
    folder = profile_folder(root, device_id, model_id)
    write_rows(folder / "mlp.csv", mlp)
    write_rows(folder / "attention.csv", attention)
    if network:
        _network(root, device)
    return root


def _network(root: Path, device) -> None:
    roof = RooflinePredictor(MODELS["llama-2-7b"], device, 2, 1, RooflinePredictorConfig())
    sizes = [2 ** k for k in range(11, 27)]
    rows = [{"time_stats.all_reduce.median": roof.roofs.all_reduce(s, 2) * 1e3 * FACTOR, "rank": 0,
             "num_workers": 2, "size": s, "collective": "all_reduce", "devices_per_node": 2} for s in sizes]
    write_rows(Path(root) / "network" / "a100_pairwise_nvlink" / "all_reduce.csv", rows)
    rows = [{"time_stats.send_recv.median": roof.roofs.send_recv(s) * 1e3 * FACTOR, "rank": 0, "num_workers": 2,
             "size": s, "collective": "send_recv", "devices_per_node": 2} for s in sizes]
    write_rows(Path(root) / "network" / "a100_pairwise_nvlink" / "send_recv.csv", rows)
