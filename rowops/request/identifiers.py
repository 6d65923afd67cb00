"""Table identifiers: parsing and validation, so that a name can never escape the lake directory.

>>> TableIdentifier.parse("db.orders")
TableIdentifier(namespace=('db',), name='orders')
>>> str(TableIdentifier.parse("sales.eu.orders"))
'sales.eu.orders'
>>> TableIdentifier.parse("../x")
Traceback (most recent call last):
...
rowops.errors.InvalidIdentifierError: Invalid table name '../x': ...
Help: Use dotted names of letters, digits and underscores, such as 'db.orders'.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rowops.errors import InvalidIdentifierError

_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def parse_namespace(text: str) -> tuple[str, ...]:
    """Split and validate a dotted namespace such as ``"db"`` or ``"sales.eu"``."""
    parts = tuple(text.split(".")) if isinstance(text, str) else ()
    if not parts or not all(_PART.match(p) for p in parts):
        raise InvalidIdentifierError(
            f"Invalid namespace {text!r}: each dotted part must be letters, digits or underscores "
            "and may not start with a digit"
        )
    return parts


@dataclass(frozen=True, order=True)
class TableIdentifier:
    """A table name: one or more namespace levels and a table name."""

    namespace: tuple[str, ...]
    name: str

    @classmethod
    def parse(cls, text: str) -> TableIdentifier:
        """Parse ``"ns.table"``; rejects anything that is not a plain dotted identifier."""
        parts = text.split(".") if isinstance(text, str) else []
        if len(parts) < 2 or not all(_PART.match(p) for p in parts):
            raise InvalidIdentifierError(
                f"Invalid table name {text!r}: expected 'namespace.table' made of letters, digits "
                "and underscores (no path separators, no '..')"
            )
        return cls(tuple(parts[:-1]), parts[-1])

    def __str__(self) -> str:
        return ".".join((*self.namespace, self.name))

    @property
    def path_parts(self) -> tuple[str, ...]:
        """Directory names of the table below the lake root."""
        return (*self.namespace, self.name)
