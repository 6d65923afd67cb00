"""Removing the files of aborted and crashed transactions; committed state is never touched.

A file is kept when any lake version references it, through the table metadata it points at: the
metadata file itself, the metadata files in its log, every snapshot's manifest list, manifests and
the data and delete files they list. Everything else below a table's ``data/`` or ``metadata/``
directory is an orphan: written by an attempt that lost, a transaction that rolled back without
cleaning up, or a process that died. An orphan is removed only when it is older than ``older_than``,
because a transaction still running may be about to commit it (Iceberg's ``remove_orphan_files``
uses the same rule, with three days by default).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta

from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestFile
from pyiceberg.serializers import FromInputFile
from pyiceberg.table.snapshots import Snapshot

from rowops.catalog.log import TableEntry
from rowops.meta.fileio import StoredFile, list_files, remove_empty_dir
from rowops.meta.paths import normalize_path, parent, relative, to_uri

DEFAULT_AGE = timedelta(days=3)
_TABLE_DIRS = ("data", "metadata")


@dataclass(frozen=True)
class CleanupResult:
    """What a cleanup found and removed."""

    referenced_files: int
    orphans_removed: int
    bytes_removed: int
    orphans_kept_young: int
    removed: tuple[str, ...] = ()


def referenced_files(io: FileIO, entries: Iterable[TableEntry]) -> set[str]:
    """Local paths of every file the given table entries reference (metadata down to data files)."""
    locations = sorted({e.metadata_location for e in entries})
    with ThreadPoolExecutor(max_workers=8) as pool:
        metadata = list(pool.map(lambda loc: FromInputFile.table_metadata(io.new_input(loc)), locations))
    found = {normalize_path(loc) for loc in locations}
    snapshots = {}
    for meta in metadata:
        found |= {normalize_path(m.metadata_file) for m in meta.metadata_log}
        snapshots.update({s.manifest_list: s for s in meta.snapshots})
    found |= {normalize_path(p) for p in snapshots}
    with ThreadPoolExecutor(max_workers=8) as pool:
        lists = list(pool.map(_manifests(io), snapshots.values()))
    manifests = {m.manifest_path: m for listed in lists for m in listed}
    found |= {normalize_path(p) for p in manifests}
    with ThreadPoolExecutor(max_workers=8) as pool:
        for paths in pool.map(_entry_paths(io), manifests.values()):
            found |= {normalize_path(p) for p in paths}
    return found


def _manifests(io: FileIO) -> Callable[[Snapshot], list[ManifestFile]]:
    """A snapshot's manifests; none when ``expire_snapshots`` deleted its manifest list (the files it
    alone referenced are gone too; those it shares are reached through the retained snapshots)."""

    def manifests(snapshot: Snapshot) -> list[ManifestFile]:
        try:
            return snapshot.manifests(io)
        except FileNotFoundError:
            return []

    return manifests


def _entry_paths(io: FileIO) -> Callable[[ManifestFile], list[str]]:
    def paths(manifest: ManifestFile) -> list[str]:
        try:
            entries = manifest.fetch_manifest_entry(io, discard_deleted=False)
        except FileNotFoundError:  # an expired snapshot's manifest (see _manifests)
            return []
        return [e.data_file.file_path for e in entries]

    return paths


def table_files(io: FileIO, root: str) -> Iterator[StoredFile]:
    """Every file below a ``data`` or ``metadata`` directory of the lake (the log excluded)."""
    for found in list_files(io, root):
        parts = relative(found.key, root).split("/")
        if parts[0] != "_rowops" and any(part in _TABLE_DIRS for part in parts[:-1]):
            yield found


def remove_orphans(io: FileIO, root: str, referenced: set[str], older_than: timedelta) -> CleanupResult:
    """Remove unreferenced table files older than ``older_than``, then empty staging directories.

    Args:
        root: the lake's location (key form).
        referenced: keys of every file a lake version references.
    """
    limit = time.time() - older_than.total_seconds()
    removed: list[str] = []
    young = size = 0
    directories: set[str] = set()
    for found in table_files(io, root):
        if found.key in referenced:
            continue
        if found.mtime > limit:
            young += 1
            continue
        with contextlib.suppress(FileNotFoundError):
            io.delete(to_uri(found.key))
            removed.append(relative(found.key, root))
            size += found.size
            directories.add(parent(found.key))
    _remove_empty_dirs(io, root, directories)
    return CleanupResult(len(referenced), len(removed), size, young, tuple(removed))


def _remove_empty_dirs(io: FileIO, root: str, directories: set[str]) -> None:
    """Remove the now empty directories of removed files, deepest first, up to the table's ``data``."""
    candidates: set[str] = set()
    for directory in directories:  # each directory and its ancestors below the table's data/metadata
        while directory.startswith(root + "/") and directory not in candidates:
            if directory.rsplit("/", 1)[-1] in _TABLE_DIRS:
                break
            candidates.add(directory)
            directory = parent(directory)
    for directory in sorted(candidates, key=len, reverse=True):
        remove_empty_dir(io, directory)
