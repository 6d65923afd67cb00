"""The three encodings of a change: copy-on-write, position deletes and equality deletes.

Each function writes files through Spark and returns what it wrote; nothing is committed here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pyiceberg.table.metadata import TableMetadata
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rowops.errors import DuplicateKeyError, NullKeyError
from rowops.exec.changes import RowChanges
from rowops.exec.scan import FILE_COL, POS_COL, scan
from rowops.exec.write import Staging, write_data, write_equality_deletes, write_position_deletes
from rowops.meta.files import LiveFile, TableFiles, WrittenFile
from rowops.meta.paths import normalize_path


@dataclass
class Written:
    """Files written by one strategy and the live files they replace."""

    data: list[WrittenFile] = field(default_factory=list)
    position_deletes: list[WrittenFile] = field(default_factory=list)
    equality_deletes: list[WrittenFile] = field(default_factory=list)
    removed_data: set[str] = field(default_factory=set)
    removed_deletes: set[str] = field(default_factory=set)
    referenced_data: set[str] = field(default_factory=set)


def _touched_files(changes: RowChanges) -> set[str]:
    """Paths of the data files holding a removed row (a list of file names, not rows)."""
    return {r[FILE_COL] for r in changes.removed.select(FILE_COL).distinct().collect()}


def _deletes_only_for(deletes: Sequence[LiveFile], removed: set[str]) -> set[str]:
    """Position delete files that reference nothing but ``removed`` data files (now dangling)."""
    dangling = set()
    for d in deletes:
        lower = (d.data_file.lower_bounds or {}).get(2147483546)
        upper = (d.data_file.upper_bounds or {}).get(2147483546)
        if lower is not None and lower == upper and normalize_path(lower.decode()) in removed:
            dangling.add(d.path)
    return dangling


def copy_on_write(
    spark: SparkSession, changes: RowChanges, files: TableFiles, metadata: TableMetadata, stage: Staging
) -> Written:
    """Rewrite every data file that holds a removed row: its surviving rows plus the new rows."""
    touched = _touched_files(changes)
    targets = [f for f in files.data if f.path in touched]
    columns = [f"`{c}`" for c in metadata.schema().column_names]
    survivors = scan(spark, metadata.schema(), files, data_files=targets, row_ids=True)
    survivors = survivors.join(changes.removed, [FILE_COL, POS_COL], "left_anti").select(*columns)
    rows = survivors.unionByName(changes.new_rows.select(*columns)) if targets else changes.new_rows
    return Written(
        data=write_data(rows, metadata, stage.next_dir("data")),
        removed_data=touched,
        removed_deletes=_deletes_only_for(files.position_deletes, touched),
    )


def position_delete(
    spark: SparkSession, changes: RowChanges, files: TableFiles, metadata: TableMetadata, stage: Staging
) -> Written:
    """Write ``(file, pos)`` of removed rows as position deletes and the new rows as data files."""
    touched = _touched_files(changes)
    targets = [f for f in files.data if f.path in touched]
    deletes = []
    if targets:
        deletes = write_position_deletes(spark, changes.removed, targets, metadata, stage.next_dir("deletes"))
    return Written(
        data=write_data(changes.new_rows, metadata, stage.next_dir("data")),
        position_deletes=deletes,
        referenced_data=touched,
    )


def check_keys(source: DataFrame, keys: Sequence[str], limit: int = 5) -> None:
    """Reject NULL or duplicate keys in the source (a scan of the source only)."""
    key_cols = [F.col(f"`{k}`") for k in keys]
    any_null = key_cols[0].isNull()
    for col in key_cols[1:]:
        any_null = any_null | col.isNull()
    nulls = source.filter(any_null).select(*key_cols).limit(limit).collect()
    if nulls:
        raise NullKeyError(
            f"The source has NULL in key columns {list(keys)}, e.g. {[tuple(r) for r in nulls]}"
        )
    dups = source.groupBy(*key_cols).count().filter(F.col("count") > 1).limit(limit).collect()
    if dups:
        examples = [tuple(r)[:-1] for r in dups]
        raise DuplicateKeyError(f"The source has duplicate keys {list(keys)}: {examples}")


def equality_delete(
    source: DataFrame, keys: Sequence[str], upsert: bool, metadata: TableMetadata, stage: Staging
) -> Written:
    """Blind by-key change: an equality delete of the source keys (+ the source rows for an upsert).

    The target is not read at all. Rows inserted in the same commit share its sequence number, so
    the new equality deletes do not apply to them.
    """
    key_rows = source.select(*[F.col(f"`{k}`") for k in keys])
    deletes = write_equality_deletes(key_rows, keys, metadata, stage.next_dir("eq-deletes"))
    data = write_data(source, metadata, stage.next_dir("data")) if upsert else []
    return Written(data=data, equality_deletes=deletes)
