"""The stateful lake-model test of issue 42: every lifecycle operation as a Hypothesis rule, checked
after every step against the plain model of ``lake_model.py``. The rules added later (pipeline
batches, fast-forwards, branch drops, layout changes, dropped tables, reads by timestamp) are in
``lake_rules.py``; ``test_lake_model_walk.py`` runs each of them once in a fixed order.

After each step, read cold (fresh handle, manifest cache cleared): every table's head and refs, one
older lake version (all of them at the end) equal the model, or are refused with
``SnapshotExpiredError`` exactly when the model says an expiry removed them; ``lake.verify()`` finds
nothing; the foreign files planted beside the tables are byte-identical. At the end, Iceberg's Java
reader reads every head and the incremental append scan since the last non-append commit.

Fast configuration in ``make test`` (one seed, ``FAST_STEPS`` steps); the long one (several seeds,
hundreds of steps) is marked ``slow`` (``make test-slow``).
"""

from __future__ import annotations

import os
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import rowops
from rowops.errors import CommitConflictError, SnapshotExpiredError
from rowops.faults import InjectedFault
from tests.spark import lake_model as m
from tests.spark.lake_checks import check_java, check_table, check_version
from tests.spark.lake_ops import (
    EQ,
    Op,
    cold,
    fault,
    foreign_changes,
    interfering,
    keys,
    ops,
    plant_foreign,
)
from tests.spark.lake_rules import LifecycleRules

# Known defects of issue 42 that the machine finds on the original code; each entry turns off the
# rules (or rule combinations) that trigger it. The lead removes an entry when its fix merges.
# Rules (or combinations) fenced off while a defect they find is open, each named by its issue item;
# empty: items 1, 2, 3/8, 4 and 9 of issue 42 are fixed, and every rule runs in every combination.
# Names the rules know: rebase-over-rollback, transaction-rebase-over-rollback,
# transaction-squash-attribution, expire-after-lake-rollback, cleanup-foreign-files.
KNOWN_DEFECTS: set[str] = set()
if os.environ.get("ROWOPS_LAKE_MODEL_DEFECTS") is not None:  # e.g. "" to look for every defect
    KNOWN_DEFECTS = {d for d in os.environ["ROWOPS_LAKE_MODEL_DEFECTS"].split(",") if d}
TABLES = ("db.a", "db.b")
FAST_STEPS = 25
FAST_SEED = 1  # fixed: the same run every time (richer than derandomize=True: transactions, rollbacks)


live = precondition(lambda self: self.active)


