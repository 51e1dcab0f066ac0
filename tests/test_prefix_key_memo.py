"""Block keys of rows that share a prefix (`memory/prefix_keys.py`): the blocks inside the
shared runs are hashed once per distinct prefix and reused; the keys must be those a fresh
hashing of each row gives."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core.memory.prefix_keys import GROUP, HASH, REQUEST, PrefixKeys, chain_keys
from sim_core.workload import Workload


def hashed_workload(prompts, outputs, hashes, hash_block=4, **columns) -> Workload:
    ids = np.array([h for row in hashes for h in row], dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum([len(row) for row in hashes]))).astype(np.int64)
    return Workload(np.zeros(len(prompts)), np.array(prompts), np.array(outputs), "t", hash_ids=ids,
                    hash_offsets=offsets, hash_block_size=hash_block, **columns)


def test_a_rows_hash_runs_stop_at_its_prompt():
    """Hash blocks of 4, prompt 10, output 3, hashes [5 6 7 8]: hash 7's block is cut at the
    prompt's end (10) and hash 8's block starts past it; the row's own tokens run to 13."""
    keys = PrefixKeys(hashed_workload([10], [3], [[5, 6, 7, 8]]), 3)
    assert keys.runs(0) == [(4, (HASH, 5)), (8, (HASH, 6)), (10, (HASH, 7)), (13, (REQUEST, 0))]


def test_rows_with_one_hash_chain_hash_its_blocks_once():
    """Blocks of 3, two rows with hashes [5 6] over 8-token prompts (+ 4 outputs): blocks 0 and 1
    (tokens 0-5) lie inside the shared 8 tokens and are the same keys, hashed for row 0 and
    kept; block 2 (tokens 6-8) holds each row's own token 8, so it differs. Both rows' keys are
    those of a fresh hashing of the row alone."""
    workload = hashed_workload([8, 8], [4, 4], [[5, 6], [5, 6]])
    keys = PrefixKeys(workload, 3)
    first, second = keys.block_keys(0), keys.block_keys(1)
    assert len(first) == len(second) == 4
    assert first[:2] == second[:2] and first[2] != second[2]
    assert list(keys._head_keys.values()) == [first[:2]]
    for row, made in ((0, first), (1, second)):
        assert made == chain_keys(PrefixKeys(workload, 3).runs(row), 3, 12 // 3)


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(1, 40), st.integers(1, 12), st.integers(0, 3), st.integers(0, 4),
                               st.integers(-1, 2), st.integers(0, 30)), min_size=1, max_size=12),
       block=st.integers(1, 9), use_hashes=st.booleans())
def test_keys_made_in_order_equal_each_rows_keys_hashed_alone(rows, block, use_hashes):
    """Random rows (prompt, output, a chain of 0-4 hashes drawn from few prefixes, or a prefix
    group and length): keys made in row order by one PrefixKeys, sharing what it kept, equal
    chain_keys over each row's runs from scratch."""
    prompts = [r[0] for r in rows]
    outputs = [r[1] for r in rows]
    if use_hashes:
        chains = [[10 * r[2] + j for j in range(r[3])] for r in rows]
        workload = hashed_workload(prompts, outputs, chains, hash_block=5)
    else:
        workload = Workload(np.zeros(len(rows)), np.array(prompts), np.array(outputs), "t",
                            prefix_group=np.array([r[4] for r in rows]), prefix_len=np.array([r[5] for r in rows]))
    keys = PrefixKeys(workload, block)
    for row, (prompt, output, *_rest) in enumerate(rows):
        alone = PrefixKeys(workload, block).runs(row)
        assert keys.block_keys(row) == chain_keys(alone, block, (prompt + output) // block)
    assert all(source[0] in (HASH, GROUP) for prefix in keys._head_keys for _, source in prefix)
