"""Probes replayed across batch caps (sim_core/sweep/reuse.py): the holders' bound, the
certificate by hand, every replayed probe equal to the probe simulated at its own cap, and a
sweep over caps that answers what per-point searches answer."""

import io
import json
import math
import tokenize
from pathlib import Path

import pandas as pd
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from sim_core.config import parse_config
from sim_core.schedulers import ReplicaLimits
from sim_core.sweep import build_grid, capacity_search, parse_sweep_spec, run_sweep
from sim_core.sweep.probe import measured_probe, peak_holders, run_probe
from sim_core.sweep.reuse import CapLimits, ProbeMemo, cap_limits, cap_order, group_key, same_run
from sim_core.sweep.task import plan_tasks, run_task

ROOT = Path(__file__).resolve().parents[1]
BASE = {"model": "llama-2-7b", "device": "a100-80gb", "max_model_len": 1024,
        "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.0002},
        "scheduler": {"num_blocks": 400},
        "workload": {"arrival": {"process": "poisson", "qps": 1.0},
                     "prompt_tokens": {"distribution": "uniform", "min": 32, "max": 256},
                     "output_tokens": {"distribution": "uniform", "min": 8, "max": 64}}}
SPEC = {"base": BASE,
        "vary": {"scheduler.type": ["vllm", "sarathi", "orca", "faster_transformer"],
                 "cluster.pipeline_parallel_size": [1, 2], "scheduler.batch_size_cap": [4, 8, 64, 256]},
        "slo": {"ttft_p90_s": 0.5, "tbt_p99_s": 0.1},
        "search": {"qps_min": 0.5, "qps_max": 256, "num_requests": 40, "tolerance": 0.1},
        "gpu_hour_usd": 3.0}


def test_peak_holders_counts_closed_intervals_per_replica():
    # replica 0: A holds over [0, 2], B [1, 3], C [2, 4]: at t = 2 A's completion and C's
    # admission share the instant, counted as overlapping -> 3. Replica 1: D [0, 1], E never
    # scheduled, F from 5 and never completed -> 1.
    requests = pd.DataFrame({"replica_id": [0, 0, 0, 1, 1, 1],
                             "scheduled_at": [0.0, 1.0, 2.0, 0.0, math.nan, 5.0],
                             "completed_at": [2.0, 3.0, 4.0, 1.0, math.nan, math.nan]})
    assert peak_holders(requests) == 3
    requests.loc[2, "scheduled_at"] = 2.5      # C admitted after A finished: never three at once
    assert peak_holders(requests) == 2


def _limits(reader: str, cap: int, stages: int, max_batch: int, blocks: int = 400) -> CapLimits:
    return CapLimits(reader, cap, stages, ReplicaLimits(blocks, max_batch, 64, 1024))


def test_the_certificate_by_hand():
    # paged, PP 2, at most 10 holders: caps 64 and 32 hold micro-batches of up to 32 // 2 = 16 > 10,
    # so neither cap was reached; caps 32 and 16 allow 16 // 2 = 8 < 10: the smaller one may bind
    paged = {cap: _limits("paged", cap, 2, cap) for cap in (16, 32, 64)}
    assert same_run(paged[64], 10, paged[32]) and same_run(paged[32], 10, paged[64])
    assert not same_run(paged[32], 10, paged[16])
    assert not same_run(paged[64], None, paged[32])                        # a run that stopped: no bound
    assert not same_run(paged[64], 1, _limits("paged", 32, 2, 32, blocks=399))   # other memory
    assert not same_run(paged[64], 1, _limits("paged", 32, 1, 32))             # other pipeline
    # reserving: max_batch_size = min(planner's 15, cap) is 15 at caps 16 and 256 whatever the run held
    assert same_run(_limits("reserving", 256, 1, 15), 15, _limits("reserving", 16, 1, 15))
    # planner's 29: cap 16 -> 16, cap 32 -> 29; a run that held at most 15 never reached 16
    assert same_run(_limits("reserving", 32, 1, 29), 15, _limits("reserving", 16, 1, 16))
    assert not same_run(_limits("reserving", 32, 1, 29), 16, _limits("reserving", 16, 1, 16))
    assert same_run(paged[16], None, paged[16])                               # the same scenario


