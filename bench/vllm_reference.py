"""Reference outputs from vLLM's own V1 scheduler, driven under a virtual clock on the CPU.

Run with a Python that has vLLM 0.33.0 installed (no GPU, no model weights needed):

    /path/to/vllm-env/bin/python bench/vllm_reference.py tests/data/vllm_reference/*.yaml \
        --project-python .venv/bin/python

For each case (a scenario YAML of this project: a `vllm_v1` scheduler, the `linear` predictor, a
workload from the generator or a trace) it writes `<case>.requests.csv` and `<case>.steps.csv`
next to the YAML. `tests/test_vllm_reference.py` replays them through our `vllm_v1`; this script
is never imported by the tests (the project's Python has no vLLM).

How the real scheduler is driven (as vLLM's own CPU tests build it, `tests/v1/core/utils.py`):

* `vllm.v1.core.sched.scheduler.Scheduler` (or `async_scheduler.AsyncScheduler` when the case's
  `async_scheduling` is on, vLLM's default) over a `VllmConfig` with a local Llama-2-7B-shaped
  `config.json`, `DeviceConfig("cpu")` and an explicit `KVCacheConfig` of `num_blocks + 1`
  blocks (vLLM keeps block 0 as its null block, so `num_blocks` are usable, as in our scenario);
  prefix hashes with sha256.
* The workload is the scenario's own (`python -m sim_core generate` in the project's Python);
  each row becomes a request with `ignore_eos` and `max_tokens` = its decode tokens. Token ids
  say what the workload's prefix columns say: the first min(prefix_len, prompt) tokens of a row
  with `prefix_group` g are 20000 + g (shared by the group), every other token of row r, prompt
  and sampled output alike, is 100 + r (its own).
* Virtual clock, `linear` cost: a step that schedules k tokens takes base_s + per_token_s x k on
  the GPU; a step with no tokens takes none. Requests that have arrived by the host's clock join
  before each `schedule()`. The model output of a step samples one token for each request whose
  computed tokens reached its length after that step (a prompt's last chunk or a decode).
* The engine loop is vLLM's: synchronous `EngineCore.step` (schedule, run, process the outputs)
  or, with async scheduling, `step_with_batch_queue` with a queue of 2: step N+1 is scheduled
  (placeholders for N's tokens) before the outputs of step N are processed, and the host blocks
  on the oldest step only when the queue is full or nothing else can be scheduled.

Outputs (times in seconds, to the nanosecond):

* `requests.csv`: id, arrived_at, num_prefill_tokens, num_decode_tokens, scheduled_at (start of
  the first step with any of its tokens), prefill_completed_at (end of the step whose output
  gave its first token), completed_at (end of the step whose output gave its last token),
  num_preemptions.
* `steps.csv`: one row per step that ran tokens, in GPU order: formed_at (the host's clock at its
  schedule()), start, end, `scheduled` (request ids in vLLM's order: running ones, then new
  admissions; `id:tokens` for more than one token, `a-b` for consecutive ids of one token each), and
  `preempted` (requests that its schedule() preempted, in preemption order; a schedule() that ran
  no tokens lends its preemptions to the next step that does, as `r@time` when it was called at
  another time).
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import yaml

GROUP_TOKEN, OWN_TOKEN = 20_000, 100   # token ids: group prefixes, then each row's own tokens
LLAMA_2_7B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
              "intermediate_size": 11008, "num_attention_heads": 32, "num_hidden_layers": 32,
              "num_key_value_heads": 32, "vocab_size": 32000, "rms_norm_eps": 1e-5, "torch_dtype": "float16",
              "bos_token_id": 1, "eos_token_id": 2}
QUEUE_SIZE = 2   # vLLM's batch queue with async scheduling and one pipeline stage


@dataclass
class Case:
    """The knobs of one scenario that the real scheduler reads (our defaults where absent)."""

    max_model_len: int
    base_s: float
    per_token_s: float
    block_size: int
    num_blocks: int
    max_num_seqs: int
    max_num_batched_tokens: int
    long_prefill_token_threshold: int
    policy: str
    prefix_caching: bool
    async_scheduling: bool

    @classmethod
    def read(cls, scenario: dict) -> Case:
        scheduler, predictor = scenario["scheduler"], scenario["predictor"]
        assert scheduler["type"] == "vllm_v1" and predictor["type"] == "linear", "vllm_v1 with the linear cost"
        assert not scheduler.get("prioritize_prefill", False), "prioritize_prefill is not a vLLM flag"
        cluster = scenario.get("cluster", {})
        assert cluster.get("num_replicas", 1) == 1 and cluster.get("pipeline_parallel_size", 1) == 1, "one replica"
        assert scheduler.get("max_num_seqs", 1) > 0, "give max_num_seqs (vLLM has no unbounded value)"
        return cls(max_model_len=scenario["max_model_len"], base_s=predictor["base_s"],
                   per_token_s=predictor["per_token_s"], block_size=scheduler.get("block_size", 16),
                   num_blocks=scheduler["num_blocks"], max_num_seqs=scheduler["max_num_seqs"],
                   max_num_batched_tokens=scheduler.get("max_num_batched_tokens") or 2048,
                   long_prefill_token_threshold=scheduler.get("long_prefill_token_threshold", 0),
                   policy=scheduler.get("scheduling_policy", "fcfs"),
                   prefix_caching=scheduler.get("enable_prefix_caching", True),
                   async_scheduling=scheduler.get("async_scheduling", True))


@dataclass
class Row:
    """One workload row and what the run observed of it."""

    id: int
    arrived_at: float
    num_prefill_tokens: int
    num_decode_tokens: int
    prompt: list[int]
    priority: int = 0
    scheduled_at: float | None = None
    prefill_completed_at: float | None = None
    completed_at: float | None = None
    num_preemptions: int = 0


@dataclass
class Step:
    """A schedule() whose tokens run on the GPU from `start` to `end`."""

    output: object
    sampled: dict[str, list[int]]
    formed_at: float   # the host's clock at schedule()
    start: float
    end: float
    preempted: list[tuple[str, float]] = field(default_factory=list)   # (request, host time)


def read_workload(case_file: Path, scenario: dict, project_python: str) -> list[Row]:
    """The scenario's workload as this project builds it (generated, or read and transformed);
    the scheduler's knobs do not change it, so only its type is passed on."""
    workload = dict(scenario["workload"])
    if workload.get("trace_file"):
        workload["trace_file"] = str((case_file.parent / workload["trace_file"]).resolve())
    with tempfile.TemporaryDirectory() as folder:
        spec, trace = Path(folder) / "workload.yaml", Path(folder) / "workload.csv"
        spec.write_text(yaml.safe_dump({**scenario, "scheduler": {"type": "vllm_v1"}, "workload": workload}))
        made = subprocess.run([project_python, "-m", "sim_core", "generate", "--config", str(spec),
                               "--out", str(trace)], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parent.parent)
        if made.returncode:
            raise RuntimeError(f"{case_file}: the project could not build the workload: {made.stderr.strip()}")
        with trace.open() as file:
            records = list(csv.DictReader(file))
    rows = []
    for index, record in enumerate(records):
        prompt_len, group = int(record["num_prefill_tokens"]), int(record.get("prefix_group") or -1)
        shared = min(int(record.get("prefix_len") or 0), prompt_len) if group >= 0 else 0
        prompt = [GROUP_TOKEN + group] * shared + [OWN_TOKEN + index] * (prompt_len - shared)
        rows.append(Row(index, float(record["arrived_at"]), prompt_len, int(record["num_decode_tokens"]), prompt,
                        int(record.get("priority") or 0)))
    assert OWN_TOKEN + len(rows) < GROUP_TOKEN, "too many rows for distinct token ids"
    return rows


