"""Row changes of MERGE, UPDATE and DELETE, as Spark DataFrames (nothing is collected).

Every operation reduces to the same two outputs, which the write strategies then encode:
  * ``removed``: ``(_file, _pos)`` of target rows that are deleted or replaced;
  * ``new_rows``: rows to add (updated versions and inserts), in table columns;
and ``new_rows_at``, the new rows with the row id of the target row each replaces (NULL for inserts),
so a copy-on-write rewrite can put an updated row where its old version was.

MERGE joins target ``t`` and source ``s`` once; each joined row gets ``_action``, the index of the
first WHEN clause that applies (SQL semantics: clauses are tried in order), or -1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import reduce

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from rowops.exec.changes import merge_sql
from rowops.exec.checks.nested import nested_assignments, with_fields
from rowops.exec.reading.file_reads import FILE_COL, POS_COL
from rowops.exec.reading.lineage import has_lineage, kept_lineage, updated_lineage
from rowops.exec.spark.compat import select_columns, select_exprs
from rowops.exec.spark.literal_frames import sql_identifier
from rowops.meta.lineage import ROW_ID
from rowops.request.operations import DeleteSpec, MergeSpec, UpdateSpec

ACTION, MATCHED = "_action", "_matched"
_T_ROW, _S_ROW, _S_ID, _S_KEY = merge_sql.T_ROW, merge_sql.S_ROW, "_s_id", "_s_key_"


@dataclass
class RowChanges:
    """The changes of one operation. ``kinds`` maps each action index to update/delete/insert."""

    joined: DataFrame
    removed: DataFrame
    new_rows: DataFrame
    kinds: Mapping[int, str]
    removing: tuple[int, ...] = (0,)
    joins_source: bool = False
    cached: list[DataFrame] = field(default_factory=list)
    new_rows_at: DataFrame | None = None  # (_file, _pos, table columns): _file NULL for inserts
    by_source: tuple[int, ...] = ()  # the action indexes of WHEN NOT MATCHED BY SOURCE clauses

    def counts(self, per_action: Mapping[int, int]) -> dict[str, int]:
        """Rows inserted, updated and deleted, from the rows per action index."""
        totals = {"insert": 0, "update": 0, "delete": 0}
        for action, count in per_action.items():
            kind = self.kinds.get(action)
            if kind is not None:
                totals[kind] += count
        return totals

    def counts_by_source(self, per_action: Mapping[int, int]) -> dict[str, int]:
        """Rows updated and deleted by WHEN NOT MATCHED BY SOURCE clauses (``update-by-source``,
        ``delete-by-source``; part of ``counts``' updates and deletes)."""
        totals = {"update-by-source": 0, "delete-by-source": 0}
        for action, count in per_action.items():
            if action in self.by_source:
                totals[f"{self.kinds[action]}-by-source"] += count
        return totals

    def release(self) -> None:
        for df in self.cached:
            df.unpersist()


def _join_type(spec: MergeSpec) -> str:
    by_source, not_matched = bool(spec.of("not_matched_by_source")), bool(spec.of("not_matched"))
    if by_source and not_matched:
        return "full_outer"
    if by_source:
        return "left_outer"
    return "right_outer" if not_matched else "inner"


def _new_value(spec: MergeSpec, column: str, columns: list[str]) -> Column:
    """``merge_sql.new_values`` of one column as a ``Column``, for a column a clause sets a field
    inside (``SET s.c1 = ...``: the struct rebuilt with ``withField``)."""
    value: Column = F.lit(None)
    for i, clause in enumerate(spec.clauses):
        if clause.action == "delete":
            continue
        text = merge_sql.clause_value(clause, column, columns)
        if text is None:
            fields = nested_assignments(
                column, [(c, e) for c, e in clause.assignments or () if c not in columns]
            )
            branch = with_fields(F.col(f"t.{sql_identifier(column)}"), fields)
        else:
            branch = F.expr(text)
        value = F.when(F.col(ACTION) == i, branch).otherwise(value)
    return value.alias(column)


def _staged(joined: DataFrame, spec: MergeSpec, columns: list[str], keep: tuple[str, ...] = ()) -> DataFrame:
    """Per joined row: row id, the index of the first applicable WHEN clause, and the new values, as
    SQL text handed over in one piece (``exec/changes/merge_sql.py``); a column a clause sets a field inside
    is a ``Column`` (:func:`_new_value`).

    ``keep``: SQL expressions of more columns to keep (source keys or row ids).
    """
    head = [f"t.{FILE_COL} AS {FILE_COL}", f"t.{POS_COL} AS {POS_COL}", ACTION, _T_ROW, _S_ROW, *keep]
    if has_lineage(joined):  # a v3 target: each target row's id (NULL for source rows alone)
        head.append(f"t.{ROW_ID} AS {ROW_ID}")
    staged = joined.withColumn(ACTION, F.expr(merge_sql.action(spec)))
    values = merge_sql.new_values(spec, ACTION, columns)
    if values is not None:
        return select_exprs(staged, [*head, *values])
    return staged.select(*[F.expr(h) for h in head], *[_new_value(spec, c, columns) for c in columns])


def _unmatched_source(s: DataFrame, matched_part: DataFrame, spec: MergeSpec, small: bool) -> DataFrame:
    """Source rows that met no target row: an anti-join of the source with the matched source rows.

    A merge on key columns anti-joins on the keys (``=``, as the ON condition: a NULL key matched
    nothing, so it is never among the matched keys and its row is kept), reading the source again;
    any other ON condition needs source row ids. The source was evaluated once (``exec/reading/source.py``),
    so both reads see the same rows and the row ids are stable.

    ``small``: the source was broadcast to the join, so its matched keys (or ids) are broadcast as they
    are, repeats included, and no source row is shuffled. Spark cannot size the matched rows before
    they are cached and would shuffle and sort the whole source (every column) with them.
    """
    hits = matched_part.filter(_met())
    if spec.on_columns is None:
        ids = hits.select(_S_ID)
        return s.join(F.broadcast(ids) if small else ids.distinct(), _S_ID, "left_anti")
    keys = [f"{_S_KEY}{i}" for i in range(len(spec.on_columns))]
    matched_keys = F.broadcast(hits.select(*keys)) if small else hits.select(*keys).distinct()
    cond = [s[f"`{c}`"] == matched_keys[k] for c, k in zip(spec.on_columns, keys, strict=True)]
    return s.join(matched_keys, cond, "left_anti")


@dataclass(frozen=True)
class JoinSlice:
    """Target rows of some partitions and the source rows that can match them.

    ``broadcast``: the source rows go to the tasks that scan the target (target rows stay put);
    otherwise both sides are shuffled (a source-side skewed partition).
    """

    target: DataFrame
    source: DataFrame
    broadcast: bool = True


def _join_slices(
    slices: list[JoinSlice], s: DataFrame, spec: MergeSpec, columns: list[str]
) -> tuple[DataFrame, list[DataFrame]]:
    """Join each slice (target rows streamed, so unmatched target rows can be kept with a left outer
    join) and unite them; unmatched source rows (for WHEN NOT MATCHED) come from
    :func:`_unmatched_source` over the whole source ``s`` (source-sized work only).

    Returns:
        The staged rows and the cached DataFrames to release.
    """
    how = "left_outer" if spec.of("not_matched_by_source") else "inner"
    if spec.on_columns is None:
        keep: tuple[str, ...] = (_S_ID,)
    else:
        keep = tuple(f"s.{sql_identifier(c)} AS {_S_KEY}{i}" for i, c in enumerate(spec.on_columns))
    parts = []
    for piece in slices:
        source = piece.source.withColumn(_S_ROW, F.lit(True))
        source = (F.broadcast(source) if piece.broadcast else source.hint("shuffle_hash")).alias("s")
        target = piece.target.withColumn(_T_ROW, F.lit(True)).alias("t")
        parts.append(_staged(target.join(source, F.expr(spec.on), how), spec, columns, keep=keep))
    matched_part = reduce(DataFrame.unionByName, parts).persist(StorageLevel.MEMORY_AND_DISK)
    staged = matched_part.drop(*[c for c in matched_part.columns if c == _S_ID or c.startswith(_S_KEY)])
    cached = [matched_part]
    if spec.of("not_matched"):
        small = all(piece.broadcast for piece in slices)
        unmatched = _unmatched_source(s.withColumn(_S_ROW, F.lit(True)), matched_part, spec, small).alias("s")
        no_target = slices[0].target.withColumn(_T_ROW, F.lit(True)).limit(0).alias("t")
        rest = _staged(unmatched.join(no_target, F.lit(False), "left_outer"), spec, columns)
        rest = rest.persist(StorageLevel.MEMORY_AND_DISK)
        staged, cached = staged.unionByName(rest), [*cached, rest]
    return staged, cached


def merge_changes(
    target: DataFrame, source: DataFrame, spec: MergeSpec, columns: list[str], colocated: bool = False
) -> RowChanges:
    """Join target (with row ids) and source and derive the changes of the MERGE.

    Args:
        colocated: broadcast the source so that target rows are never shuffled.
    """
    if colocated and spec.on_columns is not None:  # rows are told apart by key: read the source twice
        staged, cached = _join_slices([JoinSlice(target, source)], source, spec, columns)
    elif colocated:  # row ids of the once-evaluated source are stable; persisted (~0.6 s per 57k rows)
        s = source.withColumn(_S_ID, F.monotonically_increasing_id()).persist(StorageLevel.MEMORY_AND_DISK)
        staged, cached = _join_slices([JoinSlice(target, s)], s, spec, columns)
        cached = [s, *cached]
    else:
        t = target.withColumn(_T_ROW, F.lit(True)).alias("t")
        s = source.withColumn(_S_ROW, F.lit(True)).hint("shuffle_hash").alias("s")
        staged = _staged(t.join(s, F.expr(spec.on), _join_type(spec)), spec, columns)
        staged = staged.persist(StorageLevel.MEMORY_AND_DISK)
        cached = [staged]
    return _changes_of(staged, spec, columns, cached)


def merge_changes_sliced(
    slices: list[JoinSlice], source: DataFrame, spec: MergeSpec, columns: list[str]
) -> RowChanges:
    """The MERGE as a union of per-slice joins (see ``plan/colocation.py``); needs key columns.

    Args:
        slices: target rows and the source rows that can match them, per group of partitions.
        source: every source row (the unmatched ones are inserted).
    """
    assert spec.on_columns is not None and slices, "slicing needs key columns and at least one slice"
    staged, cached = _join_slices(slices, source, spec, columns)
    return _changes_of(staged, spec, columns, cached)


def _changes_of(
    staged: DataFrame, spec: MergeSpec, columns: list[str], cached: list[DataFrame]
) -> RowChanges:
    kinds = {i: c.action for i, c in enumerate(spec.clauses)}
    producing = [i for i, c in enumerate(spec.clauses) if c.action != "delete"]
    replaced = [i for i, c in enumerate(spec.clauses) if c.match != "not_matched"]
    removed = staged.filter(F.col(ACTION).isin(replaced)).select(FILE_COL, POS_COL)
    producing_rows = staged.filter(F.col(ACTION).isin(producing))
    lineage = updated_lineage(staged)  # updated rows keep their ids, inserted rows get new ones
    new_rows_at = select_exprs(producing_rows, [*_names([FILE_COL, POS_COL, *columns]), *lineage])
    new_rows = select_columns(new_rows_at, [*columns, *kept_lineage(new_rows_at)])
    by_source = tuple(i for i, c in enumerate(spec.clauses) if c.match == "not_matched_by_source")
    return RowChanges(
        staged,
        removed,
        new_rows,
        kinds,
        tuple(replaced),
        True,
        cached,
        new_rows_at=new_rows_at,
        by_source=by_source,
    )


def _names(names: list[str]) -> list[str]:
    return [sql_identifier(n) for n in names]


def _met() -> Column:
    """A joined row where a target row met a source row."""
    return F.col(_T_ROW).isNotNull() & F.col(_S_ROW).isNotNull()


def matched_flag(changes: RowChanges) -> Column:
    """``_matched``: the joined row is a target row that met a source row (False without a join)."""
    return (_met() if changes.joins_source else F.lit(False)).alias(MATCHED)


def matched_rows(changes: RowChanges) -> DataFrame:
    """Joined rows where a target row met a source row."""
    return changes.joined.filter(_met())


def update_changes(target: DataFrame, spec: UpdateSpec, columns: list[str]) -> RowChanges:
    """UPDATE: rows matching ``where`` get the assignments."""
    cond = F.expr(spec.where) if spec.where else F.lit(True)
    assigned = dict(spec.assignments)
    nested = [(c, e) for c, e in spec.assignments if c not in columns]  # SET s.c1 = ...
    values = [
        (
            F.expr(assigned[c])
            if c in assigned
            else with_fields(F.col(f"`{c}`"), nested_assignments(c, nested))
        ).alias(c)
        for c in columns
    ]
    lineage = [F.expr(e) for e in updated_lineage(target)]  # the updated rows keep their ids
    staged = (
        target.filter(cond)
        .select(FILE_COL, POS_COL, F.lit(0).alias(ACTION), *values, *lineage)
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    kept = kept_lineage(target)
    new_rows = select_columns(staged, [*columns, *kept])
    new_rows_at = select_columns(staged, [FILE_COL, POS_COL, *columns, *kept])
    return RowChanges(
        staged, staged.select(FILE_COL, POS_COL), new_rows, {0: "update"}, new_rows_at=new_rows_at
    )


def delete_changes(target: DataFrame, spec: DeleteSpec, columns: list[str]) -> RowChanges:
    """DELETE: rows matching ``where`` are removed."""
    cond = F.expr(spec.where) if spec.where else F.lit(True)
    staged = target.filter(cond).select(FILE_COL, POS_COL, F.lit(0).alias(ACTION))
    staged = staged.persist(StorageLevel.MEMORY_AND_DISK)
    empty = select_columns(target, [*columns, *kept_lineage(target)]).limit(0)  # as survivors (v3)
    return RowChanges(staged, staged.select(FILE_COL, POS_COL), empty, {0: "delete"})
