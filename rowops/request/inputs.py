"""Checks of the arguments of the public API: every bad call becomes an :class:`InvalidArgumentError`.

Conditions and expressions are Spark SQL text (``"k > 5"``, ``"s.amount + t.amount"``), so that an
operation is plain data that can be explained, logged and retried; a ``pyspark.sql.Column`` is
rejected with a Help line rather than converted (PySpark 3.5 has no reliable Column → SQL text).

>>> sql_text("k > 5", "where")
'k > 5'
>>> merge_on(["k", "g"])
('k', 'g')
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Mapping
from typing import ParamSpec, TypeVar

from rowops.errors import InvalidArgumentError

P = ParamSpec("P")
R = TypeVar("R")

_SQL_HELP = (
    'Write conditions and expressions as Spark SQL text, e.g. where="k > 5" or '
    'set={"amount": "amount * 2"}; in MERGE refer to t.<col> (target) and s.<col> (source).'
)


def checked_call(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorate a public function so that an unknown keyword or a missing argument raises
    :class:`InvalidArgumentError` (also a ``TypeError``) naming the close matches."""
    signature = inspect.signature(fn)
    accepted = [n for n, p in signature.parameters.items() if n != "self" and p.kind != p.VAR_KEYWORD]

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            unknown = [k for k in kwargs if k not in signature.parameters]
            hints = [
                f"did you mean {m[0]!r} for {k!r}?"
                for k in unknown
                if (m := difflib.get_close_matches(k, accepted, 1))
            ]
            raise InvalidArgumentError(
                f"{fn.__qualname__}(): {exc}" + (f"; {' '.join(hints)}" if hints else ""),
                help=f"{fn.__qualname__} takes {', '.join(accepted)}.",
            ) from None
        return fn(*args, **kwargs)

    return wrapper


def _kind(value: object) -> str:
    return f"{type(value).__module__}.{type(value).__qualname__}"


def sql_text(value: object, what: str) -> str:
    """``value`` if it is SQL text; a Column or anything else raises :class:`InvalidArgumentError`."""
    if isinstance(value, str):
        return value
    if type(value).__name__ == "Column":
        raise InvalidArgumentError(
            f"{what} takes Spark SQL text, not a pyspark Column ({value!r})", help=_SQL_HELP
        )
    raise InvalidArgumentError(f"{what} takes Spark SQL text, not {_kind(value)} ({value!r})", help=_SQL_HELP)


def optional_sql(value: object, what: str) -> str | None:
    """:func:`sql_text`, or None."""
    return None if value is None else sql_text(value, what)


def assignment_map(value: object, what: str) -> Mapping[str, str]:
    """A mapping of column name to SQL expression text (checked)."""
    if not isinstance(value, Mapping) or not value:
        raise InvalidArgumentError(
            f"{what} takes a non-empty mapping of column name to Spark SQL expression, not {_kind(value)}",
            help=_SQL_HELP,
        )
    for column, expression in value.items():
        if not isinstance(column, str):
            raise InvalidArgumentError(
                f"{what}: column names must be strings, not {column!r}", help=_SQL_HELP
            )
        sql_text(expression, f"{what}[{column!r}]")
    return value


def merge_on(value: object) -> str | tuple[str, ...]:
    """``on=``: a Spark SQL join condition or key column name(s)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and value and all(isinstance(c, str) for c in value):
        return tuple(value)
    raise InvalidArgumentError(
        f"on= takes key column names or a Spark SQL condition, not {_kind(value)} ({value!r})",
        help='Use on=["k"] (NULL-safe key equality) or on="t.k = s.k AND t.g = s.g".',
    )


def name_list(value: object, what: str) -> list[str]:
    """A list of names/entries; one string counts as a list of one (``partition_by="bucket(4, k)"``).

    >>> name_list("k", "identifier"), name_list(("a", "b"), "identifier"), name_list(None, "sort_by")
    (['k'], ['a', 'b'], [])
    """
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    raise InvalidArgumentError(
        f"{what} takes a list of strings, not {_kind(value)} ({value!r})",
        help=f'Pass e.g. {what}=["k"].',
    )


_NUMBERS: dict[str, tuple[type[float] | type[int], float]] = {
    "rowops.read-weight": (float, 0),
    "rowops.colocated-join.max-bytes": (int, 0),
    "write.target-file-size-bytes": (int, 1),
}
_CHOICES = {
    "rowops.colocated-join.enabled": ("true", "false"),
    "rowops.rewrite.arrow.enabled": ("true", "false"),
    "rowops.conflict-detection": ("row", "file"),
    "rowops.runtime-filter.enabled": ("true", "false"),
    "rowops.isolation-level": ("serializable", "snapshot"),
    "write.distribution-mode": ("hash", "range", "none"),
}


def check_properties(properties: Mapping[str, str]) -> None:
    """Reject values of rowops' own table properties that it could not use later.

    >>> check_properties({"rowops.read-weight": "2.5", "other": "x"})
    """
    for key, value in properties.items():
        if key in _NUMBERS:
            kind, least = _NUMBERS[key]
            try:
                ok = kind(value) >= least
            except ValueError:
                ok = False
            if not ok:
                raise InvalidArgumentError(
                    f"Table property {key}={value!r} is not a{'n integer' if kind is int else ' number'} >= {least}",
                    help=f"Set {key} to a number, e.g. set_properties(**{{{key!r}: '{kind(least) or 1}'}}).",
                )
        elif (
            key in _CHOICES
            and (value if key == "rowops.isolation-level" else value.lower()) not in _CHOICES[key]
        ):
            raise InvalidArgumentError(
                f"Table property {key}={value!r} is not one of {_CHOICES[key]}",
                help=f"Set {key} to one of {', '.join(_CHOICES[key])}.",
            )
