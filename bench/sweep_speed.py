"""Capacity-search speed: configurations per minute on the local process pool and on Ray.

    python bench/sweep_speed.py [--configs 1000] [--ray-configs 200] [--address HOST:PORT] [--workers N] [--every K]
                                [--groups K] [--no-reuse] [--save FILE] [--budget FILE]
                                [--breakdown [--groups K] [--where KEY=VALUE ...]]
                                [--probe QPS [--length L] --where ...]

The grid (1,000 configurations) is Llama-2-7B with the roofline predictor on a synthetic chat
workload (uniform prompts 64-1024, outputs 16-256 tokens), SLOs TTFT p90 <= 2 s and TBT p99 <=
200 ms, search 0.25 .. 1024 req/s with 400 requests per replica per probe and 5% tolerance, over
device (5) x scheduler (4) x replicas (1, 2, 4, 8, 16) x PP (1, 2) x batch size cap (5).
`--configs N` times the first N; `--every K` times every K-th configuration instead (K = 53: 19
configurations spread over every device, scheduler, replica count, PP and batch cap, since 53
shares no factor with the grid's dimensions), up to `--configs` of them. Ray: connects to
`--address`, or starts a temporary local head (`ray start --head` with this machine's cores;
stopped at the end) and times `--ray-configs` configurations (0 skips Ray); their results are
checked equal to the local ones. `--groups K` times every K-th group of configurations that
differ only in the batch cap (the grid's 200 groups of 5; K = 11: 19 groups, 95 configurations),
searched as the sweep searches them (one task a group, probes replayed across caps where proved
identical: `sim_core/sweep/reuse.py`); `--no-reuse` sends one task per configuration instead (as
before grouping; `--every` samples hold one configuration per group, so they are timed so
anyway). `--breakdown` instead searches the chosen configurations one at
a time in this process and prints each probe's CPU seconds, then the totals by kind of probe
(short, long, reseeded; passed or failed) and the requests simulated (in units of one replica's
`num_requests`); `--where cluster.pipeline_parallel_size=2` (repeatable) keeps only the grid's
points with those values before taking every K-th. `--breakdown --groups K` searches every K-th
cap group as a worker does (largest cap first, probes replayed across caps) and prints each
group's CPU seconds and answers, then the simulated probes' CPU by policy and PP, by replica
count and by kind of probe, the share spent in the engine's event loop (`Simulator.run`), the
probes replayed and the replica-probes simulated. `--budget FILE` reads a `--save` file (made
with the same `--configs`, `--every` or `--groups`) and prints its replica-probes by kind of probe
and what a perfect first bracket would leave of them (no simulation). `--probe QPS` times one probe (`--length`
x 400 requests per replica, default 1) of the first point `--where` keeps, `--repeats` times,
and prints each one's process CPU seconds and their median.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim_core.sweep import LocalBackend, RayBackend, build_grid, parse_sweep_spec, run_sweep, search
from sim_core.sweep.probe import num_probe_requests
from sim_core.sweep.runner import point_record
from sim_core.sweep.task import point_task

SPEC = {
    "base": {"model": "llama-2-7b", "device": "a100-80gb", "predictor": {"type": "roofline"},
             "scheduler": {"type": "vllm"},
             "workload": {"arrival": {"process": "poisson", "qps": 1.0},
                          "prompt_tokens": {"distribution": "uniform", "min": 64, "max": 1024},
                          "output_tokens": {"distribution": "uniform", "min": 16, "max": 256}}},
    "vary": {"device": ["a100-80gb", "h100-sxm", "h200", "l40s", "a40"],
             "scheduler.type": ["vllm", "sarathi", "orca", "faster_transformer"],
             "cluster.num_replicas": [1, 2, 4, 8, 16], "cluster.pipeline_parallel_size": [1, 2],
             "scheduler.batch_size_cap": [16, 32, 64, 128, 256]},
    "slo": {"ttft_p90_s": 2.0, "tbt_p99_s": 0.2},
    "search": {"qps_min": 0.25, "qps_max": 1024, "num_requests": 400, "tolerance": 0.05},
    "gpu_hour_usd": 2.5,
}


def timed(name: str, backend, limit: int, every: int = 1, groups: int = 0, reuse: bool = True) -> list[dict]:
    """Run the first `limit` configurations (every `every`-th one, or those of every `groups`-th
    cap group) on `backend` (fresh output folder) and print the rate."""
    spec, base = parse_sweep_spec(SPEC, source="bench spec")
    with tempfile.TemporaryDirectory() as out:
        cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        load, started = os.getloadavg()[0], time.perf_counter()
        records = (run_sweep(spec, base, backend, out, limit=limit).records if every == 1 and not groups and reuse
                   else _sample(spec, base, backend, limit, every, groups, reuse))
        elapsed = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    count, probes = len(records), sum(len(r["probes"]) for r in records)
    print(f"{name:6s} {count:5d} configurations in {elapsed:7.1f} s: {count / elapsed * 60:7.1f} configurations/min, "
          f"{probes / count:.1f} probes each ({probes / elapsed:.1f} probes/s); load average before: {load:.2f}",
          flush=True)
    worker_cpu = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
    if isinstance(backend, LocalBackend):   # its workers are child processes: their CPU time says what free cores do
        print(f"{'':6s} worker CPU {worker_cpu:.1f} s ({worker_cpu / count:.3f} s per configuration): "
              f"{count / (worker_cpu / backend.workers) * 60:.1f} configurations/min if every worker had "
              "a whole core", flush=True)
    return records


def _sample(spec, base, backend, limit: int, every: int, groups: int = 0, reuse: bool = True) -> list[dict]:
    """The records of every `every`-th point of the grid, or of the points of every `groups`-th
    cap group (at most `limit` points), in grid order; `reuse`: one task per cap group."""
    points = _sampled(build_grid(spec, base).points, limit, every, groups)
    if reuse:
        from sim_core.sweep.runner import TASKS_PER_WORKER
        from sim_core.sweep.task import plan_tasks, task_answers
        tasks = plan_tasks(points, spec, TASKS_PER_WORKER * getattr(backend, "workers", 1))
    else:
        tasks = [([index], point_task(point, spec)) for index, point in enumerate(points)]
    records: list[dict | None] = [None] * len(points)
    for number, result in backend.run([task for _, task in tasks]):
        answers = task_answers(tasks[number][0], result) if reuse else [(tasks[number][0][0], result)]
        for index, answer in answers:
            records[index] = point_record(points[index], answer)
    return [record for record in records if record is not None]


def _sampled(points: list, limit: int, every: int, groups: int) -> list:
    """Every `every`-th of `points`, or those of every `groups`-th cap group, at most `limit`."""
    if groups:
        keys = list(dict.fromkeys(_cap_group(point) for point in points))[::groups]
        return [point for point in points if _cap_group(point) in set(keys)][:limit]
    return points[::every][:limit]


def probe_budget(path: str, limit: int, every: int, groups: int) -> None:
    """Where the replica-probes of a `--save` file (written with the same `--configs`, `--every`
    or `--groups`) go: by kind of probe, in units of one replica's `num_requests` (a long probe
    counts its length; replayed probes count as made), and what a perfect first bracket would
    leave: two short probes a configuration, the long probes as they were (the most any choice of
    where the search starts can save)."""
    spec, base = parse_sweep_spec(SPEC, source="bench spec")
    points = _sampled(build_grid(spec, base).points, limit, every, groups)
    saved = json.loads(Path(path).read_text())
    units: Counter = Counter()
    oracle = 0
    for point, (_, _, probes, *_) in zip(points, saved):
        replicas = num_probe_requests(point.scenario, 1)
        for qps, passed, _, _, repeat, length in probes:
            kind = (f"{'long' if length > 1 else 'reseeded' if repeat else 'short'} {'pass' if passed else 'fail'}"
                    if qps != spec.search.qps_max or length > 1 or repeat else "qps_max")
            units[kind] += replicas * length
        oracle += 2 * replicas + sum(replicas * length for *_, length in probes if length > 1)
    total = sum(units.values())
    print(f"{len(saved)} configurations, {total} replica-probes ({total / len(saved):.1f} each)")
    for kind, count in sorted(units.items(), key=lambda item: -item[1]):
        print(f"  {kind:14s} {count:6d} ({count / total:4.0%})")
    print(f"  a perfect first bracket (two short probes, the same long ones): {oracle} ({oracle / total - 1:+.0%})")
    cold, near = threshold_brackets(points, saved, spec.search)
    print(f"  short brackets on a threshold model (a probe passes up to 1.025 x the saved answer): from qps_max and "
          f"the served rate {cold} replica-probes; outwards from the served rate by 1.05, 1.1, 1.21, ... {near} "
          f"({near / max(cold, 1) - 1:+.0%})")


def threshold_brackets(points: list, saved: list, settings) -> tuple[int, int]:
    """Replica-probes of the short bracket alone (no confirmation, no repeats, no noise) over the
    distinct saved answers when every probe passes up to 1.025 x the answer: the search's own
    start (`qps_max`, then the rate served there) against one that probes the served rate and
    steps outwards from it by 1 + tolerance, then 1 + 2 x tolerance squared after each probe (as
    a prior would be used), both bisecting the bracket to the tolerance."""
    bare = settings.model_copy(update={"confirm_length": 0, "repeats": 0})
    seen, cold, near = set(), 0, 0
    for point, (_, answer, probes, *_) in zip(points, saved):
        key = (json.dumps(point.values.get("cluster.num_replicas")), _cap_group(point), round(answer or 0.0, 4))
        if not answer or key in seen or probes[0][0] != settings.qps_max:
            continue
        seen.add(key)
        capacity, served = 1.025 * answer, probes[0][2]["served_rps"]
        replicas = num_probe_requests(point.scenario, 1)
        rule = lambda qps, c=capacity, s=served: search.Probe(qps, qps <= c, {"served_rps": s},  # noqa: E731
                                                             () if qps <= c else ("overloaded",))
        cold += replicas * len(search.bracket_search(rule, bare).probes)
        near += replicas * (1 + _outwards(capacity, served, settings.tolerance, settings.qps_min))
    return cold, near


def _outwards(capacity: float, start: float, tolerance: float, lowest: float) -> int:
    """Probes to bracket `capacity` within `tolerance` from `start` (see threshold_brackets)."""
    count, passed, step = 1, start <= capacity, 1.0 + tolerance
    low, high = (start, math.inf) if passed else (0.0, start)
    while low == 0.0 or high == math.inf:
        qps = low * step if passed else max(high / step, lowest)
        count += 1
        if qps <= capacity:
            low = qps
        else:
            high = qps
        if qps <= lowest and qps > capacity:
            return count
        step = 1.0 + 2.0 * tolerance if step == 1.0 + tolerance else step * step
    while high / low > (1.0 + tolerance) * (1.0 + 1e-12):
        middle = math.sqrt(low * high)
        count += 1
        low, high = (middle, high) if middle <= capacity else (low, middle)
    return count


def _cap_group(point) -> tuple:
    """The point's varied values but the batch cap."""
    return tuple((key, value) for key, value in point.values.items() if key != "scheduler.batch_size_cap")


