"""Planning a major compaction: which data files to rewrite, grouped by partition, within a budget.

A data file needs rewriting when deletes apply to it or when it is small (below
``MIN_FILE_FRACTION`` of the target file size, Iceberg's ``min-file-size-bytes`` default). A partition
is rewritten when that gains something: a file with deletes, or at least two small files to merge.
Partitions are taken in order of their debt (deleted bytes first, then small files), whole files at a
time, until the byte budget (``max_bytes``) is spent. The writer then bin-packs each partition's live
rows into files of the target size (``rowops/exec/rewriting/maintenance.py``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from pyiceberg.expressions import BooleanExpression
from pyiceberg.expressions.parser import parse
from pyiceberg.expressions.visitors import bind, expression_evaluator, extract_field_ids, inclusive_projection
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.typedef import Record

from rowops.errors import InvalidExpressionError, InvalidInputError, NoSuchColumnError
from rowops.maintenance.index import dangling_deletes
from rowops.meta.delete_index import DeleteIndex, PartitionKey, partition_key
from rowops.meta.files import LiveFile, TableFiles

MIN_FILE_FRACTION = 0.75
DEFAULT_TARGET_FILE_SIZE = 128 * 1024 * 1024
FileFilter = Callable[[LiveFile], bool]


def target_file_size(metadata: TableMetadata, requested: int | None = None) -> int:
    """The target file size: ``requested``, else ``write.target-file-size-bytes``, else 128 MiB."""
    if requested is not None:
        return requested
    return int(metadata.properties.get("write.target-file-size-bytes", DEFAULT_TARGET_FILE_SIZE))


def check_positive(name: str, value: int | None) -> None:
    """``value`` must be a positive int (or None)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise InvalidInputError(
            f"{name} must be a positive number of bytes, got {value!r}",
            help=f"Pass {name} as an int > 0, or leave it out. Nothing was changed.",
        )


def partition_filter(where: str, metadata: TableMetadata, case_sensitive: bool = False) -> FileFilter:
    """The data files whose partition may hold rows matching ``where``.

    ``where`` is a filter over partition source columns (``region = 'eu' and day >= '2024-01-01'``,
    pyiceberg's expression syntax); it is projected inclusively onto every partition spec of the table.
    """
    schema = metadata.schema()
    expression = _parsed(where)
    try:
        bound = bind(schema, expression, case_sensitive)
    except ValueError as exc:
        raise NoSuchColumnError(
            f"where={where!r} names a column the table does not have ({exc})",
            help=f"Partition source columns of {metadata.location}: {_sources(metadata) or 'none'}. "
            "Nothing was changed.",
        ) from None
    sources = {f.source_id for spec in metadata.partition_specs for f in spec.fields}  # of every spec
    outside = sorted(schema.find_column_name(i) or str(i) for i in extract_field_ids(bound) - sources)
    if outside:
        raise InvalidExpressionError(
            f"where={where!r} may only filter partition source columns; {outside} are not",
            help=f"Filter on {_sources(metadata) or 'nothing: the table is not partitioned'}. Nothing was changed.",
        )
    evaluators = {
        spec_id: _evaluator(schema, spec_id, metadata, expression, case_sensitive)
        for spec_id in metadata.specs()
    }
    return lambda f: evaluators[f.spec_id](Record(*f.partition))


def _parsed(where: str) -> BooleanExpression:
    try:
        return parse(where)
    except Exception as exc:  # pyparsing's ParseException, or a literal it cannot convert
        column = getattr(exc, "col", None)
        at = f" at character {column}" if column else ""
        raise InvalidExpressionError(
            f"where={where!r} is not a partition filter rowops can read{at}",
            help="Use comparisons of partition source columns with literals joined by and/or, e.g. "
            "\"region = 'eu' and day >= '2024-01-01'\". Nothing was changed.",
        ) from None


def _evaluator(
    schema: Schema, spec_id: int, metadata: TableMetadata, expression: BooleanExpression, case_sensitive: bool
) -> Callable[[Record], bool]:
    spec = metadata.specs()[spec_id]
    projected = inclusive_projection(schema, spec, case_sensitive)(expression)
    partition_schema = Schema(*spec.partition_type(schema).fields)
    return expression_evaluator(partition_schema, projected, case_sensitive)


def _sources(metadata: TableMetadata) -> str:
    schema = metadata.schema()
    ids = dict.fromkeys(f.source_id for spec in metadata.partition_specs for f in spec.fields)
    return ", ".join(schema.find_column_name(i) or "" for i in ids)


@dataclass(frozen=True)
class RewriteGroup:
    """The data files of one partition to rewrite together."""

    partition: PartitionKey
    files: tuple[LiveFile, ...]

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True)
class CompactionPlan:
    """What a major compaction rewrites and which delete files it drops.

    Attributes:
        groups: per partition, the data files rewritten into files of ``target_file_size``.
        removed_deletes: delete files that apply to no data file once the groups are rewritten.
        expected_files: the number of files a bin packing of the groups' bytes gives.
        skipped_bytes: bytes of files that needed rewriting but did not fit the budget.
    """

    groups: tuple[RewriteGroup, ...]
    removed_deletes: frozenset[str]
    target_file_size: int
    expected_files: int
    skipped_bytes: int = 0

    @property
    def rewritten(self) -> set[str]:
        return {f.path for g in self.groups for f in g.files}

    @property
    def empty(self) -> bool:
        return not self.groups and not self.removed_deletes


def is_small(f: LiveFile, target: int) -> bool:
    return f.size < MIN_FILE_FRACTION * target


def plan_compaction(
    files: TableFiles, target: int, selected: FileFilter | None = None, max_bytes: int | None = None
) -> CompactionPlan:
    """Choose the partitions and files to rewrite (linear in the number of files).

    >>> plan_compaction(TableFiles(None, 0, (), (), (), ()), 100).empty
    True
    """
    index = DeleteIndex.of(files)
    by_partition: dict[PartitionKey, list[LiveFile]] = defaultdict(list)
    for f in files.data:
        if (selected is None or selected(f)) and (index.deletes_on(f) or is_small(f, target)):
            by_partition[partition_key(f)].append(f)
    ranked = []
    for key, candidates in by_partition.items():
        deleted = [f for f in candidates if index.deletes_on(f)]
        if deleted or len(candidates) >= 2:
            ranked.append((-sum(f.size for f in deleted), -len(candidates), repr(key), key, candidates))
    ranked.sort(key=lambda r: r[:3])
    groups, budget, skipped = [], max_bytes, 0
    for *_, key, candidates in ranked:
        chosen = []
        for f in sorted(candidates, key=lambda f: (-index.deletes_on(f), f.size, f.path)):
            if budget is not None and f.size > budget:
                skipped += f.size
                continue
            chosen.append(f)
            budget = None if budget is None else budget - f.size
        if any(index.deletes_on(f) for f in chosen) or len(chosen) >= 2:
            groups.append(RewriteGroup(key, tuple(chosen)))
        else:
            skipped += sum(f.size for f in chosen)
    rewritten = {f.path for g in groups for f in g.files}
    return CompactionPlan(
        groups=tuple(groups),
        removed_deletes=frozenset(dangling_deletes(files, rewritten)),
        target_file_size=target,
        expected_files=sum(max(1, math.ceil(g.bytes / target)) for g in groups),
        skipped_bytes=skipped,
    )
