"""More rules of the stateful lake test (``test_lake_model.py``): pipeline batches, fast-forwards,
branch drops, partition/sort/property changes, dropped and re-registered or re-created tables, change
feeds, cancelled operations, metadata tables and time travel by timestamp. A mixin of ``LakeMachine``: every rule runs through its ``observe``.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule
from pyiceberg.manifest import DataFileContent

import rowops
from rowops.errors import InvalidInputError, InvalidRefError, NotFastForwardError, RowOpsError
from rowops.pipeline import parse_config, runner
from tests.spark import lake_model as m
from tests.spark.lake_checks import check_version
from tests.spark.lake_ops import Op, by_key, cold, keys, ops, values
from tests.spark.tables import stalled

TABLES = ("db.a", "db.b")
BATCHES = ("b1", "b2", "b3")
PIPELINE = "model"
live = precondition(lambda self: self.active)


def feed_diff(old: m.Rows, new: m.Rows) -> Counter[tuple[str, m.Row]]:
    """The net changes from rows ``old`` to ``new`` by key (the first column), as the feed names them."""
    before, after = {r[0]: r for r in old}, {r[0]: r for r in new}
    out: Counter[tuple[str, m.Row]] = Counter()
    for key in before.keys() | after.keys():
        was, now = before.get(key), after.get(key)
        if was == now:
            continue
        if was is None:
            out[("insert", now)] += 1  # type: ignore[index]
        elif now is None:
            out[("delete", was)] += 1
        else:
            out[("update_preimage", was)] += 1
            out[("update_postimage", now)] += 1
    return out


def pipeline_config(sources: Path, strategy: str) -> Any:
    """A plain upsert pipeline (no change feed) into both tables: one lake version per batch."""
    targets = "".join(f'[[targets]]\ntable = "{t}"\nkeys = ["k"]\nstrategy = "{strategy}"\n' for t in TABLES)
    text = f'[pipeline]\nid = "{PIPELINE}"\n[source]\nformat = "parquet"\npath = "{sources}/{{batch_id}}"\n'
    return parse_config(text + targets, "model.toml")


class LifecycleRules:
    """Rules over the machine's ``lake``, ``model`` and ``observe`` (defined by ``LakeMachine``)."""

    active: bool
    spark: Any
    root: Path
    lake: rowops.Lakehouse
    model: m.LakeModel
    batch_changes: dict[str, tuple[tuple[int, ...], int]]
    recreated: dict[str, list[int]]  # table -> lake versions that created it anew (drop_table)

    def observe(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError

    def table(self, name: str) -> rowops.Table:
        raise NotImplementedError

    def reset_window(self, name: str) -> None:
        raise NotImplementedError

    def unchanged(self, version: int) -> None:
        assert cold(self.root, self.spark).version == version, "a refused call committed a lake version"

    # -- pipeline batches ------------------------------------------------------------------------
    @live
    @rule(batch=st.sampled_from(BATCHES), strategy=by_key, data=st.data())
    def pipeline_batch(self, batch: str, strategy: str, data: st.DataObject) -> None:
        """Batch ``batch`` (an upsert of both tables; its rows fixed when first drawn) through the
        pipeline runner: committed unless the lake state holds its record (a ``lake.rollback_to``
        before its commit undoes it), else skipped with nothing written."""
        sources = self.root.parent / "batches"
        if batch not in self.batch_changes:
            change = (data.draw(keys), data.draw(values))
            rows = [m.new_row(k, change[1], 3) for k in change[0]]
            self.spark.createDataFrame(rows, "k long, v long, w long").write.parquet(str(sources / batch))
            self.batch_changes[batch] = change
        batch_keys, value = self.batch_changes[batch]
        before = self.lake.version
        result = runner.run(self.lake, pipeline_config(sources, strategy), batch)
        if batch in self.model.batches[self.model.version]:
            assert result.status == "skipped", f"batch {batch} in the lake state ran again"
            self.unchanged(before)
            return
        assert result.status == "committed", f"batch {batch}: {result.status} {result.message}"
        heads = {n: m.upsert(self.model.rows(n), batch_keys, value, self.model.width(n)) for n in TABLES}
        self.observe(heads=heads)
        self.model.batches[self.model.version] |= {batch}
        for name in TABLES:
            self.reset_window(name)

    # -- refs ----------------------------------------------------------------------------------------
    def descends(self, name: str, head: int, ancestor: int) -> bool:
        """Whether ``ancestor`` is on ``head``'s parent chain (parents as recorded when each snapshot
        was committed), walked while the table still lists the snapshot (as Iceberg's ``isAncestorOf``)."""
        listed = {s.snapshot_id for s in self.table(name).metadata.snapshots}
        parents = self.model.parents.get(name, {})
        current: int | None = head
        while current is not None and current in listed:
            if current == ancestor:
                return True
            current = parents.get(current)
        return False

    @live
    @rule(
        name=st.sampled_from(TABLES),
        to=st.sampled_from(["main", "b1"]),
        source=st.sampled_from(["main", "b1", "t1"]),
    )
    def fast_forward(self, name: str, to: str, source: str) -> None:
        """``to`` moves to ``source``'s snapshot when its head is an ancestor of it; else refused."""
        if to == source:
            return
        state, before = self.model.tables[name], self.lake.version
        heads: dict[str, int | None] = {"main": state.head, **dict(state.refs)}
        if to not in heads or source not in heads:
            with pytest.raises(InvalidRefError):
                self.table(name).fast_forward(to, source)
            return self.unchanged(before)
        current, target = heads[to], heads[source]
        assert current is not None and target is not None
        if not self.descends(name, target, current):
            with pytest.raises(NotFastForwardError):
                self.table(name).fast_forward(to, source)
            return self.unchanged(before)
        self.table(name).fast_forward(to, source)
        if current == target and self.lake.version == before:
            return  # nothing to move (a no-op fast-forward commits an empty lake version: observed below)
        self.observe()
        if to == "main":
            self.reset_window(name)

    @live
    @rule(name=st.sampled_from(TABLES))
    def drop_branch(self, name: str) -> None:
        if self.model.tables[name].ref("b1") is None:
            return
        self.table(name).drop_branch("b1")
        self.observe()

    # -- table layout, dropped tables --------------------------------------------------------------
    @live
    @rule(name=st.sampled_from(TABLES), change=st.sampled_from(["partition", "sort", "property"]))
    def layout(self, name: str, change: str) -> None:
        """A metadata change that keeps the rows: partition spec (bucket on k, added or dropped),
        sort order, a table property."""
        table = self.table(name)
        # partitioned or not as the table is now: a table or lake rollback may have restored either
        if change == "partition" and any("bucket" in str(f.transform) for f in table.metadata.spec().fields):
            table.drop_partition_field("bucket(2, k)")
        elif change == "partition":
            table.add_partition_field("bucket(2, k)")
        elif change == "sort":
            table.replace_sort_order(["k"])
        else:
            table.set_properties(**{"model.note": str(self.lake.version)})
        self.observe()

    @live
    @rule(name=st.sampled_from(TABLES), how=st.sampled_from(["register", "recreate"]))
    def drop_table(self, name: str, how: str) -> None:
        """``drop_table``, then the same name registered from the dropped table's metadata (same
        snapshots and rows) or created anew (new rows, new snapshots, the same location)."""
        location = self.table(name).metadata_location
        self.lake.drop_table(name)
        if how == "register":
            self.lake.register_table(name, location)
            self.observe()
            return
        rows = m.rows_of(m.new_row(k, 7, 2) for k in (2, 5))
        self.lake.create_table(
            name, self.spark.createDataFrame(list(rows), "k long, v long"), identifier=["k"]
        )
        self.observe(heads={name: rows}, columns={name: m.BASE_COLUMNS})
        self.reset_window(name)
        self.recreated.setdefault(name, []).append(self.lake.version)

    # -- reads -----------------------------------------------------------------------------------
    @live
    @rule(name=st.sampled_from(TABLES), data=st.data())
    def change_feed(self, name: str, data: st.DataObject) -> None:
        """``table.changes(start=a, end=b, net=True)`` (or its entry of ``lake.changes``, absent when
        the table did not change) between two modelled versions equals the difference of the model's
        rows of the table at them, by key (updates as pre/post images); refused with a clear error when
        the table (lake-wide: any table) was created anew in between."""
        lake = cold(self.root, self.spark)
        offered = sorted(
            v for v in self.model.versions if self.model.offered(v) and name in self.model.versions[v]
        )
        if not offered:
            return
        end = data.draw(st.sampled_from(offered))
        start = data.draw(st.sampled_from([0, *(v for v in offered if v <= end)]))
        after = self.model.versions[end][name]
        before_state = self.model.versions[start].get(name) if start else None
        old = (
            m.widen(self.model.rows_at(name, before_state, before_state.head), len(after.columns))
            if before_state
            else ()
        )
        new = self.model.rows_at(name, after, after.head)
        lake_wide = data.draw(st.booleans(), label="lake-wide")  # lake.changes: every changed table's feed
        try:
            if lake_wide:
                feeds = lake.changes(start=start, end=end, net=True)
                feed = feeds[name].collect() if name in feeds else []
            else:
                feed = lake.table(name).changes(start=start, end=end, net=True).collect()
        except InvalidInputError as refused:  # the same name, another table: only if created anew in between
            names = TABLES if lake_wide else [name]  # lake-wide: any table's feed may be refused
            assert "created again" in str(refused) and any(
                start < v <= end for t in names for v in self.recreated.get(t, [])
            )
            return
        got = Counter((r["_change_type"], tuple(r[c] for c in after.columns)) for r in feed)
        assert got == feed_diff(old, new), (name, start, end)

    # -- observability (issue 46) -----------------------------------------------------------------
    @live
    @rule(name=st.sampled_from(TABLES), op=ops.filter(lambda o: o.kind == "upsert"))
    def cancelled_statement(self, name: str, op: Op) -> None:
        """An upsert cancelled through the ``rowops`` job tag while it reads its source fails with a
        ``RowOpsError`` and commits nothing (the machine then checks every table against the model)."""
        version, sc = self.lake.version, self.spark.sparkContext
        source = stalled(op.source(self.spark, self.model.width(name)))
        failures: list[BaseException] = []

        def run() -> None:
            try:
                rowops.merge(source, self.table(name), on=["k"], strategy=op.strategy)
            except BaseException as exc:
                failures.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        deadline = time.monotonic() + 120
        while not sc.statusTracker().getActiveJobsIds() and worker.is_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        sc.cancelJobsWithTag("rowops")
        worker.join(120)
        assert not worker.is_alive(), "a cancelled operation kept running"
        assert len(failures) == 1 and isinstance(failures[0], RowOpsError), failures
        self.unchanged(version)

    @live
    @rule(name=st.sampled_from(TABLES))
    def metadata_tables(self, name: str) -> None:
        """Iceberg's metadata tables of a table, read cold, agree with its metadata: the snapshots and
        the snapshot log, one ``files`` row per live file, one ``position_deletes`` row per deleted
        position; the lake log has one row per version."""
        lake = cold(self.root, self.spark)
        if name not in lake.list_tables():
            return
        table = lake.table(name)
        metadata, live_files = table.metadata, table.files()
        inspect = table.inspect
        assert {r.snapshot_id for r in inspect.snapshots().collect()} == {
            s.snapshot_id for s in metadata.snapshots
        }
        assert inspect.history().count() == len(metadata.snapshot_log)
        assert inspect.files().count() == len(live_files.data) + len(live_files.deletes)
        positions = sum(
            f.record_count for f in live_files.deletes if f.content == DataFileContent.POSITION_DELETES
        )
        assert inspect.position_deletes().count() == positions
        assert lake.inspect.versions().count() == lake.version

    @live
    @rule(data=st.data())
    def read_at_time(self, data: st.DataObject) -> None:
        """``lake.at(timestamp=t)`` for the commit time ``t`` of a modelled version: the newest version
        committed at or before ``t``, equal to the model when modelled."""
        lake = cold(self.root, self.spark)
        times = {c.version: c.timestamp_ms for c in lake.history()}
        version = data.draw(st.sampled_from(sorted(v for v in self.model.versions if v in times)))
        view = lake.at(timestamp=times[version])
        assert view.version == max(v for v, t in times.items() if t <= times[version])
        if view.version in self.model.versions:
            check_version(self.model, lake, view.version)
