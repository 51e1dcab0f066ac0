"""The cheaper forms of per-arrival records (issue 20) equal the forms they stand for, bitwise:

* `Recorder.on_kv_state`, what the simulator records of a replica's state at the `requests`
  level (no time series), against `on_replica_state`;
* `Recorder.on_run_states(..., rising=True)`, for a run in which nobody frees blocks (the blocks
  in use never fall, so the peak is the last value), against the general form;
* a decode run's token gaps with one count for all its steps (an int) against the same count
  repeated in an array, through the compaction;
* `RequestLog.record_many` (the sweep's bulk form) against `record` one request at a time;
* `Table.drain`, which the result builds from, against `arrays`, and the table left empty.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core.entities import Request, RequestStatus
from sim_core.results.record import Recorder, Table
from sim_core.results.request_log import RequestLog


def test_kv_state_integrates_like_the_replica_state():
    """The replica's last state was 4 blocks at 1.0 s; states of 6 blocks at 1.5 s and 2 blocks at
    3.0 s add 4 x 0.5 + 6 x 1.5 = 11.0 to the integral; the peak is 6, the last state 2 at 3.0."""
    lean = Recorder("requests", 1)
    lean._kv_last[0] = (1.0, 4)
    for now, used in ((1.5, 6), (3.0, 2)):
        lean.now = now
        lean.on_kv_state(0, used)
    assert (lean.kv_area[0], lean.kv_peak[0], lean._kv_last[0]) == (11.0, 6, (3.0, 2))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 3.0), st.integers(0, 1000)), min_size=1, max_size=40))
def test_kv_state_equals_the_replica_state_bitwise(states):
    """Any times (steps of 0 s included) and blocks in use: the same integral to the last bit,
    peak and last state as `on_replica_state` at the same level."""
    lean, full = Recorder("requests", 2), Recorder("requests", 2)
    now = 0.1
    for step, used in states:
        now += step
        for recorder in (lean, full):
            recorder.now = now
        lean.on_kv_state(1, used)
        full.on_replica_state(1, used, 3, 2)
    assert lean.kv_area[1].hex() == full.kv_area[1].hex()
    assert (lean.kv_peak, lean._kv_last) == (full.kv_peak, full._kv_last)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(1e-6, 5.0), st.integers(0, 3)), min_size=1, max_size=60),
       st.integers(0, 500))
def test_a_rising_run_states_peak_is_its_last(steps, used_before):
    """Blocks only taken (never freed) over a run's formations: `rising` gives the same
    integral, peak and last state as the general form (which takes the maximum)."""
    ends = 2.0 + np.cumsum([seconds for seconds, _ in steps])
    after = used_before + np.array([taken for _, taken in steps], dtype=np.int64).cumsum()
    rising, general = Recorder("requests", 1), Recorder("requests", 1)
    for recorder in (rising, general):
        recorder._kv_last[0], recorder.kv_peak[0] = (1.0, used_before), 7
    rising.on_run_states(0, ends, after, rising=True)
    general.on_run_states(0, ends, after)
    assert rising.kv_area[0].hex() == general.kv_area[0].hex()
    assert (rising.kv_peak, rising._kv_last) == (general.kv_peak, general._kv_last)


def test_one_count_for_every_step_of_a_run():
    """Run 1's steps 0.25 and 0.5 s are each seen by 3 members (one count, an int), run 2's step
    0.75 s by 2 (an array): compacted at the end of a run that never compacted, the samples are
    kept in their order with their counts: 0.25 x 3, 0.5 x 3, 0.75 x 2."""
    recorder = Recorder("requests", 1)
    recorder.on_run_gaps([], np.array([0.25, 0.5]), 3)
    recorder.on_run_gaps([], np.array([0.75]), np.array([2]))
    recorder.compact_gaps(force=True)
    assert recorder.gaps[0].tolist() == [0.25, 0.5, 0.75] and recorder.gaps[1].tolist() == [3, 3, 2]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from([0.25, 0.5, 0.75, 1.0]), max_size=6), st.integers(1, 9),
                          st.booleans()), max_size=12),
       st.booleans(), st.booleans())
def test_int_counts_compact_as_repeated_arrays(runs, compacted_before, windowed):
    """Runs whose counts are one int or an array, in any mix and order, compacted with or
    without an earlier compaction, inside a gap window or not: the same distinct gaps and counts
    as when every count is an array."""
    window = (0.0, 10.0) if windowed else None
    with_ints, with_arrays = Recorder("requests", 1, gap_window=window), Recorder("requests", 1, gap_window=window)
    for recorder in (with_ints, with_arrays):
        recorder.now = 1.0
        recorder.on_token_gap(0.5)
        if compacted_before:
            recorder.compact_gaps(force=True)
    for gaps, alive, as_int in runs:
        steps, step_ends = np.array(gaps), np.linspace(1.0, 2.0, len(gaps))
        with_ints.on_run_gaps([0.5], steps, alive if as_int else np.full(len(gaps), alive), 1.0, step_ends)
        with_arrays.on_run_gaps([0.5], steps, np.full(len(gaps), alive, dtype=np.int64), 1.0, step_ends)
    for recorder in (with_ints, with_arrays):
        recorder.compact_gaps(force=True)
    assert with_ints.gaps[0].tolist() == with_arrays.gaps[0].tolist()
    assert with_ints.gaps[1].tolist() == with_arrays.gaps[1].tolist()


def _requests() -> list[Request]:
    """A finished request, one cut at max_model_len (truncated), an ignored one and one still
    running (recorded at the end of a run), with distinct figures in every column."""
    out = []
    for rid, status in enumerate((RequestStatus.FINISHED, RequestStatus.FINISHED, RequestStatus.IGNORED,
                                  RequestStatus.RUNNING)):
        request = Request(rid * 2, 0.5 + rid, 16 + rid, 8 + rid)
        request.status, request.replica_id = status, rid % 2
        request.scheduled_at, request.prefill_completed_at = 1.0 + rid, 1.25 + rid
        request.completed_at = 2.0 + rid if status == RequestStatus.FINISHED else -1.0
        request.num_restarts, request.max_token_gap = rid, 0.125 * rid
        request.num_cached_tokens, request.num_lookup_tokens = 4 * rid, 8 * rid
        request.num_seqs, request.num_swaps = 1 + rid, 2 * rid
        if rid == 1:
            request.truncated, request.num_decode_tokens = True, 3
        out.append(request)
    return out


def test_record_many_stores_what_record_stores():
    """Every column of the log, for every kind of request, is what `record` one by one stores."""
    one_by_one, bulk = RequestLog(8), RequestLog(8)
    for request in _requests():
        one_by_one.record(request)
    bulk.record_many(_requests())
    bulk.record_many([])   # nothing to retire
    for column in RequestLog.__slots__:
        np.testing.assert_array_equal(getattr(bulk, column), getattr(one_by_one, column), err_msg=column)
    assert bulk.finished.tolist()[:4] == [True, False, True, False]   # rows 0 and 2 finished, 4 ignored
    assert bulk.truncated[2] and bulk.num_served_decode[2] == 9       # its workload output was 9 tokens


def test_drain_returns_the_rows_and_empties_the_table():
    """A row at 0.5 s on replica 1 made one by one, then a chunk of two rows at 1.0 and 1.5 s on
    replica 0 (one value for both): the lists' rows come first, then the chunk's; afterwards the
    table holds nothing and takes rows again."""
    table = Table({"time": np.float64, "replica": np.int64})
    table.columns["time"].append(0.5)
    table.columns["replica"].append(1)
    table.add_chunk_values(2, np.array([1.0, 1.5]), 0)
    drained = table.drain()
    assert drained["time"].tolist() == [0.5, 1.0, 1.5] and drained["replica"].tolist() == [1, 0, 0]
    assert (table.list_rows, table.chunk_rows, table.chunks) == (0, 0, [])
    table.add_chunk_values(1, [2.0], 3)
    assert table.arrays()["replica"].tolist() == [3]
