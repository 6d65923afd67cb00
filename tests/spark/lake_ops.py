"""Operations of the stateful lake test (``test_lake_model.py``) and the checks it runs after each step.

An :class:`Op` is one row-level statement: it runs against a table (or inside a transaction) and
applies itself to the model's rows. The checks read everything cold: a fresh ``Lakehouse`` handle
with the process-wide manifest cache cleared.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

import rowops
from rowops.meta.manifests import CACHE
from tests.spark import lake_model as m

COW, POS, EQ = "copy-on-write", "position-delete", "equality-delete"
OLD = time.time() - 4 * 24 * 3600  # older than cleanup's three days


@dataclass(frozen=True)
class Op:
    """One statement: ``upsert`` / ``delete-keys`` (any encoding), ``update`` / ``delete-where`` (not
    equality deletes: they scan), ``append`` (keys absent from the table)."""

    kind: str
    keys: tuple[int, ...]
    value: int = 0
    strategy: str = COW

    def apply(self, rows: m.Rows, width: int) -> m.Rows:
        if self.kind == "upsert":
            return m.upsert(rows, self.keys, self.value, width)
        if self.kind == "delete-keys":
            return m.delete_keys(rows, self.keys)
        if self.kind == "update":
            return m.increment(rows, self.keys[0])
        if self.kind == "delete-where":
            return m.delete_keys(rows, self.keys[:1])
        return m.append(rows, self.keys, self.value, width)

    def source(self, spark: Any, width: int) -> Any:
        schema = ", ".join(f"{c} long" for c in m.WIDE_COLUMNS[:width])
        return spark.createDataFrame([m.new_row(k, self.value, width) for k in self.keys], schema)

    def run(self, spark: Any, table: Any, width: int, tx: rowops.Transaction | None = None) -> None:
        name = table if isinstance(table, str) else table.name
        target = name if tx is not None else table
        if self.kind in ("upsert", "delete-keys"):
            matched = "update" if self.kind == "upsert" else "delete"
            inserted = "insert" if self.kind == "upsert" else None
            merge = tx.merge if tx is not None else rowops.merge
            merge(self.source(spark, width), target, ["k"], matched, inserted, None, self.strategy)
        elif self.kind == "update":
            where = f"k = {self.keys[0]}"
            if tx is not None:
                tx.update(name, {"v": "v + 1"}, where, self.strategy)
            else:
                table.update({"v": "v + 1"}, where, self.strategy)
        elif self.kind == "delete-where":
            if tx is not None:
                tx.delete(name, f"k = {self.keys[0]}", self.strategy)
            else:
                table.delete(f"k = {self.keys[0]}", self.strategy)
        elif tx is not None:
            tx.append(name, self.source(spark, width))
        else:
            table.append(self.source(spark, width))

    def __str__(self) -> str:
        return f"{self.kind}{list(self.keys)}={self.value}/{self.strategy}"


# -- Hypothesis strategies of statements ------------------------------------------------------------
keys = st.lists(st.sampled_from(list(m.KEYS)), min_size=1, max_size=3, unique=True).map(
    lambda ks: tuple(sorted(ks))
)
values = st.integers(0, 99)
by_key = st.sampled_from([COW, POS, EQ])
scanning = st.sampled_from([COW, POS])
ops = st.one_of(
    st.builds(Op, st.just("upsert"), keys, values, by_key),
    st.builds(Op, st.just("delete-keys"), keys, values, by_key),
    st.builds(Op, st.just("update"), keys, values, scanning),
    st.builds(Op, st.just("delete-where"), keys, values, scanning),
    st.builds(Op, st.just("append"), keys, values, st.just(COW)),
)


@contextmanager
def interfering(lake: rowops.Lakehouse, action: Callable[[], None]) -> Iterator[list[bool]]:
    """Run ``action`` (on another handle) just before this handle's first attempt to take a lake
    version: the write in flight was planned on an older version and commits after it."""
    log = lake.catalog.log
    real = log.commit
    fired: list[bool] = []

    def hooked(*args: Any, **kwargs: Any) -> Any:
        if not fired:
            fired.append(True)
            action()
        return real(*args, **kwargs)

    log.commit = hooked  # type: ignore[method-assign]
    try:
        yield fired
    finally:
        del log.commit  # the instance attribute: back to the method


@contextmanager
def fault(point: str) -> Iterator[None]:
    os.environ["ROWOPS_FAULT"] = point
    try:
        yield
    finally:
        os.environ.pop("ROWOPS_FAULT", None)


def cold(root: Path, spark: Any) -> rowops.Lakehouse:
    """A fresh handle (its own metadata cache) with the process-wide manifest cache cleared."""
    CACHE.clear()
    return rowops.Lakehouse(root, spark=spark)


def collect(df: Any) -> tuple[tuple[str, ...], m.Rows]:
    return tuple(df.columns), m.rows_of(tuple(r) for r in df.collect())


# -- foreign files: planted at the start, must stay byte-identical ---------------------------------
FOREIGN = {
    "other_catalog/db/unregistered/data/00000-0-part.parquet": b"PAR1 not rowops' data PAR1",
    "other_catalog/db/unregistered/metadata/v1.metadata.json": b'{"format-version": 2}',
    "other_catalog/db/unregistered/metadata/version-hint.text": b"1",
    "landing/data/batch-0001.csv": b"k,v\n1,2\n",
    "landing/metadata/manifest.json": b"{}",
    "backup/db/a/data/copy.parquet": b"PAR1 a backup PAR1",
}


def plant_foreign(root: Path) -> dict[str, str]:
    digests = {}
    for rel, body in FOREIGN.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        os.utime(path, (OLD, OLD))
        digests[rel] = hashlib.sha256(body).hexdigest()
    return digests


def foreign_changes(root: Path, digests: dict[str, str]) -> list[str]:
    changed = []
    for rel, digest in digests.items():
        path = root / rel
        if not path.exists():
            changed.append(f"{rel} was deleted")
        elif hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            changed.append(f"{rel} was modified")
    return changed
