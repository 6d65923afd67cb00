"""Choosing the write strategy (encoding) of an operation.

>>> from rowops.spec.operations import simple_merge_spec, UpdateSpec
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

from dataclasses import dataclass, field

from rowops.errors import InvalidInputError, UnsupportedStrategyError
from rowops.plan.cost import Estimate, choose_cheapest, strategy_costs
from rowops.spec.operations import STRATEGIES, MergeSpec, OperationSpec

COPY_ON_WRITE, POSITION_DELETE, EQUALITY_DELETE = "copy-on-write", "position-delete", "equality-delete"
HYBRID = "hybrid"


@dataclass(frozen=True)
class TableFacts:
    """What the planner knows about the target table, from metadata alone."""

    identifier: tuple[str, ...]
    partition_sources: tuple[str, ...]
    data_files: int
    other_spec_files: int = 0  # live data files of another spec than the current, partitioned one


def equality_delete_blockers(spec: OperationSpec, facts: TableFacts) -> list[str]:
    """Reasons why equality deletes cannot encode ``spec`` on this table (empty when they can).

    >>> from rowops.spec.operations import simple_merge_spec
    >>> equality_delete_blockers(simple_merge_spec(["k"]), TableFacts(("k", "g"), (), 1))
    ["on=['k'] is not the table's identifier columns ['k', 'g']"]
    >>> equality_delete_blockers(simple_merge_spec(["k"]), TableFacts(("k",), ("k",), 5, other_spec_files=2))
    ['2 data files were written under an older partition spec; an equality delete partitioned by the current spec would not apply to them']
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
    outside = [c for c in facts.partition_sources if c not in facts.identifier]
    if outside:
        reasons.append(
            f"partition columns {outside} are not key columns, so a key's old row may sit in another partition"
        )
    if facts.other_spec_files:  # Iceberg scopes a partitioned equality delete to its spec's files
        reasons.append(
            f"{facts.other_spec_files} data files were written under an older partition spec; an equality "
            "delete partitioned by the current spec would not apply to them"
        )
    return reasons


@dataclass(frozen=True)
class Decision:
    """The chosen encoding, why, and the cost numbers behind it (empty when not cost-based).

    ``clears_debt``: a copy-on-write chosen by cost, priced (``cost.strategy_costs``) as rewriting
    every candidate file that deletes apply to, touched or not, so that it clears their read debt.
    """

    strategy: str
    reason: str
    costs: dict[str, float] = field(default_factory=dict)
    clears_debt: bool = False

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
) -> Decision:
    """The encoding to run.

    A requested (or table-pinned, ``rowops.strategy``) encoding is validated and used. For 'auto' the
    cheapest encoding by :func:`rowops.plan.cost.strategy_costs` wins. When position deletes win, the
    choice between rewriting and position deletes is refined per file at run time (hybrid); when
    copy-on-write wins (the deletes already on the files cost reads more than a rewrite), it runs.
    ``keys_unique=False`` (the pre-scan found NULL or repeated source keys) rules equality deletes out
    for 'auto': whether such keys are an error or rows to insert depends on the target rows they
    match, which only a scanning encoding sees.

    >>> from rowops.spec.operations import simple_merge_spec
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
    if requested != "auto":
        return Decision(requested, reason)
    if facts.data_files == 0:
        return Decision(COPY_ON_WRITE, "the table has no data files: nothing to delete from")
    if estimate is None:
        return Decision(HYBRID, "no source estimate: scan, then rewrite or add deletes per file")
    costs = strategy_costs(estimate, read_weight)
    allowed = allowed_strategies(spec, facts) - {HYBRID}
    if keys_unique is False:
        allowed -= {EQUALITY_DELETE}
    best = choose_cheapest(costs, allowed)
    if best != POSITION_DELETE:  # equality deletes, or a rewrite that clears what reads now pay
        return Decision(best, f"cheapest (read weight {read_weight:g})", costs, best == COPY_ON_WRITE)
    return Decision(
        HYBRID, f"position deletes are cheapest (read weight {read_weight:g}); dense files rewritten", costs
    )
