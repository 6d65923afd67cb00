"""The one place that maps between path forms: manifests, Spark and the local file system.

* Manifests: rowops writes full URIs ``file:/lake/t/data/x.parquet`` (as Iceberg Java does for local
  tables). Other writers record ``file:///x`` (PyIceberg), ``file:/x`` or a plain ``/x``; all are read.
* Keys: a file is identified by its plain local path (``LiveFile.path``), whatever form its manifest
  uses, so every comparison between files uses one form.
* Spark and Hadoop: rowops hands Spark ``file:`` URIs, never scheme-less paths, so a session whose
  ``fs.defaultFS`` is not ``file:`` still reads and writes the lake's files.

>>> normalize_path("file:///lake/t/a.parquet")
'/lake/t/a.parquet'
>>> normalize_path("file:/lake/t/a.parquet")
'/lake/t/a.parquet'
>>> normalize_path("file://localhost/lake/t/a.parquet")
'/lake/t/a.parquet'
>>> normalize_path("/lake/t/a.parquet")
'/lake/t/a.parquet'
>>> to_uri("/lake/t/a b.parquet")
'file:/lake/t/a b.parquet'
>>> local_path("file:///lake")
'/lake'
>>> local_path("s3://bucket/lake")
Traceback (most recent call last):
...
rowops.errors.UnsupportedStorageError: 's3://bucket/lake' is on s3 storage, which rowops cannot serve yet
Help: rowops works on local file systems only for now (object storage is not supported yet): use a local directory or a file: URI.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from rowops.errors import UnsupportedStorageError

_FILE_SCHEME = re.compile(r"^file:(//(localhost)?)?(?=/)")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:/")  # s3://b, also s3:/b (what pathlib makes of it)


def normalize_path(path: str) -> str:
    """The key form of a file: its local path without ``file:`` scheme; other schemes are kept."""
    return _FILE_SCHEME.sub("", path)


def to_uri(path: str) -> str:
    """The manifest (and Spark) form of a local path: ``file:`` + the absolute path."""
    return "file:" + normalize_path(path)


def from_hadoop_uri(uri: str) -> str:
    """The local path of a URL-encoded URI as Hadoop and Spark list files (``file:///a%20b``)."""
    return normalize_path(unquote(uri)) if uri.startswith("file:") else uri


def scheme(location: str) -> str | None:
    """The URI scheme of ``location`` (``s3``, ``file``), or None for a plain path."""
    match = _SCHEME.match(location)
    return match.group(1).lower() if match and _URI.match(location) else None


def local_path(location: str) -> str:
    """The local path of a plain path or ``file:`` URI; any other scheme is an error (not served yet)."""
    kind = scheme(location)
    if kind is None:
        return location
    local = normalize_path(location)
    if kind != "file" or local == location:
        raise UnsupportedStorageError(f"{location!r} is on {kind} storage, which rowops cannot serve yet")
    return local
