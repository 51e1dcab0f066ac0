"""A decode run's replica states at a level that keeps no time series (`Recorder.on_run_states`):
the KV-utilization integral, the peak and the last state must be bitwise what the full form
(`on_replica_states`, a state after each batch end and after each formation) makes.

The narrated run: the replica's last state was 4 blocks at 1.0 s. The run's batches end at 2.0,
2.5 and 3.5 s (binary fractions: every figure below is exact); the formations after them leave
5, 7 and 6 blocks in use, having taken 1, 2 and 0 (and 0, 0 and 1 freed by finished members at
the last one). Integral: 4 x (2.0 - 1.0) + 5 x 0.5 + 7 x 1.0 = 13.5 (the interval from a batch end
to the formation at the same instant is empty); peak 7; last state 6 blocks at 3.5 s.
"""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sim_core.results.record import Recorder


def _recorder() -> Recorder:
    recorder = Recorder("requests", 1)
    recorder._kv_last[0] = (1.0, 4)
    return recorder


def _full_form(recorder: Recorder, ends: np.ndarray, after: np.ndarray, taken: np.ndarray) -> None:
    """What fast-forward records at the levels with a time series: two states per batch end."""
    used = np.empty(2 * len(ends), dtype=np.int64)
    used[0::2], used[1::2] = after - taken, after
    recorder.on_replica_states(0, ends.repeat(2), used, 0, None)


def test_integral_peak_and_last_state():
    ends, after = np.array([2.0, 2.5, 3.5]), np.array([5, 7, 6], dtype=np.int64)
    lean = _recorder()
    lean.on_run_states(0, ends, after)
    assert (lean.kv_area[0], lean.kv_peak[0], lean._kv_last[0]) == (13.5, 7, (3.5, 6))
    full = _recorder()
    _full_form(full, ends, after, np.array([1, 2, 0], dtype=np.int64))
    assert (full.kv_area[0], full.kv_peak[0], full._kv_last[0]) == (13.5, 7, (3.5, 6))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(1e-6, 5.0), st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=60),
       st.integers(0, 500), st.floats(0.0, 1e4))
def test_lean_states_equal_the_full_form_bitwise(steps, used_before, start):
    """Random iteration times and blocks taken / freed per formation: the same integral to the
    last bit, the same peak and last state."""
    ends = start + np.cumsum([seconds for seconds, _, _ in steps])
    taken = np.array([t for _, t, _ in steps], dtype=np.int64)
    freed = np.array([min(f, used_before) for _, _, f in steps], dtype=np.int64)
    after = used_before + (taken - freed).cumsum()
    assume((after - taken).min() >= 0)   # never more freed than held
    lean, full = Recorder("requests", 1), Recorder("requests", 1)
    for recorder in (lean, full):
        recorder._kv_last[0], recorder.kv_area[0] = (start - 1.0, used_before), 123.456
    lean.on_run_states(0, ends, after)
    _full_form(full, ends, after, taken)
    assert lean.kv_area[0].hex() == full.kv_area[0].hex()
    assert (lean.kv_peak[0], lean._kv_last[0]) == (full.kv_peak[0], full._kv_last[0])
