"""The parsed-metadata cache: one parse per location, written metadata kept as it parses back, and a
table's loads after a commit served without reading the file again (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadataUtil, new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.table.update import SetPropertiesUpdate, update_table_metadata
from pyiceberg.types import LongType, NestedField

from rowops.catalog.tables import TableCatalog
from rowops.meta.metadata_cache import MetadataCache, MetadataCacheMismatchError
from rowops.meta.v3 import metadata_json
from rowops.request.identifiers import TableIdentifier

SCHEMA = Schema(NestedField(1, "k", LongType(), required=True))


def _metadata(location: str, version: int) -> object:
    props = {"format-version": str(version)}
    metadata = new_table_metadata(SCHEMA, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, location, props)
    return metadata.model_copy(update={"next_row_id": 0}) if version >= 3 else metadata


@pytest.mark.parametrize("version", [1, 2, 3])
def test_a_commit_keeps_what_it_wrote_and_loads_parse_nothing(tmp_path: Path, version: int) -> None:
    catalog = TableCatalog(str(tmp_path / "lake"))
    ident = TableIdentifier.parse("db.t")
    created = catalog.create(ident, _metadata(catalog.location(ident), version))  # type: ignore[arg-type]
    committed = catalog.set_properties(created, {"owner": "rowops"})
    assert committed.metadata_location in catalog.metadata_cache

    parsed = TableMetadataUtil.parse_raw(Path(committed.metadata_location.removeprefix("file:")).read_text())
    assert parsed == committed.metadata  # what the cache serves is what any reader parses
    Path(committed.metadata_location.removeprefix("file:")).unlink()  # a load must not need the file
    assert catalog.load(ident).metadata.properties["owner"] == "rowops"

    fresh = TableCatalog(str(tmp_path / "lake"))  # another process: nothing cached, so the file is read
    with pytest.raises(FileNotFoundError):
        fresh.load(ident)


def test_a_location_is_parsed_once_and_the_oldest_is_dropped(tmp_path: Path) -> None:
    cache = MetadataCache(capacity=2)
    reads: list[str] = []
    base = _metadata(str(tmp_path), 2)

    def read(name: str) -> object:
        reads.append(name)
        return base

    for name in ("a", "b", "a", "c", "a", "b"):
        assert cache.get(name, lambda n=name: read(n)) is base  # type: ignore[misc]
    assert reads == ["a", "b", "c", "b"]  # "b" was the least recently used when "c" came in
    assert "a" in cache and "b" in cache and "c" not in cache


def test_checking_mode_refuses_metadata_that_does_not_parse_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROWOPS_CHECK_METADATA_CACHE", "1")
    before = _metadata("/lake/t", 2)
    after = update_table_metadata(before, (SetPropertiesUpdate(updates={"a": "1"}),))  # type: ignore[arg-type]
    cache = MetadataCache()
    cache.keep_written("x", after, metadata_json(after))
    with pytest.raises(MetadataCacheMismatchError, match="does not parse back equal"):
        cache.keep_written("y", after, metadata_json(before))  # type: ignore[arg-type]
    assert "y" not in cache
