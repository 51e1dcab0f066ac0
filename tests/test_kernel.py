"""The event kernel's order within one instant, and the hooks it calls around handlers."""

from sim_core.engine.kernel import EventKernel


def test_an_instant_runs_arrivals_then_created_arrivals_then_stage_ends_then_follow_ups():
    """At t=1: the two pre-created arrivals, the session turn (created arrival), the stage end,
    then the zero-delay follow-ups in the order they were made (arrival 0's before the stage
    end's), even though the stage end and the turn were scheduled before the run."""
    kernel, log = EventKernel(), []
    kernel.at(1.0, lambda: (log.append("stage end"), kernel.soon(log.append, "after stage end")))
    kernel.arrive_at(1.0, (0,), log.append, "turn")

    def arrival(i):
        log.append(f"arrival {i}")
        if i == 0:
            kernel.soon(log.append, "after arrival 0")

    kernel.run([1.0, 1.0], arrival, lambda now: None)
    assert log == ["arrival 0", "arrival 1", "turn", "stage end", "after arrival 0", "after stage end"]


def test_end_of_instant_work_runs_by_key_after_everything_else_then_its_follow_ups():
    """Work for the end of the instant runs once nothing else is due, a batch in key order with
    `late_phase` set, each batch before the follow-ups it makes; work it adds for the end of the
    instant forms the next batch."""
    kernel, log = EventKernel(), []

    def late(name):
        log.append((name, kernel.late_phase))
        kernel.soon(log.append, f"after {name}")
        if name == "b":
            kernel.at_instant_end((0,), late, "c")

    def arrival(i):
        kernel.at_instant_end((2,), late, "a")
        kernel.at_instant_end((1,), late, "b")
        kernel.soon(log.append, "follow-up")

    kernel.run([0.5], arrival, lambda now: None)
    assert log == ["follow-up", ("b", True), ("a", True), "after b", "after a", ("c", True), "after c"]


def test_the_clock_hook_runs_once_per_instant_and_the_event_hook_after_every_handler():
    """`on_time` sees each distinct time before its handlers (the late phase reset); `after_event`
    runs after each of the five handlers, end-of-instant work included."""
    kernel, log = EventKernel(), []
    kernel.at(2.0, log.append, "stage end")

    def arrival(i):
        log.append("arrival")
        if i == 0:
            kernel.soon(kernel.at_instant_end, (0,), log.append, "late")

    kernel.run([1.0, 2.0], arrival, lambda now: log.append(("time", now, kernel.late_phase)),
               lambda: log.append("checked"))
    assert log == [("time", 1.0, False), "arrival", "checked", "checked", "late", "checked",
                   ("time", 2.0, False), "arrival", "checked", "stage end", "checked"]


def test_a_cancelled_event_never_runs_and_its_instant_never_happens():
    """Events at 1.0, 1.5 (cancelled by the arrival at 0.5), 2.0 (cancelled too, but sharing its
    time with another event) and 3.0: the clock visits 0.5, 1.0, 2.0 and 3.0 only, and the two
    cancelled handlers never run; the one at 2.0 keeps its creation-order place empty."""
    kernel, log = EventKernel(), []
    kernel.at(1.0, log.append, "a")
    gone = kernel.at_cancellable(1.5, log.append, "cancelled alone")
    shared = kernel.at_cancellable(2.0, log.append, "cancelled beside b")
    kernel.at(2.0, log.append, "b")
    kernel.at_cancellable(3.0, log.append, "c")

    def arrival(i):
        log.append("arrival")
        kernel.cancel(gone)
        kernel.cancel(shared)

    kernel.run([0.5], arrival, lambda now: log.append(now))
    assert log == [0.5, "arrival", 1.0, "a", 2.0, "b", 3.0, "c"]


def test_cancelling_the_last_events_ends_the_run_without_moving_the_clock():
    """Only cancelled events left after the arrival: the run ends at the arrival's instant."""
    kernel, log = EventKernel(), []
    late = [kernel.at_cancellable(4.0, log.append, "never"), kernel.at_cancellable(5.0, log.append, "never")]

    def arrival(i):
        for event in late:
            kernel.cancel(event)

    kernel.run([1.0], arrival, log.append)
    assert log == [1.0] and kernel.now == 1.0
