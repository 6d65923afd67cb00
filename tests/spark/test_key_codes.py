"""The pre-scan's uniqueness check from collected key codes (``exec/reading/key_codes.py``), against Python's
own count of the keys; and the rewrite by key that uses those codes, read back by every reader."""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.sql import functions as F

import rowops
from rowops.exec.reading import key_codes
from rowops.exec.reading.prescan import scan_source_keys
from rowops.exec.rewriting.arrow_deletes import KeyCodec
from tests.readers import assert_readers_agree
from tests.spark.tables import COLUMNS, frame, make_row


@pytest.fixture
def pairs(lake):  # type: ignore[no-untyped-def]
    """A table keyed by (k, g), bucketed by k."""
    source = lake.spark.range(0).select(F.col("id").alias("k"), F.col("id").cast("int").alias("g"))
    return lake.create_table("db.pairs", source, partition_by=["bucket(4, k)"], identifier=["k", "g"])


def _source(lake, keys):  # type: ignore[no-untyped-def]
    """``keys`` as a source of (k, g) rows spread over three tasks."""
    return lake.spark.createDataFrame(keys, "k long, g int").repartition(3)


def _expected_codes(codec: KeyCodec, keys: list[tuple[int, int]]) -> list[int]:
    """The codes of ``keys`` by :class:`KeyCodec` in numpy (the oracle of Spark's packing)."""
    values = [np.array([k[i] for k in keys]) for i in range(2)]
    return sorted(set(codec.encode(values, [None, None]).tolist()))


@pytest.mark.parametrize("repeat", [False, True])
def test_unique_keys_are_told_from_collected_codes(lake, pairs, repeat) -> None:  # type: ignore[no-untyped-def]
    keys = [(k, k % 7 - 3) for k in range(-50, 400, 3)] + ([(7, 4)] * 2 if repeat else [(7, 4)])
    scanned = scan_source_keys(_source(lake, keys), ["k", "g"], pairs.metadata, [], check_unique=True)
    assert scanned.rows == len(keys) and scanned.keys_unique is (not repeat)
    assert scanned.codes is not None and scanned.codes.rows == len(keys)
    assert scanned.codes.codes.tolist() == _expected_codes(scanned.codes.codec, keys)


def test_null_keys_are_not_unique_and_collect_nothing(lake, pairs) -> None:  # type: ignore[no-untyped-def]
    keys = [(k, 1) for k in range(30)] + [(None, 1)]
    scanned = scan_source_keys(_source(lake, keys), ["k", "g"], pairs.metadata, [], check_unique=True)
    assert scanned.keys_unique is False and scanned.codes is None


@pytest.mark.parametrize("repeat", [False, True])
def test_past_the_cap_spark_counts_distinct_keys(lake, pairs, monkeypatch, repeat) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(key_codes, "MAX_COLLECTED_KEYS", 10)
    keys = [(k, 0) for k in range(40)] + ([(5, 0)] if repeat else [])
    scanned = scan_source_keys(_source(lake, keys), ["k", "g"], pairs.metadata, [], check_unique=True)
    assert scanned.keys_unique is (not repeat) and scanned.codes is None


@pytest.mark.parametrize("repeat", [False, True])
def test_string_keys_are_counted_by_spark(lake, repeat) -> None:  # type: ignore[no-untyped-def]
    table = lake.create_table("db.s", frame(lake.spark, []).select("s", "k"), identifier=["s"])
    keys = [(f"key{i}", i) for i in range(25)] + ([("key3", 99)] if repeat else [])
    source = lake.spark.createDataFrame(keys, "s string, k long").repartition(3)
    scanned = scan_source_keys(source, ["s"], table.metadata, [], check_unique=True)
    assert scanned.keys_unique is (not repeat) and scanned.codes is None


def test_an_upsert_rewritten_by_key_collects_the_codes_once(lake, java, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A source of several tasks: its codes are collected once (by the pre-scan, or else by the
    rewrite by key), and every reader reads the upsert."""
    expected = {k: make_row(k) for k in range(300)}
    table = lake.create_table(
        "db.t", frame(lake.spark, list(expected.values())), partition_by=["bucket(4, k)"], identifier=["k"]
    )
    collected = []
    collect = key_codes.collect_codes
    monkeypatch.setattr(key_codes, "collect_codes", lambda *a: collected.append(1) or collect(*a))
    rows = [make_row(k, 1) for k in (*range(0, 300, 5), 400, 401)]
    source = frame(lake.spark, rows).repartition(3)
    result = rowops.merge(source, table, on=["k"], strategy="copy-on-write")
    expected.update({r[0]: r for r in rows})
    assert "rewritten by key" in result.explain and len(collected) == 1
    assert (result.rows_updated, result.rows_inserted) == (len(rows) - 2, 2)
    assert_readers_agree(table, expected.values(), COLUMNS, java)
