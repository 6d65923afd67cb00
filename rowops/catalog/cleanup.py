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
import os
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestFile
from pyiceberg.serializers import FromInputFile

from rowops.catalog.log import TableEntry
from rowops.meta.paths import normalize_path

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
        lists = list(pool.map(lambda s: s.manifests(io), snapshots.values()))
    manifests = {m.manifest_path: m for listed in lists for m in listed}
    found |= {normalize_path(p) for p in manifests}
    with ThreadPoolExecutor(max_workers=8) as pool:
        for paths in pool.map(_entry_paths(io), manifests.values()):
            found |= {normalize_path(p) for p in paths}
    return found


def _entry_paths(io: FileIO) -> Callable[[ManifestFile], list[str]]:
    def paths(manifest: ManifestFile) -> list[str]:
        return [e.data_file.file_path for e in manifest.fetch_manifest_entry(io, discard_deleted=False)]

    return paths


def table_files(root: Path) -> Iterator[Path]:
    """Every file below a ``data`` or ``metadata`` directory of the lake (the log excluded)."""
    for directory, dirs, files in os.walk(root):
        here = Path(directory)
        if here == root:
            dirs[:] = [d for d in dirs if d != "_rowops"]
        if any(part in _TABLE_DIRS for part in here.relative_to(root).parts):
            yield from (here / f for f in files)


def remove_orphans(root: Path, referenced: set[str], older_than: timedelta) -> CleanupResult:
    """Remove unreferenced table files older than ``older_than``, then empty staging directories."""
    limit = time.time() - older_than.total_seconds()
    removed: list[str] = []
    young = size = 0
    for path in table_files(root):
        if str(path) in referenced:
            continue
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        if stat.st_mtime > limit:
            young += 1
            continue
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(str(path.relative_to(root)))
            size += stat.st_size
    _remove_empty_dirs(root)
    return CleanupResult(len(referenced), len(removed), size, young, tuple(removed))


def _remove_empty_dirs(root: Path) -> None:
    for directory, _, _ in sorted(os.walk(root), key=lambda w: -len(w[0])):
        here = Path(directory)
        if here.name in _TABLE_DIRS or here == root or "_rowops" in here.parts:
            continue
        if any(part in _TABLE_DIRS for part in here.relative_to(root).parts):
            with contextlib.suppress(OSError):
                here.rmdir()  # only succeeds when empty
