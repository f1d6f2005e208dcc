"""A real ``mlflow server`` for tests: SQLite backend, proxied artifacts, a free loopback port, its own
process group, a bounded wait for ``/health``, and everything stopped on exit (even when a test fails).

    with MlflowServer(tmp_path) as server:
        mlflow.set_tracking_uri(server.url)
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


class MlflowServer:
    """A real ``mlflow server`` (SQLite backend, proxied artifacts) in ``folder`` on a free loopback port, in its
    own process group; waits (bounded, 90 s) for ``/health``; on exit SIGTERM, then SIGKILL after 3 s, to the whole
    group (the server, uvicorn, the job runner: a test server's stop need not wait for a graceful one). ``url`` once
    entered; its output in ``folder/server.log``."""

    def __init__(self, folder: str | Path, startup_seconds: float = 90.0):
        self.folder, self.startup_seconds = Path(folder), startup_seconds

    def __enter__(self) -> MlflowServer:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self._log = open(self.folder / "server.log", "wb")
        command = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
                   "--workers", "1", "--backend-store-uri", f"sqlite:///{self.folder / 'server.db'}",
                   "--artifacts-destination", str(self.folder / "artifacts")]
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
                                        env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true",
                                             # offline, litellm's background fetch of its price map can
                                             # deadlock the server's import of litellm; use the bundled map
                                             "LITELLM_LOCAL_MODEL_COST_MAP": "true"})
        deadline = time.monotonic() + self.startup_seconds
        while True:
            if self.process.poll() is not None:
                self.__exit__()
                raise RuntimeError(f"mlflow server exited with {self.process.returncode}:\n{self.log_text()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError(f"mlflow server not healthy after {self.startup_seconds:g} s:\n{self.log_text()}")
            time.sleep(0.5)

    def log_text(self) -> str:
        return (self.folder / "server.log").read_text(errors="replace")[-5000:]

    def __exit__(self, *exc: Any) -> None:
        for sig, wait in ((signal.SIGTERM, 3), (signal.SIGKILL, 5)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and _group_alive(self.process.pid):
                self.process.poll()
                time.sleep(0.2)
        self.process.wait(timeout=5)
        self._log.close()
