"""A fixed walk through the lake model's later rules (``lake_rules.py``), each step checked as the
stateful test checks it: the seeded runs draw these rules rarely, this walk runs every one of them.

Slow (``make test-slow``): about two minutes on an idle machine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.spark.lake_ops import EQ, POS, Op
from tests.spark.test_lake_model import LakeMachine


class Draws:
    """Stands in for Hypothesis's ``data`` argument: returns the given values in order."""

    def __init__(self, *values: Any) -> None:
        self.values = list(values)

    def draw(self, _strategy: Any, label: str | None = None) -> Any:
        return self.values.pop(0)


@pytest.mark.slow
def test_a_walk_through_every_later_rule(spark: Any, java: Any, tmp_path: Path) -> None:
    LakeMachine.spark, LakeMachine.java, LakeMachine.base = spark, java, tmp_path
    LakeMachine.enough = False
    machine = LakeMachine()
    machine.create_tables()
    first = machine.lake.version
    steps = [
        lambda: machine.pipeline_batch("b1", EQ, Draws((1, 5), 11)),
        lambda: machine.pipeline_batch("b1", POS, Draws()),  # in the state: skipped
        lambda: machine.lake_rollback(Draws(first)),  # undoes the batch
        lambda: machine.pipeline_batch("b1", POS, Draws()),  # runs again
        lambda: machine.branch_write("db.a", Op("upsert", (2,), 3, POS)),
        lambda: machine.fast_forward("db.a", "b1", "t1"),  # no tag t1: refused
        lambda: machine.fast_forward("db.a", "main", "b1"),
        lambda: machine.fast_forward("db.a", "b1", "main"),  # the same snapshot
        lambda: machine.statement("db.a", Op("upsert", (3,), 4, EQ)),
        lambda: machine.fast_forward("db.a", "b1", "main"),
        lambda: machine.branch_write("db.a", Op("upsert", (6,), 4, POS)),
        lambda: machine.statement("db.a", Op("delete-keys", (1,), 0, POS)),
        lambda: machine.fast_forward("db.a", "main", "b1"),  # diverged: refused
        lambda: machine.drop_branch("db.a"),
        lambda: machine.layout("db.a", "partition"),
        lambda: machine.statement("db.a", Op("upsert", (3, 7), 5, POS)),
        lambda: machine.layout("db.a", "sort"),
        lambda: machine.layout("db.a", "property"),
        lambda: machine.layout("db.a", "partition"),
        lambda: machine.change_feed(
            "db.a", Draws(machine.lake.version, first, False)
        ),  # net, across every rule so far
        lambda: machine.change_feed("db.a", Draws(machine.lake.version, first, True)),  # lake.changes()
        lambda: machine.drop_table("db.b", "register"),
        lambda: machine.statement("db.b", Op("upsert", (3,), 4, POS)),
        lambda: machine.drop_table("db.b", "recreate"),
        lambda: machine.statement("db.b", Op("delete-keys", (2,), 4, POS)),
        lambda: machine.change_feed(
            "db.b", Draws(machine.lake.version, first, False)
        ),  # created anew: refused
        lambda: machine.change_feed("db.a", Draws(machine.lake.version, first, True)),  # db.b's refusal
        lambda: machine.read_at_time(Draws(first)),
        lambda: machine.cancelled_statement("db.a", Op("upsert", (2, 9), 6, POS)),
        lambda: machine.metadata_tables("db.a"),
        lambda: machine.lake_cleanup(),
        lambda: machine.remove_orphans("db.b"),  # the dropped table's files share the location
        lambda: machine.expire("db.b", 1, False),
        lambda: machine.lake_rollback(Draws(first + 1)),  # back to the dropped table
        lambda: machine.metadata_tables("db.b"),
        lambda: machine.pipeline_batch("b1", POS, Draws()),
    ]
    for step in steps:
        step()
        machine.lake_matches_model()
    assert machine.trace.count("pipeline_batch") == 2 and "drop_table" in machine.trace
    machine.teardown()