def breakdown(limit: int, every: int, where: list[str]) -> None:
    """Search every `every`-th configuration (at most `limit`) of those whose values match
    `where` (KEY=VALUE strings) in this process, timing each probe."""
    spec, base = parse_sweep_spec(SPEC, source="bench spec")
    wanted = dict(item.split("=", 1) for item in where)
    points = [point for point in build_grid(spec, base).points
              if all(str(point.values.get(key)) == value for key, value in wanted.items())][::every][:limit]
    cpu: Counter = Counter()
    units: Counter = Counter()
    real_probe = search.run_probe

    def timed(scenario, qps, slo, settings, repeat=0, length=1):
        started = time.process_time()
        probe = real_probe(scenario, qps, slo, settings, repeat, length)
        spent = time.process_time() - started
        kind = f"{'long' if length > 1 else 'reseeded' if repeat else 'short'} {'pass' if probe.passed else 'fail'}"
        cpu[kind] += spent
        units[kind] += num_probe_requests(scenario, length)
        print(f"    {qps:10.4g} req/s  length {length}  seed +{repeat}  {'pass' if probe.passed else 'FAIL'}  "
              f"{spent:6.2f} s  {', '.join(probe.violated)}", flush=True)
        return probe
    search.run_probe = timed
    try:
        for point in points:
            started = time.process_time()
            print(", ".join(f"{key}={value}" for key, value in point.values.items()), flush=True)
            found = search.capacity_search(point.scenario, spec.slo, spec.search)
            print(f"  -> {found.max_qps:.4g} req/s ({found.binding_slo}), {len(found.probes)} probes, "
                  f"{time.process_time() - started:.2f} CPU-s", flush=True)
    finally:
        search.run_probe = real_probe
    total = sum(cpu.values())
    print(f"{len(points)} configurations: {total:.1f} CPU-s, {total / len(points):.2f} per configuration; "
          f"{sum(units.values())} replica-probes of {spec.search.num_requests} requests")
    for kind in sorted(cpu):
        print(f"  {kind:14s} {cpu[kind]:7.1f} CPU-s ({cpu[kind] / total:4.0%})  {units[kind]:5d} replica-probes")


