"""Metadata-only DELETE: when every candidate file matches the predicate in full, remove the files.

``plan/predicates.py`` finds the data files whose every row matches (strict partition projection or
strict column metrics). When those are all the files that may hold a matching row, the DELETE is a
commit that removes them and their delete files: no Spark job. The number of rows deleted must be
exact, so a file qualifies only when it is known how many of its rows are still live: no equality
delete applies to it, and at most one position delete file names it, and names only it (rowops writes
one position delete file per data file, its ``file_path`` bounds equal to that path).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rowops.meta.delete_index import delete_index
from rowops.meta.files import LiveFile, TableFiles

METADATA_ONLY = "metadata-only"


@dataclass(frozen=True)
class WholeFileDelete:
    """Files removed by a metadata-only DELETE and the live rows they held."""

    data: tuple[LiveFile, ...]
    deletes: frozenset[str]  # paths of position delete files of exactly those data files
    rows: int


def whole_file_delete(
    files: TableFiles, candidates: Sequence[LiveFile], whole: Sequence[LiveFile]
) -> WholeFileDelete | None:
    """The metadata-only delete of ``candidates`` when each is in ``whole`` and its live rows are known."""
    if len(whole) != len(candidates):
        return None
    index = delete_index(files)
    rows, deletes = 0, set()
    for f in whole:
        own = index.position_deletes_of(f)
        if len(own) > 1 or index.equality_deletes_on(f) or any(d.referenced_file != f.path for d in own):
            return None
        rows += f.record_count - sum(d.record_count for d in own)
        deletes |= {d.path for d in own}
    return WholeFileDelete(tuple(whole), frozenset(deletes), rows)


def whole_reason(whole: WholeFileDelete) -> str:
    """The plan report's reason for a metadata-only delete."""
    return (
        f"every row of the {len(whole.data)} data files that may match the predicate matches it "
        "(partition values / column metrics): they are removed without a Spark job"
    )
