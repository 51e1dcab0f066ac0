"""Policies declare themselves: a toy policy joins with one registry line and runs end to end;
each policy's config model holds only its knobs; a knob of another policy is refused with the
policies that read it (left out at its default); switching a policy keeps what the new one reads."""

import re
from math import ceil
from pathlib import Path
from typing import Literal

import pytest
from conftest import batches_of, column, cost, workload
from pydantic import Field, ValidationError

from sim_core import ConfigError, parse_config, run_simulation
from sim_core.config import PolicyTraits, SchedulerConfig
from sim_core.config.policies import for_policy, policy_config, policy_names, policy_switch, policy_traits
from sim_core.entities import Batch
from sim_core.schedulers import SCHEDULERS, register, scheduler_label, unregister
from sim_core.schedulers.base import ReplicaScheduler

ROOT = Path(__file__).resolve().parents[1]


class FifoConfig(SchedulerConfig):
    """The toy's knobs: the shared ones and its batch size."""

    type: Literal["fifo"] = Field("fifo", description="toy: static batches in arrival order")
    batch_size: int = Field(2, ge=1, le=64, description="fifo: requests in one static batch.")


class FifoScheduler(ReplicaScheduler):
    """Static batches of up to batch_size requests in arrival order, each reserving the blocks of
    its prompt and output at admission; a batch re-runs its unfinished members (one token each)
    and the next one forms when all of them have finished."""

    traits = PolicyTraits(FifoConfig, "a FIFO static-batch toy")
    config: FifoConfig

    def _next_batch(self) -> Batch | None:
        requests, self.running = list(self.running), []     # the static batch's unfinished members
        if not requests:                                    # it has finished: admit the next one
            requests = self._admit()
        return self._make_batch(requests, [self._next_num_tokens(r) for r in requests])

    def _admit(self) -> list:
        admitted = []
        while self.waiting and len(admitted) < self.config.batch_size:
            request = self.waiting[0]
            blocks = ceil((request.num_prefill_tokens + request.num_decode_tokens) / self._block_size)
            if not self.pool.can_allocate(blocks):
                break
            self.waiting.popleft()
            self._allocate(request, blocks)
            admitted.append(request)
        return admitted


@pytest.fixture
def fifo():
    register(FifoScheduler)            # the one registry line a new policy needs
    yield
    unregister("fifo")


def toy_scenario(**scheduler) -> dict:
    return {"max_model_len": 64, "predictor": {"type": "linear", "base_s": 0.01, "per_token_s": 0.001},
            "scheduler": {"type": "fifo", "num_blocks": 100, "block_size": 16, **scheduler},
            "engine": {"record": "full"}}


@pytest.mark.parametrize("fast_forward", [True, False])
def test_a_toy_policy_registered_by_one_line_runs_end_to_end(fifo, fast_forward):
    """Three requests at t=0, batches of 2, 10 ms + 1 ms per token. Requests 0 (16 prompt, 3
    output tokens) and 1 (8, 1) run their prompts together: 24 tokens, t1 = 34 ms, and 1 is done;
    0 decodes alone twice (11 ms each): t2 = 45 ms, t3 = 56 ms, done. Only then request 2 (4, 2)
    is admitted: its prompt ends at t4 = 70 ms, its last token at t5 = 81 ms. Each request holds
    ceil((prompt + output) / 16) blocks from admission until it finishes: 2, 1 and 1."""
    config = parse_config({**toy_scenario(), "engine": {"record": "full", "fast_forward": fast_forward}})
    result = run_simulation(config, workload((0.0, 16, 3), (0.0, 8, 1), (0.0, 4, 2)))
    t1 = cost(24)
    t2 = t1 + cost(1)
    t3 = t2 + cost(1)
    t4 = t3 + cost(4)
    t5 = t4 + cost(1)
    assert batches_of(result) == [(0.0, [0, 1], [16, 8]), (round(t1, 9), [0], [1]), (round(t2, 9), [0], [1]),
                                  (round(t3, 9), [2], [4]), (round(t4, 9), [2], [1])]
    assert column(result, "scheduled_at") == [0.0, 0.0, t3]
    assert column(result, "completed_at") == [t3, t1, t5]
    taken = result.block_events[result.block_events["delta"] == 1]
    assert taken.groupby("request")["block"].count().tolist() == [2, 1, 1]
    assert taken[taken["request"] == 2]["time"].tolist() == [t3]


