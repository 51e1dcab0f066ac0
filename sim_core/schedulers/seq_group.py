"""A request's parallel samples as one group of sequences (vLLM v0's SequenceGroup).

A request asking for n samples is one sequence until its prompt is prefilled; the iteration that
completes the prompt samples a first token for each of the n sequences, which then fork: every
sequence's block table lists the prompt's blocks (reference count n). The sequences advance in
lockstep (each decodes the request's output tokens), so one layout describes them all:

    block table of sequence i = shared[0 : num_shared] + private_i[0 : seq_blocks - num_shared]

Half-open ranges: the `num_shared` leading blocks are referenced by all n sequences; the rest of
each table is the sequence's own. The request holds num_shared + n x (seq_blocks - num_shared)
distinct blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim_core.entities import Request


@dataclass(slots=True, eq=False)
class SeqGroup:
    """Block layout of one request's n sequences (n > 1)."""

    num_seqs: int
    forked: bool = False      # the prompt is prefilled: n sequences exist
    num_shared: int = 0       # leading blocks every sequence references
    seq_blocks: int = 0       # blocks in each sequence's table
    tables: list[list[int]] | None = None  # each sequence's physical ids (when the pool keeps ids)

    @property
    def num_distinct(self) -> int:
        return self.num_shared + self.num_seqs * (self.seq_blocks - self.num_shared)

    def unfork(self) -> None:
        """Back to one sequence (the group's blocks were freed)."""
        self.forked, self.num_shared, self.seq_blocks, self.tables = False, 0, 0, None

    def rebuild_tables(self, blocks: list[int]) -> None:
        """Tables for the distinct `blocks` laid out as allocated in table order: the shared
        ones, then sequence 0's own, sequence 1's own, ..."""
        shared, own = blocks[: self.num_shared], self.seq_blocks - self.num_shared
        rest = blocks[self.num_shared:]
        self.tables = [shared + rest[i * own: (i + 1) * own] for i in range(self.num_seqs)]


def restart_from_prompt(request: Request) -> None:
    """Recompute a prompt cut short (chunked prefill) from its start, as vLLM resets its computed
    tokens; unlike `Request.restart` (a decoding request), nothing joins the prompt."""
    request.num_processed_tokens = 0
    request.is_prefill_complete = False
    request.scheduled = False
    request.num_restarts += 1


def recompute_group(request: Request) -> None:
    """Recompute a group of samples that could not be swapped out (vLLM v0 cannot; it aborts):
    its prompt and every sample's tokens so far become one prompt to prefill again (the samples'
    own tokens are not shared, so each counts), and each sample keeps the tokens it has left.
    With one sequence this is exactly `Request.restart`."""
    generated = request.num_processed_tokens - request.num_prefill_tokens   # per sample, the newest included
    left = request.total_tokens - request.num_processed_tokens
    request.num_prefill_tokens += request.num_seqs * generated
    request.num_decode_tokens = left
    restart_from_prompt(request)
