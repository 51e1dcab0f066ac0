"""A sweep worker: `python -m sim_core.sweep.worker` reads task JSON lines on stdin and writes one
result JSON line per task on stdout, in order (see sim_core.sweep.local).

A worker never outlives the process that started it (PARENT_ENV holds that process's id): it
exits when its input closes, and, even in the middle of a point, when its parent dies (on Linux
the kernel kills it at once, PR_SET_PDEATHSIG; everywhere a watcher thread sees the parent id
change within WATCH_INTERVAL_S).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import threading
import time

from sim_core.sweep.task import INTERNAL_ERROR, PARENT_ENV, run_task

WATCH_INTERVAL_S = 0.5
PR_SET_PDEATHSIG = 1


def main() -> None:
    parent = os.environ.get(PARENT_ENV)
    if parent and parent.isdigit():
        die_with_parent(int(parent))
    for line in sys.stdin:
        try:
            result = run_task(line)
        except Exception as error:  # noqa: BLE001 - a task that is no task: told to the parent in one line
            result = json.dumps({INTERNAL_ERROR: f"{type(error).__name__}: {error}"})
        sys.stdout.write(result + "\n")
        sys.stdout.flush()


def die_with_parent(parent_pid: int) -> None:
    """End this process when `parent_pid` is no longer its parent (it died; we were adopted)."""
    _ask_kernel_to_kill_us_with_parent()
    if os.getppid() != parent_pid:        # it died before we could ask
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(WATCH_INTERVAL_S)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _ask_kernel_to_kill_us_with_parent() -> None:
    """prctl(PR_SET_PDEATHSIG, SIGKILL) on Linux; elsewhere nothing (the watcher covers it)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass


if __name__ == "__main__":
    main()
