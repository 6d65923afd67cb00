"""Choosing the write strategy (encoding) of an operation.

>>> from rowops.request.operations import simple_merge_spec, UpdateSpec
>>> facts = TableFacts(identifier=("k",), partition_sources=("k",), data_files=4)
>>> choose_strategy("auto", simple_merge_spec(["k"]), facts).strategy
'hybrid'
>>> choose_strategy("equality-delete", simple_merge_spec(["k"]), facts).strategy
'equality-delete'
>>> choose_strategy("equality-delete", UpdateSpec((("c", "1"),)), facts)
Traceback (most recent call last):
...
rowops.errors.UnsupportedStrategyError: strategy='equality-delete' cannot encode this operation: ...
Help: Use strategy='auto', 'copy-on-write' or 'position-delete'.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from pyiceberg.table.metadata import TableMetadata

from rowops.errors import InvalidInputError, UnsupportedStrategyError
from rowops.meta.files import TableFiles
from rowops.plan.cost import (
    Estimate,
    choose_cheapest,
    keyed_position_cost,
    keyed_rewrite_cost,
    strategy_costs,
)
from rowops.request.operations import STRATEGIES, MergeSpec, OperationSpec

COPY_ON_WRITE, POSITION_DELETE, EQUALITY_DELETE = "copy-on-write", "position-delete", "equality-delete"
HYBRID = "hybrid"


@dataclass(frozen=True)
class SpecFacts:
    """A partition spec that live data files were written with: its id, the source column names of
    its fields (empty: unpartitioned) and how many live data files it has."""

    spec_id: int
    sources: tuple[str, ...]
    data_files: int = 0


@dataclass(frozen=True)
class TableFacts:
    """What the planner knows about the target table, from metadata alone."""

    identifier: tuple[str, ...]
    partition_sources: tuple[str, ...]  # of the current (default) spec
    data_files: int
    spec_id: int = 0  # the current (default) spec
    older_specs: tuple[SpecFacts, ...] = ()  # specs of live data files other than the current one
    unpartitioned_spec: int | None = None  # a spec of the table without fields, if it has one


def table_facts(metadata: TableMetadata, files: TableFiles) -> TableFacts:
    """The facts of a table state: its key, its specs (of live data files too) and file count."""
    schema, specs = metadata.schema(), metadata.specs()
    ident = tuple(schema.find_column_name(i) or "" for i in schema.identifier_field_ids)

    def sources(spec_id: int) -> tuple[str, ...]:  # a dropped source column keys nothing
        fields = specs[spec_id].fields
        return tuple(schema.find_column_name(f.source_id) or f"<dropped field {f.source_id}>" for f in fields)

    current = metadata.default_spec_id
    per_spec = Counter(f.spec_id for f in files.data if f.spec_id != current)
    older = tuple(SpecFacts(i, sources(i), n) for i, n in sorted(per_spec.items()))
    unpartitioned = next((i for i, s in sorted(specs.items()) if not s.fields), None)
    return TableFacts(ident, sources(current), len(files.data), current, older, unpartitioned)


def equality_delete_specs(facts: TableFacts) -> tuple[tuple[int, ...], list[str]]:
    """The partition specs an equality-delete write puts its keys under, or why no spec will do.

    Iceberg applies an equality delete to the older data files of its own spec and partition, or of
    every spec when its spec is unpartitioned. So the keys are written once per spec that has live data
    files, and under the current spec (new files of concurrent writers), each partitioned by that
    spec's transforms: valid when the key determines the partition (every source column of the spec
    is a key column), since a key's old row then lies in exactly that partition. An unpartitioned spec
    in use, or a spec whose partition the key does not determine, calls for one global delete instead,
    written under an unpartitioned spec of the table (none: the encoding is refused).

    >>> from dataclasses import replace
    >>> facts = TableFacts(("k",), ("k",), 5, spec_id=1, older_specs=(SpecFacts(0, ("k",), 3),))
    >>> equality_delete_specs(facts)
    ((0, 1), [])
    >>> equality_delete_specs(replace(facts, older_specs=(SpecFacts(0, (), 3),)))
    ((0,), [])
    >>> equality_delete_specs(replace(facts, older_specs=(SpecFacts(0, ("g",), 3),)))[1]
    ["partition columns ['g'] of spec 0 (3 live data files) are not key columns, so a key's old row may sit in another partition, and the table has no unpartitioned spec for a global delete"]
    >>> equality_delete_specs(replace(facts, older_specs=(SpecFacts(0, ("g",), 3),), unpartitioned_spec=2))
    ((2,), [])
    """
    current = SpecFacts(facts.spec_id, facts.partition_sources)
    specs = [current, *facts.older_specs]
    unpartitioned = [s.spec_id for s in specs if not s.sources]
    if unpartitioned:  # its global delete applies to the files of every spec
        return (unpartitioned[0],), []
    outside = [(s, [c for c in s.sources if c not in facts.identifier]) for s in specs]
    outside = [(s, columns) for s, columns in outside if columns]
    if not outside:
        return tuple(sorted(s.spec_id for s in specs)), []
    if facts.unpartitioned_spec is not None:
        return (facts.unpartitioned_spec,), []
    reasons = []
    for s, columns in outside:
        which = "" if s is current else f" of spec {s.spec_id} ({s.data_files} live data files)"
        reasons.append(
            f"partition columns {columns}{which} are not key columns, so a key's old row may sit in "
            "another partition, and the table has no unpartitioned spec for a global delete"
        )
    return (), reasons


def equality_delete_blockers(spec: OperationSpec, facts: TableFacts) -> list[str]:
    """Reasons why equality deletes cannot encode ``spec`` on this table (empty when they can).

    >>> from rowops.request.operations import simple_merge_spec
    >>> equality_delete_blockers(simple_merge_spec(["k"]), TableFacts(("k", "g"), (), 1))
    ["on=['k'] is not the table's identifier columns ['k', 'g']"]
    >>> equality_delete_blockers(simple_merge_spec(["k"]), TableFacts(("k",), ("k",), 5, spec_id=1,
    ...     older_specs=(SpecFacts(0, ("k",), 2),)))
    []
    """
    if not isinstance(spec, MergeSpec):
        return ["UPDATE and DELETE with a predicate must scan the target to find the rows"]
    reasons = []
    if spec.key_upsert_or_delete is None:
        reasons.append(
            "only an unconditional upsert (update all + insert all) or delete-by-key MERGE on the key "
            "columns can be encoded without scanning the target"
        )
    if spec.on_columns is None or set(spec.on_columns) != set(facts.identifier):
        on = list(spec.on_columns) if spec.on_columns is not None else spec.on
        reasons.append(f"on={on!r} is not the table's identifier columns {list(facts.identifier)!r}")
    return reasons + equality_delete_specs(facts)[1]


@dataclass(frozen=True)
class Decision:
    """The chosen encoding, why, and the cost numbers behind it (empty when not cost-based).

    ``clears_debt``: a copy-on-write chosen by cost, priced (``cost.strategy_costs``) as rewriting
    every candidate file that deletes apply to, touched or not, so that it clears their read debt.
    ``by_key``: that copy-on-write rewrites every candidate file by the source's keys, without a join
    (``cost.keyed_rewrite_cost``, ``exec/rewriting/keyed_rewrite.py``); a position-delete decision finds
    the positions by key, without a join (``exec/writing/keyed_deletes.py``).
    """

    strategy: str
    reason: str
    costs: dict[str, float] = field(default_factory=dict)
    clears_debt: bool = False
    by_key: bool = False

    @property
    def scans_target(self) -> bool:
        return self.strategy != EQUALITY_DELETE


def allowed_strategies(spec: OperationSpec, facts: TableFacts) -> set[str]:
    """Encodings that can express ``spec`` on this table."""
    allowed = {COPY_ON_WRITE, POSITION_DELETE, HYBRID}
    return allowed | {EQUALITY_DELETE} if not equality_delete_blockers(spec, facts) else allowed


def choose_strategy(
    requested: str,
    spec: OperationSpec,
    facts: TableFacts,
    estimate: Estimate | None = None,
    read_weight: float = 1.0,
    pinned: str | None = None,
    keys_unique: bool | None = None,
    by_key: bool = False,
    positions_by_key: bool = False,
) -> Decision:
    """The encoding to run.

    A requested (or table-pinned, ``rowops.strategy``) encoding is validated and used. For 'auto' the
    cheapest encoding by :func:`rowops.plan.cost.strategy_costs` wins. When position deletes win, the
    choice between rewriting and position deletes is refined per file at run time (hybrid); when
    copy-on-write wins (the deletes already on the files cost reads more than a rewrite), it runs.
    ``keys_unique=False`` (the pre-scan found NULL or repeated source keys) rules equality deletes out
    for 'auto': whether such keys are an error or rows to insert depends on the target rows they
    match, which only a scanning encoding sees. So does a table whose equality deletes would be
    written under several partition specs (partition evolution, :func:`equality_delete_specs`): valid
    Iceberg that Iceberg Java reads, but DuckDB 1.5.5 fails on an equality delete whose spec has a
    field a data file's spec lacks, so only an explicit request writes them. ``by_key``: the MERGE
    can be rewritten by key (a blind upsert on unique integer keys): where its keys are the table's
    identifier (at most one live row per key), its copy-on-write, chosen or requested, runs as the
    cheaper of the join and the rewrite by key (:func:`rowops.plan.cost.keyed_rewrite_cost`).
    ``positions_by_key``: its position deletes (deletion vectors on v3) can be found by key
    (``exec/writing/keyed_deletes.py``): requested, they are; for 'auto' they are priced without the
    join (:func:`rowops.plan.cost.keyed_position_cost`).

    >>> from rowops.request.operations import simple_merge_spec
    >>> facts = TableFacts(identifier=("k",), partition_sources=("k",), data_files=4)
    >>> choose_strategy("copy-on-write", simple_merge_spec(["k"]), facts).reason
    'requested'
    >>> est = Estimate(10, 1_000, 10**9, 10**7, 100, 0.1, 10**9)
    >>> d = choose_strategy("auto", simple_merge_spec(["k"]), facts, est, read_weight=0.0)
    >>> d.strategy, sorted(d.costs)
    ('equality-delete', ['copy-on-write', 'equality-delete', 'position-delete'])
    >>> choose_strategy("auto", simple_merge_spec(["k"]), facts, est, read_weight=2.0).strategy
    'hybrid'
    >>> choose_strategy("auto", simple_merge_spec(["k"]), facts, est, read_weight=5.0).strategy
    'copy-on-write'
    >>> choose_strategy("auto", simple_merge_spec(["k"]), facts, est, read_weight=0.0, keys_unique=False).strategy
    'hybrid'
    >>> dense = Estimate(180_000, 9_000_000, 13_000_000, 360_000, 2, 0.1, 13_000_000)
    >>> choose_strategy("auto", simple_merge_spec(["k"]), facts, dense, 2.0, keys_unique=True).strategy
    'equality-delete'
    >>> keyed = choose_strategy("auto", simple_merge_spec(["k"]), facts, dense, 2.0, keys_unique=True, by_key=True)
    >>> keyed.strategy, keyed.by_key, keyed.reason
    ('copy-on-write', True, 'cheapest (read weight 2); rewritten by key, no join')
    >>> forced = choose_strategy("copy-on-write", simple_merge_spec(["k"]), facts, dense, by_key=True)
    >>> forced.by_key, forced.reason
    (True, 'requested; rewritten by key, no join')
    >>> choose_strategy("copy-on-write", simple_merge_spec(["k"]), facts, est, by_key=True).by_key
    False
    >>> choose_strategy("position-delete", simple_merge_spec(["k"]), facts, est, positions_by_key=True).reason
    'requested; positions found by key, no join'
    >>> by_keys = choose_strategy("auto", simple_merge_spec(["k"]), facts, est, 2.0, keys_unique=True, positions_by_key=True)
    >>> by_keys.strategy, by_keys.by_key, by_keys.reason
    ('position-delete', True, 'cheapest (read weight 2); positions found by key, no join')
    >>> no_key = TableFacts(identifier=(), partition_sources=("k",), data_files=4)
    >>> choose_strategy("copy-on-write", simple_merge_spec(["k"]), no_key, dense, by_key=True).by_key
    False
    >>> evolved = TableFacts(("k",), ("k",), 4, spec_id=1, older_specs=(SpecFacts(0, ("k",), 2),))
    >>> choose_strategy("auto", simple_merge_spec(["k"]), evolved, est, read_weight=0.0).strategy
    'hybrid'
    """
    if requested not in STRATEGIES:
        raise InvalidInputError(f"Unknown strategy {requested!r}; expected one of {', '.join(STRATEGIES)}")
    reason = "requested"
    if requested == "auto" and pinned:
        requested, reason = pinned, "pinned by table property rowops.strategy"
    if requested == EQUALITY_DELETE:
        blockers = equality_delete_blockers(spec, facts)
        if blockers:
            raise UnsupportedStrategyError(
                f"strategy='equality-delete' cannot encode this operation: {'; '.join(blockers)}"
            )
    on = spec.on_columns if isinstance(spec, MergeSpec) else None
    on_identifier = on is not None and set(on) == set(facts.identifier)
    by_key, positions_by_key = by_key and on_identifier, positions_by_key and on_identifier
    if requested == COPY_ON_WRITE and by_key and estimate is not None:
        return _copy_on_write(reason, estimate, read_weight)
    if requested == POSITION_DELETE and positions_by_key:
        return Decision(POSITION_DELETE, f"{reason}; positions found by key, no join", by_key=True)
    if requested != "auto":
        return Decision(requested, reason)
    if facts.data_files == 0:
        return Decision(COPY_ON_WRITE, "the table has no data files: nothing to delete from")
    if estimate is None:
        return Decision(HYBRID, "no source estimate: scan, then rewrite or add deletes per file")
    costs = strategy_costs(estimate, read_weight)
    keyed = keyed_rewrite_cost(estimate, read_weight) if by_key else float("inf")
    costs[COPY_ON_WRITE] = min(costs[COPY_ON_WRITE], keyed)
    keyed_positions = keyed_position_cost(estimate, read_weight) if positions_by_key else float("inf")
    costs[POSITION_DELETE] = min(costs[POSITION_DELETE], keyed_positions)
    allowed = allowed_strategies(spec, facts) - {HYBRID}
    if keys_unique is False or len(equality_delete_specs(facts)[0]) > 1:
        allowed -= {EQUALITY_DELETE}
    best = choose_cheapest(costs, allowed)
    if best == COPY_ON_WRITE:  # a rewrite that clears what reads now pay
        how = "; rewritten by key, no join" if costs[best] == keyed else ""
        reason = f"cheapest (read weight {read_weight:g}){how}"
        return Decision(best, reason, costs, clears_debt=True, by_key=costs[best] == keyed)
    if best != POSITION_DELETE:
        return Decision(best, f"cheapest (read weight {read_weight:g})", costs)
    if costs[best] == keyed_positions:
        reason = f"cheapest (read weight {read_weight:g}); positions found by key, no join"
        return Decision(POSITION_DELETE, reason, costs, by_key=True)
    return Decision(
        HYBRID, f"position deletes are cheapest (read weight {read_weight:g}); dense files rewritten", costs
    )


def _copy_on_write(reason: str, estimate: Estimate, read_weight: float) -> Decision:
    """A requested copy-on-write: rewritten by key where that is cheaper than through the join."""
    keyed = keyed_rewrite_cost(estimate, read_weight)
    if keyed < strategy_costs(estimate, read_weight)[COPY_ON_WRITE]:
        return Decision(COPY_ON_WRITE, f"{reason}; rewritten by key, no join", by_key=True)
    return Decision(COPY_ON_WRITE, reason)
