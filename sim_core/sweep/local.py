"""The default backend: worker processes on this machine, one task at a time each.

Workers are plain subprocesses (`python -m sim_core.sweep.worker`) that read task JSON lines on
stdin and answer result lines on stdout. multiprocessing is avoided on purpose: its spawned
workers re-import the parent's `__main__`, which inside Streamlit is the app script, and forking
a threaded server can deadlock. Workers run in their own session, so Ctrl-C reaches only the
parent, which stops them; a worker whose parent dies sees its stdin close and exits.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
from collections import deque
from collections.abc import Iterator
from pathlib import Path

from sim_core.sweep.task import INTERNAL_ERROR

PROJECT_ROOT = str(Path(__file__).resolve().parents[2])   # the folder that holds sim_core/


class LocalBackend:
    """Runs tasks on `workers` processes (default: every core)."""

    name = "local"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = max(1, workers or os.cpu_count() or 1)

    def run(self, tasks: list[str]) -> Iterator[tuple[int, str]]:
        """Yield (task index, result JSON) as tasks finish; closing the iterator stops the workers
        (points still running are dropped)."""
        queue = deque(enumerate(tasks))
        workers = [_start_worker() for _ in range(min(self.workers, len(tasks)))]
        busy: dict[subprocess.Popen, int] = {}
        selector = selectors.DefaultSelector()
        try:
            for worker in workers:
                selector.register(worker.stdout, selectors.EVENT_READ, worker)
                _send(worker, queue, busy)
            while busy:
                for key, _ in selector.select():
                    worker = key.data
                    line = worker.stdout.readline()
                    if not line:
                        raise RuntimeError(f"a sweep worker exited unexpectedly (status {worker.wait()})")
                    if line.startswith(f'{{"{INTERNAL_ERROR}"'):
                        raise RuntimeError(f"in a sweep worker: {json.loads(line)[INTERNAL_ERROR]}")
                    yield busy.pop(worker), line
                    _send(worker, queue, busy)
        finally:
            selector.close()
            for worker in workers:
                _stop(worker, worker in busy)


def _start_worker() -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [PROJECT_ROOT, os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-m", "sim_core.sweep.worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)


def _send(worker: subprocess.Popen, queue: deque, busy: dict) -> None:
    if queue:
        index, task = queue.popleft()
        worker.stdin.write(task + "\n")
        worker.stdin.flush()
        busy[worker] = index


def _stop(worker: subprocess.Popen, running: bool) -> None:
    """Close the worker's input (it exits when idle); kill it if it is still computing a point."""
    if running:
        worker.kill()
    try:
        worker.stdin.close()
    except OSError:
        pass
    worker.wait()
    worker.stdout.close()
