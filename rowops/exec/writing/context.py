"""What an encoding needs and returns: the write context (table state, staging) and the files written.

Shared by the encodings (``strategies.py``) and the copy-on-write rewrites they call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from pyiceberg.table.metadata import TableMetadata
from pyspark.sql import SparkSession

from rowops.errors import UnmatchedFileError
from rowops.exec.reading.file_reads import file_uris
from rowops.exec.writing.write import DEFAULT_TARGET_FILE_SIZE, Staging
from rowops.meta.delete_index import delete_index
from rowops.meta.files import LiveFile, TableFiles, WrittenFile
from rowops.plan.cost import FileChange


@dataclass
class Written:
    """Files written by one encoding and the live files they replace."""

    data: list[WrittenFile] = field(default_factory=list)
    position_deletes: list[WrittenFile] = field(default_factory=list)
    equality_deletes: list[WrittenFile] = field(default_factory=list)
    removed_data: set[str] = field(default_factory=set)
    removed_deletes: set[str] = field(default_factory=set)
    referenced_data: set[str] = field(default_factory=set)
    rewritten: set[str] = field(default_factory=set)
    changed_rows: dict[str, int] = field(default_factory=dict)
    absorbed: set[str] = field(default_factory=set)  # rewritten with their updated rows in place

    def merge(self, other: Written) -> Written:
        return Written(
            self.data + other.data,
            self.position_deletes + other.position_deletes,
            self.equality_deletes + other.equality_deletes,
            self.removed_data | other.removed_data,
            self.removed_deletes | other.removed_deletes,
            self.referenced_data | other.referenced_data,
            self.rewritten | other.rewritten,
            {**self.changed_rows, **other.changed_rows},
            self.absorbed | other.absorbed,
        )


@dataclass(frozen=True)
class WriteContext:
    """Everything an encoding needs besides the changes."""

    spark: SparkSession
    files: TableFiles
    metadata: TableMetadata
    stage: Staging

    @property
    def target_file_size(self) -> int:
        return int(self.metadata.properties.get("write.target-file-size-bytes", DEFAULT_TARGET_FILE_SIZE))

    @cached_property
    def paths_by_uri(self) -> dict[str, str]:
        """Manifest path of each live data file by Spark's name for it (the ``_file`` column)."""
        return {uri: path for path, uri in file_uris(self.spark, self.files.data).items()}

    @property
    def bytes_per_row(self) -> float:
        rows = sum(f.record_count for f in self.files.data)
        return sum(f.size for f in self.files.data) / rows if rows else 100.0


def single_file_target(delete: LiveFile) -> str | None:
    """The one data file a position delete file references (from its file_path bounds), if only one."""
    return delete.referenced_file


def deletes_only_for(files: TableFiles, data_paths: set[str]) -> list[LiveFile]:
    """Position delete files that reference nothing but one of ``data_paths`` (index lookups)."""
    by_path = delete_index(files).pos_by_path
    return [d for p in data_paths for d in by_path.get(p, ())]


def removed_by_path(ctx: WriteContext, removed_by_uri: dict[str, int]) -> dict[str, int]:
    """Removed rows per data file, keyed by manifest path instead of Spark's name of the file.

    A row id that names no live file would make an encoding skip that file's rows: an error instead.
    """
    unknown = sorted(set(removed_by_uri) - set(ctx.paths_by_uri))
    if unknown:
        raise UnmatchedFileError(
            f"Rows were read from files that are not live files of the table: {unknown[:3]}"
        )
    return {ctx.paths_by_uri[uri]: n for uri, n in removed_by_uri.items()}


def file_changes(removed: dict[str, int], files: TableFiles) -> list[FileChange]:
    """Run-time facts about each touched file, for the hybrid decision."""
    previous = {single_file_target(d): d.record_count for d in deletes_only_for(files, set(removed))}
    index = delete_index(files)
    return [
        FileChange(
            f.path,
            f.record_count,
            f.size,
            removed[f.path],
            previous.get(f.path, 0),
            index.equality_deletes_on(f) > 0,
        )
        for f in files.data
        if f.path in removed
    ]


def max_rows_per_file(ctx: WriteContext) -> int:
    """The rows of a new data file of the target size."""
    return max(int(ctx.target_file_size / max(ctx.bytes_per_row, 1.0)), 1)
