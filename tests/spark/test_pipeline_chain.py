"""Chained pipelines (issue 45): a pipeline whose source is another rowops table's change feed
(``[source] table_changes = "db.silver"``) applies every change of it exactly once.

The gold table must equal the silver table after every run, whatever happened in between: silver
upserts and deletes in every encoding, runs that fail at each fault point and run again, re-runs of a
committed batch, runs with nothing new, and a lake rollback that undoes a gold batch.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from pyspark.sql import SparkSession

import rowops
from rowops.errors import CommitStateUnknownError, PipelineConfigError
from rowops.faults import InjectedFault
from rowops.pipeline import parse_config, runner

SCHEMA = "id long, v string"
GOLD = parse_config(
    '[pipeline]\nid = "gold"\n[source]\ntable_changes = "db.silver"\n'
    '[[targets]]\ntable = "db.gold"\nkeys = ["id"]\n',
    "gold.toml",
)


def rows(table: rowops.Table) -> dict[int, str]:
    return {r["id"]: r["v"] for r in table.to_df().collect()}


def frame(spark: SparkSession, values: dict[int, str]) -> Any:
    return spark.createDataFrame(sorted(values.items()), SCHEMA)


def change_silver(lake: rowops.Lakehouse, rng: random.Random, model: dict[int, str], round_: int) -> None:
    """An upsert and a delete of random keys, each in a random encoding."""
    silver = lake.table("db.silver")
    upserts = {rng.randrange(40): f"r{round_}-{i}" for i in range(6)}
    strategy = rng.choice(["copy-on-write", "position-delete", "equality-delete"])
    rowops.merge(frame(lake.spark, upserts), silver, on=["id"], strategy=strategy)
    model.update(upserts)
    gone = {k: "" for k in rng.sample(sorted(model), min(2, len(model)))}
    strategy = rng.choice(["copy-on-write", "position-delete", "equality-delete"])
    rowops.merge(
        frame(lake.spark, gone),
        silver,
        on=["id"],
        when_matched="delete",
        when_not_matched=None,
        strategy=strategy,
    )
    for k in gone:
        del model[k]


@pytest.mark.slow  # two minutes; make test runs the chain through make pipeline-demo (test_readme.py)
def test_a_chained_pipeline_applies_every_change_exactly_once(
    lake: rowops.Lakehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    spark, rng = lake.spark, random.Random(7)
    model = {k: f"v{k}" for k in range(10)}
    lake.create_table("db.silver", frame(spark, model), partition_by=["bucket(4, id)"], identifier=["id"])
    gold = lake.create_table("db.gold", frame(spark, {}), identifier=["id"])
    assert runner.run(lake, GOLD, "b0").status == "committed"  # the first batch loads every row
    assert rows(gold) == model
    faults = ["before-commit", "manifests-merged", "commit-unknown", "after-commit"]
    for round_, fault in enumerate(faults, start=1):
        change_silver(lake, rng, model, round_)
        batch = f"b{round_}"
        monkeypatch.setenv("ROWOPS_FAULT", fault)
        with pytest.raises((InjectedFault, CommitStateUnknownError, OSError)):
            runner.run(lake, GOLD, batch)
        monkeypatch.delenv("ROWOPS_FAULT")
        again = runner.run(lake, GOLD, batch)
        assert again.status == ("skipped" if fault in ("after-commit", "commit-unknown") else "committed"), (
            fault
        )
        assert rows(gold) == model, fault
        assert runner.run(lake, GOLD, batch).status == "skipped"
    assert runner.run(lake, GOLD, "nothing-new").status in ("empty", "committed")
    assert rows(gold) == model
    # a lake rollback undoes silver's last changes and gold's last batch: the next batch is consistent
    before = lake.version
    change_silver(lake, rng, dict(model), 99)
    assert runner.run(lake, GOLD, "b-undone").status == "committed"
    lake.rollback_to(before)
    change_silver(lake, rng, model, 100)
    assert runner.run(lake, GOLD, "b-after-rollback").status == "committed"
    assert rows(gold) == model
    undone = runner.run(lake, GOLD, "b-undone")  # undone by the rollback: runs again (nothing new now)
    assert undone.status == "empty" and rows(gold) == model


def test_table_changes_sources_are_checked() -> None:
    with pytest.raises(PipelineConfigError, match="table_changes takes no path"):
        parse_config(
            '[pipeline]\nid = "g"\n[source]\ntable_changes = "db.s"\npath = "x"\n'
            '[[targets]]\ntable = "db.g"\nkeys = ["id"]\n',
            "bad.toml",
        )
    assert GOLD.source.table == "db.silver" and GOLD.source.cdc is not None
