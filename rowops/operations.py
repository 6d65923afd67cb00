"""Running a row-level operation end to end: plan, execute with Spark, commit, report.

spec ──► plan.choose_strategy ──► exec (scan/join/write) ──► meta (DataFiles) ──► catalog commit
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from py4j.protocol import Py4JJavaError
from pyiceberg.manifest import DataFileContent
from pyiceberg.table.snapshots import Operation
from pyspark.errors import AnalysisException, PythonException

from rowops.catalog.tables import LoadedTable
from rowops.commit.row_delta import RowDelta
from rowops.errors import CardinalityViolationError, InvalidExpressionError, NoSuchColumnError, NullKeyError
from rowops.exec import strategies
from rowops.exec.changes import RowChanges, delete_changes, matched_duplicates, merge_changes, update_changes
from rowops.exec.scan import POS_COL, read_data_files, scan
from rowops.exec.strategies import Written
from rowops.exec.validation import check_source
from rowops.exec.write import NULL_MARKER, staging, write_data
from rowops.meta.files import TableFiles, data_files_from_parquet, live_files
from rowops.plan.strategy import COPY_ON_WRITE, EQUALITY_DELETE, TableFacts, choose_strategy
from rowops.spec.operations import MergeSpec, OperationSpec, UpdateSpec
from rowops.spec.results import OperationResult

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from rowops.table import Table


@contextmanager
def spark_errors(context: str) -> Iterator[None]:
    """Translate Spark's analysis and runtime errors into rowops errors at one boundary."""
    try:
        yield
    except AnalysisException as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip() and not line.startswith("==")]
        detail = " ".join(lines[:3])[:500]
        raise InvalidExpressionError(f"Invalid SQL in {context}: {detail}") from exc
    except (Py4JJavaError, PythonException) as exc:
        text = str(exc)
        if NULL_MARKER in text:
            detail = text[text.index(NULL_MARKER) :].splitlines()[0]
            raise NullKeyError(f"NULL in a required column: {detail.split(': ', 1)[-1]}") from exc
        raise


def _describe(spec: OperationSpec) -> str:
    if isinstance(spec, MergeSpec):
        return f"MERGE ON {spec.on} " + " ".join(c.describe() for c in spec.clauses)
    if isinstance(spec, UpdateSpec):
        assignments = ", ".join(f"{c} = {e}" for c, e in spec.assignments)
        return f"UPDATE SET {assignments}" + (f" WHERE {spec.where}" if spec.where else "")
    return "DELETE" + (f" WHERE {spec.where}" if spec.where else "")


def table_facts(loaded: LoadedTable, files: TableFiles) -> TableFacts:
    schema = loaded.metadata.schema()
    ident = tuple(schema.find_column_name(i) or "" for i in schema.identifier_field_ids)
    sources = tuple(schema.find_column_name(f.source_id) or "" for f in loaded.metadata.spec().fields)
    return TableFacts(identifier=ident, partition_sources=sources, data_files=len(files.data))


def _check_columns(names: list[str], loaded: LoadedTable, context: str) -> None:
    known = loaded.metadata.schema().column_names
    unknown = [n for n in names if n not in known]
    if unknown:
        raise NoSuchColumnError(f"Unknown column(s) {unknown} in {context}; table columns are {known}")


def _validate(spec: OperationSpec, source: DataFrame | None, loaded: LoadedTable) -> None:
    schema = loaded.metadata.schema()
    if isinstance(spec, UpdateSpec):
        _check_columns([c for c, _ in spec.assignments], loaded, "set=")
    if isinstance(spec, MergeSpec) and source is not None:
        if spec.on_columns is not None:
            _check_columns(list(spec.on_columns), loaded, "on=")
            missing = [c for c in spec.on_columns if c not in source.columns]
            if missing:
                raise NoSuchColumnError(f"Key column(s) {missing} of on= are not in the source")
        for clause in spec.clauses:
            _check_columns([c for c, _ in clause.assignments or ()], loaded, clause.describe())
        needs_all = any(c.assignments is None and c.action != "delete" for c in spec.clauses)
        if needs_all:
            check_source(source.schema, schema, allow_extra=spec.on_columns is None)


def _changes(
    spec: OperationSpec, source: DataFrame | None, target: DataFrame, columns: list[str]
) -> RowChanges:
    if isinstance(spec, MergeSpec):
        assert source is not None
        return merge_changes(target, source, spec, columns)
    if isinstance(spec, UpdateSpec):
        return update_changes(target, spec, columns)
    return delete_changes(target, spec, columns)


def _check_cardinality(
    spec: OperationSpec, changes: RowChanges, files: TableFiles, loaded: LoadedTable
) -> None:
    """SQL's MERGE cardinality rule: a target row may match at most one source row."""
    if not isinstance(spec, MergeSpec) or not spec.of("matched"):
        return
    dups = matched_duplicates(changes)
    if not dups:
        return
    schema = loaded.metadata.schema()
    ids = [schema.find_column_name(i) for i in schema.identifier_field_ids]
    key_names = [k for k in (spec.on_columns or ids) if k] or schema.column_names[:3]
    examples: list[tuple[object, ...]] = []
    for path, pos in dups:
        rows = read_data_files(changes.joined.sparkSession, schema, [f for f in files.data if f.path == path])
        examples += [tuple(r) for r in rows.filter(rows[POS_COL] == pos).select(*key_names).collect()]
    raise CardinalityViolationError(
        f"MERGE matched a single target row with more than one source row; offending target keys "
        f"{key_names}: {examples}",
        example_keys=examples,
    )


