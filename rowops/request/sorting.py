"""Parsing of ``sort_by`` entries: a column, optional direction, optional null order (Spark SQL style).

Defaults follow Iceberg and Spark: ascending, NULLs first when ascending and last when descending.

>>> parse_sort_field("ts")
SortFieldSpec(column='ts', descending=False, nulls_first=True)
>>> parse_sort_field("amount DESC")
SortFieldSpec(column='amount', descending=True, nulls_first=False)
>>> parse_sort_field("s.c1 DESC").column
's.c1'
>>> parse_sort_field("k asc nulls last")
SortFieldSpec(column='k', descending=False, nulls_first=False)
>>> parse_sort_field("bucket(4, k)")
Traceback (most recent call last):
...
rowops.errors.InvalidSortOrderError: Invalid sort field 'bucket(4, k)'; expected 'column [ASC|DESC] [NULLS FIRST|LAST]'
Help: Sort by plain columns, e.g. sort_by=["event_date", "amount DESC"].
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rowops.errors import InvalidSortOrderError

_FIELD = re.compile(
    r"^\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(?:\s+(ASC|DESC))?(?:\s+NULLS\s+(FIRST|LAST))?\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class SortFieldSpec:
    """One sort field as the user wrote it."""

    column: str
    descending: bool = False
    nulls_first: bool = True


def parse_sort_field(text: str) -> SortFieldSpec:
    """Parse ``column [ASC|DESC] [NULLS FIRST|LAST]``."""
    match = _FIELD.match(text)
    if match is None:
        raise InvalidSortOrderError(
            f"Invalid sort field {text!r}; expected 'column [ASC|DESC] [NULLS FIRST|LAST]'"
        )
    column, direction, nulls = match.groups()
    descending = (direction or "ASC").upper() == "DESC"
    nulls_first = (nulls.upper() == "FIRST") if nulls else not descending
    return SortFieldSpec(column, descending, nulls_first)


def parse_sort_by(entries: Sequence[str]) -> list[SortFieldSpec]:
    """Parse every entry; a column may appear once.

    >>> [f.column for f in parse_sort_by(["a", "b DESC"])]
    ['a', 'b']
    """
    fields = [parse_sort_field(e) for e in entries]
    seen: set[str] = set()
    for f in fields:
        if f.column in seen:
            raise InvalidSortOrderError(f"Column {f.column!r} appears twice in sort_by")
        seen.add(f.column)
    return fields
