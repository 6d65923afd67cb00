"""File access for everything rowops reads and writes itself, on local disks and S3 alike.

pyiceberg's ``PyArrowFileIO`` (configured with pyiceberg's property names: ``s3.endpoint``,
``s3.access-key-id``, ``s3.secret-access-key``, ``s3.session-token``, ``s3.region``...) reads and writes
metadata, manifests and footers. The few operations FileIO lacks (listing with modification times,
removing a directory) use the same pyarrow file system it resolved for the location. The lake log's
put-if-absent is not here: it is ``catalog.storage``'s job.
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pyiceberg.io as pyiceberg_io
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import PyArrowFileIO

from rowops.errors import UnknownStorageOptionError
from rowops.meta.paths import normalize_path, to_uri

PATH_STYLE = "s3.path-style-access"  # Iceberg Java's name; pyarrow's is the inverse below
_VIRTUAL_ADDRESSING = "s3.force-virtual-addressing"
SECRET_OPTIONS = frozenset({"s3.secret-access-key", "s3.session-token", "s3.access-key-id"})


def _option_names() -> frozenset[str]:
    """Every FileIO property name pyiceberg defines (``pyiceberg.io``'s constants), and Iceberg Java's
    ``s3.path-style-access`` that rowops translates."""
    names = {v for k, v in vars(pyiceberg_io).items() if k.isupper() and isinstance(v, str)}
    return frozenset(
        {n for n in names if "." in n and "/" not in n and not n.startswith("pyiceberg.")} | {PATH_STYLE}
    )


STORAGE_OPTIONS = _option_names()


def check_storage_options(options: Mapping[str, object]) -> dict[str, str]:
    """``options`` as strings; an unknown key raises ``UnknownStorageOptionError`` naming close matches.

    >>> check_storage_options({"s3.endpoint": "http://h"})
    {'s3.endpoint': 'http://h'}
    >>> check_storage_options({"s3.endpont": "http://h"})
    Traceback (most recent call last):
    ...
    rowops.errors.UnknownStorageOptionError: unknown storage option 's3.endpont'; did you mean 's3.endpoint'?
    Help: ...
    """
    checked = {str(k): str(v) for k, v in options.items()}
    for key in checked:
        if key not in STORAGE_OPTIONS:
            close = difflib.get_close_matches(key, sorted(STORAGE_OPTIONS), 1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise UnknownStorageOptionError(f"unknown storage option {key!r}{hint}")
    return checked


def make_io(options: Mapping[str, str] | None = None) -> FileIO:
    """A FileIO for a lake's files, from pyiceberg FileIO properties (``storage_options``).

    >>> make_io({"s3.path-style-access": "false"}).properties["s3.force-virtual-addressing"]
    'true'
    """
    properties = {k: str(v) for k, v in (options or {}).items()}
    style = properties.pop(PATH_STYLE, None)
    if style is not None and _VIRTUAL_ADDRESSING not in properties:
        properties[_VIRTUAL_ADDRESSING] = "false" if style.lower() == "true" else "true"
    return PyArrowFileIO(properties=properties)


def redacted(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` with credentials masked, for reprs and messages.

    >>> redacted({"s3.endpoint": "http://h", "s3.secret-access-key": "x"})
    {'s3.endpoint': 'http://h', 's3.secret-access-key': '***'}
    """
    return {k: ("***" if k in SECRET_OPTIONS else v) for k, v in options.items()}


def filesystem(io: FileIO, key: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow file system that serves ``key`` and the path of ``key`` on it."""
    if not isinstance(io, PyArrowFileIO):
        return pafs.LocalFileSystem(), normalize_path(key)
    scheme, netloc, path = PyArrowFileIO.parse_location(to_uri(key), io.properties)
    fs = io.fs_by_scheme(scheme, netloc)  # cached per scheme and bucket by pyiceberg
    return fs, path  # "bucket/key" for object stores


@dataclass(frozen=True)
class StoredFile:
    key: str
    size: int
    mtime: float  # seconds since the epoch


def list_files(io: FileIO, root: str) -> Iterator[StoredFile]:
    """Every file below ``root`` (recursively), with size and modification time."""
    fs, base = filesystem(io, root)
    prefix = root.rstrip("/")
    selector = pafs.FileSelector(base.rstrip("/"), recursive=True, allow_not_found=True)
    for info in fs.get_file_info(selector):
        if info.type == pafs.FileType.File:
            relative = info.path[len(base.rstrip("/")) :].lstrip("/")
            mtime = info.mtime.timestamp() if info.mtime is not None else 0.0
            yield StoredFile(f"{prefix}/{relative}", int(info.size or 0), mtime)


def has_entries(io: FileIO, root: str) -> bool:
    """Whether anything is stored below ``root`` (one listing of its top level, not recursive)."""
    fs, base = filesystem(io, root)
    selector = pafs.FileSelector(base.rstrip("/"), recursive=False, allow_not_found=True)
    return bool(fs.get_file_info(selector))


def remove_tree(io: FileIO, root: str) -> None:
    """Remove ``root`` and everything below it (no error if it is absent)."""
    fs, path = filesystem(io, root)
    with contextlib.suppress(FileNotFoundError):
        fs.delete_dir(path)


def remove_empty_dir(io: FileIO, directory: str) -> None:
    """Remove ``directory`` if it is an empty local directory (object stores have no directories)."""
    fs, path = filesystem(io, directory)
    if isinstance(fs, pafs.LocalFileSystem):
        with contextlib.suppress(OSError):
            if not fs.get_file_info(pafs.FileSelector(path)):
                fs.delete_dir(path)


def read_footer(io: FileIO, key: str) -> tuple[pq.FileMetaData, int]:
    """The Parquet footer of the file at ``key`` and the file's size in bytes."""
    source = io.new_input(to_uri(key))
    size = len(source)
    with source.open() as stream:
        return pq.read_metadata(stream), size


def s3a_conf(options: Mapping[str, str]) -> dict[str, str]:
    """Spark settings (``spark.hadoop.fs.s3a.*``) that match pyiceberg FileIO ``options``.

    >>> sorted(s3a_conf({"s3.endpoint": "http://127.0.0.1:9000", "s3.path-style-access": "true"}).items())
    [('spark.hadoop.fs.s3a.connection.ssl.enabled', 'false'), ('spark.hadoop.fs.s3a.endpoint', 'http://127.0.0.1:9000'), ('spark.hadoop.fs.s3a.path.style.access', 'true')]
    """
    names = {
        "s3.endpoint": "endpoint",
        "s3.access-key-id": "access.key",
        "s3.secret-access-key": "secret.key",
        "s3.session-token": "session.token",
        "s3.region": "endpoint.region",
        PATH_STYLE: "path.style.access",
    }
    conf = {f"spark.hadoop.fs.s3a.{names[k]}": str(v) for k, v in options.items() if k in names}
    endpoint = options.get("s3.endpoint", "")
    if endpoint.startswith("http://"):
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = "false"
    if "s3.session-token" in options:
        provider = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        conf["spark.hadoop.fs.s3a.aws.credentials.provider"] = provider
    return conf