def build_scheduler(case: Case, model_dir: str):  # noqa: ANN201 (vLLM's types)
    import torch
    from vllm.config import CacheConfig, DeviceConfig, ModelConfig, SchedulerConfig, VllmConfig
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    model = ModelConfig(model=model_dir, skip_tokenizer_init=True, max_model_len=case.max_model_len,
                        dtype="float16", seed=0)
    scheduler = SchedulerConfig(max_num_seqs=case.max_num_seqs, max_num_batched_tokens=case.max_num_batched_tokens,
                                long_prefill_token_threshold=case.long_prefill_token_threshold, policy=case.policy,
                                max_model_len=case.max_model_len, is_encoder_decoder=False,
                                async_scheduling=case.async_scheduling)
    cache = CacheConfig(block_size=case.block_size, enable_prefix_caching=case.prefix_caching)
    config = VllmConfig(scheduler_config=scheduler, model_config=model, cache_config=cache,
                        device_config=DeviceConfig("cpu"))
    num_blocks = case.num_blocks + 1   # + vLLM's null block
    config.cache_config.num_gpu_blocks = num_blocks
    spec = FullAttentionSpec(block_size=case.block_size, num_kv_heads=1, head_size=1, dtype=torch.float32)
    kv_cache = KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[],
                             kv_cache_groups=[KVCacheGroupSpec(["layer"], spec)])
    kind = AsyncScheduler if case.async_scheduling else Scheduler
    built = kind(vllm_config=config, kv_cache_config=kv_cache,
                 structured_output_manager=StructuredOutputManager(config),
                 block_size=case.block_size, log_stats=False)
    assert built.scheduler_reserve_full_isl, "vLLM 0.33's default"
    return built


