"""Format v3 row lineage of scanned rows (``meta/lineage.py``): each row's ``_row_id`` and
``_last_updated_sequence_number`` as Iceberg reads them, so writers that move rows keep both.

A scan with row ids reads the materialized values (NULL where a file has none) and fills the rest
from the row's file: its ``first_row_id`` + the row's position, and its data sequence number. The
per-file values reach the rows through literal maps (few files) or a broadcast of one row per file;
rows never leave the executors.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from rowops.exec.reading.file_reads import FILE_COL, POS_COL, file_uris
from rowops.exec.spark.literal_frames import literal_frame
from rowops.meta.files import LiveFile
from rowops.meta.lineage import LAST_UPDATED, LINEAGE_COLUMNS, ROW_ID
from rowops.meta.v3 import first_row_id

_LITERAL_FILES = 64  # files looked up in literal maps; more are joined with a broadcast table
_FIRST, _SEQ = "_lineage_first_row_id", "_lineage_seq"


def carries_lineage(files: Sequence[LiveFile]) -> bool:
    """Whether rows of ``files`` have row ids: data files of a v3 table (they have a ``first_row_id``)."""
    return any(first_row_id(f.data_file) is not None for f in files)


def has_lineage(df: DataFrame) -> bool:
    """Whether ``df`` has the row lineage columns (a scan of a v3 table with row ids)."""
    return ROW_ID in df.columns


def resolve_lineage(spark: SparkSession, rows: DataFrame, files: Sequence[LiveFile]) -> DataFrame:
    """``rows`` (with ``_file``, ``_pos`` and the materialized lineage columns, NULL where absent) with
    every row's lineage as Iceberg reads it: the materialized values, else inherited from its file."""
    uris = file_uris(spark, files)
    facts = [(uris[f.path], first_row_id(f.data_file), f.seq) for f in files]
    if len(facts) > _LITERAL_FILES:
        table = literal_frame(spark, facts, [(FILE_COL, "string"), (_FIRST, "bigint"), (_SEQ, "bigint")])
        joined = rows.join(F.broadcast(table), FILE_COL, "left_outer")
        return _resolved(joined, F.col(_FIRST), F.col(_SEQ)).drop(_FIRST, _SEQ)
    first = F.create_map(*[c for uri, row_id, _ in facts for c in (F.lit(uri), F.lit(row_id))])
    seq = F.create_map(*[c for uri, _, s in facts for c in (F.lit(uri), F.lit(s))])
    return _resolved(rows, first[F.col(FILE_COL)], seq[F.col(FILE_COL)])


def _resolved(rows: DataFrame, first: Column, seq: Column) -> DataFrame:
    row_id = F.coalesce(F.col(ROW_ID), first.cast("bigint") + F.col(POS_COL)).alias(ROW_ID)
    updated = F.coalesce(F.col(LAST_UPDATED), seq.cast("bigint")).alias(LAST_UPDATED)
    return rows.withColumns({ROW_ID: row_id, LAST_UPDATED: updated})


def updated_lineage(df: DataFrame) -> list[str]:
    """SQL of the lineage columns of new row versions made from ``df``'s rows (none without lineage):
    the old row's ``_row_id`` (NULL for an insert), and NULL as the sequence number, which inherits the
    sequence number of the commit that writes the row (Iceberg's own UPDATE and MERGE)."""
    return [ROW_ID, f"CAST(NULL AS BIGINT) AS {LAST_UPDATED}"] if has_lineage(df) else []


def kept_lineage(df: DataFrame) -> list[str]:
    """The lineage columns of ``df``, to keep where rows are selected by column (none without)."""
    return list(LINEAGE_COLUMNS) if has_lineage(df) else []
