"""Iceberg v3 column defaults as metadata (no Spark): declared on add_columns / create / set_default,
refused on v1/v2, written to and read back from ``metadata.json``, DEFAULT resolved in specs."""

from __future__ import annotations

import datetime
import json
from decimal import Decimal

import pytest
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadataUtil, new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import (
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)

from rowops.errors import InvalidInputError, InvalidSchemaChangeError, NoDefaultError
from rowops.meta import evolution
from rowops.meta.defaults import normalize, resolve_defaults, sql_literal, with_write_defaults
from rowops.meta.v3 import metadata_json
from rowops.request.operations import DEFAULT, MergeClause, MergeSpec, UpdateSpec

SCHEMA = Schema(NestedField(1, "k", LongType(), required=True), NestedField(2, "n", IntegerType()))


def _metadata(version: int) -> object:
    props = {"format-version": str(version)}
    metadata = new_table_metadata(SCHEMA, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, "/lake/t", props)
    return metadata.model_copy(update={"next_row_id": 0}) if version >= 3 else metadata


V3 = _metadata(3)


def _reloaded(metadata: object) -> object:
    """The metadata as a reader sees it after rowops writes ``metadata.json``."""
    return TableMetadataUtil.parse_raw(metadata_json(metadata))  # type: ignore[arg-type]


def test_add_columns_with_defaults_writes_initial_and_write_default_to_v3_metadata() -> None:
    defaults = {"amt": "2.5", "day": datetime.date(2024, 2, 29), "note": "n/a", "c": 7}
    change = evolution.add_columns(
        V3,  # type: ignore[arg-type]
        {"amt": "decimal(6,2)", "day": "date", "note": "string", "c": "int NOT NULL", "plain": "int"},
        defaults,
    )
    after = _reloaded(change.apply(V3, None))  # type: ignore[arg-type]
    fields = {f.name: f for f in after.schema().fields}  # type: ignore[attr-defined]
    assert fields["amt"].initial_default == fields["amt"].write_default == Decimal("2.50")
    assert fields["day"].initial_default == datetime.date(2024, 2, 29)
    assert fields["note"].write_default == "n/a"
    assert fields["c"].required and fields["c"].initial_default == 7
    assert fields["plain"].initial_default is None and not fields["plain"].required
    raw = json.loads(metadata_json(change.apply(V3, None)))  # type: ignore[arg-type]
    by_name = {f["name"]: f for f in raw["schemas"][-1]["fields"]}
    assert by_name["amt"]["initial-default"] == "2.50" and by_name["day"]["write-default"] == "2024-02-29"


@pytest.mark.parametrize("version", [1, 2])
def test_defaults_are_refused_on_v1_and_v2_tables(version: int) -> None:
    metadata = _metadata(version)
    with pytest.raises(InvalidSchemaChangeError, match="format v3") as caught:
        evolution.add_columns(metadata, {"c": "int"}, {"c": 1})  # type: ignore[arg-type]
    assert "Help:" in str(caught.value)
    with pytest.raises(InvalidSchemaChangeError, match="format v3"):
        evolution.set_write_default(metadata, "n", 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidSchemaChangeError, match="format v3"):
        with_write_defaults(metadata, {"n": 1})  # type: ignore[arg-type]


def test_not_null_needs_a_default_and_bad_defaults_are_named() -> None:
    with pytest.raises(InvalidSchemaChangeError, match="NOT NULL without a default"):
        evolution.add_columns(V3, {"c": "int NOT NULL"})  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="'c'"):
        evolution.add_columns(V3, {"c": "int"}, {"c": "seven"})  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="does not fit"):
        normalize("d", DecimalType(4, 2), "1.234")
    with pytest.raises(InvalidInputError, match="out of range"):
        normalize("i", IntegerType(), 2**31)
    with pytest.raises(InvalidInputError):
        normalize("t", TimestamptzType(), datetime.datetime(2024, 1, 1))  # naive for a zoned column
    with pytest.raises(InvalidSchemaChangeError, match="not among the new columns"):
        evolution.add_columns(V3, {"c": "int"}, {"x": 1})  # type: ignore[arg-type]


def test_set_default_changes_only_the_write_default() -> None:
    added = evolution.add_columns(V3, {"c": "int"}, {"c": 1}).apply(V3, None)  # type: ignore[arg-type]
    changed = _reloaded(evolution.set_write_default(added, "c", 2).apply(added, None))
    field = changed.schema().find_field("c")  # type: ignore[attr-defined]
    assert (field.initial_default, field.write_default) == (1, 2)
    removed = evolution.set_write_default(changed, "c", None).apply(changed, None)  # type: ignore[arg-type]
    assert removed.schema().find_field("c").write_default is None


def test_create_with_defaults_sets_write_defaults_only() -> None:
    created = _reloaded(with_write_defaults(V3, {"n": 3}))  # type: ignore[arg-type]
    field = created.schema().find_field("n")  # type: ignore[attr-defined]
    assert (field.initial_default, field.write_default) == (None, 3)
    with pytest.raises(InvalidInputError, match="no top-level column"):
        with_write_defaults(V3, {"zz": 3})  # type: ignore[arg-type]


def test_default_keyword_resolves_to_the_write_default_or_fails() -> None:
    schema = Schema(NestedField(1, "k", LongType()), NestedField(2, "n", StringType(), write_default="x"))
    update = resolve_defaults(UpdateSpec((("n", DEFAULT),)), schema)
    assert isinstance(update, UpdateSpec) and update.assignments == (("n", "CAST(X'78' AS STRING)"),)
    with pytest.raises(NoDefaultError, match="k") as caught:
        resolve_defaults(UpdateSpec((("k", "default"),)), schema)
    assert "Help:" in str(caught.value)
    merge = MergeSpec("t.k = s.k", (MergeClause("matched", "update", None, (("k", DEFAULT),)),))
    with pytest.raises(NoDefaultError, match="WHEN MATCHED"):
        resolve_defaults(merge, schema)


def test_sql_literals_accept_both_forms_pyiceberg_holds() -> None:
    """pyiceberg's UpdateSchema keeps dates and timestamps as days / micros; metadata.json reads them
    back as date / datetime: both spell the same literal."""
    day = datetime.date(2024, 2, 29)
    assert sql_literal(DateType(), day) == sql_literal(DateType(), 19782)
    ts = datetime.datetime(2024, 2, 29, 1, 2, 3, 4)
    micros = 1709168523000004
    assert sql_literal(TimestampType(), ts) == sql_literal(TimestampType(), micros)
    zoned = ts.replace(tzinfo=datetime.UTC)
    assert sql_literal(TimestamptzType(), zoned) == f"TIMESTAMP_MICROS({micros})"