def test_the_toy_is_a_choice_with_its_own_knobs_and_leaves_with_unregister(fifo):
    """Registered, fifo is a scheduler.type with a label and a knob no other policy reads; the
    built-in policies refuse that knob and name fifo as its reader."""
    assert policy_names()[-1] == "fifo" and SCHEDULERS["fifo"] is FifoScheduler
    assert scheduler_label("fifo") == "fifo · a FIFO static-batch toy"
    assert parse_config(toy_scenario(batch_size=3)).scheduler.batch_size == 3
    with pytest.raises(ConfigError, match=r"^scenario: scheduler.batch_size: got 0; allowed range 1 .. 64$"):
        parse_config(toy_scenario(batch_size=0))
    with pytest.raises(ConfigError) as error:
        parse_config({"scheduler": {"type": "vllm", "batch_size": 3}})
    assert str(error.value) == "scenario: scheduler.batch_size: got 3; vllm does not read it (read by: fifo)"


def test_an_unregistered_policy_is_an_unknown_type():
    with pytest.raises(ConfigError) as error:
        parse_config({"scheduler": {"type": "fifo"}})
    assert str(error.value) == ("scenario: scheduler.type: got 'fifo'; allowed one of: vllm, sarathi, orca, "
                                "faster_transformer, lightllm, vllm_v0, vllm_v1, sglang")


def test_a_knob_of_another_policy_is_refused_naming_its_readers_unless_it_is_at_its_default():
    """vllm does not read chunk_size: 256 is an error naming sarathi; 512 (sarathi's default, as
    older files that spelled out every knob hold it) is left out; a value wrong for the knob
    itself gets the knob's own message."""
    with pytest.raises(ConfigError) as error:
        parse_config({"scheduler": {"type": "vllm", "chunk_size": 256}})
    assert str(error.value) == "scenario: scheduler.chunk_size: got 256; vllm does not read it (read by: sarathi)"
    with pytest.raises(ConfigError) as error:
        parse_config({"scheduler": {"type": "vllm_v1", "watermark_blocks_fraction": 0.2}})
    assert str(error.value) == ("scenario: scheduler.watermark_blocks_fraction: got 0.2; vllm_v1 does not read it "
                                "(read by: vllm, sarathi, vllm_v0)")
    config = parse_config({"scheduler": {"type": "vllm", "chunk_size": 512, "enable_prefix_caching": True}})
    assert config.scheduler.model_dump() == {"type": "vllm", "batch_size_cap": 128, "block_size": 16,
                                             "num_blocks": None, "watermark_blocks_fraction": 0.01,
                                             "max_tokens_in_batch": 4096}
    with pytest.raises(ConfigError, match=r"scheduler.chunk_size: got 0; allowed range 1 .. 10000000$"):
        parse_config({"scheduler": {"type": "vllm", "chunk_size": 0}})


def test_each_policy_reads_its_own_knobs():
    """The shared knobs are everyone's; the others belong to the policies that read them."""
    shared = ["type", "batch_size_cap", "block_size", "num_blocks"]
    own = {name: [k for k in policy_config(name).model_fields if k not in shared] for name in policy_names()}
    assert own == {
        "vllm": ["watermark_blocks_fraction", "max_tokens_in_batch"],
        "sarathi": ["watermark_blocks_fraction", "chunk_size"],
        "orca": [], "faster_transformer": [],
        "lightllm": ["max_tokens_in_batch", "max_waiting_iters"],
        "vllm_v0": ["watermark_blocks_fraction", "max_num_seqs", "max_num_batched_tokens", "enable_chunked_prefill",
                    "preemption_mode", "swap_space_gb"],
        "vllm_v1": ["enable_prefix_caching", "max_num_seqs", "max_num_batched_tokens", "long_prefill_token_threshold",
                    "prioritize_prefill", "scheduling_policy", "async_scheduling", "kv_offloading_size",
                    "api_server_s", "host_scale", "eager_layer_s", "eager_moe_layer_s", "eager_gap_layer_s"],
        "sglang": ["enable_prefix_caching", "max_prefill_tokens", "chunked_prefill_size", "max_running_requests",
                   "cuda_graph_batch_sizes", "enable_overlap_schedule"],
    }


