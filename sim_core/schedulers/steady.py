"""A policy's promise that a decode batch re-forms unchanged (what fast-forward relies on).

A "steady" decode batch is one the policy will form again, unchanged, at every following
iteration until one of its requests finishes, a request arrives, or (per `growth`) KV blocks run
short. The policy says so when it forms the batch (`ReplicaScheduler.steady_decode`); fast-forward
then advances those iterations in one step and hands the replica back through `resume`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
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
    step runs, one iteration ahead; it is the run's iteration 0 (see docs/design/fast-forward.md)."""

    scheduler: ReplicaScheduler
    limit: int
    past_completions: bool = False
    growth: Growth = None
    frees_on_completion: bool = True
    keys_blocks: bool = False
    in_flight: Batch | None = None

    @property
    def block_size(self) -> int:
        return self.scheduler._block_size

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