def test_cap_order_and_group_key():
    spec, base = parse_sweep_spec(SPEC)
    points = build_grid(spec, base).points
    scenarios = [p.scenario for p in points[:4]]                                # vllm, PP 1, caps 4 .. 256
    assert cap_order(scenarios) == [3, 2, 1, 0]
    assert len({group_key(s) for s in scenarios}) == 1 and group_key(points[4].scenario) != group_key(scenarios[0])
    tasks = plan_tasks(points, spec)
    assert [indices for indices, _ in tasks] == [[4 * k, 4 * k + 1, 4 * k + 2, 4 * k + 3] for k in range(8)]
    # two groups for 4 tasks: each is split into its two larger caps (256, 64) and its two smaller (8, 4)
    tasks = plan_tasks(points[:8], spec, min_tasks=4)
    assert [indices for indices, _ in tasks] == [[2, 3], [0, 1], [6, 7], [4, 5]]
    assert [len(json.loads(task)["scenarios"]) for _, task in tasks] == [2, 2, 2, 2]
    assert [indices for indices, _ in plan_tasks(points[:2], spec, min_tasks=5)] == [[1], [0]]   # no more to split


def test_only_audited_policies_without_pd_or_dp_are_reused():
    def limits(**extra):
        scenario = {**BASE, "scheduler": {**BASE["scheduler"], **extra.pop("scheduler", {})}, **extra}
        return cap_limits(parse_config(scenario))
    assert limits(scheduler={"type": "vllm"}).reader == "paged"
    assert limits(scheduler={"type": "orca"}).reader == "reserving"
    assert limits(scheduler={"type": "vllm_v1"}) is None
    pools = {"enabled": True, "prefill": {"num_replicas": 1}, "decode": {"num_replicas": 1}}
    assert limits(scheduler={"type": "vllm"}, disaggregation=pools) is None   # a hand-off reads the cap


def test_every_replayed_probe_is_the_probe_simulated_at_its_own_cap():
    """Both ways, probe by probe: each group's searches run through one memo, and every probe
    the memo answers is also simulated directly at its own cap."""
    spec, base = parse_sweep_spec(SPEC)
    points = build_grid(spec, base).points
    replayed = 0
    for indices, _ in plan_tasks(points, spec):
        memo = ProbeMemo()

        def checked(scenario, qps, slo, search, repeat=0, length=1, memo=memo):
            probe = memo.run(scenario, qps, slo, search, repeat, length)
            assert probe == run_probe(scenario, qps, slo, search, repeat, length)
            return probe
        scenarios = [points[i].scenario for i in indices]
        for i in cap_order(scenarios):
            capacity_search(scenarios[i], spec.slo, spec.search, checked)
        replayed += memo.replayed
    assert replayed > 20     # the caps that did not bind were replayed (112 when written)


