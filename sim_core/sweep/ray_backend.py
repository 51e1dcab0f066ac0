"""The Ray backend: run points on an existing Ray cluster (for sweeps that outgrow one machine).

It only ever connects (`ray.init(address=...)`); it never starts a cluster. Tasks and results
travel as JSON text; the `sim_core` package is shipped to the cluster with the job
(`runtime_env.py_modules`), its dependencies (numpy, pandas, pydantic, PyYAML) must be installed
there. Ray is optional: `pip install -r requirements-ray.txt`.

Before `ray.init` (which retries an address for many minutes) the address is checked in at most
PROBE_TIMEOUT_S: it must read HOST:PORT (or ray://HOST:PORT) and a gRPC server must answer there,
as a Ray cluster's GCS (or client server) does; a port where nothing or something else listens
fails at once with one line. Which addresses a server may join is its caller's decision (the
app keeps an allowlist); `parse_ray_address` and `probe_address` are the pieces it needs. Note
that joining a cluster means trusting it: Ray unpickles what the cluster sends back.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Generator
from pathlib import Path
from types import ModuleType

from sim_core.errors import ConfigError
from sim_core.export.text import shorten
from sim_core.sweep.task import failed_point, run_task

PACKAGE_DIR = str(Path(__file__).resolve().parents[1])
PROBE_TIMEOUT_S = 3.0
POLL_S = 0.5          # how often a run looks at stop() while waiting for results
HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9])?)$")
# An HTTP/2 client's connection preface and an empty SETTINGS frame: a gRPC server answers with
# its own SETTINGS frame (type 4, not an ACK, stream 0) before anything else.
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


class RayBackend:
    """Runs tasks as Ray tasks (one CPU each) on the cluster at `address` (e.g. 10.0.0.5:6379).

    Raises:
        ConfigError: no address, not HOST:PORT, or no Ray cluster answers there (checked at once:
            ray.init would retry for minutes).
    """

    name = "ray"

    def __init__(self, address: str) -> None:
        if not address or not address.strip():
            raise ConfigError("--address: the ray backend needs the address of a running cluster "
                              "(e.g. 127.0.0.1:6379, as printed by `ray start --head`)")
        self.address = address.strip()
        probe_address(*parse_ray_address(self.address))
        self._stopped = threading.Event()

    def stop(self) -> None:
        """End the current run (and any later one) within POLL_S, cancelling its Ray tasks; safe
        from any thread. (A `ray.init` in progress cannot be interrupted; the probe keeps it short.)"""
        self._stopped.set()

    def run(self, tasks: list[str]) -> Generator[tuple[int, str], None, None]:
        """Yield (task index, result JSON) as tasks finish; closing the iterator, or stop(),
        cancels the rest."""
        if not tasks or self._stopped.is_set():
            return
        ray = _connect(self.address)
        pending = {}
        try:
            remote = ray.remote(num_cpus=1)(run_task)
            pending.update({remote.remote(task): index for index, task in enumerate(tasks)})
            while pending and not self._stopped.is_set():
                ready, rest = ray.wait(list(pending), num_returns=1, timeout=POLL_S)
                if ready and rest:
                    more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                    ready += more
                for ref in ready:
                    yield pending.pop(ref), _result(ray, ref)
        finally:
            for ref in pending:
                ray.cancel(ref)
            ray.shutdown()


def parse_ray_address(text: str) -> tuple[str, int]:
    """(host, port) of `HOST:PORT` or `ray://HOST:PORT` (IPv6 hosts in brackets).

    Raises:
        ConfigError: anything else (the text is quoted, cut to 200 characters).
    """
    host, _, port = text.strip().removeprefix("ray://").rpartition(":")
    if not HOST.match(host) or not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535:
        raise ConfigError(f"--address: got '{shorten(text)}'; expected HOST:PORT (e.g. 127.0.0.1:6379) or "
                          "ray://HOST:PORT, the port in 1 .. 65535")
    return host.strip("[]"), int(port)


def probe_address(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Check within `timeout_s` that a gRPC server (as a Ray cluster runs) answers at host:port.

    Raises:
        ConfigError: nothing listens there, or what listens does not speak gRPC.
    """
    deadline = time.monotonic() + timeout_s
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as connection:
            connection.sendall(HTTP2_PREFACE)
            header = _receive(connection, 9, deadline)
    except OSError as error:
        raise ConfigError(f"--address: no Ray cluster answers at {shorten(host)}:{port} "
                          f"({shorten(error.strerror or error)}); start one with `ray start --head` "
                          "or give its address") from None
    if len(header) < 9 or header[3] != 4 or header[4] & 1 or any(header[5:9]):
        raise ConfigError(f"--address: {shorten(host)}:{port} is not a Ray cluster (no gRPC answer within "
                          f"{timeout_s:g} s); give the address printed by `ray start --head`")


def _receive(connection: socket.socket, size: int, deadline: float) -> bytes:
    """Up to `size` bytes, whatever arrived by `deadline` (fewer when the peer closed or was slow)."""
    data = b""
    while len(data) < size:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        connection.settimeout(left)
        try:
            chunk = connection.recv(size - len(data))
        except TimeoutError:
            break
        if not chunk:
            break
        data += chunk
    return data


def _result(ray: ModuleType, ref: object) -> str:
    """The task's JSON answer; a task Ray lost (its worker or node died) is a failed point."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayError as error:
        return json.dumps(failed_point(f"on the Ray cluster: {type(error).__name__}: {shorten(error)}"))


def _connect(address: str) -> ModuleType:
    try:
        import ray
    except ImportError:
        raise ConfigError("backend ray: Ray is not installed; pip install -r requirements-ray.txt") from None
    try:
        ray.init(address=address, runtime_env={"py_modules": [PACKAGE_DIR]}, log_to_driver=False,
                 logging_level="WARNING")  # type: ignore[arg-type]  # ray.init takes a level name too
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise ConfigError(f"--address: cannot connect to a Ray cluster at {shorten(address)}: "
                          f"{shorten(' '.join(str(error).split()))}") from None
    return ray