class Driver:
    """vLLM's engine loop over one scheduler, with a virtual clock and a stand-in model."""

    def __init__(self, case: Case, rows: list[Row], model_dir: str) -> None:
        from vllm import SamplingParams
        from vllm.utils.hashing import get_hash_fn_by_name
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
        from vllm.v1.request import Request

        self.case, self.rows = case, rows
        self.scheduler = build_scheduler(case, model_dir)
        hash_fn = get_hash_fn_by_name("sha256")
        init_none_hash(hash_fn)
        hasher = get_request_block_hasher(case.block_size, hash_fn)
        self.requests = [Request(str(r.id), list(r.prompt), SamplingParams(max_tokens=r.num_decode_tokens,
                                                                           ignore_eos=True),
                                 None, arrival_time=r.arrived_at, priority=r.priority, block_hasher=hasher)
                         for r in rows]
        self.now = 0.0                 # the host's clock
        self.gpu_free = 0.0            # when the GPU finishes the work queued so far
        self.next_row = 0
        self.steps: list[Step] = []
        self.carried: list[tuple[str, float]] = []   # preemptions of schedule() calls that ran nothing

    # ---- the clock and the stand-in model ----------------------------------------------------

    def admit_arrivals(self) -> None:
        while self.next_row < len(self.rows) and self.rows[self.next_row].arrived_at <= self.now:
            self.scheduler.add_request(self.requests[self.next_row])
            self.next_row += 1

    def idle_until_next_arrival(self) -> bool:
        """Nothing can run: move the clock to the next arrival (False when there is none)."""
        if self.next_row == len(self.rows):
            return False
        self.now = max(self.now, self.rows[self.next_row].arrived_at)
        return True

    def schedule(self) -> Step:
        """schedule() now and queue its tokens on the GPU."""
        self.admit_arrivals()
        output = self.scheduler.schedule()
        preempted = self.carried + [(r, self.now) for r in sorted(output.preempted_req_ids,
                                                                 key=self._preemption_order)]
        total = output.total_num_scheduled_tokens
        start = max(self.now, self.gpu_free)
        end = start + (self.case.base_s + self.case.per_token_s * total) if total else start
        sampled = {}
        for request_id in output.num_scheduled_tokens:
            request = self.scheduler.requests[request_id]
            sampled[request_id] = [] if request.is_prefill_chunk else [OWN_TOKEN + int(request_id)]
        step = Step(output, sampled, self.now, start, end, preempted)
        self.carried = [] if total else preempted
        if total:
            self.gpu_free = end
            self.steps.append(step)
            for request_id in output.num_scheduled_tokens:
                row = self.rows[int(request_id)]
                if row.scheduled_at is None:
                    row.scheduled_at = start
        return step

    def _preemption_order(self, request_id: str) -> int:
        return self._preempted_at.get(request_id, 0)

    def process(self, step: Step) -> None:
        """Wait for the step, then update_from_output with its sampled tokens."""
        from vllm.v1.outputs import ModelRunnerOutput

        self.now = max(self.now, step.end)
        ids = list(step.output.num_scheduled_tokens)
        model_output = ModelRunnerOutput(req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)},
                                         sampled_token_ids=[step.sampled[r] for r in ids])
        outputs = self.scheduler.update_from_output(step.output, model_output)
        for engine_outputs in outputs.values():
            for output in engine_outputs.outputs:
                row = self.rows[int(output.request_id)]
                if output.new_token_ids and row.prefill_completed_at is None:
                    row.prefill_completed_at = step.end
                if output.finish_reason is not None:
                    row.completed_at = step.end

    # ---- the engine loops ----------------------------------------------------------------------

    def run(self) -> None:
        self._watch_preemptions()
        if self.case.async_scheduling:
            self._run_async()
        else:
            self._run_sync()
        for row, request in zip(self.rows, self.requests):
            assert row.completed_at is not None, f"request {row.id} never finished"
            row.num_preemptions = request.num_preemptions

    def _run_sync(self) -> None:
        """EngineCore.step: schedule, execute, process the outputs; again at once."""
        while True:
            self.admit_arrivals()
            if not self.scheduler.has_requests():
                if not self.idle_until_next_arrival():
                    return
                continue
            step = self.schedule()
            self.process(step)
            if self._stalled(step):
                self._wait_for_arrival()

    def _run_async(self) -> None:
        """EngineCore.step_with_batch_queue with a queue of 2 steps."""
        queue: deque[Step] = deque()
        while True:
            self.admit_arrivals()
            if self.scheduler.has_requests():
                step = self.schedule()
                executed = step.output.total_num_scheduled_tokens > 0
                queue.appendleft(step)
                if len(queue) < QUEUE_SIZE and (executed or self.scheduler.has_requests()):
                    if len(queue) == 1 and self._stalled(step):   # the real loop spins until an arrival
                        self.process(queue.pop())
                        self._wait_for_arrival()
                    continue
            elif not queue:
                if not self.idle_until_next_arrival():
                    return
                continue
            self.process(queue.pop())

    def _stalled(self, step: Step) -> bool:
        """schedule() ran nothing and changed nothing, though requests are unfinished."""
        output = step.output
        return (output.total_num_scheduled_tokens == 0 and not output.preempted_req_ids
                and self.scheduler.get_num_unfinished_requests() > 0)

    def _wait_for_arrival(self) -> None:
        if not self.idle_until_next_arrival():
            raise RuntimeError("the scheduler can never run its requests")

    def _watch_preemptions(self) -> None:
        """Record the order in which schedule() preempts (its output holds them as a set)."""
        self._preempted_at: dict[str, int] = {}
        scheduler, original = self.scheduler, self.scheduler._preempt_request
        counter = iter(range(1 << 62))

        def preempt(request, *args, **kwargs):  # noqa: ANN001, ANN202
            self._preempted_at[request.request_id] = next(counter)
            return original(request, *args, **kwargs)

        scheduler._preempt_request = preempt