def test_a_knobs_description_names_exactly_the_policies_that_read_it():
    """A description that starts with "a/b: ..." belongs to a knob that a and b (and only they)
    declare; the shared knobs are left out (every policy has them)."""
    for name in policy_names():
        model = policy_config(name)
        for knob, field in model.model_fields.items():
            if knob in SchedulerConfig.model_fields:
                continue
            top_level = re.sub(r"\([^)]*\)", "", field.description or "")    # asides in parentheses do not count
            prefixes = re.findall(r"(?:^|; )([a-z0-9_/]+):", top_level)
            named = {p for prefix in prefixes for p in prefix.split("/") if p in policy_names()}
            readers = {n for n in policy_names() if knob in policy_config(n).model_fields}
            assert named == readers, f"{name}.{knob}"


def test_traits_answer_what_the_rest_of_the_simulator_asked_by_name():
    """The facts that used to be `scheduler.type in (...)` tests outside the schedulers."""
    def having(attribute):
        return [name for name in policy_names() if getattr(policy_traits(name), attribute)]
    assert [n for n in policy_names() if policy_traits(n).memory_planner == "vidur"] == [
        "vllm", "sarathi", "orca", "faster_transformer", "lightllm"]
    assert having("reserves_max_model_len") == ["orca", "faster_transformer"]
    assert [n for n in policy_names() if not policy_traits(n).clips_prompts] == ["sglang"]
    assert [n for n in policy_names() if not policy_traits(n).supports_disaggregation] == [
        "faster_transformer", "lightllm"]
    assert having("has_prefix_cache") == ["vllm_v1", "sglang"]
    assert having("serves_parallel_samples") == ["vllm_v0"]
    assert having("implied_changes") == ["lightllm"]


def test_no_module_outside_the_schedulers_tests_a_scheduler_type_by_name():
    """Knowledge of a policy lives in its file: nothing else compares scheduler.type to a name."""
    pattern = re.compile(r"(scheduler|sched)\.type\s*(==|!=|in\b|not in\b)")
    offenders = [str(path.relative_to(ROOT)) for folder in ("sim_core", "explorer", "pages")
                 for path in (ROOT / folder).rglob("*.py")
                 if "schedulers" not in path.parts and pattern.search(path.read_text())]
    assert offenders == []


def test_switching_the_policy_keeps_the_knobs_the_new_one_reads():
    """sarathi -> vllm keeps the shared knobs and the watermark, leaves out chunk_size; a switch
    to lightllm also sets what it requires; leaving it puts its forced block size back."""
    section = {"type": "sarathi", "batch_size_cap": 8, "block_size": 32, "watermark_blocks_fraction": 0.0,
               "chunk_size": 256}
    assert for_policy(section, "vllm") == {"type": "vllm", "batch_size_cap": 8, "block_size": 32,
                                           "watermark_blocks_fraction": 0.0}
    assert policy_switch({"scheduler": section}, "vllm") == {"scheduler.chunk_size": None}
    assert policy_switch({"scheduler": section}, "lightllm") == {
        "scheduler.watermark_blocks_fraction": None, "scheduler.chunk_size": None, "scheduler.block_size": 1,
        "cluster.pipeline_parallel_size": 1}
    light = {"type": "lightllm", "block_size": 1, "max_waiting_iters": 3}
    assert policy_switch({"scheduler": light}, "sarathi") == {"scheduler.max_waiting_iters": None,
                                                              "scheduler.block_size": 16}


def test_configs_are_frozen():
    """A validated scenario never changes; model_copy(update=...) builds another."""
    config = parse_config({})
    with pytest.raises(ValidationError, match="frozen"):
        config.scheduler.block_size = 32
    with pytest.raises(ValidationError, match="frozen"):
        config.engine.record = "full"
    changed = config.model_copy(update={"scheduler": config.scheduler.model_copy(update={"block_size": 32})})
    assert (changed.scheduler.block_size, config.scheduler.block_size) == (32, 16)
