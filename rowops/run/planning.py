"""Planning a row-level operation: the facts it rests on and the choices made from them.

The table loaded once, the source evaluated once and its keys pre-scanned, target files pruned, the
encoding chosen (``plan/strategy.py``) and the join laid out (``plan/colocation.py``). The result,
:class:`Planned`, is what ``operations.execute`` runs and what ``explain`` shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rowops.catalog.tables import LoadedTable
from rowops.exec.checks.expressions import case_sensitive
from rowops.exec.checks.operation import checked_spec, with_write_defaults
from rowops.exec.reading.prescan import SourceKeys, file_keys, scan_source_keys
from rowops.exec.reading.source import evaluate_once, release
from rowops.exec.rewriting.arrow_deletes import KeyCodec
from rowops.exec.rewriting.arrow_rewrite import arrow_eligible
from rowops.exec.rewriting.keyed_rewrite import BY_KEY_PROPERTY, rewrite_codec
from rowops.exec.spark.job_errors import spark_errors
from rowops.exec.spark.stats import broadcast_cap, is_small, measured_bytes
from rowops.meta.delete_index import delete_index, partition_key
from rowops.meta.files import LiveFile, TableFiles, live_files
from rowops.meta.v3 import V3
from rowops.plan.colocation import DISABLED as COLOCATION_DISABLED
from rowops.plan.colocation import JoinLayout, plan_join
from rowops.plan.cost import Estimate
from rowops.plan.debt import Paydown, outside_paydown, read_debt
from rowops.plan.explain import PlanReport
from rowops.plan.metadata_delete import METADATA_ONLY, WholeFileDelete, whole_file_delete, whole_reason
from rowops.plan.predicates import candidates as predicate_candidates
from rowops.plan.pruning import prune_files
from rowops.plan.strategy import (
    COPY_ON_WRITE,
    EQUALITY_DELETE,
    POSITION_DELETE,
    Decision,
    choose_strategy,
    table_facts,
)
from rowops.request.operations import DeleteSpec, MergeSpec, OperationSpec, UpdateSpec, describe
from rowops.request.properties import isolation_level, row_level_conflicts

if TYPE_CHECKING:
    from rowops.exec.spark.frames import DataFrame
    from rowops.run.target import TableTarget

DEFAULT_COLOCATED_MAX_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Planned:
    """An operation planned against one table state, ready to execute."""

    table: TableTarget
    spec: OperationSpec
    source: DataFrame | None
    loaded: LoadedTable
    files: TableFiles
    decision: Decision
    candidates: tuple[LiveFile, ...]
    layout: JoinLayout
    read_weight: float
    report: PlanReport
    source_keys: SourceKeys | None = None
    whole_files: WholeFileDelete | None = None  # a DELETE committed by metadata alone
    key_codec: KeyCodec | None = None  # run by key, no join (``Decision.by_key``)
    # files outside the candidates whose read debt a copy-on-write chosen by cost clears on the way
    paydown: tuple[LiveFile, ...] = ()

    @property
    def rewritten_if_indebted(self) -> tuple[LiveFile, ...]:
        """The files a copy-on-write rewrites when deletes apply to them, touched or not: the
        candidates and the paydown when ``auto`` chose it by cost (``Decision.clears_debt``)."""
        return self.candidates + self.paydown if self.decision.clears_debt else ()


def _property(loaded: LoadedTable, key: str, default: str) -> str:
    return loaded.metadata.properties.get(key, default)


def _estimate(
    planned_files: TableFiles,
    candidates: list[LiveFile],
    rows: int,
    keys: list[str],
    loaded: LoadedTable,
    touched_partitions: set[tuple[object, ...]],
    read_weight: float,
    outside: Paydown,
) -> Estimate:
    schema = loaded.metadata.schema()
    key_ids = {schema.find_field(k).field_id for k in keys}
    total = sum(sum((f.data_file.column_sizes or {}).values()) for f in candidates) or 1
    key_bytes = sum(
        v for f in candidates for k, v in (f.data_file.column_sizes or {}).items() if k in key_ids
    )
    all_rows = sum(f.record_count for f in planned_files.data) or 1
    per_row = sum(f.size for f in planned_files.data) / all_rows
    debt = read_debt(planned_files, candidates, read_weight)
    in_arrow = arrow_eligible(loaded.metadata, delete_index(planned_files), candidates)
    return Estimate(
        source_rows=rows,
        source_bytes=int(rows * per_row),
        candidate_bytes=sum(f.size for f in candidates),
        candidate_rows=sum(f.record_count for f in candidates),
        candidate_files=len(candidates),
        key_fraction=min(key_bytes / total, 1.0),
        partition_bytes=sum(f.size for f in planned_files.data if f.partition in touched_partitions),
        debt_bytes=debt.bytes,
        pos_deleted_bytes=debt.pos_deleted_bytes,
        eq_deleted_bytes=debt.eq_deleted_bytes,
        debt_generations=debt.generations,
        spark_rewrite_bytes=sum(f.size for f in candidates) - sum(f.size for f in in_arrow),
        deleted_bytes=debt.deleted_bytes,
        outside_paid_bytes=outside.paid_bytes,
        outside_rewrite_bytes=outside.rewrite_bytes,
    )


def _outside_paydown(
    files: TableFiles, candidates: list[LiveFile], loaded: LoadedTable, read_weight: float
) -> Paydown:
    """The partitions outside ``candidates`` whose paid-off read debt a copy-on-write would clear
    (``plan/debt.py``); only files that can be rewritten in Arrow."""
    index = delete_index(files)

    def rewritable(group: Sequence[LiveFile]) -> bool:
        return len(arrow_eligible(loaded.metadata, index, group)) == len(group)

    return outside_paydown(files, candidates, rewritable, read_weight)


def plan(table: TableTarget, spec: OperationSpec, source: DataFrame | None, strategy: str) -> Planned:
    """Check the operation, evaluate the source once (``exec/reading/source.py``) and plan on it.

    The caller releases ``Planned.source`` (:func:`release`) once the operation is done.
    """
    loaded = table.load()
    isolation_level(loaded.metadata.properties)  # unknown values fail before any work
    row_level_conflicts(loaded.metadata.properties)
    if source is not None:  # a column the source lacks: its write-default (format v3), if any
        source = with_write_defaults(source, loaded.metadata.schema())
    spec = checked_spec(spec, source, loaded.metadata, table.lake.spark)
    small = source is not None and is_small(source)  # Spark's estimate: pre-scanned in one task
    source = evaluate_once(source) if source is not None else None
    try:
        return _plan(table, spec, source, strategy, loaded, small)
    except BaseException:
        release(source)
        raise


def _runs_by_key(spec: OperationSpec, strategy: str, loaded: LoadedTable) -> tuple[bool, bool]:
    """Whether ``strategy`` (the requested or pinned one) may run ``spec`` by key, without a join:
    (as a copy-on-write rewritten by key, ``exec/rewriting/keyed_rewrite.py``: ``auto``, or a
    copy-on-write of a blind upsert; as position deletes found by key, ``exec/writing/keyed_deletes.py``:
    a blind upsert, ``auto`` or position deletes), unless the table property
    ``rowops.rewrite.by-key.enabled`` is ``false``. On v3 only the latter: a rewrite by key cannot
    know the updated rows' ids, the delete tasks find them."""
    if _property(loaded, BY_KEY_PROPERTY, "true").lower() != "true":
        return False, False
    upsert = isinstance(spec, MergeSpec) and spec.key_upsert_or_delete == "upsert"
    positions = upsert and strategy in ("auto", POSITION_DELETE)
    if loaded.metadata.format_version >= V3:
        return False, positions
    return strategy == "auto" or (strategy in (COPY_ON_WRITE, POSITION_DELETE) and upsert), positions