class LakeMachine(LifecycleRules, RuleBasedStateMachine):
    spark: Any = None
    java: Any = None
    base: Path = Path(tempfile.gettempdir())
    wanted = 0  # the checked steps asked for, over all examples (Hypothesis ends many early)
    done = 0

    enough = False  # a run has made enough real steps: later examples are no-ops

    def __init__(self) -> None:
        super().__init__()
        self.active = not type(self).enough
        self.paused = False
        self.steps = 0
        if not self.active:
            return
        self.root = Path(tempfile.mkdtemp(prefix="lake-model-", dir=self.base)) / "lake"
        self.root.mkdir()
        self.foreign = plant_foreign(self.root)
        self.lake = rowops.Lakehouse(self.root, spark=self.spark)
        self.model = m.LakeModel()
        self.batch_changes: dict[str, tuple[tuple[int, ...], int]] = {}
        self.recreated: dict[str, list[int]] = {}
        self.trace: list[
            str
        ] = []  # the rules that committed, in order (printed with ROWOPS_LAKE_MODEL_VERBOSE)

    # -- the model's bookkeeping -------------------------------------------------------------------
    def observe(
        self,
        version: int | None = None,
        heads: dict[str, m.Rows] | None = None,
        refs: dict[tuple[str, str], m.Rows] | None = None,
        columns: dict[str, tuple[str, ...]] | None = None,
    ) -> None:
        """Record lake ``version`` (default: the newest): snapshot ids as committed, rows as the model
        expects (``heads``/``refs`` for what the step changed; a new snapshot elsewhere keeps the rows)."""
        self.trace.append(sys._getframe(1).f_code.co_name)
        lake = cold(self.root, self.spark)
        version = lake.version if version is None else version
        view = lake.at(version=version)
        observed, new_rows = {}, {}
        for name in TABLES:
            meta = view.table(name).metadata
            parents = self.model.parents.setdefault(name, {})
            for snapshot in meta.snapshots:
                parents.setdefault(snapshot.snapshot_id, snapshot.parent_snapshot_id)
            before = self.model.tables.get(name)
            state = m.TableState(
                (columns or {}).get(name, before.columns if before else m.BASE_COLUMNS),
                meta.current_snapshot_id,
                tuple(sorted((n, r.snapshot_id) for n, r in meta.refs.items() if n != "main")),
            )
            known = self.model.snapshots.get(name, {})
            for ref, sid in (("main", state.head), *state.refs):
                if sid is None or sid in known or sid in new_rows.get(name, {}):
                    continue
                expected = (heads or {}).get(name) if ref == "main" else (refs or {}).get((name, ref))
                if expected is None:  # a commit that keeps the rows (maintenance) or moved a ref
                    prior = before.head if ref == "main" or before is None else before.ref(ref)
                    expected = self.model.snapshots[name][prior] if prior is not None else ()
                new_rows.setdefault(name, {})[sid] = expected
            observed[name] = state
        self.model.committed(version, observed, new_rows)

    def table(self, name: str) -> rowops.Table:
        return self.lake.table(name)

    def reset_window(self, name: str) -> None:
        self.model.open_window(name)

    # -- setup -----------------------------------------------------------------------------------
    @rule()
    def a_pause(self) -> None:
        """Nothing. Hypothesis's first example repeats the first rule (no arguments, first by name):
        this one, so that example costs one check."""
        self.paused = True

    @initialize()
    def create_tables(self) -> None:
        if not self.active:
            return
        heads = {}
        with self.lake.transaction() as tx:
            for name in TABLES:
                rows = m.rows_of(m.new_row(k, 0, 2) for k in (1, 2, 3, 4))
                df = self.spark.createDataFrame(list(rows), "k long, v long")
                tx.create_table(name, df, identifier=["k"])
                heads[name] = rows
        self.observe(heads=heads)
        for name in TABLES:
            self.reset_window(name)

    # -- row-level statements --------------------------------------------------------------------
    @live
    @rule(name=st.sampled_from(TABLES), op=ops)
    def statement(self, name: str, op: Op) -> None:
        rows, width = self.model.rows(name), self.model.width(name)
        if op.kind == "append":
            op = Op("append", tuple(k for k in op.keys if k not in {r[0] for r in rows}), op.value)
            if not op.keys:
                return
        op.run(self.spark, self.table(name), width)
        self.observe(heads={name: op.apply(rows, width)})
        if op.kind == "append":
            self.model.note_append(name, [m.new_row(k, op.value, width) for k in op.keys])
        else:
            self.reset_window(name)

    @live
    @rule(
        first=st.sampled_from(TABLES),
        op1=ops,
        second=st.sampled_from(TABLES),
        op2=ops,
        ending=st.sampled_from(["commit", "rollback", "exception"]),
    )
    def transaction(self, first: str, op1: Op, second: str, op2: Op, ending: str) -> None:
        if first == second and "transaction-squash-attribution" in KNOWN_DEFECTS:
            second = TABLES[1 - TABLES.index(first)]  # item 2: two statements on one table (squash)
        expected = {n: self.model.rows(n) for n in TABLES}
        plan = []
        for name, op in ((first, op1), (second, op2)):
            if op.kind == "append":
                op = Op(
                    "append", tuple(k for k in op.keys if k not in {r[0] for r in expected[name]}), op.value
                )
                if not op.keys:
                    continue
            expected[name] = op.apply(expected[name], self.model.width(name))
            plan.append((name, op))
        if ending == "exception":
            with pytest.raises(KeyError), self.lake.transaction() as tx:
                for name, op in plan:
                    op.run(self.spark, name, self.model.width(name), tx)
                raise KeyError("raised inside the transaction")
            return
        tx = self.lake.begin()
        for name, op in plan:
            op.run(self.spark, name, self.model.width(name), tx)
        if ending == "rollback":
            tx.rollback()
            return
        tx.commit()
        self.observe(heads={n: expected[n] for n, _ in plan})
        squashed = len(plan) == 2 and plan[0][0] == plan[1][0]
        for name in {n for n, _ in plan}:
            mine = [op for n, op in plan if n == name]
            if all(op.kind == "append" for op in mine):
                for op in mine:
                    self.model.note_append(
                        name, (m.new_row(k, op.value, self.model.width(name)) for k in op.keys), squashed
                    )
            else:
                self.reset_window(name)

    @live
    @rule(
        name=st.sampled_from(TABLES),
        op=ops.filter(lambda o: o.kind != "append"),
        other=st.sampled_from(["upsert", "table-rollback", "lake-rollback"]),
        in_tx=st.booleans(),
        data=st.data(),
    )
    def stale_write(self, name: str, op: Op, other: str, in_tx: bool, data: st.DataObject) -> None:
        """``op`` planned on the newest version; before it commits, another handle commits ``other``."""
        fence = "transaction-rebase-over-rollback" if in_tx else "rebase-over-rollback"
        if other != "upsert" and fence in KNOWN_DEFECTS:
            other = "upsert"
        second = rowops.Lakehouse(self.root, spark=self.spark)
        version = self.lake.version
        width = self.model.width(name)
        if other == "upsert":
            change = Op("upsert", data.draw(keys), 50, EQ)
            after = {name: change.apply(self.model.rows(name), width)}

            def action() -> None:
                change.run(self.spark, second.table(name), width)
        elif other == "table-rollback":
            target = data.draw(st.sampled_from(sorted(self.rollback_targets(name))))
            after = {name: self.model.rows(name, target)}

            def action() -> None:
                second.table(name).rollback_to(target)
        else:
            target_version = data.draw(st.sampled_from(sorted(self.offered_versions())))
            after = {
                n: self.model.rows_at(n, s, s.head) for n, s in self.model.versions[target_version].items()
            }

            def action() -> None:
                second.rollback_to(target_version)

        tx = self.lake.begin() if in_tx else None
        try:
            with interfering(self.lake, action) as fired:
                op.run(self.spark, name if tx else self.table(name), width, tx)
                if tx is not None:
                    tx.commit()
            committed = True
        except CommitConflictError:
            committed = False
            if tx is not None:
                tx.rollback()
        if not fired:  # nothing to commit: the other write never ran
            self.observe(heads={name: op.apply(self.model.rows(name), width)})
            return
        if other == "lake-rollback":
            self.note_lake_rollback(version + 1, target_version)
        else:
            self.observe(version + 1, heads=after)
        self.reset_window(name)
        if committed:
            width = self.model.width(name)
            self.observe(heads={name: op.apply(self.model.rows(name), width)})
            self.reset_window(name)

    # -- history -----------------------------------------------------------------------------------
    def rollback_targets(self, name: str) -> set[int]:
        listed = {s.snapshot_id for s in self.table(name).metadata.snapshots}
        return {
            s
            for s in self.model.snapshots.get(name, {})
            if s in listed and not self.model.is_expired(name, s)
        }

    def offered_versions(self) -> set[int]:
        return {v for v in self.model.versions if self.model.offered(v)}

    @live
    @rule(name=st.sampled_from(TABLES), data=st.data())
    def table_rollback(self, name: str, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(sorted(self.rollback_targets(name))))
        self.table(name).rollback_to(target)
        self.observe(heads={name: self.model.rows(name, target)})
        self.reset_window(name)

    @live
    @rule(data=st.data())
    def lake_rollback(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(sorted(self.model.versions)))
        if not self.model.offered(target):
            before = self.lake.version
            with pytest.raises(SnapshotExpiredError):
                self.lake.rollback_to(target)
            assert self.lake.version == before, "a refused lake rollback committed a version"
            return
        self.note_lake_rollback(self.lake.rollback_to(target), target)

    def note_lake_rollback(self, version: int, target: int) -> None:
        states = self.model.versions[target]
        self.observe(version, columns={n: s.columns for n, s in states.items()})
        self.model.batches[version] = self.model.batches[target]
        self.model.lake_rollbacks += 1
        for name in TABLES:
            self.reset_window(name)

    # -- branches and tags, schema ------------------------------------------------------------------
    @live
    @rule(name=st.sampled_from(TABLES), tag=st.sampled_from(["t1", "t2"]), drop=st.booleans())
    def tag(self, name: str, tag: str, drop: bool) -> None:
        exists = self.model.tables[name].ref(tag) is not None
        if exists and drop:
            self.table(name).drop_tag(tag)
        elif not exists:
            self.table(name).create_tag(tag)
        self.observe()

    @live
    @rule(name=st.sampled_from(TABLES), op=ops.filter(lambda o: o.kind in ("upsert", "delete-keys")))
    def branch_write(self, name: str, op: Op) -> None:
        state = self.model.tables[name]
        if state.ref("b1") is None:
            self.table(name).create_branch("b1")
            self.observe()
            state = self.model.tables[name]
        rows = self.model.rows_at(name, state, state.ref("b1"))
        op.run(self.spark, self.table(name).branch("b1"), len(state.columns))
        self.observe(refs={(name, "b1"): op.apply(rows, len(state.columns))})

    @live
    @rule(name=st.sampled_from(TABLES))
    def add_column(self, name: str) -> None:
        if self.model.width(name) == 3:
            return
        self.table(name).add_columns({"w": "bigint"})
        self.observe(columns={name: m.WIDE_COLUMNS})

    # -- maintenance ---------------------------------------------------------------------------------
    @live
    @rule(
        name=st.sampled_from(TABLES),
        action=st.sampled_from(
            ["compact", "convert_equality_deletes", "compact_position_deletes", "rewrite_manifests"]
        ),
    )
    def maintain(self, name: str, action: str) -> None:
        getattr(self.table(name), action)()
        self.observe()
        self.reset_window(name)

    @precondition(
        lambda self: not ("expire-after-lake-rollback" in KNOWN_DEFECTS and self.model.lake_rollbacks)
    )
    @live
    @rule(name=st.sampled_from(TABLES), retain=st.integers(1, 3), default_age=st.booleans())
    def expire(self, name: str, retain: int, default_age: bool) -> None:
        """``default_age``: the table's ``history.expire.max-snapshot-age-ms`` (5 days) keeps every
        snapshot of this run; else any age expires."""
        before = {s.snapshot_id for s in self.table(name).metadata.snapshots}
        self.table(name).expire_snapshots(None if default_age else timedelta(0), retain_last=retain)
        after = {s.snapshot_id for s in cold(self.root, self.spark).table(name).metadata.snapshots}
        assert not default_age or after == before, "the default age expired young snapshots"
        self.model.expire(name, before, after)
        self.observe()
        self.reset_window(name)

    @live
    @rule(name=st.sampled_from(TABLES))
    def remove_orphans(self, name: str) -> None:
        self.table(name).remove_orphans(older_than=timedelta(0))

    @precondition(lambda self: self.active and "cleanup-foreign-files" not in KNOWN_DEFECTS)
    @rule()
    def lake_cleanup(self) -> None:
        self.lake.cleanup(older_than=timedelta(0))

    @live
    @rule(
        name=st.sampled_from(TABLES),
        op=ops.filter(lambda o: o.kind == "upsert"),
        point=st.sampled_from(["before-commit", "after-commit"]),
    )
    def crash(self, name: str, op: Op, point: str) -> None:
        """A write stopped at a fault point, then the lake reopened by a new handle."""
        rows, width = self.model.rows(name), self.model.width(name)
        with fault(point), pytest.raises(InjectedFault):
            op.run(self.spark, self.table(name), width)
        self.lake = rowops.Lakehouse(self.root, spark=self.spark)
        self.observe(heads={name: op.apply(rows, width)} if point == "after-commit" else None)
        self.reset_window(name)

    # -- checks ------------------------------------------------------------------------------------
    @invariant()
    def lake_matches_model(self) -> None:
        if not self.active or self.paused:
            self.paused = False
            return
        self.steps += 1
        lake = cold(self.root, self.spark)
        assert lake.version == self.model.version
        for name in TABLES:
            check_table(self.model, lake, name)
        older = sorted(self.model.versions)
        check_version(self.model, lake, older[self.steps * 7 % len(older)])
        result = lake.verify()
        assert result.ok, "\n".join(result.lines())
        assert not foreign_changes(self.root, self.foreign)

    def teardown(self) -> None:
        if not self.active:
            return
        type(self).done += self.steps
        type(self).enough = type(self).done >= self.wanted
        if os.environ.get("ROWOPS_LAKE_MODEL_VERBOSE"):
            print(f"lake model: {self.steps} checked steps; commits by", " ".join(self.trace))
        lake = cold(self.root, self.spark)
        for version in sorted(self.model.versions):
            check_version(self.model, lake, version)
        if self.java is not None:
            for name in TABLES:
                check_java(
                    self.model, lake, self.java, name, "transaction-squash-attribution" in KNOWN_DEFECTS
                )


