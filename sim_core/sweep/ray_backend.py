"""The Ray backend: run points on an existing Ray cluster (for sweeps that outgrow one machine).

It only ever connects (`ray.init(address=...)`); it never starts a cluster, so it is safe to use
from the app's server. Tasks and results travel as JSON text; the `sim_core` package is shipped
to the cluster with the job (`runtime_env.py_modules`), its dependencies (numpy, pandas,
pydantic, PyYAML) must be installed there. Ray is optional: `pip install -r requirements-ray.txt`.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

from sim_core.errors import ConfigError
from sim_core.sweep.task import run_task

PACKAGE_DIR = str(Path(__file__).resolve().parents[1])


class RayBackend:
    """Runs tasks as Ray tasks (one CPU each) on the cluster at `address` (e.g. 10.0.0.5:6379).

    Raises:
        ConfigError: no address, or nothing answers there (checked at once: ray.init would
            retry for minutes).
    """

    name = "ray"

    def __init__(self, address: str) -> None:
        if not address or not address.strip():
            raise ConfigError("--address: the ray backend needs the address of a running cluster "
                              "(e.g. 127.0.0.1:6379, as printed by `ray start --head`)")
        self.address = address.strip()
        _check_reachable(self.address)

    def run(self, tasks: list[str]) -> Iterator[tuple[int, str]]:
        """Yield (task index, result JSON) as tasks finish; closing the iterator cancels the rest."""
        if not tasks:
            return
        ray = _connect(self.address)
        pending = {}
        try:
            remote = ray.remote(num_cpus=1)(run_task)
            pending.update({remote.remote(task): index for index, task in enumerate(tasks)})
            while pending:
                ready, rest = ray.wait(list(pending), num_returns=1)
                if rest:
                    more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                    ready += more
                for ref in ready:
                    yield pending.pop(ref), ray.get(ref)
        finally:
            for ref in pending:
                ray.cancel(ref)
            ray.shutdown()


def _connect(address: str):
    try:
        import ray
    except ImportError:
        raise ConfigError("backend ray: Ray is not installed; pip install -r requirements-ray.txt") from None
    try:
        ray.init(address=address, runtime_env={"py_modules": [PACKAGE_DIR]}, log_to_driver=False,
                 logging_level="WARNING")
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise ConfigError(f"--address: cannot connect to a Ray cluster at {address}: "
                          f"{' '.join(str(error).split())[:200]}") from None
    return ray


def _check_reachable(address: str, timeout_s: float = 3.0) -> None:
    """Fail fast when nothing listens at HOST:PORT (ray.init would retry for minutes)."""
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--address: got '{address}'; expected HOST:PORT (e.g. 127.0.0.1:6379), ray://HOST:PORT "
                          "or auto")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as error:
        raise ConfigError(f"--address: no Ray cluster answers at {host}:{port} ({error.strerror or error}); "
                          "start one with `ray start --head` or give its address") from None
