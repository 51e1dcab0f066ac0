"""The methods through which fast-forward and the P/D hand-off change requests and records
(instead of writing their fields)."""

from sim_core.entities import Request, RequestStatus
from sim_core.results.record import FINISHED, Recorder


def decoding(prompt=10, outputs=5):
    """A request whose prompt ran at t=2 (its first output token)."""
    request = Request(0, 0.0, prompt, outputs)
    request.on_batch_end(2.0, prompt)
    return request


def test_a_decode_run_adds_its_tokens_and_keeps_the_widest_gap():
    """Three iterations ending at t=5 with gaps up to 1.25 s: 3 more tokens, the last at t=5;
    a later run with narrower gaps leaves the widest in place and, holding the last output
    token, finishes the request at its end."""
    request = decoding()
    request.on_decode_run(3, 5.0, 1.25, finished=False)
    assert (request.num_processed_tokens, request.last_token_at, request.max_token_gap) == (14, 5.0, 1.25)
    assert not request.completed
    request.on_decode_run(1, 6.0, 1.0, finished=True)
    assert (request.num_processed_tokens, request.max_token_gap) == (15, 1.25)
    assert (request.completed, request.completed_at, request.status) == (True, 6.0, RequestStatus.FINISHED)


def test_a_hand_off_moves_the_blocks_to_their_stand_in():
    """The request gives up its three blocks (count and ids) and holds none afterwards."""
    request = decoding()
    request.num_blocks, request.blocks = 3, [4, 5, 6]
    assert request.hand_over_blocks() == (3, [4, 5, 6])
    assert (request.num_blocks, request.blocks) == (0, [])


def test_a_finish_inside_a_run_is_recorded_at_its_own_time_without_moving_the_clock():
    """At t=9, at the end of the instant, a request is recorded as finished at t=7.5, letting go
    of blocks 3 and 4: the state row and both block rows carry 7.5 and the ordinary phase (late
    False: a finish is never made at the end of an instant), and records made next still carry 9
    and the end of the instant."""
    recorder = Recorder("full", 1)
    recorder.now, recorder.late = 9.0, True
    recorder.on_finished_at(7.5, 0, 42, [3, 4])
    recorder.on_state(0, 43, FINISHED)
    assert recorder.states.columns == {"time": [7.5, 9.0], "replica": [0, 0], "request": [42, 43],
                                       "state": [FINISHED, FINISHED], "late": [False, True]}
    assert recorder.blocks.columns == {"time": [7.5, 7.5], "replica": [0, 0], "request": [42, 42],
                                       "block": [3, 4], "delta": [-1, -1]}


def test_a_record_level_without_block_events_skips_finishes_inside_a_run():
    """At the `batches` level neither the state change nor the block events are kept."""
    recorder = Recorder("batches", 1)
    recorder.on_finished_at(7.5, 0, 42, [3, 4])
    assert recorder.states.columns["time"] == [] and recorder.blocks.columns["time"] == []
