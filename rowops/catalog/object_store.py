"""The lake log's :class:`~rowops.catalog.storage.Storage` on S3-compatible object storage.

Reads, listings, deletes and hint overwrites go through pyarrow's ``S3FileSystem`` (the one pyiceberg's
FileIO resolves for the bucket). Put-if-absent is the one thing pyarrow lacks: it is a boto3
``PutObject`` with ``If-None-Match: *``, which S3 (since 2024), MinIO and moto answer with ``412
Precondition Failed`` when the key exists. A check-then-write (``exists`` then ``create``) is not a
substitute: two writers can both pass the check.

Outcomes of a put, as the log needs them:

* 200: created.
* 412: the key exists (:class:`AlreadyExists`); it may be this writer's own object if botocore retried a
  request whose first response was lost: the log reads the version back and compares transaction ids.
* 409 ``ConditionalRequestConflict`` (a concurrent conditional write on the key): retried here.
* other 4xx (access denied, no such bucket): certainly not created (``OSError``).
* 5xx, timeouts, connection errors after the request was sent: :class:`OutcomeUnknown`.

A store that ignores ``If-None-Match: *`` (older MinIO, some Ceph releases) answers 200 to both puts of
two racing writers, and the later silently replaces the earlier's lake version. Opening a lake on S3
therefore probes once per process and lake root (:func:`check_put_if_absent`): a put-if-absent of one
fresh probe key twice; a second put that is not refused makes the open fail with
``PutIfAbsentUnsupportedError``. The probe key is deleted either way.
"""

from __future__ import annotations

import builtins
import contextlib
import threading
import time
import uuid
from collections.abc import Mapping

import boto3
import botocore.config
import botocore.exceptions
from pyiceberg.io import FileIO

from rowops.catalog.storage import AlreadyExists, OutcomeUnknown, Storage
from rowops.errors import PutIfAbsentUnsupportedError, StorageAccessError
from rowops.meta.fileio import filesystem, list_files
from rowops.meta.paths import join

_CONFLICT_RETRIES = 20
_READ_ATTEMPTS = 5
PROBE_PREFIX = "_rowops/probe/"
_probed: set[str] = set()  # lake roots whose store refused a second put-if-absent, this process
_probe_lock = threading.Lock()


def _client_options(options: Mapping[str, str]) -> dict[str, object]:
    """boto3 client arguments from pyiceberg FileIO properties."""
    path_style = options.get("s3.path-style-access", "").lower() == "true" or (
        options.get("s3.force-virtual-addressing", "").lower() == "false"
    )
    config = botocore.config.Config(
        s3={"addressing_style": "path" if path_style else "auto"},
        retries={"max_attempts": 5, "mode": "standard"},
        connect_timeout=float(options.get("s3.connect-timeout", 10)),
        read_timeout=float(options.get("s3.request-timeout", 60)),
    )
    return {
        "endpoint_url": options.get("s3.endpoint"),
        "aws_access_key_id": options.get("s3.access-key-id"),
        "aws_secret_access_key": options.get("s3.secret-access-key"),
        "aws_session_token": options.get("s3.session-token"),
        "region_name": options.get("s3.region"),
        "config": config,
    }


