"""What each request's KV blocks hold, as keys a prefix cache can compare.

The simulator has no token ids, so the content of a request is derived from the workload's
optional prefix columns. A request's token stream is its prompt followed by its output; every
position of it gets a *source*, and equal sources at equal positions mean equal tokens:

* Mooncake `hash_ids` (when the row has any, block size H = `hash_block_size`): prompt
  position i with j = i // H < len(hash_ids) has source (HASH, hash_ids[j]);
* else a session turn whose session has an earlier row in the workload (the latest one, q):
  its first L positions copy q's sources, L = its `prefix_len` (without that column: q's prompt
  plus output), capped at its own prompt and at q's stream; so each turn extends the previous
  context, and a system prompt shared by turn 0 (below) is shared by every later turn;
* else a row with `prefix_group` g >= 0: its first min(prefix_len, prompt) positions have
  source (GROUP, g) (requests of one group share their common leading positions);
* every other position (new input, output) has source (REQUEST, row): unique to the request.
A `prefix_len` without a session or group shares nothing (it does not say with whom).

Block k covers positions [k * B, (k + 1) * B) for the cache's block size B. Its key is a 64-bit
hash chaining block k-1's key with the runs of sources inside block k (each run's source and
where it ends), as vLLM chains block hashes: equal keys mean equal prefixes up to and including
the block (a false match needs a 64-bit hash collision). Only full blocks have keys.

A session turn's blocks that lie inside the part it copies from its earlier turn have that
turn's keys (the same sources at the same positions, and the same parents): they are taken from
the earlier turn's keys when those are still at hand (`PrefixKeys` keeps the latest ones of turns
that have a follower) instead of being hashed again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sim_core.workload.model import Workload

HASH, GROUP, REQUEST = 1, 2, 3
ROOT = 0x5EED  # the parent key of block 0
KEPT_TURNS = 256   # earlier turns' keys kept for their followers (the oldest go first beyond this)
KEPT_HEADS = 4096  # shared prefixes whose block keys are kept (the oldest go first beyond this)


class PrefixKeys:
    """Block keys of workload rows (request id = row); session rows are memoised, since later
    turns copy them."""

    def __init__(self, workload: Workload, block_size: int) -> None:
        self.workload = workload
        self.block_size = block_size
        columns = workload.optional_columns()
        self.group = columns.get("prefix_group")
        self.prefix_len = columns.get("prefix_len")
        self.previous = previous_turns(columns["session_id"]) if "session_id" in columns else None
        self._session_runs: dict[int, list[tuple[int, tuple[int, int]]]] = {}
        # keys of turns a later turn copies, until that turn takes them (a memo: a turn whose
        # keys are gone, or whose follower runs on another replica, is hashed in full)
        self._followed = None if self.previous is None else np.zeros(len(self.previous), dtype=bool)
        if self.previous is not None and self._followed is not None:
            self._followed[self.previous[self.previous >= 0]] = True
        self._turn_keys: dict[int, list[int]] = {}
        # keys of the blocks inside a shared prefix (every run of a row's own runs but its last,
        # the row's own tokens), by those runs: rows of one hash chain or group hash them once
        self._head_keys: dict[tuple[tuple[int, tuple[int, int]], ...], list[int]] = {}

    def stream_length(self, row: int) -> int:
        return int(self.workload.num_prefill_tokens[row] + self.workload.num_decode_tokens[row])

    def block_keys(self, row: int) -> list[int]:
        """Keys of the full blocks of the row's stream (prompt + output), in order."""
        runs = self.runs(row)
        head = self._copied_keys(row)
        if not head and len(runs) > 1 and runs[-1][1] == (REQUEST, row) and runs[-2][1][0] != REQUEST:
            head = self._shared_keys(runs)
        keys = chain_keys(runs, self.block_size, self.stream_length(row) // self.block_size, head)
        if self._followed is not None and self._followed[row]:
            self._turn_keys[row] = keys
            if len(self._turn_keys) > KEPT_TURNS:
                del self._turn_keys[next(iter(self._turn_keys))]
        return keys

    def _shared_keys(self, runs: list[tuple[int, tuple[int, int]]]) -> list[int]:
        """Keys of the blocks that lie inside `runs[:-1]` (a block's key depends only on the runs
        up to its end), hashed once per distinct prefix and kept (at most KEPT_HEADS of them);
        none for a prefix holding some request's own tokens (an earlier turn's: nobody else's)."""
        shared = tuple(runs[:-1])
        keys = self._head_keys.get(shared)
        if keys is None:
            if any(source[0] == REQUEST for _, source in shared):
                return []
            keys = chain_keys(runs, self.block_size, shared[-1][0] // self.block_size)
            self._head_keys[shared] = keys
            if len(self._head_keys) > KEPT_HEADS:
                del self._head_keys[next(iter(self._head_keys))]
        return keys

    def _copied_keys(self, row: int) -> list[int]:
        """Keys of the row's leading blocks that lie inside what it copies from its earlier turn,
        when that turn's keys are kept (else none); the earlier turn's are let go."""
        if self.previous is None or self.previous[row] < 0 or self._has_hashes(row):
            return []
        earlier = int(self.previous[row])
        keys = self._turn_keys.pop(earlier, None)
        if keys is None:
            return []
        return keys[: self._shared_length(row, earlier) // self.block_size]

    def runs(self, row: int) -> list[tuple[int, tuple[int, int]]]:
        """The row's stream as (end position, source) runs in order, covering [0, length)."""
        if self.previous is None or self.previous[row] < 0:
            return self._own_runs(row)
        chain = [row]
        while self.previous[chain[-1]] >= 0 and chain[-1] not in self._session_runs:
            chain.append(int(self.previous[chain[-1]]))
        for turn in reversed(chain):
            if turn not in self._session_runs:
                self._session_runs[turn] = self._turn_runs(turn)
        return self._session_runs[row]

    def _turn_runs(self, row: int) -> list[tuple[int, tuple[int, int]]]:
        assert self.previous is not None, "only session rows have earlier turns"
        earlier = int(self.previous[row])
        if earlier < 0 or self._has_hashes(row):
            return self._own_runs(row)
        before = self._session_runs[earlier]
        return truncate(before, self._shared_length(row, earlier)) + [(self.stream_length(row), (REQUEST, row))]

    def _shared_length(self, row: int, earlier: int) -> int:
        """Leading positions a session turn copies from its earlier turn."""
        shared = (int(self.prefix_len[row]) if self.prefix_len is not None
                  else self.stream_length(earlier))
        return min(shared, int(self.workload.num_prefill_tokens[row]), self.stream_length(earlier))

    def _has_hashes(self, row: int) -> bool:
        return self.workload.hash_ids is not None and len(self.workload.hashes_of(row)) > 0

    def _own_runs(self, row: int) -> list[tuple[int, tuple[int, int]]]:
        """Runs of a row that copies no earlier turn: hash blocks, a group prefix, or nothing."""
        prompt, end = int(self.workload.num_prefill_tokens[row]), self.stream_length(row)
        runs: list[tuple[int, tuple[int, int]]] = []
        hashes = self.workload.hashes_of(row).tolist() if self.workload.hash_ids is not None else []
        if hashes:
            size = self.workload.hash_block_size
            count = min(len(hashes), -(-prompt // size))   # the blocks that start inside the prompt
            runs = [((j + 1) * size, (HASH, value)) for j, value in enumerate(hashes[:count])]
            runs[-1] = (min(count * size, prompt), runs[-1][1])
        elif self.group is not None and self.prefix_len is not None and self.group[row] >= 0:
            shared = min(int(self.prefix_len[row]), prompt)
            if shared > 0:
                runs.append((shared, (GROUP, int(self.group[row]))))
        runs.append((end, (REQUEST, row)))
        return runs


def truncate(runs: list, length: int) -> list:
    """The runs covering [0, length) (length at most the runs' end)."""
    kept = []
    for end, source in runs:
        if length <= 0:
            break
        kept.append((min(end, length), source))
        if end >= length:
            break
    return kept


def chain_keys(runs: list, block_size: int, num_blocks: int, head: list[int] | None = None) -> list[int]:
    """Chained keys of blocks 0..num_blocks-1 over `runs` (which must cover them); `head`: the
    keys of the leading blocks, known already (only the rest are hashed)."""
    keys = list(head) if head else []
    append, parent, first, block = keys.append, keys[-1] if keys else ROOT, 0, len(keys)
    while block < num_blocks:
        start = block * block_size
        while runs[first][0] <= start:
            first += 1
        end, source = runs[first]
        if end >= start + block_size:   # the usual case: blocks block..inside-1 lie inside this run
            inside = min(num_blocks, end // block_size)
            for stop in range(start + block_size, inside * block_size + 1, block_size):
                parent = hash((parent, ((source, stop),)))
                append(parent)
            block = inside
            continue
        stop = start + block_size
        content, i = [(source, end)], first + 1
        while True:
            end, source = runs[i]
            if end >= stop:
                content.append((source, stop))
                break
            content.append((source, end))
            i += 1
        parent = hash((parent, tuple(content)))
        append(parent)
        block += 1
    return keys


def previous_turns(session: np.ndarray) -> np.ndarray:
    """For each row, the latest earlier row of the same session (session ids >= 0), else -1."""
    rows = np.arange(len(session), dtype=np.int64)
    order = np.lexsort((rows, session))
    previous = np.full(len(session), -1, dtype=np.int64)
    same = (session[order][1:] == session[order][:-1]) & (session[order][1:] >= 0)
    previous[order[1:][same]] = order[:-1][same]
    return previous
