"""A Spark Connect server on loopback, started from a pyspark 4.x installation, and client sessions.

The server runs ``org.apache.spark.sql.connect.service.SparkConnectServer`` through that
installation's ``bin/spark-submit`` (the pip wheel ships the connect jar but no
``sbin/start-connect-server.sh``). Its Python workers use ``$ROWOPS_CONNECT_SERVER_PYTHON`` (default
``.venv4/bin/python``), which has rowops' dependencies but not rowops: the client ships it. The tests
run in the client's interpreter (``.venv-connect``: ``pyspark-client``, no JVM, no Py4J).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from pyspark.sql import SparkSession

from rowops.meta.fileio import s3a_conf
from tests import jvm_options
from tests.oracles.s3_server import S3Server, s3_server
from tools import s3_jars

ROOT = Path(__file__).resolve().parents[2]
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def server_python() -> Path:
    return Path(os.environ.get("ROWOPS_CONNECT_SERVER_PYTHON", ROOT / ".venv4" / "bin" / "python"))


def server_env() -> dict[str, str]:
    """The server's environment: none of the client's Python path (so its workers cannot see rowops)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK", "SPARK_"))}
    return {**env, "PYSPARK_PYTHON": str(server_python()), "SPARK_LOCAL_IP": "127.0.0.1"}


def spark_home() -> Path:
    """The pyspark 4.x installation of the server's Python."""
    code = "import os, pyspark; print(os.path.dirname(pyspark.__file__))"
    out = subprocess.run([str(server_python()), "-c", code], env=server_env(), capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"no pyspark 4.x for the Connect server at {server_python()} (make install4)")
    return Path(out.stdout.strip())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_until_listening(process: subprocess.Popen[bytes], port: int, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"Spark Connect server exited: {log.read_text()[-3000:]}")
        if "Spark Connect server started" in log.read_text(errors="replace"):
            return
        time.sleep(0.5)
    raise RuntimeError(f"Spark Connect server did not start on port {port}: {log.read_text()[-3000:]}")


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    """A moto S3 server on loopback, started before the Connect server (which gets its settings)."""
    if not s3_jars.available():
        pytest.fail(f"S3A jars are missing in {s3_jars.DEFAULT_OUT_DIR}: run `make install`")
    with s3_server() as server:
        yield server


def s3_arguments(server: S3Server) -> list[str]:
    """``spark-submit`` arguments that let the Connect server read and write the test S3 server."""
    jars = s3_jars.available() or []
    settings = {**s3_jars.LEGACY_CONNECTOR_CONF, **s3a_conf(server.options)}
    return ["--jars", ",".join(jars), *[a for k, v in settings.items() for a in ("--conf", f"{k}={v}")]]


@pytest.fixture(scope="session")
def connect_url(tmp_path_factory: pytest.TempPathFactory, s3: S3Server) -> Iterator[str]:
    if not pyspark.__version__.startswith("4."):
        pytest.skip("the Connect tests run from a pyspark 4.x client (make test-connect)")
    home, port = spark_home(), _free_port()
    work = tmp_path_factory.mktemp("connect-server")
    command = [
        str(home / "bin" / "spark-submit"),
        "--class", SERVER_CLASS,
        "--master", "local[2]",
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf", f"spark.connect.grpc.binding.port={port}",
        "--conf", "spark.driver.host=127.0.0.1",
        "--conf", "spark.driver.bindAddress=127.0.0.1",
        "--conf", "spark.driver.memory=1g",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.shuffle.partitions=4",
        "--conf", "spark.sql.session.timeZone=UTC",
        *[a for k, v in jvm_options.spark_conf().items() for a in ("--conf", f"{k}={v}")],
        *s3_arguments(s3),
    ]  # fmt: skip
    log = work / "server.log"
    env = {**server_env(), "SPARK_HOME": str(home)}
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        _wait_until_listening(process, port, log, timeout=300)
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture(scope="session")
def spark(connect_url: str) -> Iterator[SparkSession]:
    """A Spark Connect client session (overrides the classic one of ``tests/conftest.py``)."""
    session = SparkSession.builder.remote(connect_url).getOrCreate()
    yield session
    session.stop()
