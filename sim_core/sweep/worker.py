"""A sweep worker: `python -m sim_core.sweep.worker` reads task JSON lines on stdin and writes one
result JSON line per task on stdout, in order (see sim_core.sweep.local)."""

from __future__ import annotations

import json
import sys

from sim_core.sweep.task import INTERNAL_ERROR, run_task


def main() -> None:
    for line in sys.stdin:
        try:
            result = run_task(line)
        except Exception as error:  # noqa: BLE001 - a bug in the core: told to the parent in one line
            result = json.dumps({INTERNAL_ERROR: f"{type(error).__name__}: {error}"})
        sys.stdout.write(result + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