def _run(spark: Any, java: Any, tmp_path: Path, steps: int, examples: int, seed: int | None) -> None:
    LakeMachine.spark, LakeMachine.java, LakeMachine.base = spark, java, tmp_path
    LakeMachine.wanted, LakeMachine.enough, LakeMachine.done = steps, False, 0
    config = settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        derandomize=seed is None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
        verbosity=Verbosity.verbose if os.environ.get("ROWOPS_LAKE_MODEL_VERBOSE") else Verbosity.normal,
    )
    if seed is not None:
        LakeMachine._hypothesis_internal_use_seed = seed  # type: ignore[attr-defined]
    try:
        run_state_machine_as_test(LakeMachine, settings=config)
        assert LakeMachine.enough, f"{LakeMachine.done} checked steps of the {steps} asked for"
    finally:
        if "_hypothesis_internal_use_seed" in LakeMachine.__dict__:
            delattr(LakeMachine, "_hypothesis_internal_use_seed")


def test_lake_model_fast(spark, java, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _run(spark, java, tmp_path, FAST_STEPS, 40, FAST_SEED)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lake_model_long(spark, java, tmp_path, seed) -> None:  # type: ignore[no-untyped-def]
    _run(spark, java, tmp_path, int(os.environ.get("ROWOPS_LAKE_MODEL_STEPS", "200")), 200, seed)
