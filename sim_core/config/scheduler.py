"""The scheduler section: what every policy's settings share, and what a policy declares.

A policy (one file in `sim_core/schedulers/`) declares two things next to its scheduler class:

* its config model, a subclass of `SchedulerConfig` with `type: Literal["<name>"]` and only the
  knobs it reads (a knob several policies read is one of the `Annotated` types below), whose
  hooks answer what the rest of the simulator asks about its settings (activation size, prompt
  chunk, swap space, prefix caching, overlap, its own validation rules);
* its `PolicyTraits` (the scheduler class's `traits`): the facts that do not depend on knobs.

`sim_core.schedulers` registers every policy (`policies.add_policies`); the scenario then
validates `scheduler` as the registered model its `type` names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from sim_core.config.choices import ChoiceBase
from sim_core.config.sections import Strict

if TYPE_CHECKING:
    from sim_core.config.simulation import SimulationConfig


@dataclass(frozen=True, eq=False)   # one per policy: compared (and hashed) by identity
class PolicyTraits:
    """What the rest of the simulator may ask a policy instead of testing its name.

    Attributes:
        config: the policy's config model (its `type` literal is the policy's name).
        label: the engine (and version) it mirrors, for the UI.
        memory_planner: the planner `memory.planner: auto` picks ("vidur" for the policies
            Vidur models, so their runs match Vidur; "vllm" for the engines whose KV budget is
            vLLM's memory profiling).
        reserves_max_model_len: every request reserves max_model_len // block_size blocks up
            front (the planner's max batch size bounds the batch; num_blocks must hold one).
        clips_prompts: a request over max_model_len has its prompt shortened before the run
            (Vidur's rule); False: the policy cuts the output where the request reaches it.
        supports_disaggregation: the policy can hand requests between P/D pools.
        has_prefix_cache: the policy can reuse KV of shared prompt prefixes (reports hit rates).
        serves_parallel_samples: the policy reads the workload's `n` column (else one sequence
            per request).
        pipeline_runs: at pipeline parallelism above 1 the policy may promise a pipeline run
            (`SteadyDecode.micro_batches`, engine/pipeline_run.py); the simulator asks no other
            policy there.
        implied_changes: dotted scenario path -> value that choosing this policy must set for
            the scenario to stay valid (the app applies them when the type changes).
    """

    config: type[SchedulerConfig]
    label: str
    memory_planner: Literal["vidur", "detailed", "vllm"] = "detailed"
    reserves_max_model_len: bool = False
    clips_prompts: bool = True
    supports_disaggregation: bool = True
    has_prefix_cache: bool = False
    serves_parallel_samples: bool = False
    pipeline_runs: bool = False
    implied_changes: Mapping[str, object] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The policy's `scheduler.type` (its config model's `type` default)."""
        return str(self.config.model_fields["type"].default)


# ---- knobs several policies read (one definition each; defaults included) ------------------

WatermarkFraction = Annotated[float, Field(0.01, ge=0.0, le=0.9, description=(
    "vllm/sarathi/vllm_v0: keep int(fraction * num_blocks) blocks free when admitting a new request "
    "(vllm_v0: also when swapping one back in), headroom for running requests to grow."))]
MaxTokensInBatch = Annotated[int, Field(4096, ge=1, le=10_000_000, description=(
    "vllm: batch size x longest prompt must stay within this; lightllm: sum of prompt tokens "
    "in a prefill batch."))]
MaxNumSeqs = Annotated[int, Field(256, ge=0, le=1_000_000, description=(
    "vllm_v0/vllm_v1: most sequences running at once (vLLM's --max-num-seqs, default 256; a "
    "vllm_v0 request with n parallel samples counts n; vllm_v1 checks it only when admitting a "
    "request, never against one already running); 0 = unbounded."))]
MaxNumBatchedTokens = Annotated[int | None, Field(None, ge=1, le=10_000_000, description=(
    "vllm_v0/vllm_v1: tokens one iteration may process, shared by running decodes (1 token "
    "each) and prompt chunks (vLLM's --max-num-batched-tokens); empty: the engine's default "
    "(vllm_v1: 2048; vllm_v0: max(max_model_len, 2048), or 512 with chunked prefill). vllm_v0 "
    "without chunked prefill ignores a prompt longer than min(this, max_model_len)."))]


class SchedulerConfig(ChoiceBase):
    """The knobs every per-replica batching policy reads (names follow Vidur), and the hooks
    through which the simulator asks a policy's settings; each policy's model adds its own."""

    model_config = Strict

    type: str = Field(description="Batching policy (each reads its own knobs besides the shared ones).")
    batch_size_cap: int = Field(128, ge=1, le=65536, description=(
        "vllm/sarathi/orca/faster_transformer/lightllm: most requests holding KV memory at once; a "
        "batch holds at most batch_size_cap // PP (vllm_v0, vllm_v1 and sglang bound requests with "
        "their own knobs; for them it only sizes the detailed memory planner's logits reserve, "
        "which sglang uses; the vllm planner reads max_num_seqs instead)."))
    block_size: int = Field(16, ge=1, le=4096, description=(
        "Tokens per KV-cache block (lightllm requires 1: one block per token)."))
    num_blocks: int | None = Field(None, ge=1, le=1_000_000_000, description=(
        "KV-cache blocks per replica; when absent the memory planner derives it from the model, "
        "device and max_model_len."))

    @property
    def traits(self) -> PolicyTraits:
        """The registered traits of this policy."""
        from sim_core.config.policies import policy_traits  # the registry imports this module

        return policy_traits(self.type)

    def check_scenario(self, scenario: SimulationConfig) -> None:
        """Raise ValueError (a one-line message naming the field) when the scenario breaks one of
        the policy's rules; a policy with rules of its own extends this."""
        if self.block_size > scenario.max_model_len:
            raise ValueError(f"scheduler.block_size: {self.block_size} exceeds max_model_len {scenario.max_model_len}")
        reserve = scenario.max_model_len // self.block_size
        if self.traits.reserves_max_model_len and self.num_blocks is not None and self.num_blocks < reserve:
            raise ValueError(f"scheduler.num_blocks: {self.type} reserves max_model_len // block_size = {reserve} "
                             f"blocks per request, more than num_blocks = {self.num_blocks}")

    def activation_tokens(self, max_model_len: int) -> int:
        """Tokens of the largest iteration the policy can form (the detailed planner reserves
        activation memory for it): a whole max_model_len prompt unless a knob bounds it."""
        return max_model_len

    def profile_batch(self, max_model_len: int) -> tuple[int, int]:
        """(tokens, sequences) of the engine's memory-profiling run, the batch whose activations
        the vllm planner reserves: by default the largest iteration and batch_size_cap requests
        (vLLM's engines: max_num_batched_tokens spread over at most max_num_seqs requests)."""
        tokens = self.activation_tokens(max_model_len)
        return tokens, min(self.batch_size_cap, tokens)

    def max_batch_requests(self) -> int:
        """Most requests one iteration may hold (0: unbounded): batch_size_cap unless the policy
        bounds them with a knob of its own (vLLM's engines: max_num_seqs)."""
        return self.batch_size_cap

    def prefill_chunk(self) -> int | None:
        """Most prompt tokens one request runs in one iteration (None: its whole prompt)."""
        return None

    def swap_space_gib(self) -> float:
        """CPU swap space per GPU in GiB for preempted requests' KV (0: the policy does not swap)."""
        return 0.0

    def kv_offload_gib(self) -> float:
        """CPU memory per replica in GiB for KV offloading (0: none; vllm_v1 reads it)."""
        return 0.0

    def prefix_caching(self) -> bool:
        """Whether the policy reuses cached prompt prefixes in this run."""
        return False

    def overlap_schedule(self, num_stages: int) -> bool:
        """Whether the host work of iteration i hides behind the GPU work of iteration i - 1
        (SGLang's overlap loop, vLLM's async scheduling) on a replica with `num_stages` pipeline
        stages."""
        return False

    def overlapped_cpu_phases(self) -> tuple[str, ...]:
        """With overlap: the host phases of an iteration (`CPU_PHASES`) that run while the GPU
        works on the previous one (SGLang: scheduling and processing outputs)."""
        return ("schedule", "process_outputs")

    def host_phase_scale(self) -> float:
        """Factor on the predictor's host phases (`cpu_<phase>_s` and their per-request parts)
        for this engine's host loop: 1 for the policies that take the phases as given."""
        return 1.0

    def eager_launch(self) -> tuple[int, float, float, float] | None:
        """For an engine that runs small steps as CUDA graphs: (the most tokens a graphed step
        holds, host seconds to launch a dense layer, a MoE layer, GPU seconds a layer adds beyond
        its kernels) of a larger step, which the GPU cannot finish before the host has launched it
        (predictor/eager.py); None: every step is priced by its GPU work alone."""
        return None

    def client_latency_s(self) -> float:
        """Seconds between the engine and its client that every request's first and last token
        carry on top of the engine's own times (an API server's work: 0 for the policies that
        model the engine alone)."""
        return 0.0