def _delta(
    written: Written, loaded: LoadedTable, files: TableFiles, strategy: str, spec: OperationSpec
) -> RowDelta:
    metadata = loaded.metadata
    schema = metadata.schema()
    eq_ids = (
        [schema.find_field(n).field_id for n in (spec.on_columns or ())]
        if isinstance(spec, MergeSpec)
        else []
    )
    added_data = data_files_from_parquet(written.data, metadata)
    added_deletes = data_files_from_parquet(
        written.position_deletes, metadata, DataFileContent.POSITION_DELETES
    )
    if written.equality_deletes:
        added_deletes += data_files_from_parquet(
            written.equality_deletes, metadata, DataFileContent.EQUALITY_DELETES, eq_ids
        )
    if written.removed_data or added_deletes:
        operation = Operation.OVERWRITE if added_data else Operation.DELETE
    else:
        operation = Operation.APPEND
    return RowDelta(
        operation=operation,
        added_data=tuple(added_data),
        added_deletes=tuple(added_deletes),
        removed_data=frozenset(written.removed_data),
        removed_deletes=frozenset(written.removed_deletes),
        referenced_data=frozenset(written.referenced_data),
        serializable=metadata.properties.get("rowops.isolation-level", "serializable") == "serializable",
        blind=strategy == EQUALITY_DELETE,
        extra_summary={"rowops.strategy": strategy},
    )


def run(table: Table, spec: OperationSpec, source: DataFrame | None, strategy: str) -> OperationResult:
    """Plan, execute and commit one operation on ``table``."""
    started = time.perf_counter()
    spark = table.lake.spark
    loaded = table.load()
    files = live_files(loaded.metadata, table.lake.catalog.io)
    chosen = choose_strategy(strategy, spec, table_facts(loaded, files))
    _validate(spec, source, loaded)
    counts: dict[str, int | None] = {"insert": None, "update": None, "delete": None}
    with staging(loaded.metadata.location) as stage, spark_errors(_describe(spec)):
        if chosen == EQUALITY_DELETE:
            assert isinstance(spec, MergeSpec) and source is not None and spec.on_columns is not None
            strategies.check_keys(source, spec.on_columns)
            upsert = spec.key_upsert_or_delete == "upsert"
            written = strategies.equality_delete(source, spec.on_columns, upsert, loaded.metadata, stage)
        else:
            columns = loaded.metadata.schema().column_names
            target = scan(spark, loaded.metadata.schema(), files, row_ids=True)
            changes = _changes(spec, source, target, columns)
            try:
                _check_cardinality(spec, changes, files, loaded)
                counts = dict(changes.counts())
                encode = strategies.copy_on_write if chosen == COPY_ON_WRITE else strategies.position_delete
                written = encode(spark, changes, files, loaded.metadata, stage)
            finally:
                changes.release()
        delta = _delta(written, loaded, files, chosen, spec)
        committed = _commit(table, loaded, files, delta)
        if committed is None:
            stage.discard()
    return OperationResult(
        strategy=chosen,
        snapshot_id=committed.metadata.current_snapshot_id
        if committed
        else loaded.metadata.current_snapshot_id,
        rows_inserted=counts["insert"],
        rows_updated=counts["update"],
        rows_deleted=counts["delete"],
        data_files_added=len(delta.added_data),
        data_files_removed=len(delta.removed_data),
        delete_files_added=len(delta.added_deletes),
        delete_files_removed=len(delta.removed_deletes),
        duration_s=time.perf_counter() - started,
    )


def _commit(table: Table, loaded: LoadedTable, files: TableFiles, delta: RowDelta) -> LoadedTable | None:
    """Commit unless the delta changes nothing (then no snapshot is made)."""
    if not (delta.added_data or delta.added_deletes or delta.removed_data or delta.removed_deletes):
        return None
    return table.lake.catalog.commit_delta(loaded, files, delta)


def append(table: Table, df: DataFrame) -> OperationResult:
    """Append the rows of ``df`` (columns matched by name) in one snapshot."""
    started = time.perf_counter()
    loaded = table.load()
    check_source(df.schema, loaded.metadata.schema(), allow_extra=False)
    files = live_files(loaded.metadata, table.lake.catalog.io)
    written = Written()
    with staging(loaded.metadata.location) as stage, spark_errors("append"):
        written.data = write_data(df, loaded.metadata, stage.next_dir("data"))
        delta = RowDelta(
            Operation.APPEND,
            added_data=tuple(data_files_from_parquet(written.data, loaded.metadata)),
            blind=True,
            extra_summary={"rowops.strategy": "append"},
        )
        committed = _commit(table, loaded, files, delta)
    return OperationResult(
        "append",
        committed.metadata.current_snapshot_id if committed else loaded.metadata.current_snapshot_id,
        sum(f.record_count for f in delta.added_data),
        0,
        0,
        len(delta.added_data),
        0,
        0,
        time.perf_counter() - started,
    )