def test_a_sweep_over_caps_answers_what_each_search_answers():
    spec, base = parse_sweep_spec(SPEC)

    class InProcess:
        def run(self, tasks):
            for index, task in enumerate(tasks):
                yield index, run_task(task)
    outcome = run_sweep(spec, base, InProcess())
    for point, record in zip(build_grid(spec, base).points, outcome.records):
        direct = capacity_search(point.scenario, spec.slo, spec.search)
        assert (record["key"], record["max_qps"]) == (point.key, direct.max_qps)
        assert record["probes"] == json.loads(json.dumps([p.to_json() for p in direct.probes]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policy=st.sampled_from(["vllm", "sarathi", "orca", "faster_transformer"]), stages=st.sampled_from([1, 2]),
       caps=st.lists(st.sampled_from([2, 3, 8, 16, 40, 300]), min_size=2, max_size=2, unique=True),
       qps=st.floats(1.0, 200.0), seed=st.integers(0, 1000), blocks=st.sampled_from([80, 400, 3000]))
def test_a_certified_run_is_the_run_at_the_other_cap(policy, stages, caps, qps, seed, blocks):
    spec, base = parse_sweep_spec(SPEC)
    point = build_grid(spec, base).points[0].scenario    # every default spelled out, as a sweep's
    scenarios = [{**point, "seed": seed, "cluster": {**point["cluster"], "pipeline_parallel_size": stages},
                  "scheduler": {"type": policy, "num_blocks": blocks, "batch_size_cap": cap}} for cap in caps]
    limits = [cap_limits(parse_config(s)) for s in scenarios]
    probe, peak = measured_probe(scenarios[0], qps, spec.slo, spec.search)
    certified = limits[0] is not None and limits[1] is not None and same_run(limits[0], peak, limits[1])
    event(f"certified: {certified}")
    if certified:
        assert run_probe(scenarios[1], qps, spec.slo, spec.search) == probe


# where the engine and the audited policies read the batch cap (sweep/reuse.py's certificate
# covers exactly these: a new reader needs the certificate re-checked, then listed here)
AUDITED = {
    ("engine/simulation.py", "return graph_limit(config.scheduler.max_batch_requests())"),
    ("engine/simulation.py",
     "max_batch = min(plan.max_batch_size, sched.batch_size_cap) if plan else sched.batch_size_cap"),
    ("engine/cost_estimate.py",
     "cap = min(float(config.scheduler.profile_batch(config.max_model_len)[1]), len(steps) * scale / replicas,"),
    ("schedulers/paged.py",
     "return scheduler.pool.num_holders < scheduler.config.batch_size_cap and scheduler.can_admit(request)"),
    ("schedulers/base.py", "max_batch_size: int          # min(planner's max batch, batch_size_cap): orca / FT"),
    ("schedulers/base.py", "self._micro_batch_cap = config.batch_size_cap // num_stages"),
    ("schedulers/sarathi.py", "def activation_tokens(self, max_model_len: int) -> int:"),
    ("schedulers/sarathi.py", "return self.chunk_size + self.batch_size_cap"),
    ("schedulers/sarathi.py",
     "requests, partial, remaining = self.take_decodes(self.running, self._micro_batch_cap)"),
    ("schedulers/sarathi.py",
     "if self.pool.num_holders == self.config.batch_size_cap or len(requests) == self._micro_batch_cap:"),
    ("schedulers/faster_transformer.py",
     "limit, reserve = self._limits.max_batch_size, self._limits.max_blocks_per_request"),
    ("schedulers/vllm.py", "def activation_tokens(self, max_model_len: int) -> int:"),
    ("schedulers/vllm.py", "waiting, cap = self.waiting, self.config.batch_size_cap"),
    ("schedulers/vllm.py", "if self.pool.num_holders == cap or len(requests) == self._micro_batch_cap:"),
    ("schedulers/vllm.py", "taken, partial, remaining = self.take_decodes(self.running, self._micro_batch_cap)"),
    ("schedulers/endpoint.py", "return (scheduler.pool.num_holders < scheduler.config.batch_size_cap"),
    ("schedulers/orca.py", "limit, reserve = self._limits.max_batch_size, self._limits.max_blocks_per_request"),
}
CAP_NAMES = {"batch_size_cap", "_micro_batch_cap", "max_batch_size", "max_batch_requests", "profile_batch",
             "activation_tokens"}
OTHER_POLICIES = ("lightllm", "sglang", "vllm_v0", "vllm_v1", "v0_", "v1_")


def test_the_engine_reads_the_cap_only_where_the_certificate_was_audited():
    found = set()
    for folder in ("engine", "schedulers"):
        for path in sorted((ROOT / "sim_core" / folder).glob("*.py")):
            if path.name.startswith(OTHER_POLICIES):
                continue
            text = path.read_text()
            lines = text.splitlines()
            for token in tokenize.generate_tokens(io.StringIO(text).readline):
                if token.type == tokenize.NAME and token.string in CAP_NAMES:
                    found.add((f"{folder}/{path.name}", lines[token.start[0] - 1].strip()))
    assert found == AUDITED
