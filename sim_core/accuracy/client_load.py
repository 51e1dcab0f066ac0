"""The load a benchmark client generated, rebuilt as a workload: when each request was sent and
what it asked for.

inference-perf (the version behind the public vLLM 0.15 runs), from its source:

* `constant` load: each stage of `duration` seconds at `rate` requests/s sends
  n = rate x duration requests; the gaps are drawn exponential and then rescaled so that the
  stage's sends fill its duration (not evenly spaced, and not Poisson over the stage either).
  `poisson` load keeps the exponential gaps as drawn.
* `shared_prefix` data: SYSTEM_PROMPTS groups of QUESTIONS_PER_SYSTEM_PROMPT prompts (10 x 10, the
  version's defaults: it did not know the profile's `num_unique_system_prompts` /
  `num_users_per_system_prompt` names, and each run's `results/config.yaml` records 10 x 10); a
  prompt is its group's system prompt (`system_prompt_len` random tokens) + " " + its own question.
  The pool of PROMPT_POOL prompts is built once and shuffled; request n of a stage sends prompt
  n mod PROMPT_POOL. Whole prompts repeat, so after a prompt's first send every later one is a
  prefix-cache hit on the whole prompt; and a prompt's first send finds its system prompt cached
  when another prompt of its group went before, so it computes the question only.
* `ignore_eos`: the server generates exactly `output_len` tokens.

The client's own seed is not recorded; the rebuild is seeded by the scenario's seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sim_core.errors import ConfigError
from sim_core.workload.model import Workload

SYSTEM_PROMPTS = 10               # inference-perf's shared_prefix defaults (num_groups)
QUESTIONS_PER_SYSTEM_PROMPT = 10  # (num_prompts_per_group)
PROMPT_POOL = SYSTEM_PROMPTS * QUESTIONS_PER_SYSTEM_PROMPT


@dataclass(frozen=True)
class LoadStage:
    """One stage of the client's load: `rate` requests/s for `duration_s` seconds."""

    rate: float
    duration_s: float

    @property
    def num_requests(self) -> int:
        return int(round(self.rate * self.duration_s))


def send_times(stages: Sequence[LoadStage], kind: str, rng: np.random.Generator) -> list[np.ndarray]:
    """Send times (seconds from the first stage's start) of every stage's requests, per stage.

    `kind` is the client's load type: `constant` rescales each stage's exponential gaps to fill
    the stage, `poisson` keeps them."""
    times, start = [], 0.0
    for stage in stages:
        gaps = rng.exponential(1.0 / stage.rate, stage.num_requests) if stage.num_requests else np.empty(0)
        sends = np.cumsum(gaps)
        if kind == "constant" and len(sends):
            sends = sends * (stage.duration_s / sends[-1])
        times.append(start + sends)
        start += stage.duration_s
    return times


def shared_prefix_workload(stages: Sequence[LoadStage], kind: str, prompt_tokens: int, output_tokens: int,
                           rng: np.random.Generator, source: str, pool: int = PROMPT_POOL,
                           system_tokens: int = 0, per_system_prompt: int = QUESTIONS_PER_SYSTEM_PROMPT) -> Workload:
    """The requests of an inference-perf `shared_prefix` run: every request sends one of `pool`
    whole prompts of `prompt_tokens` tokens (request n of a stage sends prompt order[n mod pool])
    and gets `output_tokens` tokens back. Prompt p starts with the system prompt of group
    p // `per_system_prompt` (its first `system_tokens` tokens; 0: nothing shared between prompts).

    The prompts' content is given as prefix-block hashes of `system_tokens` tokens
    (`prompt_hashes`), so a prefix cache matches a repeated prompt whole and a new prompt of a
    group whose system prompt is cached up to the last full cache block of the system prompt.

    Raises:
        ConfigError: a prompt or an output of no tokens (the message names `source`).
    """
    if prompt_tokens < 1 or output_tokens < 1:
        raise ConfigError(f"{source}: shared_prefix: prompts ({prompt_tokens}) and outputs ({output_tokens}) need at "
                          "least 1 token each (system_prompt_len + question_len, output_len)")
    order = rng.permutation(pool).astype(np.int64)
    per_stage = send_times(stages, kind, rng)
    arrived_at = np.concatenate(per_stage) if per_stage else np.empty(0)
    prompt_ids = np.concatenate([order[np.arange(len(t)) % pool] for t in per_stage]) if per_stage else \
        np.empty(0, dtype=np.int64)
    n = len(arrived_at)
    block, table = prompt_hashes(pool, prompt_tokens, system_tokens, per_system_prompt)
    width = table.shape[1]
    system = (f"{pool // max(per_system_prompt, 1)} system prompts of {system_tokens} tokens shared by "
              f"{per_system_prompt} prompts each, " if 0 < system_tokens < prompt_tokens else "")
    return Workload(arrived_at=arrived_at.astype(np.float64),
                    num_prefill_tokens=np.full(n, prompt_tokens, dtype=np.int64),
                    num_decode_tokens=np.full(n, output_tokens, dtype=np.int64), source=source,
                    notes=(f"inference-perf shared_prefix: {pool} whole prompts of {prompt_tokens} tokens, "
                           f"{system}{output_tokens} output tokens (ignore_eos), {kind} load",),
                    hash_ids=table[prompt_ids].reshape(-1), hash_offsets=np.arange(n + 1, dtype=np.int64) * width,
                    hash_block_size=block)


def prompt_hashes(pool: int, prompt_tokens: int, system_tokens: int, per_system_prompt: int) -> tuple[int, np.ndarray]:
    """(hash block size, hashes of every prompt of the pool: one row per prompt).

    With a shared system prompt (0 < `system_tokens` < `prompt_tokens`) the block is the system
    prompt: block 0 of prompt p is its group's hash (p // `per_system_prompt`), the question's
    blocks are the prompt's own. Without one the whole prompt is one block of its own. Group
    hashes are 0 .. groups - 1, the prompts' own ones follow, so no two sources collide."""
    shared = 0 < system_tokens < prompt_tokens and per_system_prompt >= 1
    block = system_tokens if shared else prompt_tokens
    width = -(-prompt_tokens // block)
    groups = -(-pool // per_system_prompt) if shared else 0
    own = groups + np.arange(pool * width, dtype=np.int64).reshape(pool, width)
    if shared:
        own[:, 0] = np.arange(pool, dtype=np.int64) // per_system_prompt
    return block, own


def stage_windows(stages: Sequence[LoadStage]) -> list[tuple[float, float]]:
    """(start, end) seconds of each stage."""
    ends = np.cumsum([s.duration_s for s in stages])
    return [(float(end - s.duration_s), float(end)) for s, end in zip(stages, ends)]


def empty_workload(source: str) -> Workload:
    """No requests (the workload of a run that cannot be replayed)."""
    none = np.empty(0, dtype=np.int64)
    return Workload(arrived_at=np.empty(0), num_prefill_tokens=none, num_decode_tokens=none, source=source)
