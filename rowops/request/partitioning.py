"""Parsing of ``partition_by`` entries into Iceberg partition transforms.

>>> parse_partition_field("bucket(16, k)")
PartitionFieldSpec(transform='bucket', source='k', param=16)
>>> parse_partition_field("day(ts)").field_name
'ts_day'
>>> parse_partition_field("g")
PartitionFieldSpec(transform='identity', source='g', param=None)
>>> parse_partition_field("day(s.ts)")
PartitionFieldSpec(transform='day', source='s.ts', param=None)
>>> parse_partition_field("void(g)")
PartitionFieldSpec(transform='void', source='g', param=None)
>>> parse_partition_field("bucket(k)")
Traceback (most recent call last):
...
rowops.errors.InvalidPartitionSpecError: Invalid partition field 'bucket(k)': bucket needs (N, column)
Help: Use column names, bucket(N, col), truncate(W, col), year(col), month(col), day(col) or hour(col).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rowops.errors import InvalidPartitionSpecError

TIME_TRANSFORMS = ("year", "month", "day", "hour")
_ALIASES = {"years": "year", "months": "month", "days": "day", "hours": "hour", "date": "day"}
_NAME = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"  # a column, or a field of a struct: s.c1
_CALL = re.compile(rf"^\s*([A-Za-z_]+)\s*\(\s*(?:(\d+)\s*,\s*)?({_NAME})\s*\)\s*$")
_COLUMN = re.compile(rf"^\s*({_NAME})\s*$")


@dataclass(frozen=True)
class PartitionFieldSpec:
    """One partition field as the user wrote it: transform name, source column, parameter."""

    transform: str
    source: str
    param: int | None = None

    @property
    def field_name(self) -> str:
        """Iceberg's conventional partition field name (as Iceberg's Java library names it); a nested
        source's dots become underscores (``s.c1`` -> ``s_c1``), as names of Avro record fields.

        >>> parse_partition_field("bucket(4, s.c1)").field_name
        's_c1_bucket'
        """
        source = self.source.replace(".", "_")
        if self.transform == "identity":
            return source
        return f"{source}_{self.transform}"


def parse_partition_field(text: str) -> PartitionFieldSpec:
    """Parse one ``partition_by`` entry."""
    if not isinstance(text, str):
        raise InvalidPartitionSpecError(f"Invalid partition field {text!r}: expected a string")
    if m := _COLUMN.match(text):
        return PartitionFieldSpec("identity", m.group(1))
    m = _CALL.match(text)
    if not m:
        raise InvalidPartitionSpecError(f"Invalid partition field {text!r}: cannot parse")
    name, param, column = m.group(1).lower(), m.group(2), m.group(3)
    name = _ALIASES.get(name, name)
    if name in ("bucket", "truncate"):
        if param is None or int(param) <= 0:
            raise InvalidPartitionSpecError(f"Invalid partition field {text!r}: {name} needs (N, column)")
        return PartitionFieldSpec(name, column, int(param))
    if name in TIME_TRANSFORMS and param is None:
        return PartitionFieldSpec(name, column)
    if name in ("identity", "void") and param is None:
        return PartitionFieldSpec(name, column)
    raise InvalidPartitionSpecError(f"Invalid partition field {text!r}: unknown transform {name!r}")


def parse_partition_by(entries: list[str] | tuple[str, ...] | None) -> tuple[PartitionFieldSpec, ...]:
    """Parse all entries; rejects duplicates of the same transform on the same column."""
    fields = tuple(parse_partition_field(e) for e in entries or ())
    names = [f.field_name for f in fields]
    if len(set(names)) != len(names):
        raise InvalidPartitionSpecError(f"Invalid partition_by {entries!r}: a partition field is repeated")
    return fields
