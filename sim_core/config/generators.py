"""Synthetic workload knobs: multi-turn sessions, shared prompt prefixes; trace formats (the
arrival process and the length distributions are in arrival.py and lengths.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from sim_core.config.sections import Strict

TraceFormat = Literal["auto", "canonical", "vidur", "vidur_lengths", "azure", "burstgpt", "mooncake"]
FORMAT_HELP = ("Format of the file: auto (detected from its columns), canonical, vidur, vidur_lengths, "
               "azure, burstgpt or mooncake (JSON lines).")


class SessionConfig(BaseModel):
    """Multi-turn conversations: each turn's prompt holds the whole conversation so far."""

    model_config = Strict

    enabled: bool = Field(False, description=(
        "Generate conversations: `arrival` then says when conversations start, prompt_tokens is "
        "each turn's new user input, and num_requests counts turns."))
    min_turns: int = Field(1, ge=1, le=10_000, description="Fewest turns per conversation.")
    max_turns: int = Field(6, ge=1, le=10_000, description="Most turns per conversation (uniform in between).")
    think_time_s: float = Field(5.0, ge=0.0, le=1e6, description=(
        "Mean pause (exponential) between receiving an answer and sending the next turn, seconds."))
    response_s_per_token: float = Field(0.02, ge=0.0, le=100.0, description=(
        "Estimated seconds to generate one output token, used to place the next turn after the "
        "answer (open loop only; closed_loop waits for the simulated answer instead)."))
    system_prompt_tokens: int = Field(0, ge=0, le=1_000_000, description=(
        "Tokens of a system prompt shared by many conversations (0: none); added to every prompt."))
    num_system_prompts: int = Field(1, ge=1, le=1_000_000, description=(
        "How many distinct system prompts conversations draw from (uniformly)."))

    closed_loop: bool = Field(False, description=(
        "Closed loop (agentic sessions): a session's next turn arrives a pause after its previous "
        "turn completes in the simulation, not at a time fixed in advance. Applies to generated "
        "sessions and to traces with a session_id column (turns ordered by turn, else by arrival)."))
    closed_loop_gap: Literal["workload", "think_time"] = Field("workload", description=(
        "closed loop: the pause before a later turn: workload (its arrival time minus the previous "
        "turn's: for generated sessions exactly the drawn think time; for a trace the recorded gap, "
        "which also holds the recorded answer time) or think_time (exponential with mean "
        "think_time_s, seeded)."))

    @model_validator(mode="after")
    def _turns(self) -> SessionConfig:
        if self.min_turns > self.max_turns:
            raise ValueError(f"min_turns ({self.min_turns}) must not exceed max_turns ({self.max_turns})")
        return self


class SharedPrefixConfig(BaseModel):
    """Prompt prefixes shared by many requests (system prompts), for prefix-caching workloads."""

    model_config = Strict

    tokens: int = Field(0, ge=0, le=1_000_000, description=(
        "Tokens of a prefix (a system prompt) put before every generated prompt; requests with the "
        "same prefix group share it exactly (0 = none). Without sessions; sessions have "
        "system_prompt_tokens."))
    num_groups: int = Field(1, ge=1, le=1_000_000, description=(
        "How many distinct prefixes the requests draw from (uniformly): fewer means more sharing."))
