"""A policy's promise that a decode batch re-forms unchanged (what fast-forward relies on).

A "steady" decode batch is one the policy will form again, unchanged, at every following
iteration until one of its requests finishes, a request arrives, or (per `growth`) KV blocks run
short. The policy says so when it forms the batch (`ReplicaScheduler.steady_decode`); fast-forward
then advances those iterations in one step and hands the replica back through `resume`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import numpy as np

    from sim_core.entities import Batch, Request
    from sim_core.schedulers.base import ReplicaScheduler

Growth = Literal["paged", "per_token"] | None   # how members take KV blocks while decoding


@dataclass(frozen=True, slots=True)
class SteadyDecode:
    """The promise about one just-formed decode batch of `scheduler`.

    `limit` bounds the iterations, the one just formed included, that re-form the batch exactly
    if no request arrives (completions and block growth are checked by fast-forward).
    `past_completions`: after a member finishes, the next formation is surely the same batch
    without it (nobody else could join); False ends a run at the first finish. `growth`: members
    take a block when their tokens outgrow their blocks ("paged"), one per iteration
    ("per_token"), or none. `frees_on_completion`: a finished member's blocks return to the pool
    at its batch end (else when the whole static batch ends). `keys_blocks`: each formation keys
    the blocks its members' tokens fill (vllm_v1's prefix cache), so a run replays those keys at
    their instants. `in_flight` (vllm_v1's async scheduling): the batch was formed while this
    step runs, one iteration ahead; it is the run's iteration 0 (see docs/design/fast-forward.md).
    `padded_sizes[n]`: the batch size the GPU runs (and the cost model prices) for n live
    members, CUDA-graph padding included, for every n up to the batch's size (None: no padding).
    `inbox_may_join`: a hand-off waiting in this decode replica's inbox might be taken at a
    later formation even without a completion (its room grows as the members decode), so no
    run starts while one waits. `on_completion(request)`: the policy books a member's completion
    inside a run itself (with the pool's own records, at its instant; the radix pool); None:
    fast-forward frees its blocks. `counts_frees`: growth planning may count a finished
    member's blocks as spare again (False: some may stay held, e.g. a cached prefix other
    members lock, so none are counted). `sequential_sums`: the run's KV-utilization integral is
    summed term by term, bitwise as stepwise (the policies whose snapshots were taken with the
    faster bulk sum keep it; the two differ in the last bits only). `ends_in_bulk`: the run's
    last iteration ends in bulk too (no batch is formed for it): its members' tokens are applied
    with the skipped ones and its batch end is the policy's plain one (`end_batch`), which only
    policies whose batch end and resume are the base ones can promise. The engine also reads it as
    "a formation while this serial run goes forms nothing and loads no KV" (one stage, the base
    `_has_room`, no KV offload: vllm and sarathi; `FastForward.holds_slot` skips queuing one): a
    policy that promises it must keep that true too. `micro_batches` (pipeline
    parallelism, engine/pipeline_run.py): the promise covers the replica's whole pipeline: it
    has this many batches in flight, this one included; every one of them that is a decode
    batch re-forms unchanged (minus finished members) at its batch end, nothing else is formed
    while they last, and nothing but the re-formation changes the pool (0: no such promise);
    `arrivals_join`: except that a request arriving is formed into a new batch at once (the
    pipeline has room), which ends the run there (else arrivals change nothing)."""

    scheduler: ReplicaScheduler
    limit: int
    past_completions: bool = False
    growth: Growth = None
    frees_on_completion: bool = True
    keys_blocks: bool = False
    in_flight: Batch | None = None
    padded_sizes: np.ndarray | None = None
    inbox_may_join: bool = False
    on_completion: Callable[[Request], None] | None = None
    counts_frees: bool = True
    sequential_sums: bool = False
    ends_in_bulk: bool = False
    micro_batches: int = 0
    arrivals_join: bool = False

    @property
    def block_size(self) -> int:
        return self.scheduler._block_size

    @property
    def preemptions(self) -> int:
        """How many preemptions (restarts) the policy has made so far."""
        return self.scheduler._num_preemptions

    def padded(self, num_requests: np.ndarray) -> np.ndarray:
        """The batch size the GPU runs (and the cost model prices) for each count of live
        members."""
        return num_requests if self.padded_sizes is None else self.padded_sizes[num_requests]

    def padded_size(self, num_requests: int) -> int:
        """`padded` of one count."""
        return num_requests if self.padded_sizes is None else int(self.padded_sizes[num_requests])

    @property
    def lead(self) -> int:
        """Iterations by which formations run ahead of outputs: 1 with async steps, else 0."""
        return 0 if self.in_flight is None else 1

    def resume(self, first: Batch, live: list[Request], num_iterations: int) -> tuple[Batch, Batch | None]:
        """Iterations 0..num_iterations-2 of `first` ran in one step (fast-forward applied their
        tokens and blocks): the replica forms the last one, of the `live` members, as stepwise
        it would have. Returns that batch (in flight until the run's end) and, with async steps,
        the next one, formed as the last began (queued behind it)."""
        return self.scheduler._resume_steady(first, live, num_iterations)

    def skip_batches(self, num_iterations: int) -> int:
        """`ends_in_bulk`: the run's num_iterations iterations all ran in one step; their batch
        ids are taken. Returns the last one's id."""
        return self.scheduler._skip_steady(num_iterations)

    def end_batch(self, live: list[Request]) -> None:
        """`ends_in_bulk`: the run's last iteration, of the `live` members (tokens applied), ended
        now: the policy's batch end, as `ReplicaScheduler.on_batch_end` of that batch."""
        self.scheduler._end_steady(live)

    def moved(self, first: Batch, last: Batch, num_iterations: int) -> None:
        """`micro_batches`: a pipeline run advanced the micro-batch of `first` by
        num_iterations - 1 iterations (tokens applied); `last` is its batch in flight now."""
        self.scheduler._on_steady_decode(first, last, num_iterations)

    def step_ended(self, batch: Batch) -> None:
        """A batch formed before the run (its first, or with async steps the one queued behind
        it) ended inside it, at the instant the run's replay is at."""
        self.scheduler._step_ended_in_run(batch)

    def release(self, request: Request) -> None:
        """A member finished inside the run, now (fast-forward sets the recorder's clock to that
        instant): its blocks go back as its policy frees them."""
        self.scheduler._release_in_run(request)

    def key_blocks(self, request: Request, num_tokens: int) -> None:
        """The formation being replayed keys the blocks the first `num_tokens` tokens fill."""
        self.scheduler._key_blocks(request, num_tokens)