def group_breakdown(every: int, where: list[str]) -> None:
    """Search every `every`-th cap group (of the points matching `where`) in this process as a
    worker searches a group task, and print where the simulated probes' CPU goes."""
    from sim_core.engine.simulator import Simulator
    from sim_core.sweep import reuse
    from sim_core.sweep.task import search_group
    spec, base = parse_sweep_spec(SPEC, source="bench spec")
    wanted = dict(item.split("=", 1) for item in where)
    points = [point for point in build_grid(spec, base).points
              if all(str(point.values.get(key)) == value for key, value in wanted.items())]
    keys = list(dict.fromkeys(_cap_group(point) for point in points))[::every]
    rows: list[tuple[dict, str, float]] = []   # (group values, kind, CPU-s) per simulated probe
    engine, units = [0.0], [0]   # the event loop's CPU-s; replica-probes simulated (units of num_requests)
    real_probe, real_run = reuse.measured_probe, Simulator.run
    group: dict = {}

    def timed_probe(scenario, qps, slo, settings, repeat=0, length=1, inputs=None):
        started = time.process_time()
        found = real_probe(scenario, qps, slo, settings, repeat, length, inputs)
        kind = f"{'long' if length > 1 else 'reseeded' if repeat else 'short'} {'pass' if found[0].passed else 'fail'}"
        rows.append((group, kind, time.process_time() - started))
        units[0] += num_probe_requests(scenario, length)
        return found

    def timed_run(self, *args, **kwargs):
        started = time.process_time()
        try:
            return real_run(self, *args, **kwargs)
        finally:
            engine[0] += time.process_time() - started

    reuse.measured_probe, Simulator.run = timed_probe, timed_run   # type: ignore[method-assign]
    total, num_points, num_probes = 0.0, 0, 0
    try:
        for key in keys:
            members = [point for point in points if _cap_group(point) == key]
            group = dict(key)
            started = time.process_time()
            answers = search_group([point.scenario for point in members], spec.slo, spec.search)
            spent = time.process_time() - started
            total, num_points = total + spent, num_points + len(members)
            num_probes += sum(len(answer["probes"]) for answer in answers)
            print(f"  {spent:7.2f} CPU-s  {len(members)} caps  " + ", ".join(f"{k}={v}" for k, v in key), flush=True)
            print("    answers (probes): " + ", ".join(f"{answer['max_qps']:.4g} ({len(answer['probes'])})"
                                                   for answer in answers), flush=True)
    finally:
        reuse.measured_probe, Simulator.run = real_probe, real_run   # type: ignore[method-assign]
    probed = sum(cpu for _, _, cpu in rows)
    print(f"{len(keys)} groups, {num_points} configurations: {total:.1f} CPU-s ({total / max(num_points, 1):.3f} per "
          f"configuration); {num_probes} probes, {len(rows)} simulated ({probed:.1f} CPU-s, {units[0]} "
          f"replica-probes), {num_probes - len(rows)} replayed; the engine's event loop {engine[0]:.1f} CPU-s "
          f"({engine[0] / total:.0%})")
    for title, by in (("policy, PP", lambda g: f"{g['scheduler.type']}, PP {g['cluster.pipeline_parallel_size']}"),
                      ("replicas", lambda g: f"{g['cluster.num_replicas']} replica(s)"), ("kind", None)):
        shares: dict[str, float] = {}
        counts: Counter = Counter()
        for values, kind, cpu in rows:
            name = kind if by is None else by(values)
            shares[name] = shares.get(name, 0.0) + cpu
            counts[name] += 1
        print(f"  by {title}:")
        for name, spent in sorted(shares.items(), key=lambda item: -item[1]):
            print(f"    {name:28s} {spent:7.1f} CPU-s ({spent / probed:4.0%})  {counts[name]:4d} probes, "
                  f"{spent / counts[name]:.3f} each")


