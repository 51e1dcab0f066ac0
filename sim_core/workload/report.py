"""What a user should know about a workload: size, span, rate, lengths, what was changed."""

from __future__ import annotations

import numpy as np

from sim_core.workload.model import Workload


def workload_stats(workload: Workload) -> dict:
    """Headline figures of a workload (JSON-serializable)."""
    times = workload.arrived_at
    span = float(times[-1] - times[0]) if len(times) else 0.0
    stats: dict[str, object] = {"num_requests": len(workload), "span_s": span,
             "mean_qps": (len(times) - 1) / span if span > 0 else float("nan")}
    for name, values in (("prompt", workload.num_prefill_tokens), ("output", workload.num_decode_tokens)):
        stats.update({f"{name}_min": int(values.min()), f"{name}_mean": float(values.mean()),
                      f"{name}_max": int(values.max())})
    hashed = ["hash_ids"] if workload.hash_ids is not None else []
    stats["optional_columns"] = list(workload.optional_columns()) + hashed
    return stats


def describe(workload: Workload, fmt: str | None = None, has_arrivals: bool = True) -> str:
    """One line: '<format> trace of N requests over S s (R req/s), prompts a..b (mean m) tokens, ...'."""
    s = workload_stats(workload)
    rate = "" if np.isnan(s["mean_qps"]) else f" ({s['mean_qps']:.3g} req/s)"
    when = f"over {s['span_s']:.3f} s{rate}" if has_arrivals else "(no arrival times: the arrival process adds them)"
    extra = f"; also {', '.join(s['optional_columns'])}" if s["optional_columns"] else ""
    return (f"{fmt + ' ' if fmt else ''}trace of {s['num_requests']} requests {when}, "
            f"prompts {s['prompt_min']}..{s['prompt_max']} (mean {s['prompt_mean']:.0f}) tokens, "
            f"outputs {s['output_min']}..{s['output_max']} (mean {s['output_mean']:.0f}) tokens{extra}")
