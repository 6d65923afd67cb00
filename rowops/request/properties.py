"""Table properties rowops reads, validated where they are used (``request/inputs.py`` checks them where set).

>>> isolation_level({})
'serializable'
>>> isolation_level({"rowops.isolation-level": "Snapshot"})
'snapshot'
>>> isolation_level({"rowops.isolation-level": "serialisable"})
Traceback (most recent call last):
...
rowops.errors.InvalidInputError: Table property rowops.isolation-level is 'serialisable'; expected one of serializable, snapshot
Help: Set it with table.set_properties(**{"rowops.isolation-level": "serializable"}) (or "snapshot").
>>> row_level_conflicts({}), row_level_conflicts({"rowops.conflict-detection": "File"})
(True, False)
"""

from __future__ import annotations

from collections.abc import Mapping

from rowops.errors import InvalidInputError

ISOLATION_LEVEL = "rowops.isolation-level"
ISOLATION_LEVELS = ("serializable", "snapshot")
DEFAULT_ISOLATION_LEVEL = "serializable"


def isolation_level(properties: Mapping[str, str]) -> str:
    """The table's isolation level; an unknown value is an error, never a silent default."""
    value = properties.get(ISOLATION_LEVEL, DEFAULT_ISOLATION_LEVEL)
    level = value.strip().lower()
    if level not in ISOLATION_LEVELS:
        raise InvalidInputError(
            f"Table property {ISOLATION_LEVEL} is {value!r}; expected one of {', '.join(ISOLATION_LEVELS)}",
            help=f'Set it with table.set_properties(**{{"{ISOLATION_LEVEL}": "serializable"}}) (or "snapshot").',
        )
    return level


CONFLICT_DETECTION = "rowops.conflict-detection"
CONFLICT_DETECTIONS = ("row", "file")


def row_level_conflicts(properties: Mapping[str, str]) -> bool:
    """Whether concurrent deletes are compared row by row (``row``, the default) or file by file."""
    value = properties.get(CONFLICT_DETECTION, "row")
    if value.strip().lower() not in CONFLICT_DETECTIONS:
        raise InvalidInputError(
            f"Table property {CONFLICT_DETECTION} is {value!r}; expected one of {', '.join(CONFLICT_DETECTIONS)}",
            help=f'Set it with table.set_properties(**{{"{CONFLICT_DETECTION}": "row"}}) (or "file").',
        )
    return value.strip().lower() == "row"
