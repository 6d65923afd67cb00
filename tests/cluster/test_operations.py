"""MERGE (every strategy, the sliced join), UPDATE and DELETE on a Spark standalone cluster.

Executors are separate JVMs started by two workers, with their own Python workers that cannot import
rowops by themselves: rowops ships itself. Expected rows come from the plain-Python oracle the local
behaviour suite (``tests/spark``) checks local mode against; every table is read back by rowops (on
the cluster), DuckDB and PyIceberg.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

import rowops
from tests.readers import assert_readers_agree
from tests.spark.tables import COLUMNS, Layout, Oracle, Row, frame, make_row

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

BUCKETED = Layout("bucket", ("bucket(4, k)",), ("k",))


def _where_python_runs():  # type: ignore[no-untyped-def]
    """Per executor Python process: its pid, interpreter and where it imported rowops from."""

    def probe(_: Iterator[int]) -> Iterator[tuple[int, str, str]]:
        import rowops as shipped

        yield os.getpid(), sys.executable, os.path.abspath(str(shipped.__file__))

    return probe


def test_executors_import_rowops_only_from_the_zip_it_ships(
    lake, executor_python: Path, shared_cluster
) -> None:  # type: ignore[no-untyped-def]
    alone = subprocess.run(
        [str(executor_python), "-c", "import rowops"], cwd=executor_python.parents[2], capture_output=True,
        text=True, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )  # fmt: skip
    assert alone.returncode != 0 and "No module named 'rowops'" in alone.stderr
    context = lake.spark.sparkContext
    seen = set(context.parallelize(range(8), 8).mapPartitions(_where_python_runs()).collect())
    assert {python for _, python, _ in seen} == {str(executor_python)}
    assert all(Path(source).parent.name == "rowops" and "rowops.zip" in source for _, _, source in seen), seen
    # each executor runs in its own work directory of its worker (…/worker-N/<app>/<executor>/)
    workers = {Path(source).parents[4].name for _, _, source in seen}
    assert all(Path(source).is_relative_to(shared_cluster.root) for _, _, source in seen), seen
    assert workers == {"worker-1", "worker-2"}, seen


def _create(lake: rowops.Lakehouse, layout: Layout = BUCKETED, keys: Iterable[int] = range(120)):  # type: ignore[no-untyped-def]
    rows = [make_row(k) for k in keys]
    table = lake.create_table(
        "db.t", frame(lake.spark, rows), partition_by=list(layout.partition_by), identifier=list(layout.keys)
    )
    return table, Oracle(layout, rows)


def _updated(oracle: Oracle, where: Iterable[Row], column: str, change: int) -> list[Row]:
    index = COLUMNS.index(column)
    out = []
    for row in where:
        new = list(row)
        new[index] = row[index] + change
        out.append(tuple(new))
    return out


def test_merge_update_delete_on_a_cluster(lake, strategy: str) -> None:  # type: ignore[no-untyped-def]
    table, oracle = _create(lake)
    changes = [make_row(k, 1) for k in range(0, 200, 3)]
    result = rowops.merge(frame(lake.spark, changes), table, on=["k"], strategy=strategy)
    oracle.upsert(changes)
    assert result.strategy == strategy
    if strategy != "equality-delete":  # blind by-key writes do not count what they replace
        assert (result.rows_updated, result.rows_inserted) == (40, 27)
    assert_readers_agree(table, oracle.values(), COLUMNS, None)

    gone = [make_row(k) for k in (1, 2, 30, 119, 1000)]
    rowops.merge(frame(lake.spark, gone), table, on=["k"], when_matched="delete", when_not_matched=None,
                 strategy=strategy)  # fmt: skip
    oracle.delete_keys(gone)
    assert_readers_agree(table, oracle.values(), COLUMNS, None)

    # UPDATE/DELETE by predicate cannot be written as equality deletes: auto, over the equality deletes
    by_predicate = "auto" if strategy == "equality-delete" else strategy
    hit = [r for r in oracle.values() if r[0] % 5 == 0]
    result = rowops.update(table, set={"n": "n + 10"}, where="k % 5 = 0", strategy=by_predicate)
    assert result.rows_updated == len(hit)
    oracle.upsert(_updated(oracle, hit, "n", 10))
    assert_readers_agree(table, oracle.values(), COLUMNS, None)

    result = rowops.delete(table, where="k % 7 = 0 OR s IS NULL", strategy=by_predicate)
    kept = [r for r in oracle.values() if not (r[0] % 7 == 0 or r[2] is None)]
    assert result.rows_deleted == len(oracle.values()) - len(kept)
    assert_readers_agree(table, kept, COLUMNS, None)


def _every_clause(table, source):  # type: ignore[no-untyped-def]
    return (
        table.merge(source, on=["k"])
        .when_matched("s.n = 9")
        .delete()
        .when_matched()
        .update({"n": "s.n + t.n"})
        .when_not_matched()
        .insert_all()
        .when_not_matched_by_source("t.k % 10 = 0")
        .update({"n": "-1"})
    )


def _every_clause_oracle(rows: list[Row], changes: list[Row]) -> list[Row]:
    """What :func:`_every_clause` does, in plain Python."""
    table = {r[0]: list(r) for r in rows}
    n = COLUMNS.index("n")
    for change in changes:
        row = table.get(change[0])
        if row is None:
            table[change[0]] = list(change)
        elif change[n] == 9:
            del table[change[0]]
        else:
            row[n] = change[n] + row[n]
    touched = {c[0] for c in changes}
    for k, row in table.items():
        if k not in touched and k % 10 == 0:
            row[n] = -1
    return [tuple(r) for r in table.values()]


@pytest.mark.parametrize("strategy", ["copy-on-write", "position-delete"])
def test_sliced_merge_on_a_cluster(lake, strategy: str) -> None:  # type: ignore[no-untyped-def]
    table, oracle = _create(lake, keys=range(400))
    table.set_properties(**{"rowops.colocated-join.max-bytes": "4096"})  # forces slices of the source
    changes = [make_row(k, 9 if k % 7 == 0 else 1) for k in range(0, 500, 3)]
    result = _every_clause(table, frame(lake.spark, changes)).execute(strategy=strategy)
    assert "co-located join: yes" in result.explain and "broadcast slices" in result.explain
    assert_readers_agree(table, _every_clause_oracle(oracle.values(), changes), COLUMNS, None)
