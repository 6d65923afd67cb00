"""Removing the files of aborted and crashed transactions; committed state is never touched.

A file is kept when any lake version references it, through the table metadata it points at: the
metadata file itself, the metadata files in its log, its statistics files, every snapshot's manifest
list, manifests and the data and delete files they list.

**What cleanup may delete.** Only files below the ``data/`` and ``metadata/`` folders of the location of
a table the lake itself *created* (a ``create`` in some lake version's transaction record; dropped
tables included). Never another catalog's pointer file (``version-hint.text``), never anything
outside those folders (an unregistered table, a landing folder, a backup copy below the lake root),
and nothing in the location of a table *registered* from another catalog (``lake.register_table``):
that catalog may still reference, or be writing, files there, so rowops cannot prove any of them an
orphan (``table.remove_orphans`` on such a table raises ``ForeignFilesError``). Everything else there
that no version references is an orphan: written by an attempt that lost, a transaction that rolled
back without cleaning up, or a process that died. An orphan is removed only when it is older than
``older_than``, because a transaction still running may be about to commit it (Iceberg's
``remove_orphan_files`` uses the same rule, with three days by default). ``dry_run`` lists what
would go and deletes nothing.

**Cost.** Metadata files, manifest lists and manifests are immutable: :class:`ReferenceScanner` parses
each once per process (the metadata JSON for the few fields cleanup needs, not a full model), so a
cleanup after N more versions reads only what those versions added, and one cold scan reads each
file once.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta

from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestFile, read_manifest_list

from rowops.catalog.log import LakeLog, LakeVersion, TableEntry
from rowops.meta.fileio import StoredFile, list_files, remove_empty_dir
from rowops.meta.paths import join, normalize_path, parent, relative, to_uri

DEFAULT_AGE = timedelta(days=3)
_TABLE_DIRS = ("data", "metadata")
FOREIGN_POINTERS = frozenset({"version-hint.text"})  # other catalogs' files rowops never writes


@dataclass(frozen=True)
class CleanupResult:
    """What a cleanup found and removed (with ``dry_run``: would remove)."""

    referenced_files: int
    orphans_removed: int
    bytes_removed: int
    orphans_kept_young: int
    removed: tuple[str, ...] = ()
    dry_run: bool = False


@dataclass
class _LogWalk:
    """What the versions of one lake log up to ``version`` held (versions are immutable)."""

    first_id: object = None  # version 1's transaction id: a lake recreated at the same path restarts
    version: int = 0
    nodes: set[str] = field(default_factory=set)
    entries: set[TableEntry] = field(default_factory=set)
    created: set[TableEntry] = field(default_factory=set)


@dataclass(frozen=True)
class _Metadata:
    """The fields of a table metadata file that cleanup needs."""

    location: str
    files: tuple[str, ...]  # the metadata log and statistics files
    manifest_lists: tuple[str, ...]


class ReferenceScanner:
    """Reads each immutable metadata file, manifest list and manifest once per process.

    ``reads`` counts the files actually parsed by kind (``metadata``, ``manifest-list``, ``manifest``).
    A missing file (a snapshot's manifest list that ``expire_snapshots`` deleted) is not remembered.
    """

    def __init__(self) -> None:
        self._metadata: dict[str, _Metadata] = {}
        self._lists: dict[str, tuple[ManifestFile, ...]] = {}
        self._manifests: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()
        self._walks: dict[str, _LogWalk] = {}
        self._walk_lock = threading.Lock()
        self.reads: Counter[str] = Counter()

    def lake_entries(self, log: LakeLog) -> tuple[set[TableEntry], set[TableEntry]]:
        """Every table entry any version of ``log`` held, and those its versions created (see
        ``_created``); versions already walked in this process are not read again."""
        with self._walk_lock:
            key = str(log.dir)
            walk = self._walks.get(key)
            latest = log.latest().version
            if walk is not None and walk.version and walk.first_id != log.read(1).transaction.get("id"):
                walk = None
            if walk is None:
                walk = self._walks[key] = _LogWalk()
            for version in log.history(walk.version + 1, latest + 1):
                walk.entries.update(log.new_entries(version, walk.nodes))
                walk.created.update(_created(version))
                if version.version == 1:
                    walk.first_id = version.transaction.get("id")
                walk.version = version.version
                self.reads["version"] += 1
            return set(walk.entries), set(walk.created)

    def metadata(self, io: FileIO, location: str) -> _Metadata:
        key = normalize_path(location)
        found = self._metadata.get(key)
        if found is None:
            found = _parse_metadata(_read_bytes(io, location))
            with self._lock:
                self._metadata[key] = found
                self.reads["metadata"] += 1
        return found

    def manifests(self, io: FileIO, manifest_list: str) -> tuple[ManifestFile, ...]:
        key = normalize_path(manifest_list)
        found = self._lists.get(key)
        if found is None:
            try:
                found = tuple(read_manifest_list(io.new_input(manifest_list)))
            except FileNotFoundError:  # expired: the files it alone referenced are gone too
                return ()
            with self._lock:
                self._lists[key] = found
                self.reads["manifest-list"] += 1
        return found

    def entries(self, io: FileIO, manifest: ManifestFile) -> tuple[str, ...]:
        key = normalize_path(manifest.manifest_path)
        found = self._manifests.get(key)
        if found is None:
            try:
                listed = manifest.fetch_manifest_entry(io, discard_deleted=False)
            except FileNotFoundError:  # an expired snapshot's manifest (see manifests)
                return ()
            found = tuple(normalize_path(e.data_file.file_path) for e in listed)
            with self._lock:
                self._manifests[key] = found
                self.reads["manifest"] += 1
        return found

    def referenced(self, io: FileIO, metadata_locations: Iterable[str]) -> set[str]:
        """Keys of every file the metadata files reference (themselves included)."""
        locations = sorted({normalize_path(loc) for loc in metadata_locations})
        with ThreadPoolExecutor(max_workers=8) as pool:
            parsed = list(pool.map(lambda loc: self.metadata(io, to_uri(loc)), locations))
        found = set(locations)
        lists: set[str] = set()
        for meta in parsed:
            found.update(meta.files)
            lists.update(meta.manifest_lists)
        found |= lists
        with ThreadPoolExecutor(max_workers=8) as pool:
            listed = list(pool.map(lambda path: self.manifests(io, to_uri(path)), sorted(lists)))
        manifests = {normalize_path(m.manifest_path): m for ms in listed for m in ms}
        found.update(manifests)
        with ThreadPoolExecutor(max_workers=8) as pool:
            for paths in pool.map(lambda m: self.entries(io, m), manifests.values()):
                found.update(paths)
        return found


SCANNER = ReferenceScanner()  # this process's parsed immutable files, shared by every lake handle


def _read_bytes(io: FileIO, location: str) -> bytes:
    with io.new_input(location).open() as stream:
        data = stream.read()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def _parse_metadata(data: bytes) -> _Metadata:
    body = json.loads(data)
    files = [e["metadata-file"] for e in body.get("metadata-log", [])]
    for kind in ("statistics", "partition-statistics"):
        files += [s["statistics-path"] for s in body.get(kind, []) if "statistics-path" in s]
    lists = tuple(
        normalize_path(s["manifest-list"]) for s in body.get("snapshots", []) if "manifest-list" in s
    )
    return _Metadata(body["location"], tuple(normalize_path(f) for f in files), lists)


def referenced_files(io: FileIO, entries: Iterable[TableEntry]) -> set[str]:
    """Local paths of every file the given table entries reference (metadata down to data files)."""
    return SCANNER.referenced(io, (e.metadata_location for e in entries))


def _created(version: LakeVersion) -> Iterator[TableEntry]:
    """The entries of the tables ``version``'s transaction record says it created."""
    for commit in version.transaction.get("commits", []):
        operations = commit.get("operations") or [commit.get("operation")]
        entry = version.get(str(commit.get("table"))) if "create" in operations else None
        if entry is not None:
            yield entry


def lake_references(io: FileIO, log: LakeLog) -> tuple[set[str], set[str]]:
    """Keys of every file any version of ``log`` references, and the locations of the tables the lake
    created (what cleanup may look into; see the module docstring)."""
    entries, created = SCANNER.lake_entries(log)
    referenced = SCANNER.referenced(io, (e.metadata_location for e in entries))
    owned = {normalize_path(SCANNER.metadata(io, e.metadata_location).location).rstrip("/") for e in created}
    return referenced, owned


def owned_locations(io: FileIO, log: LakeLog) -> set[str]:
    """Key-form locations of every table the lake created (see the module docstring)."""
    return lake_references(io, log)[1]


def table_files(io: FileIO, location: str) -> Iterator[StoredFile]:
    """Every file below the ``data/`` and ``metadata/`` folders of ``location``, but foreign pointers."""
    for folder in _TABLE_DIRS:
        for found in list_files(io, join(location, folder)):
            if found.key.rsplit("/", 1)[-1] not in FOREIGN_POINTERS:
                yield found


def remove_orphans(
    io: FileIO,
    root: str,
    locations: Iterable[str],
    referenced: set[str],
    older_than: timedelta,
    dry_run: bool = False,
) -> CleanupResult:
    """Remove (``dry_run``: list) unreferenced files of the table ``locations`` older than ``older_than``,
    then their empty staging directories.

    Args:
        root: what the removed paths are reported relative to (the lake's location, key form).
        locations: key-form locations of tables the lake owns (see ``owned_locations``).
        referenced: keys of every file a lake version references.
    """
    limit = time.time() - older_than.total_seconds()
    removed: list[str] = []
    young = size = 0
    seen: set[str] = set()
    for location in sorted(locations):
        directories: set[str] = set()
        for found in table_files(io, location):
            if found.key in referenced or found.key in seen:
                continue
            seen.add(found.key)
            if found.mtime > limit:
                young += 1
                continue
            with contextlib.suppress(FileNotFoundError):
                if not dry_run:
                    io.delete(to_uri(found.key))
                removed.append(relative(found.key, root) if found.key.startswith(root + "/") else found.key)
                size += found.size
                directories.add(parent(found.key))
        if not dry_run:
            _remove_empty_dirs(io, location, directories)
    return CleanupResult(len(referenced), len(removed), size, young, tuple(removed), dry_run)


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
