"""The default backend: worker processes on this machine, one task at a time each.

Workers are plain subprocesses (`python -m sim_core.sweep.worker`) that read task JSON lines on
stdin and answer result lines on stdout. multiprocessing is avoided on purpose: its spawned
workers re-import the parent's `__main__`, which inside Streamlit is the app script, and forking
a threaded server can deadlock. Workers run in their own session, so Ctrl-C reaches only the
parent, which stops them; a worker whose parent dies exits at once (see sim_core.sweep.worker;
on Linux the kernel ties a worker to the thread that started it, the one iterating `run`).
A worker that dies in the middle of a point (killed, out of memory) fails that point only: a
new worker takes its place.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Generator
from pathlib import Path
from typing import IO

from sim_core.errors import ConfigError
from sim_core.sweep.task import INTERNAL_ERROR, PARENT_ENV, failed_point

PROJECT_ROOT = str(Path(__file__).resolve().parents[2])   # the folder that holds sim_core/
MAX_WORKERS = 256
POLL_S = 0.25     # how often a run looks at stop() while every worker is busy


class LocalBackend:
    """Runs tasks on `workers` processes (default: every core).

    Raises:
        ConfigError: `workers` outside 1 .. MAX_WORKERS.
    """

    name = "local"

    def __init__(self, workers: int | None = None) -> None:
        if workers is not None and not 1 <= workers <= MAX_WORKERS:
            raise ConfigError(f"--workers: got {workers}; allowed 1 .. {MAX_WORKERS}")
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._stopped = threading.Event()

    def stop(self) -> None:
        """End the current run (and any later one) within POLL_S; points running are dropped.
        Safe to call from any thread."""
        self._stopped.set()

    def run(self, tasks: list[str]) -> Generator[tuple[int, str], None, None]:
        """Yield (task index, result JSON) as tasks finish; closing the iterator, or stop(),
        stops the workers (points still running are dropped).

        Raises:
            RuntimeError: a worker answered INTERNAL_ERROR (a task it cannot read: a bug).
        """
        queue = deque(enumerate(tasks))
        workers = [start_worker() for _ in range(min(self.workers, len(tasks)))]
        busy: dict[subprocess.Popen[str], int] = {}
        selector = selectors.DefaultSelector()
        try:
            for worker in workers:
                selector.register(_out(worker), selectors.EVENT_READ, worker)
                _send(worker, queue, busy)
            while busy and not self._stopped.is_set():
                for key, _ in selector.select(POLL_S):
                    worker = key.data
                    line = worker.stdout.readline()
                    if not line:            # it died: its point fails, a new worker goes on
                        index, status = busy.pop(worker), _retire(worker, workers, selector)
                        worker = _add_worker(workers, selector)
                        yield index, json.dumps(failed_point(f"its worker process exited (status {status})"))
                    elif line.startswith(f'{{"{INTERNAL_ERROR}"'):
                        raise RuntimeError(f"in a sweep worker: {json.loads(line)[INTERNAL_ERROR]}")
                    else:
                        yield busy.pop(worker), line
                    _send(worker, queue, busy)
        finally:
            selector.close()
            for worker in workers:
                _stop(worker, worker in busy)


def start_worker() -> subprocess.Popen[str]:
    """A worker process that reads tasks on stdin (and dies with this process)."""
    env = {**os.environ, PARENT_ENV: str(os.getpid()),
           "PYTHONPATH": os.pathsep.join(filter(None, [PROJECT_ROOT, os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-m", "sim_core.sweep.worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)


def _out(worker: subprocess.Popen[str]) -> IO[str]:
    assert worker.stdout is not None, "workers are started with stdout=PIPE"
    return worker.stdout


def _in(worker: subprocess.Popen[str]) -> IO[str]:
    assert worker.stdin is not None, "workers are started with stdin=PIPE"
    return worker.stdin


def _retire(dead: subprocess.Popen[str], workers: list[subprocess.Popen[str]],
            selector: selectors.BaseSelector) -> int:
    """Forget a worker that exited; returns its exit status."""
    selector.unregister(_out(dead))
    workers.remove(dead)
    _stop(dead, running=False)
    return dead.returncode


def _add_worker(workers: list[subprocess.Popen[str]], selector: selectors.BaseSelector) -> subprocess.Popen[str]:
    worker = start_worker()
    workers.append(worker)
    selector.register(_out(worker), selectors.EVENT_READ, worker)
    return worker


def _send(worker: subprocess.Popen[str], queue: deque, busy: dict) -> None:
    if queue:
        index, task = queue.popleft()
        _in(worker).write(task + "\n")
        _in(worker).flush()
        busy[worker] = index


def _stop(worker: subprocess.Popen[str], running: bool) -> None:
    """Close the worker's input (it exits when idle); kill it if it is still computing a point."""
    if running:
        worker.kill()
    try:
        _in(worker).close()
    except OSError:
        pass
    worker.wait()
    _out(worker).close()
