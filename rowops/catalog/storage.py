"""The storage primitives the catalog relies on: put-if-absent of a complete file, and durability.

Local disks: the content is written to a private temporary file and fsync-ed, then ``os.link``-ed to
its final name and the directory fsync-ed. ``link`` fails with ``EEXIST`` if the name is taken, and
a reader never sees a partial file. On object stores the same contract is ``PUT`` with
``If-None-Match: *``; on HDFS, rename.

Failures are told apart by when they happen, because that decides what a caller may clean up:

* before the link is attempted (writing the temporary file): nothing landed, plain ``OSError``;
* the link reports the name taken: :class:`AlreadyExists` (the caller checks whose version it is:
  a retried link on a network file system can report the caller's own success as ``EEXIST``);
* anything else from the link on (the link itself, the directory fsync): :class:`OutcomeUnknown`.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rowops import faults
from rowops.meta.paths import normalize_path


class AlreadyExists(Exception):
    """Raised by :func:`put_if_absent` when the name is taken."""


class OutcomeUnknown(Exception):
    """The link was attempted but did not report success: the file may or may not be there."""


def put_if_absent(path: Path, content: bytes) -> None:
    """Create ``path`` with ``content`` atomically and durably, or raise :class:`AlreadyExists`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        with open(tmp, "wb") as out:
            out.write(content)
            out.flush()
            os.fsync(out.fileno())
        try:
            _link(tmp, path)
        except FileExistsError:
            raise AlreadyExists(str(path)) from None
        except OSError as exc:
            raise OutcomeUnknown(f"linking {path} failed: {exc}") from exc
        try:
            faults.check_os("commit-unknown")
            fsync_dir(path.parent)
        except OSError as exc:
            raise OutcomeUnknown(f"{path} was linked but its directory could not be synced: {exc}") from exc
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def _link(tmp: Path, path: Path) -> None:
    os.link(tmp, path)


def write_hint(path: Path, content: bytes) -> None:
    """Best-effort overwrite of a hint file (atomic replace; losing a race is harmless)."""
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    tmp.write_bytes(content)
    os.replace(tmp, path)


def fsync_dir(directory: Path) -> None:
    """Make the entries of ``directory`` (a new name linked into it) durable."""
    _fsync(directory)


def local_path(location: str) -> Path | None:
    """The local file system path of a location (plain or ``file:`` URI); None for other schemes.

    >>> local_path("file:///lake/t/a.parquet"), local_path("/lake/t/a.parquet"), local_path("s3://b/k")
    (PosixPath('/lake/t/a.parquet'), PosixPath('/lake/t/a.parquet'), None)
    """
    plain = normalize_path(location)
    return Path(plain) if plain.startswith("/") else None


def sync_files(locations: Iterable[str]) -> None:
    """fsync local files (and their directories) before a commit references them.

    Spark's and pyiceberg's local writers close files without fsync; a version that points at data
    still in the page cache could reference lost bytes after a power failure. Object stores are
    durable on PUT, so other schemes are skipped.
    """
    paths = [p for p in (local_path(loc) for loc in locations) if p is not None]
    if not paths:
        return
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(_fsync, paths))
        list(pool.map(fsync_dir, sorted({p.parent for p in paths})))


def _fsync(path: Path) -> None:
    """fsync a file or a directory (opened read-only, which is enough on Linux)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
