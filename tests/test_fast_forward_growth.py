"""Fast-forward checks KV growth only as far as a run is planned, and further when the run is
extended (engine/fast_forward.py, `DecodeRun.check_growth`): most runs are cut by an arrival
long before they could run short of blocks. The run must still end exactly where a check of
its whole length would end it, and an arrival in its last planned iteration must cut it unless
growth ends it there anyway. Every table equals the stepwise run's.

vllm, blocks of 16, no watermark; linear cost 10 ms + 1 ms per token (conftest), so a 16-token
prefill takes 26 ms and a decode iteration of one request 11 ms. A 16-token prompt holds one
block; its prefill yields token 17, so the first decode formation (iteration 0, formed at
0.026 s) takes a second block, and the member takes its next block at formation
16 * 2 + 1 - 17 = 16 (token 33), then every 16 formations. Iteration j of that run ends at
0.026 + (j + 1) x 0.011. A replica's first run plans 16 iterations (FIRST_CHUNK)."""

import pandas as pd
import pytest
from conftest import cost, scenario, workload
from run_agreement import TABLES

from sim_core import parse_config, run_simulation


def both(rows, num_blocks):
    """The stepwise and the fast-forwarded run (full records), and for the latter, after every
    event, the kernel time and replica 0's run as (planned iterations, num_iterations,
    growth_to, whether its length is final), or None."""
    results, seen = {}, []

    def note(simulator):
        run = simulator.fast.runs.get(0) if simulator.fast is not None else None
        state = None if run is None else (len(run.ends), run.num_iterations, run.growth_to, run.final)
        seen.append((simulator.kernel.now, state))
    for fast in (False, True):
        config = parse_config(scenario("vllm", engine={"fast_forward": fast}, scheduler={"num_blocks": num_blocks}))
        results[fast] = run_simulation(config, workload(*rows), after_event=note if fast else None)
    for table in TABLES:
        pd.testing.assert_frame_equal(getattr(results[False], table), getattr(results[True], table))
    return results[True], seen


def end_of(iteration: int) -> float:
    """When iteration `iteration` of the first request's decode run ends."""
    return cost(16) + (iteration + 1) * cost(1)


def test_growth_past_the_first_chunk_is_checked_when_the_run_is_extended():
    """4 blocks: after formation 0 the request (16 + 34 tokens; 33 decode iterations left)
    holds 2 and 2 are free. It takes one at formation 16 (1 spare) and would take the last at
    formation 32 (0 spare), so the run is iterations 0..31 and formation 32 is made stepwise.
    At the start only 16 iterations are planned and checked (nothing runs short before 16);
    the extension at the end of iteration 15 checks up to min(33, 3 x 16) and stops the run at
    32. Blocks are taken at formations 16 and 32: as iterations 15 and 31 end."""
    result, seen = both([(0.0, 16, 34)], num_blocks=4)
    states = [state for _, state in seen if state is not None]
    assert states[0] == (16, 16, 16, False)       # first chunk planned, growth checked that far
    assert states[-1] == (32, 32, 33, True)   # checked up to min(33, 48): short at 32
    taken = result.block_events[(result.block_events["delta"] == 1) & (result.block_events["request"] == 0)]
    assert taken["time"].tolist()[-2:] == pytest.approx([end_of(15), end_of(31)], abs=1e-12)
    assert taken["block"].tolist() == [0, 1, 2, 3]


def test_an_arrival_in_the_last_planned_iteration_cuts_the_run_there():
    """100 blocks (no shortage). Request 1 arrives at 0.026 + 15.5 x 0.011, inside iteration 15,
    the last of the first chunk, whose growth is checked only that far: the check is taken one
    iteration further (no shortage), so the run is cut after iteration 15 as it would be with
    every iteration checked, and request 1's prefill is formed as iteration 15 ends."""
    arrival = cost(16) + 15.5 * cost(1)
    result, _ = both([(0.0, 16, 100), (arrival, 16, 4)], num_blocks=100)
    batches = result.batches
    prefill = batches[batches["num_prefill_tokens"] > 0]
    assert prefill["formed_at"].tolist() == pytest.approx([0.0, end_of(15)], abs=1e-12)


def test_an_arrival_in_the_last_planned_iteration_where_growth_ends_the_run_anyway():
    """3 blocks: after formation 0 the request (16 + 18 tokens: 17 decode iterations left) holds
    2 and 1 is free; formation 16 would take it (0 spare), so the run is iterations 0..15,
    exactly its first chunk, though only 16 iterations were checked at its start. Request 1
    arrives inside iteration 15: checking one iteration further finds the shortage, so the run
    is not cut but ends at its planned event, the end of iteration 15, where request 1's
    prefill is formed."""
    arrival = cost(16) + 15.5 * cost(1)
    result, seen = both([(0.0, 16, 18), (arrival, 16, 4)], num_blocks=3)
    at_arrival = [state for now, state in seen if now == arrival and state is not None]
    assert at_arrival[-1] == (16, 16, 17, True)
    prefill = result.batches[result.batches["num_prefill_tokens"] > 0]
    assert prefill["formed_at"].tolist()[:2] == pytest.approx([0.0, end_of(15)], abs=1e-12)