def _runtime_filter(loaded: LoadedTable) -> bool:
    """Whether a MERGE prunes target files by the source's key ranges (``plan/pruning.py``); the table
    property ``rowops.runtime-filter.enabled=false`` turns it off (the paper's Case 4 compares both)."""
    return _property(loaded, "rowops.runtime-filter.enabled", "true").lower() == "true"


def _plan(
    table: TableTarget,
    spec: OperationSpec,
    source: DataFrame | None,
    strategy: str,
    loaded: LoadedTable,
    small: bool = False,
) -> Planned:
    """Pre-scan the source keys, prune target files, choose the encoding and the join.

    A forced equality-delete write skips the pre-scan, unless the source is ``small``: then its one
    single-task job also checks the keys (``keys_unique``) and counts the rows written.
    """
    files = live_files(loaded.metadata, table.lake.catalog.io)
    facts = table_facts(loaded.metadata, files)
    read_weight = float(_property(loaded, "rowops.read-weight", "1"))
    pinned = loaded.metadata.properties.get("rowops.strategy")
    effective = pinned if strategy == "auto" and pinned else strategy
    rewrite_by_key, positions_by_key = _runs_by_key(spec, effective, loaded)
    by_key = rewrite_by_key or positions_by_key
    candidates, estimate, keyed, whole = list(files.data), None, None, None
    outside = Paydown()
    keys = list(spec.on_columns or ()) if isinstance(spec, MergeSpec) else []
    if isinstance(spec, (UpdateSpec, DeleteSpec)):  # prune by the predicate (``plan/predicates.py``)
        sensitive = case_sensitive(table.lake.spark)
        candidates, all_rows = predicate_candidates(spec.where, files.data, loaded.metadata, sensitive)
        whole = whole_file_delete(files, candidates, all_rows) if isinstance(spec, DeleteSpec) else None
    if source is not None and keys and (strategy != EQUALITY_DELETE or small):
        with spark_errors(describe(spec)):
            partitions = sorted({f.partition for f in files.data}, key=repr)
            check = by_key or EQUALITY_DELETE in (strategy, effective)  # keys_unique: no separate check
            keyed = scan_source_keys(source, keys, loaded.metadata, partitions, check, small, measure=True)
        assert isinstance(spec, MergeSpec)
        if not spec.of("not_matched_by_source") and _runtime_filter(loaded):
            kept = {
                k.path
                for k in prune_files(file_keys(files.data, keys, loaded.metadata.schema()), keyed.ranges).kept
            }
            candidates = [f for f in files.data if f.path in kept]
        if effective == "auto":
            outside = _outside_paydown(files, candidates, loaded, read_weight)
        estimate = _estimate(
            files, candidates, keyed.rows, keys, loaded, set(keyed.ranges.by_partition), read_weight, outside
        )
    unique = keyed.keys_unique if keyed else None
    codec = rewrite_codec(spec, loaded.metadata.schema(), source, keyed) if by_key else None
    decision = choose_strategy(
        strategy,
        spec,
        facts,
        estimate,
        read_weight,
        pinned,
        unique,
        codec is not None and rewrite_by_key,
        codec is not None and positions_by_key,
    )
    layout = _join_layout(spec, source, keyed, decision, loaded, candidates)
    paydown = outside.files if decision.clears_debt else ()
    scanned = len(candidates) if decision.scans_target and whole is None else 0
    report = PlanReport(
        operation=describe(spec),
        requested=strategy,
        strategy=decision.strategy if whole is None else METADATA_ONLY,
        reason=decision.reason + _paydown_note(paydown) if whole is None else whole_reason(whole),
        costs=decision.costs if whole is None else {},
        files_total=len(files.data),
        files_scanned=scanned,
        files_pruned=len(files.data) - scanned if decision.scans_target else 0,
        colocated=layout.colocated if isinstance(spec, MergeSpec) else None,
        colocated_reason=layout.reason,
    )
    return Planned(
        table,
        spec,
        source,
        loaded,
        files,
        decision,
        tuple(candidates),
        layout,
        read_weight,
        report,
        keyed,
        whole,
        codec if decision.by_key else None,
        paydown,
    )


