"""The row counts of a row-level operation: what each encoding knows, and how they are recorded.

``counts`` maps ``insert``, ``update`` and ``delete`` to rows (None: the encoding cannot know); the
Spark join path adds the parts of updates and deletes done by WHEN NOT MATCHED BY SOURCE clauses
(``update-by-source``, ``delete-by-source``; ``commit.summary.merge_into_summary``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pyiceberg.manifest import DataFile

from rowops.catalog.history import UNKNOWN_ROWS

ROW_KINDS = ("insert", "update", "delete")

# What equality deletes know without reading the target: an upsert replaces or inserts each source
# row (it deletes none without writing its new version) but cannot tell which keys existed; a delete
# by key inserts and updates nothing and cannot tell how many of its keys existed.
BLIND_UPSERT_COUNTS: dict[str, int | None] = {"insert": None, "update": None, "delete": 0}
BLIND_DELETE_COUNTS: dict[str, int | None] = {"insert": 0, "update": 0, "delete": None}


def rows_summary(counts: Mapping[str, int | None]) -> dict[str, str]:
    """The snapshot summary's ``rowops.rows-*`` keys, and the one naming the counts not known
    (``catalog/history.py`` reads both).

    >>> rows_summary(BLIND_UPSERT_COUNTS)
    {'rowops.rows-deleted': '0', 'rowops.rows-unknown': 'inserted,updated'}
    """
    known = {
        f"rowops.rows-{kind.removesuffix('e')}ed": str(counts[kind])
        for kind in ROW_KINDS
        if counts.get(kind) is not None
    }
    unknown = [f"{kind.removesuffix('e')}ed" for kind in ROW_KINDS if kind in counts and counts[kind] is None]
    return known | ({UNKNOWN_ROWS: ",".join(unknown)} if unknown else {})


def rows_written(counts: Mapping[str, int | None], added_data: Iterable[DataFile]) -> int:
    """Rows inserted or updated; where the split is unknown (equality deletes) the rows written, which
    are exactly the source rows (no unchanged row is copied)."""
    inserted, updated = counts.get("insert"), counts.get("update")
    if inserted is not None and updated is not None:
        return inserted + updated
    return sum(f.record_count for f in added_data)
