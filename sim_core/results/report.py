"""Plain-text summary of a run, as the CLI prints it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim_core.results.result import SimulationResult


def _ms(value: float) -> str:
    return "n/a" if value != value else f"{value * 1e3:.1f} ms"


def format_summary(result: SimulationResult) -> str:
    s, c, first = result.summary, result.config, result.replicas[0]
    shape = (f"{len(result.replicas)} replica(s) x {c.model} on {c.device} (TP={first.tensor_parallel_size}, "
             f"PP={first.pipeline_parallel_size}) | {result.num_blocks} KV blocks per replica")
    if result.pools:
        pools = " + ".join(f"{p.num_replicas} {p.name}" for p in result.pools)
        shape = f"P/D disaggregated: {pools} x {c.model} on {c.device}"
    lines = [
        f"scenario: {c.name or 'unnamed'} | {c.scheduler.type} | {shape}",
        f"requests: {s['num_finished']} finished, {s['num_rejected']} rejected"
        + (f", {s['num_ignored']} ignored" if s.get("num_ignored") else "") + f" | batches: {s['num_batches']} "
        f"| makespan {s['makespan_s']:.3f} s",
        f"throughput: {s['throughput_rps']:.3f} req/s, {s['output_tokens_per_s']:.1f} output tok/s, "
        f"{s['total_tokens_per_s']:.1f} total tok/s",
    ]
    lines += _pool_lines(result)
    for label, key in (("TTFT", "ttft"), ("TBT", "tbt"), ("E2E", "e2e"), ("queueing", "scheduling_delay")):
        lines.append(f"{label:9s} p50 {_ms(s[f'{key}_p50_s']):>12}  p90 {_ms(s[f'{key}_p90_s']):>12}  "
                     f"p99 {_ms(s[f'{key}_p99_s']):>12}")
    swaps = f", {s['num_swap_outs']} by swapping" if s.get("num_swap_outs") else ""
    lines.append(f"preemptions: {s['num_preemptions']}{swaps} ({s['num_requests_preempted']} requests) | "
                 f"KV utilization: mean {s['kv_utilization_mean']:.1%}, peak {s['kv_utilization_peak']:.1%}")
    if c.scheduler.traits.has_prefix_cache:
        hits = f"{s['prefix_hit_rate']:.1%}" if c.scheduler.prefix_caching() else "off"
        lines.append(f"prefix cache: hit rate {hits} ({s['prefix_cached_tokens']} cached prompt tokens) | "
                     f"prompt {s['prompt_tokens_per_s']:.1f} tok/s | truncated: {s['num_truncated']}")
    if "kv_offload_hit_tokens" in s:
        lines.append(f"KV offload: {s['kv_offload_blocks_stored']} blocks stored to the CPU tier "
                     f"({s['kv_offload_blocks_evicted']} evicted) | {s['kv_offload_hit_tokens']} prompt tokens "
                     f"loaded instead of computed, {_ms(s['kv_offload_load_s'])} of loads")
    if not result.operator_times.empty:
        top = result.operator_times.head(5)
        lines.append("stage time by operator: " + ", ".join(f"{name} {share:.0%}" for name, share in
                                                           zip(top["operator"], top["share"])))
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)


def _pool_lines(result: SimulationResult) -> list[str]:
    """P/D disaggregation: the pools (they replace the cluster's replicas) and the KV transfers."""
    if not result.pools:
        return []
    s, link = result.summary, result.config.disaggregation
    pools = ", ".join(f"{p.name} {p.num_replicas} x (TP={p.tensor_parallel_size}, PP={p.pipeline_parallel_size}, "
                      f"{p.num_blocks} KV blocks, busy {s[p.name + '_busy_fraction']:.0%})"
                      if f"{p.name}_busy_fraction" in s else f"{p.name} {p.num_replicas} x {p.num_blocks} KV blocks"
                      for p in result.pools)
    transfers = (f"KV transfers: {s['num_transfers']} over {link.link_bandwidth_gb_s:g} GB/s + "
                 f"{link.link_latency_s:g} s | time p50 {_ms(s['transfer_time_p50_s'])}, "
                 f"wait p99 {_ms(s['transfer_wait_p99_s'])}")
    return [f"pools: {pools}", transfers]
