"""vllm_v1's running phase (`VllmV1Scheduler._run`) under async scheduling with prefix caching:
which formation keys a decode's newly filled block, and the invariant that lets the usual
member (a decode whose step in flight samples its newest token, its blocks holding the next
one) skip the key call."""

from conftest import simulate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_engine_properties import _run as run_engine_case
from test_engine_properties import scenarios as engine_scenarios
from test_pd_session_properties import _run as run_pd_case
from test_pd_session_properties import scenarios as pd_scenarios

from sim_core.config.policies import for_policy
from sim_core.entities import RequestStatus
from sim_core.schedulers.vllm_v1 import VllmV1Scheduler


def _record_steps(monkeypatch) -> list[tuple]:
    """(tokens of request 0, its blocks, its keyed blocks) after each formation holding it."""
    seen = []
    step_of = VllmV1Scheduler._step

    def recording(self):
        step = step_of(self)
        request = next((r for r in step.requests if r.id == 0), None)
        if request is not None:
            seen.append((step.tokens[0], request.num_blocks, self._hashed.keyed.get(0, 0)))
        return step

    monkeypatch.setattr(VllmV1Scheduler, "_step", recording)
    return seen


def test_a_decode_filling_a_block_is_keyed_by_the_formation_that_gives_it_the_next_block(monkeypatch):
    """One request, a 3-token prompt and 6 outputs, 4-token blocks, stepwise. Formation 1 admits
    the prompt (3 tokens: 1 block, not full, no key); formation 2, with the prompt in flight,
    gives it the placeholder token behind it (KV for 4 tokens: still 1 block; keys stop at the 3
    known tokens). The prompt lands: 4 known tokens fill block 0. Formation 3, with the
    placeholder in flight, needs KV for 5 tokens: a new block, and block 0 gets its key then.
    Formations 4-6 (5, 6, 7 known tokens) need no block and key nothing."""
    seen = _record_steps(monkeypatch)
    simulate([(0.0, 3, 6)], "vllm_v1", scheduler={"block_size": 4}, engine={"fast_forward": False})
    assert seen == [(3, 1, 0), (1, 1, 0), (1, 2, 1), (1, 2, 1), (1, 2, 1), (1, 2, 1)]


def _check_usual_members_keyed(monkeypatch) -> list[int]:
    """Before each running phase with caching and async steps: every running member whose step
    in flight samples its newest token and whose blocks hold the next one has its blocks keyed
    up to its known tokens (so `_run` needs no key call for it); at each landing, every member
    also in the step still in flight has its blocks keyed up to its KV tokens (so
    `_after_step` needs none). Returns a one-item list counting the members checked."""
    checked = [0]
    run = VllmV1Scheduler._run

    def checking(self, step, candidates):
        if self._cache is not None and self.async_steps:
            size, flying_of, keyed_of = self._block_size, self.in_flight.by_id.get, self._cache.keyed.get
            for request in candidates:
                known = request.num_processed_tokens
                if (request.status == RequestStatus.RUNNING and flying_of(request.id, 0) == 1
                        and request.is_prefill_complete and known < request.num_blocks * size):
                    checked[0] += 1
                    assert known // size <= keyed_of(request.id, 0), (request.id, known, request.num_blocks)
        return run(self, step, candidates)

    monkeypatch.setattr(VllmV1Scheduler, "_run", checking)
    after_step = VllmV1Scheduler._after_step

    def checking_landing(self, batch, keyed_of):
        # a landing member also in the step in flight: the key call `_after_step` skips would
        # key nothing (its KV tokens fill no block past the keyed ones)
        if keyed_of is not None:
            held, size = self.in_flight.by_id, self._block_size
            for request in batch.requests:
                if request.id in held and not request.completed and request.is_prefill_complete:
                    checked[0] += 1
                    full = min((request.num_processed_tokens - 1) // size, len(self.keys(request)), request.num_blocks)
                    assert full <= keyed_of(request.id, 0), (request.id, request.num_processed_tokens)
        return after_step(self, batch, keyed_of)

    monkeypatch.setattr(VllmV1Scheduler, "_after_step", checking_landing)
    return checked


def test_the_usual_async_member_holds_keys_for_its_known_tokens_in_a_narrated_run(monkeypatch):
    """The scenario above: formations 4-6 are the usual member's, each checked, and so are the
    landings of steps 1-5 (the prompt's included), each with the next step, which holds the
    request, in flight: 3 + 5 checks (step 6 lands with nothing in flight, and finishes it)."""
    checked = _check_usual_members_keyed(monkeypatch)
    simulate([(0.0, 3, 6)], "vllm_v1", scheduler={"block_size": 4}, engine={"fast_forward": False})
    assert checked == [8]


@st.composite
def async_caching_cases(draw):
    """vllm_v1 with async steps and prefix caching: the engine property scenarios (chunking,
    priorities, prioritize_prefill, KV offload, shared prefixes, sessions, PP 2) or the P/D and
    closed-loop session ones (hand-offs to decode replicas with their own caches)."""
    if draw(st.booleans()):
        config, workload = draw(engine_scenarios())
        knobs = {"block_size": draw(st.sampled_from([1, 4, 8, 16])), "num_blocks": draw(st.integers(8, 60)),
                 "kv_offloading_size": draw(st.sampled_from([0.0, 0.0, 0.02, 4.0])),
                 "max_num_seqs": draw(st.integers(0, 8)), "max_num_batched_tokens": draw(st.integers(1, 96)),
                 "long_prefill_token_threshold": draw(st.integers(0, 40)),
                 "prioritize_prefill": draw(st.booleans()),
                 "scheduling_policy": draw(st.sampled_from(["fcfs", "priority"]))}
        run = run_engine_case
    else:
        config, workload = draw(pd_scenarios())
        knobs = {"block_size": draw(st.sampled_from([4, 8, 16])), "num_blocks": draw(st.integers(8, 60)),
                 "max_num_seqs": draw(st.integers(0, 6)), "max_num_batched_tokens": draw(st.integers(1, 96))}
        run = run_pd_case
    knobs.update(enable_prefix_caching=True, async_scheduling=True)
    config = {**config, "scheduler": {"type": "vllm_v1", **for_policy(knobs, "vllm_v1")}}
    return config, workload, run, draw(st.booleans())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(case=async_caching_cases())
def test_the_usual_async_member_holds_keys_for_its_known_tokens(case, monkeypatch):
    """At every formation and landing of random async, caching scenarios (stepwise and
    fast-forwarded): the usual member's blocks are keyed up to its known tokens, and a landing
    member held by the step in flight up to its KV tokens: the invariants `_run`'s inline path
    and `_after_step` rely on instead of key calls."""
    config, workload, run, fast_forward = case
    with monkeypatch.context() as patched:
        _check_usual_members_keyed(patched)
        run(config, workload, fast_forward=fast_forward)
