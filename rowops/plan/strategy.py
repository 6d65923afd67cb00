"""Choosing the write strategy (encoding) of an operation.

>>> from rowops.spec.operations import simple_merge_spec, UpdateSpec
>>> facts = TableFacts(identifier=("k",), partition_sources=("k",), data_files=4)
>>> choose_strategy("auto", simple_merge_spec(["k"]), facts)
'position-delete'
>>> choose_strategy("equality-delete", simple_merge_spec(["k"]), facts)
'equality-delete'
>>> choose_strategy("equality-delete", UpdateSpec((("c", "1"),)), facts)
Traceback (most recent call last):
...
rowops.errors.UnsupportedStrategyError: strategy='equality-delete' cannot encode this operation: ...
Help: Use strategy='auto', 'copy-on-write' or 'position-delete'.
"""

from __future__ import annotations

from dataclasses import dataclass

from rowops.errors import InvalidInputError, UnsupportedStrategyError
from rowops.spec.operations import STRATEGIES, MergeSpec, OperationSpec

COPY_ON_WRITE, POSITION_DELETE, EQUALITY_DELETE = "copy-on-write", "position-delete", "equality-delete"


@dataclass(frozen=True)
class TableFacts:
    """What the planner knows about the target table, from metadata alone."""

    identifier: tuple[str, ...]
    partition_sources: tuple[str, ...]
    data_files: int


def equality_delete_blockers(spec: OperationSpec, facts: TableFacts) -> list[str]:
    """Reasons why equality deletes cannot encode ``spec`` on this table (empty when they can).

    >>> from rowops.spec.operations import simple_merge_spec
    >>> equality_delete_blockers(simple_merge_spec(["k"]), TableFacts(("k", "g"), (), 1))
    ["on=['k'] is not the table's identifier columns ['k', 'g']"]
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
    return reasons


def choose_strategy(requested: str, spec: OperationSpec, facts: TableFacts) -> str:
    """The strategy to run: the requested one if it can encode the operation, or the rule for 'auto'.

    The rule for 'auto' (until the cost-based planner lands): position deletes, the paper's best
    all-round encoding for micro-batches; copy-on-write when the table has no data files yet.
    """
    if requested not in STRATEGIES:
        raise InvalidInputError(f"Unknown strategy {requested!r}; expected one of {', '.join(STRATEGIES)}")
    if requested == EQUALITY_DELETE:
        blockers = equality_delete_blockers(spec, facts)
        if blockers:
            raise UnsupportedStrategyError(
                f"strategy='equality-delete' cannot encode this operation: {'; '.join(blockers)}"
            )
        return EQUALITY_DELETE
    if requested == "auto":
        return COPY_ON_WRITE if facts.data_files == 0 else POSITION_DELETE
    return requested