def _paydown_note(paydown: tuple[LiveFile, ...]) -> str:
    """``explain``'s words for the files outside the candidates a copy-on-write rewrites."""
    if not paydown:
        return ""
    partitions = len({partition_key(f) for f in paydown})
    return f"; also clears the read debt of {len(paydown)} files in {partitions} partitions it does not touch"


def _join_layout(
    spec: OperationSpec,
    source: DataFrame | None,
    keyed: SourceKeys | None,
    decision: Decision,
    loaded: LoadedTable,
    candidates: list[LiveFile],
) -> JoinLayout:
    """How the MERGE join co-locates source and target rows (``plan/colocation.py``)."""
    if not isinstance(spec, MergeSpec) or source is None:
        return JoinLayout("shuffle", "no join")
    if not decision.scans_target:
        return JoinLayout("shuffle", "equality deletes do not read the target")
    if _property(loaded, "rowops.colocated-join.enabled", "true").lower() != "true":
        return JoinLayout("shuffle", COLOCATION_DISABLED)
    limit = int(_property(loaded, "rowops.colocated-join.max-bytes", str(DEFAULT_COLOCATED_MAX_BYTES)))
    limit = min(limit, broadcast_cap(source.sparkSession))  # measured bytes, hard cap: exec/spark/stats.py
    size = measured_bytes(source, keyed.rows if keyed else None, measured=keyed.bytes if keyed else None)
    by_partition = None
    if keyed and keyed.rows_by_partition is not None and loaded.metadata.spec().fields:
        by_partition = {p: int(n * size.per_row) for p, n in keyed.rows_by_partition.items()}
    other = sum(1 for f in candidates if f.spec_id != loaded.metadata.default_spec_id)  # partition evolution
    partitions = {f.partition for f in candidates}
    return plan_join(size.bytes, by_partition, partitions, limit, basis=size.basis, other_spec_files=other)
