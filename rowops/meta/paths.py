"""The one place that maps between path forms: manifests, Spark, pyarrow and the lake's keys.

A lake lives on a local file system or on S3-compatible object storage.

* Keys: a file is identified by one form (``LiveFile.path``), whatever form its manifest uses, so
  every comparison between files uses one form: the plain local path for local files, ``s3://`` URIs
  for object storage (``s3a://`` and ``s3n://`` are the same objects).
* Manifests: rowops writes full URIs: ``file:/lake/t/data/x.parquet`` (as Iceberg Java does for local
  tables) and ``s3://bucket/lake/t/data/x.parquet``. Other writers record ``file:///x`` (PyIceberg),
  ``file:/x``, a plain ``/x`` or ``s3a://``; all are read.
* Spark and Hadoop: rowops hands Spark ``file:`` and ``s3a:`` URIs, never scheme-less paths, so a
  session whose ``fs.defaultFS`` is not ``file:`` still reads and writes the lake's files.

>>> normalize_path("file:///lake/t/a.parquet")
'/lake/t/a.parquet'
>>> normalize_path("file:/lake/t/a.parquet"), normalize_path("file://localhost/lake/t/a.parquet")
('/lake/t/a.parquet', '/lake/t/a.parquet')
>>> normalize_path("s3a://bucket/lake/t/a.parquet")
's3://bucket/lake/t/a.parquet'
>>> to_uri("/lake/t/a b.parquet"), to_uri("s3://bucket/t/a.parquet")
('file:/lake/t/a b.parquet', 's3://bucket/t/a.parquet')
>>> spark_uri("/lake/t"), spark_uri("s3://bucket/t")
('file:/lake/t', 's3a://bucket/t')
>>> lake_location("s3a://bucket/lake/"), lake_location("file:///lake/")
('s3://bucket/lake', '/lake')
>>> join("s3://bucket/lake", "db", "t"), relative("s3://bucket/lake/db/t", "s3://bucket/lake")
('s3://bucket/lake/db/t', 'db/t')
>>> lake_location("gs://b/l")
Traceback (most recent call last):
...
rowops.errors.UnsupportedStorageError: 'gs://b/l' is on gs storage, which rowops cannot serve yet
Help: rowops serves lakes on local (or shared POSIX) file systems and S3-compatible object storage: use a local directory, a file: URI or an s3:// URI.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote

from rowops.errors import UnsupportedStorageError

_FILE_SCHEME = re.compile(r"^file:(//(localhost)?)?(?=/)")
_S3_SCHEME = re.compile(r"^s3[an]?:/+", re.IGNORECASE)  # also s3:/b (what pathlib makes of s3://b)
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:/")  # s3://b, also s3:/b (what pathlib makes of it)
S3_SCHEMES = ("s3", "s3a", "s3n")


def normalize_path(path: str) -> str:
    """The key form of a file: its local path without ``file:`` scheme, ``s3://`` for S3 objects."""
    return _S3_SCHEME.sub("s3://", _FILE_SCHEME.sub("", path))


def to_uri(path: str) -> str:
    """The manifest form of a file: ``file:`` + the absolute local path, or its ``s3://`` URI."""
    key = normalize_path(path)
    return key if is_remote(key) else "file:" + key


def spark_uri(path: str) -> str:
    """The form Spark and Hadoop are given: ``file:`` + the local path, ``s3a://`` for S3 objects."""
    key = normalize_path(path)
    return "s3a://" + key[len("s3://") :] if key.startswith("s3://") else to_uri(key)


def from_hadoop_uri(uri: str) -> str:
    """The key of a URL-encoded URI as Hadoop and Spark list files (``file:///a%20b``, ``s3a://b/k``)."""
    return normalize_path(unquote(uri)) if uri.startswith("file:") or _S3_SCHEME.match(uri) else uri


def scheme(location: str) -> str | None:
    """The URI scheme of ``location`` (``s3``, ``file``), or None for a plain path."""
    match = _SCHEME.match(location)
    return match.group(1).lower() if match and _URI.match(location) else None


def is_remote(key: str) -> bool:
    """Whether a key names an object in object storage (not a local file)."""
    return key.startswith("s3://")


def lake_location(location: str) -> str:
    """The key form of a lake (or table) root: an absolute local path or ``s3://bucket/prefix``.

    Raises:
        UnsupportedStorageError: a scheme rowops cannot serve (``gs``, ``abfs``, ``hdfs``...).
    """
    kind = scheme(location)
    if kind in S3_SCHEMES:
        key = normalize_path(location).rstrip("/")
        if not key[len("s3://") :]:
            raise UnsupportedStorageError(f"{location!r} names no bucket")
        return key
    if kind is not None and kind != "file":
        raise UnsupportedStorageError(f"{location!r} is on {kind} storage, which rowops cannot serve yet")
    local = normalize_path(location)
    if kind == "file" and local == location:
        raise UnsupportedStorageError(f"{location!r} is a file: URI with a host, which rowops cannot serve")
    return os.path.abspath(local)


def local_path(location: str) -> Path | None:
    """The local file system path of a location (plain or ``file:`` URI); None for other schemes.

    >>> local_path("file:///lake/t/a.parquet"), local_path("/lake/t/a.parquet"), local_path("s3://b/k")
    (PosixPath('/lake/t/a.parquet'), PosixPath('/lake/t/a.parquet'), None)
    """
    plain = normalize_path(location)
    return Path(plain) if plain.startswith("/") else None


def join(root: str, *parts: str) -> str:
    """``root/part/...`` for keys of either kind (no ``os.path``: S3 keys are not paths)."""
    return "/".join([root.rstrip("/"), *parts])


def relative(key: str, root: str) -> str:
    """``key`` relative to ``root`` (``key`` must be below it)."""
    prefix = root.rstrip("/") + "/"
    if not key.startswith(prefix):
        raise ValueError(f"{key!r} is not below {root!r}")
    return key[len(prefix) :]


def parent(key: str) -> str:
    """The directory (or key prefix) holding ``key``."""
    return key.rsplit("/", 1)[0]
