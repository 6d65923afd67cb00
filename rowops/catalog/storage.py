"""The storage primitives the catalog relies on: put-if-absent of a complete file, and durability.

The lake log talks to storage only through :class:`Storage` (keys relative to the lake root, such as
``_rowops/log/00000000000000000001.json``), so an object-store implementation (``PUT`` with
``If-None-Match: *``, ``GET``, ``LIST``, ``DELETE``) can be added without touching the protocol.
:class:`LocalStorage` is the default.

Local disks: the content is written to a private temporary file and fsync-ed, then ``os.link``-ed to
its final name and the directory fsync-ed. ``link`` fails with ``EEXIST`` if the name is taken, and
a reader never sees a partial file. On object stores the same contract is ``PUT`` with
``If-None-Match: *``; on HDFS, rename.

Failures are told apart by when they happen, because that decides what a caller may clean up:

* before the link is attempted (writing the temporary file): nothing landed, plain ``OSError``;
* the link reports the name taken: :class:`AlreadyExists` (the caller checks whose version it is:
  a retried link on a network file system can report the caller's own success as ``EEXIST``);
* anything else from the link on (the link itself, the directory fsync): :class:`OutcomeUnknown`.

Directories: a file is durable only if the name of every directory above it is, so a directory is
fsync-ed into its parent before any version may reference what is below it — whether this process
created it or found it existing (a writer that crashed between ``mkdir`` and its parent's fsync leaves
a directory that looks durable and is not). :func:`sync_into_parents` does this once per directory and
process. A trie node or version found already existing (another writer's, who may have died before
its directory sync) is made durable the same way (:meth:`LocalStorage.make_durable`) before a version
builds on it.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import threading
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from rowops.meta.paths import local_path


class AlreadyExists(Exception):
    """Raised by :func:`put_if_absent` when the name is taken."""


class OutcomeUnknown(Exception):
    """The link was attempted but did not report success: the file may or may not be there."""


class Storage(Protocol):
    """The four operations the lake log needs, on keys relative to the lake root ("a/b/c.json").

    ``put`` (an unconditional overwrite) is used only for best-effort hints that readers verify.
    """

    def put_if_absent(self, key: str, data: bytes) -> None:
        """Create ``key`` with ``data`` atomically and durably.

        Raises:
            AlreadyExists: the key exists (another writer's, or this writer's retried request).
            OutcomeUnknown: the request was sent but did not report success: the key may exist.
            OSError: the request certainly did not create the key.
        """
        ...

    def read(self, key: str) -> bytes:
        """The content of ``key``; ``FileNotFoundError`` if absent."""
        ...

    def list(self, prefix: str) -> builtins.list[str]:
        """Every key starting with ``prefix``, sorted."""
        ...

    def delete(self, key: str) -> None:
        """Remove ``key`` (no error if it is absent)."""
        ...

    def put(self, key: str, data: bytes) -> None:
        """Overwrite ``key`` atomically, not durably (hints only)."""
        ...

    def make_durable(self, key: str) -> None:
        """Make an existing ``key`` written by someone else (who may have crashed before syncing) durable."""
        ...


class LocalStorage:
    """:class:`Storage` on a local (or POSIX network) file system below ``root``.

    ``durable=False`` skips every fsync: a crash may then lose or truncate recently written keys. It
    exists only to build very large benchmark logs quickly; never use it for a real lake.
    """

    def __init__(self, root: Path, durable: bool = True) -> None:
        self.root = root
        self.durable = durable

    def _path(self, key: str) -> Path:
        return self.root / key

    def put_if_absent(self, key: str, data: bytes) -> None:
        put_if_absent(self._path(key), data, durable=self.durable, root=self.root)

    def make_durable(self, key: str) -> None:
        if self.durable:
            path = self._path(key)
            _fsync(path)
            fsync_dir(path.parent)
            sync_into_parents(path.parent, self.root)

    def read(self, key: str) -> bytes:
        return self._path(key).read_bytes()

    def list(self, prefix: str) -> builtins.list[str]:
        base, _, _ = prefix.rpartition("/")
        start = self._path(base) if base else self.root
        found: builtins.list[str] = []
        _walk(start, base + "/" if base else "", found)
        return sorted(k for k in found if k.startswith(prefix))

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_hint(path, data)


def _walk(directory: Path, prefix: str, out: list[str]) -> None:
    """Append the keys of files below ``directory`` (skipping in-flight ``.*.tmp`` files)."""
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            _walk(Path(entry.path), f"{prefix}{entry.name}/", out)
        elif not (entry.name.startswith(".") and entry.name.endswith(".tmp")):
            out.append(prefix + entry.name)


def put_if_absent(path: Path, content: bytes, durable: bool = True, root: Path | None = None) -> None:
    """Create ``path`` with ``content`` atomically and durably, or raise :class:`AlreadyExists`.

    ``durable=False`` skips the fsyncs (benchmark builds only, see :class:`LocalStorage`). Its
    directories up to ``root`` (exclusive; None: the file system's root) are synced into their parents.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if durable:
        sync_into_parents(path.parent, root)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        with open(tmp, "wb") as out:
            out.write(content)
            if durable:
                out.flush()
                os.fsync(out.fileno())
        try:
            _link(tmp, path)
        except FileExistsError:
            raise AlreadyExists(str(path)) from None
        except OSError as exc:
            raise OutcomeUnknown(f"linking {path} failed: {exc}") from exc
        try:
            if durable:
                fsync_dir(path.parent)
        except OSError as exc:
            raise OutcomeUnknown(f"{path} was linked but its directory could not be synced: {exc}") from exc
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


_synced: set[tuple[str, int, int]] = set()  # (path, device, inode) of directories synced into their parent
_synced_lock = threading.Lock()


def sync_into_parents(directory: Path, root: Path | None = None) -> None:
    """fsync the parent of ``directory`` and of each ancestor below ``root``, so that their names are
    durable; each directory once per process (a directory another process created is synced too).
    Ancestors this process may not open (a parent of the lake without read permission) end the walk."""
    chain: list[tuple[Path, tuple[str, int, int]]] = []
    current = directory
    while current != current.parent and current != root:
        info = os.stat(current)
        key = (str(current), info.st_dev, info.st_ino)
        if key in _synced:
            break
        chain.append((current, key))
        current = current.parent
    for directory_, key in reversed(chain):  # the top first: each name durable before those below
        try:
            fsync_dir(directory_.parent)
        except PermissionError:
            if root is not None:  # below the lake root: a real failure
                raise
            continue  # possibly above the lake: not ours to sync
        with _synced_lock:
            _synced.add(key)


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


def sync_files(locations: Iterable[str]) -> None:
    """fsync local files, their directories, and each new directory into its parent (the staging
    folder, ``data-N/``, partition folders, a new table's folders) before a commit references them.

    Spark's and pyiceberg's local writers close files without fsync and create directories without
    syncing their names; a version that points at data still in the page cache could reference lost
    bytes after a power failure. Object stores are durable on PUT, so other schemes are skipped.
    """
    paths = [p for p in (local_path(loc) for loc in locations) if p is not None]
    if not paths:
        return
    directories = sorted({p.parent for p in paths})
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(_fsync, paths))
        list(pool.map(fsync_dir, directories))
    for directory in directories:
        sync_into_parents(directory)


def _fsync(path: Path) -> None:
    """fsync a file or a directory (opened read-only, which is enough on Linux)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
