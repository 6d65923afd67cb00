"""Format v3 row lineage columns: ``_row_id`` and ``_last_updated_sequence_number``.

A data file's rows without a materialized ``_row_id`` inherit its ``first_row_id`` + their position;
a NULL ``_last_updated_sequence_number`` inherits the file's data sequence number (Iceberg spec, "Row
Lineage"). Writers that move a row into a new file (copy-on-write, compaction, an updated row's new
version) write both columns, with their reserved field ids, so the row keeps its id; an updated row
writes NULL as its sequence number (it inherits the new one), an inserted row NULL in both.
"""

from __future__ import annotations

from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

ROW_ID, LAST_UPDATED = "_row_id", "_last_updated_sequence_number"
ROW_ID_FIELD_ID, LAST_UPDATED_FIELD_ID = 2147483540, 2147483539
LINEAGE_FIELDS = (
    NestedField(ROW_ID_FIELD_ID, ROW_ID, LongType(), required=False),
    NestedField(LAST_UPDATED_FIELD_ID, LAST_UPDATED, LongType(), required=False),
)
LINEAGE_COLUMNS = (ROW_ID, LAST_UPDATED)


def with_lineage(schema: Schema) -> Schema:
    """``schema`` with the two lineage columns last (for reading and writing data files)."""
    return Schema(
        *schema.fields,
        *LINEAGE_FIELDS,
        schema_id=schema.schema_id,
        identifier_field_ids=schema.identifier_field_ids,
    )