def probe(qps: float, length: int, where: list[str], repeats: int) -> None:
    """Time one probe of the first grid point matching `where` (process CPU seconds)."""
    spec, base = parse_sweep_spec(SPEC, source="bench spec")
    wanted = dict(item.split("=", 1) for item in where)
    point = next(point for point in build_grid(spec, base).points
                 if all(str(point.values.get(key)) == value for key, value in wanted.items()))
    print(", ".join(f"{key}={value}" for key, value in point.values.items()), f"at {qps:g} req/s, length {length}")
    spent = []
    for _ in range(repeats):
        started = time.process_time()
        found = search.run_probe(point.scenario, qps, spec.slo, spec.search, 0, length)
        spent.append(time.process_time() - started)
        print(f"  {'pass' if found.passed else 'FAIL'} {spent[-1]:.3f} CPU-s (load average {os.getloadavg()[0]:.2f})",
              flush=True)
    print(f"  median {sorted(spent)[len(spent) // 2]:.3f} CPU-s")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ray_head(cpus: int):
    """Start a local head; returns (address, stop function)."""
    ray = shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"
    port = _free_port()
    subprocess.run([ray, "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1", f"--num-cpus={cpus}",
                    "--include-dashboard=false"], check=True, capture_output=True)
    return f"127.0.0.1:{port}", lambda: subprocess.run([ray, "stop", "--force"], capture_output=True, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=1000)
    parser.add_argument("--ray-configs", type=int, default=200)
    parser.add_argument("--address", help="an existing Ray cluster (default: start a local head)")
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--every", type=int, default=1, help="time every K-th configuration (local pool only)")
    parser.add_argument("--groups", type=int, default=0, help="time every K-th cap group's configurations")
    parser.add_argument("--no-reuse", action="store_true", help="one task per configuration (no probe reuse)")
    parser.add_argument("--budget", metavar="FILE",
                        help="print where a --save file's replica-probes go (same --configs/--every/--groups)")
    parser.add_argument("--save", help="write the local records' keys, answers and probes to this JSON file")
    parser.add_argument("--breakdown", action="store_true", help="one at a time in this process, CPU per probe")
    parser.add_argument("--where", action="append", default=[], help="KEY=VALUE: --breakdown only these points")
    parser.add_argument("--probe", type=float, help="time one probe at this rate (req/s) of the first --where point")
    parser.add_argument("--length", type=int, default=1, help="--probe: requests per replica in units of 400")
    parser.add_argument("--repeats", type=int, default=3, help="--probe: how many times")
    args = parser.parse_args()
    if args.budget:
        probe_budget(args.budget, args.configs, args.every, args.groups)
        return
    if args.probe is not None:
        probe(args.probe, args.length, args.where, args.repeats)
        return
    if args.breakdown and args.groups:
        group_breakdown(args.groups, args.where)
        return
    if args.breakdown:
        breakdown(args.configs, args.every, args.where)
        return
    print(f"{os.cpu_count()} cores, {args.workers} local workers")
    local = (timed("local", LocalBackend(args.workers), args.configs, args.every, args.groups, not args.no_reuse)
             if args.configs else [])
    if args.save:   # to compare two runs' answers (e.g. with and without --no-reuse)
        Path(args.save).write_text(json.dumps([[r["key"], r["max_qps"], r["probes"]] for r in local]))
    if not args.ray_configs:
        return
    address, stop = (args.address, lambda: None) if args.address else _ray_head(args.workers)
    try:
        remote = timed("ray", RayBackend(address), args.ray_configs)
    finally:
        stop()
    common = min(len(local), len(remote))
    same = all(a["max_qps"] == b["max_qps"] and a["probes"] == b["probes"] for a, b in zip(local, remote))
    print(f"local and ray agree on the first {common} configurations: {same}")


if __name__ == "__main__":
    main()
