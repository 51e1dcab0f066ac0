"""A decode run's member arrays carried into the replica's next run (engine/fast_forward.py).

Under a router that piles arrivals onto few replicas, a replica's runs are long lists of the
same members, cut every few iterations by an arrival: each new run used to read every member's
tokens and blocks from its `Request` again (`MemberArrays.of`, the iterations left). What those
reads return is known when a run ends in bulk (`FastForward._end_in_bulk`): a survivor (a member
with iterations left after the run's k) has k iterations fewer left, has processed k more
tokens and holds the blocks it took at the run's formations 1..k-1 (`growth_counts`). Between
that run and the replica's next one nothing else may touch a survivor for the carry to hold:

* batches of prompts alone (vllm's prefill batches of queued requests) leave the survivors
  idle; any other batch formed meanwhile (a stepwise decode batch, sarathi's mixed batches)
  makes the carry stale, so the first batch that is not prompts alone consumes it or drops it;
* a restart (preemption) rewrites a request's tokens: the carry is used only if the policy
  restarted nobody since it was made (its count of preemptions);
* the next run's formation 0 grows each survivor by one block exactly when its processed
  tokens outgrow its blocks (`PagedScheduler.take_decodes`: `first_growth` <= 0 then, and
  never below 0, since a decoding member takes a block at every formation it outgrows one).

The next run's batch must list the survivors first, in the same order (vllm's decode batch is
the running requests sorted by arrival: survivors, then the newcomers that arrived after them);
the newcomers are read from their requests as before. Any other batch reads every member afresh.
`tests/test_run_carry.py` holds the carried arrays equal to fresh reads on random runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sim_core.engine.run_growth import MemberArrays

if TYPE_CHECKING:
    from sim_core.entities import Batch, Request
    from sim_core.schedulers.steady import SteadyDecode


# runs of this many members or more carry theirs: deriving the carried arrays costs about as much
# as reading some 50 members afresh (a few dozen numpy calls against a few per member)
CARRY_MEMBERS = 48


@dataclass(slots=True, eq=False)
class Carry:
    """A replica's last run, ended in bulk after k iterations: what its survivors' arrays are
    derived from when the next run starts (nothing is computed for a carry that is dropped)."""

    members: list[Request]   # the survivors, in the run's batch order
    arrays: MemberArrays     # the survivors' figures when the run started
    k: int                   # iterations the run applied (tokens included)
    preemptions: int         # the policy's count of preemptions when the run ended


def carry_of(members: list[Request], arrays: MemberArrays, k: int, everyone: bool, preemptions: int) -> Carry | None:
    """The survivors of a serial run of `members` (paged growth, `arrays` read at its start) whose
    k iterations were all applied, tokens included (`everyone`: nobody finished in them); None
    when nobody survives."""
    if everyone:
        # `members` is the run's batch list, shared, not copied: the run's end copies it into
        # the scheduler's running list and nothing edits the batch's list after that
        return Carry(members, arrays, k, preemptions)
    keep = (arrays.left > k).nonzero()[0]
    if not len(keep):
        return None
    kept = MemberArrays(arrays.left[keep], arrays.held[keep], arrays.first[keep])
    return Carry([members[i] for i in keep.tolist()], kept, k, preemptions)


def carried_arrays(carry: Carry, promise: SteadyDecode, batch: Batch,
                   preemptions: int) -> tuple[list[int], MemberArrays] | None:
    """The iterations left and `MemberArrays` of a decode batch just formed, from `carry` for its
    survivors (listed first, in the carry's order, with no preemption since) and from the
    requests for the rest; None when the batch does not start with the survivors."""
    survivors = carry.members
    n = len(survivors)
    requests = batch.requests
    if preemptions != carry.preemptions or requests[:n] != survivors:   # (identity: eq=False)
        return None
    k, size, was = carry.k, promise.block_size, carry.arrays
    # blocks each took at formations 1..k of the last run (formation k is this batch's, made by
    # take_decodes): at first, first + size, ... (a survivor is live at all of them)
    taken = np.maximum(k + size - was.first, 0) // size
    if len(requests) == n:
        left = was.left - k
        return left.tolist(), MemberArrays(left, was.held + taken, was.first - k + size * taken)
    # the newcomers' figures, as `MemberArrays.of` reads them, after the survivors'
    total = len(requests)
    left, held, first = np.empty(total, np.int64), np.empty(total, np.int64), np.empty(total, np.int64)
    np.subtract(was.left, k, out=left[:n])
    np.add(was.held, taken, out=held[:n])
    np.add(was.first - k, size * taken, out=first[:n])
    newcomers = requests[n:]
    left[n:] = [r.num_prefill_tokens + r.num_decode_tokens - r.num_processed_tokens for r in newcomers]
    blocks = [r.num_blocks for r in newcomers]
    held[n:] = blocks
    first[n:] = [size * b + 1 - r.num_processed_tokens for r, b in zip(newcomers, blocks)]
    return left.tolist(), MemberArrays(left, held, first)