def seconds(value: float) -> str:
    """A time to the nanosecond (the replay compares to 1e-6 s)."""
    return f"{value:.9f}".rstrip("0").rstrip(".")


def scheduled_text(num_scheduled_tokens: dict[str, int]) -> str:
    """Requests in order: `r:n` for n tokens, `r` for one, `a-b` for a run a, a+1, ..., b of one each."""
    items: list[str] = []
    run: list[int] = []
    for request_id, tokens in [*num_scheduled_tokens.items(), (None, 0)]:
        if tokens == 1 and (not run or int(request_id) == run[-1] + 1):
            run.append(int(request_id))
            continue
        if run:
            items.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
            run = []
        if tokens == 1:
            run = [int(request_id)]
        elif request_id is not None:
            items.append(f"{request_id}:{tokens}")
    return " ".join(items)


def write_outputs(case_file: Path, rows: list[Row], steps: list[Step]) -> None:
    stem = case_file.with_suffix("")
    with open(f"{stem}.requests.csv", "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["id", "arrived_at", "num_prefill_tokens", "num_decode_tokens", "scheduled_at",
                         "prefill_completed_at", "completed_at", "num_preemptions"])
        for r in rows:
            assert r.scheduled_at is not None and r.prefill_completed_at is not None and r.completed_at is not None
            writer.writerow([r.id, seconds(r.arrived_at), r.num_prefill_tokens, r.num_decode_tokens,
                             seconds(r.scheduled_at), seconds(r.prefill_completed_at), seconds(r.completed_at),
                             r.num_preemptions])
    with open(f"{stem}.steps.csv", "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["formed_at", "start", "end", "scheduled", "preempted"])
        for step in steps:
            writer.writerow([seconds(step.formed_at), seconds(step.start), seconds(step.end),
                             scheduled_text(step.output.num_scheduled_tokens),
                             " ".join(r if t == step.formed_at else f"{r}@{seconds(t)}" for r, t in step.preempted)])


def run_case(case_file: Path, project_python: str) -> tuple[int, int, int]:
    """Drive vLLM over one case and write its outputs; returns (requests, steps, preemptions)."""
    scenario = yaml.safe_load(case_file.read_text())
    case = Case.read(scenario)
    rows = read_workload(case_file, scenario, project_python)
    with tempfile.TemporaryDirectory() as model_dir:
        (Path(model_dir) / "config.json").write_text(json.dumps({**LLAMA_2_7B,
                                                                 "max_position_embeddings": case.max_model_len}))
        driver = Driver(case, rows, model_dir)
        driver.run()
    write_outputs(case_file, rows, driver.steps)
    return len(rows), len(driver.steps), sum(r.num_preemptions for r in rows)


def write_priority_trace(path: Path) -> None:
    """The priority case's trace (a formula, so that it can be written again): 60 requests of
    priority 1 or 2 (every third) arriving every 40 ms, then 10 arriving in pairs at equal times
    with equal priority (vLLM breaks such ties by running order), then 20 urgent ones (priority
    0) arriving late, every 50 ms from 2.5 s."""
    rows = []
    for i in range(60):
        rows.append((round(0.04 * i, 6), 40 + 97 * i % 360, 30 + 61 * i % 150, 2 if i % 3 == 0 else 1))
    for i in range(60, 70):
        rows.append((round(2.4 + 0.02 * ((i - 60) // 2), 6), 50 + 41 * i % 200, 20 + 37 * i % 100, 1))
    for i in range(70, 90):
        rows.append((round(2.5 + 0.05 * (i - 70), 6), 60 + 53 * i % 200, 20 + 29 * i % 60, 0))
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["arrived_at", "num_prefill_tokens", "num_decode_tokens", "priority"])
        writer.writerows(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="+", type=Path, help="scenario YAMLs (vllm_v1, linear predictor)")
    parser.add_argument("--project-python", default=".venv/bin/python",
                        help="a Python with this project's requirements (builds each case's workload)")
    parser.add_argument("--priority-trace", type=Path, help="first write the priority case's trace to this file")
    args = parser.parse_args()
    if args.priority_trace:
        write_priority_trace(args.priority_trace)
    import vllm

    print(f"vLLM {vllm.__version__}")
    for case_file in args.cases:
        num_requests, num_steps, num_preemptions = run_case(case_file, args.project_python)
        print(f"{case_file.stem}: {num_requests} requests, {num_steps} steps, {num_preemptions} preemptions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
