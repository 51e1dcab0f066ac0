"""Plain-text summary of a run, as the CLI prints it."""

from __future__ import annotations


def _ms(value: float) -> str:
    return "n/a" if value != value else f"{value * 1e3:.1f} ms"


def format_summary(result) -> str:
    s, c = result.summary, result.config
    lines = [
        f"scenario: {c.name or 'unnamed'} | {c.scheduler.type} | {c.cluster.num_replicas} replica(s) x "
        f"{c.model} on {c.device} (TP={c.cluster.tensor_parallel_size}, PP={c.cluster.pipeline_parallel_size}) "
        f"| {result.num_blocks} KV blocks per replica",
        f"requests: {s['num_finished']} finished, {s['num_rejected']} rejected"
        + (f", {s['num_ignored']} ignored" if s.get("num_ignored") else "") + f" | batches: {s['num_batches']} "
        f"| makespan {s['makespan_s']:.3f} s",
        f"throughput: {s['throughput_rps']:.3f} req/s, {s['output_tokens_per_s']:.1f} output tok/s, "
        f"{s['total_tokens_per_s']:.1f} total tok/s",
    ]
    for label, key in (("TTFT", "ttft"), ("TBT", "tbt"), ("E2E", "e2e"), ("queueing", "scheduling_delay")):
        lines.append(f"{label:9s} p50 {_ms(s[f'{key}_p50_s']):>12}  p90 {_ms(s[f'{key}_p90_s']):>12}  "
                     f"p99 {_ms(s[f'{key}_p99_s']):>12}")
    swaps = f", {s['num_swap_outs']} by swapping" if s.get("num_swap_outs") else ""
    lines.append(f"preemptions: {s['num_preemptions']}{swaps} ({s['num_requests_preempted']} requests) | KV utilization: "
                 f"mean {s['kv_utilization_mean']:.1%}, peak {s['kv_utilization_peak']:.1%}")
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)
