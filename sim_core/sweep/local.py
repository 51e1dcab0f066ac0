"""The default backend: a pool of worker processes on this machine."""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

from sim_core.sweep.task import run_task


class LocalBackend:
    """Runs tasks on `workers` processes (default: every core).

    Workers are spawned, not forked: forking a threaded process (the app's server) can deadlock.
    They ignore Ctrl-C, so an interrupted sweep stops cleanly from the parent.
    """

    name = "local"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = max(1, workers or os.cpu_count() or 1)

    def run(self, tasks: list[str]) -> Iterator[tuple[int, str]]:
        """Yield (task index, result JSON) as tasks finish; closing the iterator cancels the rest."""
        if not tasks:
            return
        pool = ProcessPoolExecutor(min(self.workers, len(tasks)), mp_context=multiprocessing.get_context("spawn"),
                                   initializer=signal.signal, initargs=(signal.SIGINT, signal.SIG_IGN))
        pending = {pool.submit(run_task, task): index for index, task in enumerate(tasks)}
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    yield pending.pop(future), future.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
