"""vllm_v1's KV offload in a result: the recorded stores and loads, and the run's figures."""

from __future__ import annotations

import numpy as np
import pandas as pd

KINDS = ("store", "load")   # the recorded codes (schedulers/v1_offload.py: STORE, LOAD)


def offload_frame(arrays: dict[str, np.ndarray]) -> pd.DataFrame:
    """The recorded offload rows in time order (stable), `kind` as names: one row per request
    per step that stored blocks to the CPU tier, and one per load started; `cpu_blocks_used` is
    the tier's content after the row."""
    order = np.lexsort([arrays["replica_id"], arrays["time"]])
    frame = pd.DataFrame({name: values[order] for name, values in arrays.items()})
    frame["kind"] = pd.Categorical.from_codes(frame["kind"].astype(int), categories=list(KINDS))
    return frame


def offload_figures(frame: pd.DataFrame, block_size: int) -> dict:
    """Summary figures: blocks stored to and evicted from the CPU tier, prompt tokens loaded
    from it instead of computed (CPU prefix hits; `block_size` tokens a block), the bytes those
    loads moved onto each GPU (summed over replicas) and the seconds requests waited for them
    (summed over the loads)."""
    stores, loads = frame[frame["kind"] == "store"], frame[frame["kind"] == "load"]
    return {
        "kv_offload_blocks_stored": int(stores["num_blocks"].sum()),
        "kv_offload_blocks_evicted": int(stores["num_evicted"].sum()),
        "kv_offload_hit_tokens": int(loads["num_blocks"].sum()) * block_size,
        "kv_offload_loaded_bytes_per_gpu": int(loads["bytes_per_gpu"].sum()),
        "kv_offload_load_s": float(loads["seconds"].sum()),
    }