class S3Storage:
    """:class:`~rowops.catalog.storage.Storage` below ``s3://bucket/prefix``.

    Args:
        root: the lake's ``s3://bucket/prefix``.
        io: the lake's FileIO (its pyarrow file system serves reads and listings).
        options: pyiceberg FileIO properties (endpoint, credentials, region, addressing style).
    """

    durable = True  # a successful PUT is durable

    def __init__(self, root: str, io: FileIO, options: Mapping[str, str]) -> None:
        self.root = root.rstrip("/")
        self.io = io
        self.bucket, _, self.prefix = self.root[len("s3://") :].partition("/")
        self._client = boto3.session.Session().client("s3", **_client_options(options))

    def __repr__(self) -> str:
        return f"S3Storage({self.root!r})"

    def check_access(self) -> None:
        """Raise :class:`StorageAccessError` unless the bucket exists and the credentials may use it."""
        try:
            self._client.head_bucket(Bucket=self.bucket)
        except botocore.exceptions.ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "?")
            reason = {404: "does not exist", 403: "refuses these credentials"}.get(
                status, f"answered {status}"
            )
            raise StorageAccessError(f"Bucket {self.bucket!r} of lake {self.root} {reason}") from None
        except botocore.exceptions.BotoCoreError as exc:
            raise StorageAccessError(f"The storage of lake {self.root} cannot be reached: {exc}") from None

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def put_if_absent(self, key: str, data: bytes) -> None:
        for attempt in range(_CONFLICT_RETRIES):
            try:
                self._client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, IfNoneMatch="*")
                return
            except botocore.exceptions.ClientError as exc:
                status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
                code = exc.response.get("Error", {}).get("Code", "")
                if status == 412 or code == "PreconditionFailed":
                    raise AlreadyExists(join(self.root, key)) from None
                if status == 409:  # a concurrent conditional write on the same key: try again
                    time.sleep(min(0.05 * 2**attempt, 1.0))
                    continue
                if 400 <= status < 500:
                    raise OSError(f"PUT {join(self.root, key)} was refused ({code}): {exc}") from exc
                raise OutcomeUnknown(f"PUT {join(self.root, key)} failed ({status} {code}): {exc}") from exc
            except botocore.exceptions.BotoCoreError as exc:
                if isinstance(
                    exc, botocore.exceptions.NoCredentialsError | botocore.exceptions.ParamValidationError
                ):
                    raise OSError(f"PUT {join(self.root, key)} could not be sent: {exc}") from exc
                raise OutcomeUnknown(f"PUT {join(self.root, key)} did not complete: {exc}") from exc
        raise OSError(f"PUT {join(self.root, key)} kept conflicting with concurrent writes")

    def read(self, key: str) -> bytes:
        """The object's bytes. A GET is idempotent, so one that breaks off mid-stream (a 5xx or a reset
        connection, which pyarrow's request retries do not cover once the body is streaming) is sent
        again, up to :data:`_READ_ATTEMPTS` times; a missing key raises ``FileNotFoundError`` at once."""
        fs, path = filesystem(self.io, join(self.root, key))
        for attempt in range(1, _READ_ATTEMPTS + 1):
            try:
                with fs.open_input_stream(path) as stream:
                    return bytes(stream.read())
            except FileNotFoundError:
                raise
            except OSError:
                if attempt == _READ_ATTEMPTS:
                    raise
                time.sleep(min(0.05 * 2**attempt, 1.0))
        raise AssertionError("unreachable")

    def list(self, prefix: str) -> builtins.list[str]:
        base, _, _ = prefix.rpartition("/")
        start = join(self.root, base) if base else self.root
        found = [f.key[len(self.root) + 1 :] for f in list_files(self.io, start)]
        return sorted(k for k in found if k.startswith(prefix))

    def delete(self, key: str) -> None:
        fs, path = filesystem(self.io, join(self.root, key))
        with contextlib.suppress(FileNotFoundError):
            fs.delete_file(path)

    def make_durable(self, key: str) -> None:
        """Nothing to do: an object is durable once its PUT succeeded."""

    def put(self, key: str, data: bytes) -> None:
        fs, path = filesystem(self.io, join(self.root, key))
        with fs.open_output_stream(path) as out:
            out.write(data)


def check_put_if_absent(storage: Storage, root: str) -> None:
    """Refuse a store on which put-if-absent does not refuse an existing key (probed once per process
    and ``root``): two writers could both commit the same lake version.

    Raises:
        PutIfAbsentUnsupportedError: the second put of the probe key was accepted.
    """
    with _probe_lock:
        if root in _probed:
            return
        key = f"{PROBE_PREFIX}{uuid.uuid4().hex}"
        try:
            storage.put_if_absent(key, b"first")
            try:
                storage.put_if_absent(key, b"second")
            except AlreadyExists:
                _probed.add(root)
                return
        finally:
            with contextlib.suppress(OSError):
                storage.delete(key)
    raise PutIfAbsentUnsupportedError(
        f"The storage of lake {root} accepted a second conditional put of an existing key "
        "(If-None-Match: * was ignored): concurrent writers could overwrite each other's lake versions"
    )
