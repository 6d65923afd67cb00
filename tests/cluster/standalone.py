"""A Spark standalone cluster on loopback, started from the pyspark installation (``bin/spark-class``).

Master and workers are separate JVMs, each in its own process group (stopped with ``killpg``); a
worker's executors and their Python workers are its children, so they go with it. Workers run with a
clean environment (no ``PYTHONPATH``) in their own directory, and may be wrapped in a command prefix
(``unshare -rm sh -c 'mount … && exec "$@"'``) that gives them a private view of the file system.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from pyspark.find_spark_home import _find_spark_home

SPARK_HOME = Path(_find_spark_home())
# The daemons themselves need little: executors get their own JVMs and memory.
DAEMON_ENV = {"SPARK_DAEMON_MEMORY": "256m", "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": str(SPARK_HOME)}
DROPPED_ENV = ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_CONF_DIR", "ROWOPS_CONF")


def free_port() -> int:
    """A TCP port on loopback that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def daemon_env() -> dict[str, str]:
    """The environment of master and workers: the caller's, without anything pointing at rowops."""
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    return {**env, **DAEMON_ENV}


class StandaloneCluster:
    """One master and its workers under ``root`` (logs, work directories).

    Args:
        root: a directory of this cluster's own (logs and the workers' work directories).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.web_port = free_port()
        self.processes: list[subprocess.Popen[bytes]] = []
        self.workers = 0

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _spawn(self, name: str, command: Sequence[str]) -> None:
        log = (self.root / f"{name}.log").open("wb")
        process = subprocess.Popen(
            list(command), cwd=self.root, env=daemon_env(), stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        log.close()
        self.processes.append(process)

    def start_master(self) -> None:
        master = "org.apache.spark.deploy.master.Master"
        ports = ["--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.web_port)]
        self._spawn("master", [str(SPARK_HOME / "bin" / "spark-class"), master, *ports])

    def start_worker(self, prefix: Sequence[str] = (), memory: str = "1g") -> None:
        """A worker with one core; ``prefix`` is prepended to its command (e.g. an ``unshare`` wrapper)."""
        self.workers += 1
        work = self.root / f"worker-{self.workers}"
        work.mkdir()
        worker = [
            str(SPARK_HOME / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker", self.url,
            "--cores", "1", "--memory", memory, "--host", "127.0.0.1",
            "--webui-port", str(free_port()), "--work-dir", str(work),
        ]  # fmt: skip
        self._spawn(f"worker-{self.workers}", [*prefix, *worker])

    def state(self) -> dict[str, object]:
        """The master's JSON status page."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}/json", timeout=5) as page:
            return dict(json.load(page))

    def wait_for_workers(self, timeout: float = 180.0) -> None:
        """Wait until every started worker is registered and alive (or one of the daemons died)."""
        deadline = time.monotonic() + timeout
        while True:
            dead = [p.args for p in self.processes if p.poll() is not None]
            if dead:
                raise RuntimeError(f"cluster daemon exited: {dead}\n{self.logs()}")
            try:
                alive = int(str(self.state().get("aliveworkers", 0)))
            except OSError:
                alive = 0
            if alive >= self.workers:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{alive} of {self.workers} workers registered\n{self.logs()}")
            time.sleep(0.5)

    def logs(self, tail: int = 3000) -> str:
        """The end of every daemon's log, for failure messages."""
        return "\n".join(
            f"== {p.name}\n{p.read_text(errors='replace')[-tail:]}" for p in self.root.glob("*.log")
        )

    def stop(self) -> None:
        """Stop every daemon's process group: TERM, then KILL whatever is left after a grace period."""
        for process in reversed(self.processes):
            _signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
        for process in self.processes:
            _signal_group(process, signal.SIGKILL)
            process.wait()
        self.processes.clear()


def _signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


def isolated_python(root: Path) -> Path:
    """A virtualenv for executors that sees the driver's packages but not rowops.

    The driver's venv has rowops installed in editable mode (an ``__editable__`` ``.pth`` hook that maps
    ``rowops`` to the source checkout). This venv lists the driver's ``site-packages`` in a ``.pth`` file
    as a plain path: its packages are importable, but the ``.pth`` hooks inside it are never run (site
    only processes ``.pth`` files of its own site directories), so ``import rowops`` fails unless Spark
    ships it.
    """
    venv = root / "executor-venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    driver_site = [p for p in sys.path if p.endswith("site-packages") and Path(p, "pyspark").is_dir()]
    (site / "driver-packages.pth").write_text("\n".join(driver_site) + "\n")
    return venv / "bin" / "python"
