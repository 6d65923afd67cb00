"""``lake.verify()`` / ``rowops verify``: the integrity check of every lake version still offered.

The walk reads every version of the lake log, every table entry of each, and every branch, tag and
snapshot the entry's ``metadata.json`` lists, and checks that

* the version files and the metadata parse;
* every ref points at a snapshot the metadata lists;
* manifest lists, manifests, data and delete files exist, with the sizes their metadata records;
* sequence numbers are consistent: a snapshot's is at least its parent's, a manifest's and its entries'
  at most their snapshot's, and every manifest and ADDED/EXISTING entry names a snapshot the table
  has listed (in any metadata the log references: an expired ancestor counts);
* a snapshot summary's ``total-records`` / ``total-data-files`` / ``total-delete-files`` match the live
  entries of its manifests.

**Refused, not broken.** A ref whose snapshot's files are gone is a problem, unless the snapshot was
expired: a later metadata of the same table (same ``table-uuid``) no longer lists it. Such a state is
refused by the lake on purpose (``SnapshotExpiredError``); it is reported in ``refused``, not as a
problem, except in the newest lake version, which must always be readable. Snapshots that no ref points
at (time travel by id) are checked only while their manifest list exists.

**Linear.** Metadata files, manifest lists and manifests are immutable and shared between versions:
each is parsed once per walk (cached by path), each file's size is read once. No process-wide cache is
used, so the walk reads storage cold.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFileContent, ManifestEntry, ManifestEntryStatus, ManifestFile
from pyiceberg.serializers import FromInputFile
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot

from rowops.catalog.log import LakeLog, LakeVersion
from rowops.errors import CorruptLakeError
from rowops.meta.paths import normalize_path
from rowops.meta.v3 import read_manifest, read_manifest_list


@dataclass(frozen=True)
class Problem:
    """One thing wrong: where (lake version, table, ref or snapshot, file) and what."""

    lake_version: int
    table: str
    ref: str
    file: str
    what: str
    versions: int = 1  # how many lake versions show the same problem (``lake_version`` is the newest)

    def __post_init__(self) -> None:
        object.__setattr__(self, "file", normalize_path(self.file) if self.file else "")

    def line(self) -> str:
        where = " ".join(p for p in (f"v{self.lake_version}", self.table, self.ref) if p)
        more = f" [and {self.versions - 1} older versions]" if self.versions > 1 else ""
        return f"{where}: {self.what}" + (f" ({self.file})" if self.file else "") + more


@dataclass(frozen=True)
class VerifyResult:
    """What ``lake.verify()`` walked and found; ``ok`` when ``problems`` is empty.

    Attributes:
        refused: ``(lake version, table, ref)`` states whose snapshot was expired (refused on purpose).
    """

    versions: int
    tables: int
    snapshots: int
    files: int
    problems: tuple[Problem, ...] = ()
    refused: tuple[tuple[int, str, str], ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        head = (
            f"{self.versions} lake versions, {self.tables} table states, {self.snapshots} snapshots, "
            f"{self.files} files checked: {len(self.problems) or 'no'} problems, {len(self.refused)} expired "
            "states refused"
        )
        return [head, *(p.line() for p in self.problems)]


@dataclass
class _Found:
    """Problems of one immutable object (a snapshot's files), found once, reported per version."""

    problems: list[tuple[str, str]] = field(default_factory=list)  # (file, what)
    files_missing: bool = False


class Verifier:
    """One walk; every parse and size is cached by path for its duration."""

    def __init__(self, log: LakeLog, io: FileIO) -> None:
        self.log, self.io = log, io
        self._metadata: dict[str, TableMetadata | str] = {}
        self._lists: dict[str, tuple[ManifestFile, ...] | None] = {}
        self._entries: dict[tuple[str, int], list[ManifestEntry] | None] = {}
        self._sizes: dict[str, int | None] = {}
        self._snapshots: dict[tuple[str, str], _Found] = {}
        self.listed: dict[str, set[int]] = {}  # table uuid -> every snapshot id any metadata lists
        self.expired: dict[str, set[int]] = {}  # table uuid -> ids a later metadata no longer lists

    # -- cached reads ------------------------------------------------------------------------------
    def metadata(self, location: str) -> TableMetadata | str:
        """The parsed metadata, or the reason it cannot be read."""
        if location not in self._metadata:
            try:
                self._metadata[location] = FromInputFile.table_metadata(self.io.new_input(location))
            except Exception as exc:  # any parse failure is a finding
                self._metadata[location] = f"metadata does not parse: {type(exc).__name__}: {exc}"
        return self._metadata[location]

    def size(self, path: str) -> int | None:
        """The file's size, None when it does not exist."""
        if path not in self._sizes:
            try:
                self._sizes[path] = len(self.io.new_input(path))
            except (FileNotFoundError, OSError):
                self._sizes[path] = None
        return self._sizes[path]

    def manifests(self, path: str) -> tuple[ManifestFile, ...] | None:
        if path not in self._lists:
            try:
                self._lists[path] = read_manifest_list(self.io, path) if self.size(path) is not None else None
            except (OSError, ValueError):
                self._lists[path] = None
        return self._lists[path]

    def entries(self, manifest: ManifestFile) -> list[ManifestEntry] | None:
        key = (manifest.manifest_path, int(manifest.sequence_number or 0))
        if key not in self._entries:
            try:
                self._entries[key] = read_manifest(manifest, self.io)
            except (OSError, ValueError):
                self._entries[key] = None
        return self._entries[key]

    @property
    def snapshot_count(self) -> int:
        return len(self._snapshots)

    @property
    def file_count(self) -> int:
        return len(self._sizes)

    @staticmethod
    def counted(problems: list[Problem]) -> tuple[Problem, ...]:
        """One problem per (table, ref, file, what): the newest version showing it, and how many do."""
        merged: dict[tuple[str, str, str, str], Problem] = {}
        for p in problems:
            key = (p.table, p.ref, p.file, p.what)
            seen = merged.get(key)
            if seen is None:
                merged[key] = p
            else:
                newest = max(seen.lake_version, p.lake_version)
                merged[key] = Problem(newest, p.table, p.ref, p.file, p.what, seen.versions + 1)
        return tuple(sorted(merged.values(), key=lambda p: (-p.lake_version, p.table, p.ref, p.file)))

    # -- the walk ----------------------------------------------------------------------------------
    def versions(self) -> Iterator[LakeVersion | tuple[int, str]]:
        for number in self.log.versions():
            try:
                yield self.log.read(number)
            except (OSError, CorruptLakeError) as exc:
                yield number, f"lake version does not read: {exc}"

    def learn(self, states: list[tuple[int, str, str]]) -> None:
        """Pass 1: which snapshots each table ever listed, and which a later metadata dropped (expired)."""
        by_uuid: dict[str, list[TableMetadata]] = {}
        for location in dict.fromkeys(loc for _, _, loc in states):
            meta = self.metadata(location)
            if not isinstance(meta, str):
                by_uuid.setdefault(str(meta.table_uuid), []).append(meta)
        for uuid, metas in by_uuid.items():
            listed = {s.snapshot_id for m in metas for s in m.snapshots}
            self.listed[uuid] = listed
            expired: set[int] = set()
            for meta in metas:
                top = int(getattr(meta, "last_sequence_number", 0) or 0)
                seqs = {s.snapshot_id: s.sequence_number or 0 for m in metas for s in m.snapshots}
                mine = {s.snapshot_id for s in meta.snapshots}
                expired |= {i for i in listed - mine if seqs[i] <= top}
            self.expired[uuid] = expired

    def check_snapshot(self, meta: TableMetadata, snapshot: Snapshot) -> _Found:
        key = (str(meta.table_uuid), snapshot.manifest_list)
        if key not in self._snapshots:
            self._snapshots[key] = self._check_snapshot(meta, snapshot)
        return self._snapshots[key]

    def _check_snapshot(self, meta: TableMetadata, snapshot: Snapshot) -> _Found:
        found = _Found()
        seq = int(snapshot.sequence_number or 0)
        known = self.listed.get(str(meta.table_uuid), set())
        parent = meta.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id else None
        if parent is not None and int(parent.sequence_number or 0) > seq:
            found.problems.append(
                ("", f"sequence number {seq} is below its parent's {parent.sequence_number}")
            )
        manifests = self.manifests(snapshot.manifest_list)
        if manifests is None:
            found.files_missing = True
            found.problems.append((snapshot.manifest_list, "manifest list is missing or unreadable"))
            return found
        counts = {"records": 0, "data": 0, "deletes": 0}
        for manifest in manifests:
            self._check_manifest(manifest, seq, known, counts, found)
        self._check_totals(snapshot, counts, found)
        return found

    def _check_manifest(
        self, manifest: ManifestFile, seq: int, known: set[int], counts: dict[str, int], found: _Found
    ) -> None:
        path = manifest.manifest_path
        size = self.size(path)
        if size is None:
            found.files_missing = True
            found.problems.append((path, "manifest is missing"))
            return
        if size != int(manifest.manifest_length):
            found.problems.append(
                (path, f"manifest has {size} bytes, its list records {manifest.manifest_length}")
            )
        if int(manifest.sequence_number or 0) > seq:
            found.problems.append(
                (path, f"manifest sequence number {manifest.sequence_number} exceeds {seq}")
            )
        if manifest.added_snapshot_id not in known:
            found.problems.append(
                (path, f"manifest names snapshot {manifest.added_snapshot_id}, never listed")
            )
        entries = self.entries(manifest)
        if entries is None:
            found.files_missing = True
            found.problems.append((path, "manifest does not parse"))
            return
        for entry in entries:
            if entry.status != ManifestEntryStatus.DELETED:
                self._check_entry(entry, seq, known, counts, found)

    def _check_entry(
        self, entry: ManifestEntry, seq: int, known: set[int], counts: dict[str, int], found: _Found
    ) -> None:
        data = entry.data_file
        if entry.snapshot_id is not None and entry.snapshot_id not in known:
            found.problems.append((data.file_path, f"entry names snapshot {entry.snapshot_id}, never listed"))
        if entry.sequence_number is not None and int(entry.sequence_number) > seq:
            found.problems.append(
                (data.file_path, f"entry sequence number {entry.sequence_number} exceeds {seq}")
            )
        size = self.size(data.file_path)
        if size is None:
            found.files_missing = True
            found.problems.append((data.file_path, f"{_kind(data.content)} file is missing"))
        elif size != int(data.file_size_in_bytes):
            found.problems.append(
                (
                    data.file_path,
                    f"{_kind(data.content)} file has {size} bytes, recorded {data.file_size_in_bytes}",
                )
            )
        if data.content == DataFileContent.DATA:
            counts["records"] += int(data.record_count)
            counts["data"] += 1
        else:
            counts["deletes"] += 1

    @staticmethod
    def _check_totals(snapshot: Snapshot, counts: dict[str, int], found: _Found) -> None:
        summary = snapshot.summary.additional_properties if snapshot.summary is not None else {}
        for key, name in (
            ("total-records", "records"),
            ("total-data-files", "data"),
            ("total-delete-files", "deletes"),
        ):
            if key in summary and int(summary[key]) != counts[name]:
                found.problems.append(
                    ("", f"summary {key} is {summary[key]}, its manifests hold {counts[name]}")
                )


def _kind(content: DataFileContent) -> str:
    return "data" if content == DataFileContent.DATA else "delete"


def verify(log: LakeLog, io: FileIO) -> VerifyResult:
    """Walk every version of ``log`` (see the module docstring)."""
    walker = Verifier(log, io)
    problems: list[Problem] = []
    states: list[tuple[int, str, str]] = []
    versions = 0
    for version in walker.versions():
        versions += 1
        if isinstance(version, tuple):
            problems.append(Problem(version[0], "", "", "", version[1]))
            continue
        states.extend((version.version, name, entry.metadata_location) for name, entry in version.items())
    walker.learn(states)
    newest = max((v for v, _, _ in states), default=0)
    refused: list[tuple[int, str, str]] = []
    for number, name, location in states:
        meta = walker.metadata(location)
        if isinstance(meta, str):
            problems.append(Problem(number, name, "", location, meta))
            continue
        for ref, what, found, expired in _check_refs(walker, meta):
            if found is None:
                problems.append(Problem(number, name, ref, location, what))
            elif found.files_missing and expired and number != newest:
                refused.append((number, name, ref))
            else:
                problems.extend(Problem(number, name, ref, file, msg) for file, msg in found.problems)
        problems.extend(
            Problem(number, name, ref, file, msg) for ref, file, msg in _unreferenced(walker, meta)
        )
    counted = walker.counted(problems)
    return VerifyResult(
        versions, len(states), walker.snapshot_count, walker.file_count, counted, tuple(refused)
    )


def _check_refs(walker: Verifier, meta: TableMetadata) -> Iterator[tuple[str, str, _Found | None, bool]]:
    """Per ref: (ref name, what is wrong if it names no snapshot, the snapshot's findings, expired?)."""
    expired = walker.expired.get(str(meta.table_uuid), set())
    refs = dict(meta.refs)
    if meta.current_snapshot_id is not None and meta.current_snapshot_id > 0:
        refs.setdefault("main", None)  # type: ignore[arg-type]
    for name, ref in sorted(refs.items()):
        target = ref.snapshot_id if ref is not None else meta.current_snapshot_id
        label = f"{getattr(ref, 'snapshot_ref_type', 'branch')} {name}"
        snapshot = meta.snapshot_by_id(target) if target is not None else None
        if snapshot is None:
            yield label, f"ref points at snapshot {target}, which the metadata does not list", None, False
            continue
        yield f"{label} (snapshot {target})", "", walker.check_snapshot(meta, snapshot), target in expired


def _unreferenced(walker: Verifier, meta: TableMetadata) -> Iterator[tuple[str, str, str]]:
    """Snapshots no ref names: checked while their manifest list exists (else they were expired)."""
    targets = {r.snapshot_id for r in meta.refs.values()} | {meta.current_snapshot_id}
    for snapshot in meta.snapshots:
        if snapshot.snapshot_id in targets or walker.size(snapshot.manifest_list) is None:
            continue
        for file, msg in walker.check_snapshot(meta, snapshot).problems:
            yield f"snapshot {snapshot.snapshot_id}", file, msg
