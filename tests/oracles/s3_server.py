"""A real S3-compatible server on loopback for tests: ``moto[server]`` in its own process.

moto honours ``If-None-Match: *`` on ``PutObject`` (412 when the key exists), which the lake log's
put-if-absent relies on. Spark reaches it through Hadoop's S3A connector (test-only jars from
``tools/s3_jars.py``), DuckDB through its ``httpfs`` extension, PyIceberg and rowops through pyarrow.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import boto3

ACCESS_KEY, SECRET_KEY, REGION = "rowops-test-key", "rowops-test-secret", "us-east-1"


@dataclass(frozen=True)
class S3Server:
    endpoint: str

    @property
    def options(self) -> dict[str, str]:
        """pyiceberg FileIO properties (rowops' ``storage_options``) for this server."""
        return {
            "s3.endpoint": self.endpoint,
            "s3.access-key-id": ACCESS_KEY,
            "s3.secret-access-key": SECRET_KEY,
            "s3.region": REGION,
            "s3.path-style-access": "true",
        }

    def client(self):  # type: ignore[no-untyped-def]
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def new_bucket(self) -> str:
        """A fresh, empty bucket."""
        name = f"rowops-{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str) -> dict[str, str]:
        """Every key of ``bucket`` with its ETag (content hash): proves 'nothing changed'."""
        found: dict[str, str] = {}
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for page in pages:
            for item in page.get("Contents", []):
                found[item["Key"]] = item["ETag"]
        return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def s3_server() -> Iterator[S3Server]:
    """Start ``python -m moto.server`` on a free loopback port; stop it on exit."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not start on port {port}") from None
                time.sleep(0.1)
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(10)
        if process.poll() is None:
            process.kill()
