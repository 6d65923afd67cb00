"""The results of row-level and maintenance operations."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class OperationResult:
    """What an operation did. A count is None where the encoding cannot know it.

    Equality deletes never scan the target: a blind upsert knows it wrote ``rows_written`` rows and
    deleted ``keys_deleted`` keys (no row is deleted without its new version: ``rows_deleted`` 0) but
    not which keys existed, so ``rows_inserted`` and ``rows_updated`` are None; a blind delete by key
    inserts and updates nothing but cannot tell how many of its keys existed (``rows_deleted`` None).

    Attributes:
        strategy: the encoding that ran (a hybrid that only rewrote files is ``copy-on-write``); the
            snapshot summary's ``rowops.strategy`` is the same value.
        rows_written: rows inserted or updated (new row versions; rows a rewrite copies unchanged are
            not counted).
        keys_deleted: equality-delete keys written (each deletes the older rows with its key, if any).
    """

    strategy: str
    snapshot_id: int | None
    rows_inserted: int | None
    rows_updated: int | None
    rows_deleted: int | None
    data_files_added: int
    data_files_removed: int
    delete_files_added: int
    duration_s: float
    delete_files_removed: int = 0
    files_scanned: int = 0
    files_pruned: int = 0
    files_rewritten: int = 0
    explain: str = field(default="", repr=False)
    rows_written: int | None = None
    keys_deleted: int = 0


@dataclass(frozen=True)
class MaintenanceResult:
    """What a maintenance operation did (``Table.compact``, ``expire_snapshots``, ...).

    Attributes:
        operation: the method that ran (``compact``, ``compact_position_deletes``, ...).
        snapshot_id: the snapshot it committed (for ``expire_snapshots``, a metadata-only commit: the
            current snapshot after it); None when there was nothing to do (nothing committed) and for
            ``remove_orphans`` (a cleanup, not a commit).
        files_read / bytes_read: data and delete files the operation read.
        files_written / bytes_written: files it wrote and committed.
        files_removed / bytes_removed: files removed from the table's live state (rewrites) or deleted
            from storage (``expire_snapshots``, ``remove_orphans``).
        data_files_rewritten / delete_files_removed / snapshots_expired: the operation's own counts.
        dry_run / paths: ``remove_orphans(dry_run=True)`` deleted nothing; ``paths`` lists the files it
            removed (with ``dry_run``: would remove).
    """

    operation: str
    snapshot_id: int | None
    files_read: int = 0
    bytes_read: int = 0
    files_written: int = 0
    bytes_written: int = 0
    files_removed: int = 0
    bytes_removed: int = 0
    duration_s: float = 0.0
    data_files_rewritten: int = 0
    delete_files_removed: int = 0
    snapshots_expired: int = 0
    dry_run: bool = False
    paths: tuple[str, ...] = ()

    @property
    def committed(self) -> bool:
        return self.snapshot_id is not None

    def to_dict(self) -> dict[str, object]:
        """The result as JSON-ready values."""
        return {**asdict(self), "committed": self.committed}


@dataclass(frozen=True)
class HealthReport:
    """The maintenance debt of a table's current snapshot (``Table.health()``), from metadata only.

    Attributes:
        delete_files_per_data_file / max_delete_files_per_data_file: live delete files that apply to a
            data file, on average and at most.
        deleted_rows_share: deleted rows (position-delete rows plus equality-delete keys, an estimate)
            over the rows of the data files.
        equality_delete_generations: distinct commits whose equality deletes are live.
        small_files: data files below 75% of the target file size in partitions with more than one file.
        read_overhead_bytes: what each full read pays for deletes and small files, in bytes-equivalents
            of scan work (the planner's debt model, ``plan/cost.py``), fixed per-file costs included;
            ``read_overhead_ratio`` is that over a full read's cost: the data bytes, never less than a
            read's fixed cost (``cost.READ_FLOOR_BYTES``), so that a tiny table's few kilobytes do not
            turn a few file opens into a huge percentage.
        advice: the maintenance calls that would pay off, each with its reason.
        extra_file_opens: files each full read opens for this debt (delete files, small files worth
            merging), each a fixed cost (``cost.FILE_OPEN_MS``) whatever its size.
    """

    table: str
    snapshot_id: int | None
    snapshots: int
    data_files: int
    data_bytes: int
    records: int
    position_delete_files: int
    equality_delete_files: int
    delete_files_per_data_file: float
    max_delete_files_per_data_file: int
    deleted_rows_share: float
    equality_delete_generations: int
    small_files: int
    target_file_size: int
    read_overhead_bytes: float
    read_overhead_ratio: float
    advice: list[str] = field(default_factory=list)
    extra_file_opens: int = 0

    def to_dict(self) -> dict[str, object]:
        """The report as JSON-ready values."""
        return asdict(self)
