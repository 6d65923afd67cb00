"""The change feed of one Case 2 batch (issue 45): ``table.changes()`` against the naive way and the floor.

For each encoding, ``db.store_sales`` (TPC-DS SF ``--sf``, ``bucket(16, ss_ticket_number)``, keys
``ss_ticket_number, ss_item_sk``) takes one Case 2 batch (1% updates, 1% inserts, spread over every
bucket) as a MERGE; then, timed ``--runs`` times each (the median is reported), every timer covering
the whole computation down to the last row (a ``noop`` write of the result):

* ``feed``: ``table.changes(start=before, end=after)``, updates paired;
* ``naive``: both snapshots read in full and diffed by key (a full outer join; changed rows only);
* ``touched``: the floor: the data files the feed must read (those removed, re-deleted or added by the
  commit) read once as plain Parquet, without deletes.

Targets (the issue's): ``feed`` <= 0.2x ``naive`` and <= 1.5x ``touched``. Writes
``changes-sf<SF>.json`` / ``.md`` / ``.png`` to ``--out``::

    python -m tpcds.bench_changes --sf 1 --out tpcds/results
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import rowops
from rowops.plan.feed import file_diff
from tpcds.batches import KEY_COLUMNS, TICKET, upsert_batch
from tpcds.cases import NUM_BUCKETS
from tpcds.datagen import generate_store_sales

ENCODINGS = ("copy-on-write", "position-delete", "equality-delete")
FEED_TARGET, FLOOR_TARGET = 0.2, 1.5


def timed(run: Callable[[], DataFrame], runs: int) -> tuple[float, list[float]]:
    """The median wall time of computing ``run()`` to its last row, over ``runs`` runs."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run().write.format("noop").mode("overwrite").save()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def naive_diff(table: rowops.Table, before: int, after: int) -> DataFrame:
    """Both snapshots in full, joined by key: the rows whose values differ (or exist on one side)."""
    old, new = table.to_df(snapshot_id=before), table.to_df(snapshot_id=after)
    columns = [c for c in old.columns if c not in KEY_COLUMNS]
    old = old.select(*KEY_COLUMNS, F.struct(*columns).alias("_old"))
    new = new.select(*KEY_COLUMNS, F.struct(*columns).alias("_new"))
    joined = old.join(new, list(KEY_COLUMNS), "full_outer")
    return joined.where(~F.col("_old").eqNullSafe(F.col("_new")))


def touched_files(table: rowops.Table, before: int, after: int) -> DataFrame:
    """The data files the commit touched, read once as plain Parquet (the floor of any feed)."""
    diff = file_diff(table.files(before), table.files(after))
    paths = [f.path for f in (*diff.read_before, *diff.added)]
    return table.lake.spark.read.parquet(*paths)


def measure(lake: rowops.Lakehouse, source: Path, encoding: str, runs: int) -> dict[str, Any]:
    spark = lake.spark
    rows = spark.read.parquet(str(source))
    table = lake.create_table(
        f"db.store_sales_{encoding.replace('-', '_')}",
        rows,
        partition_by=[f"bucket({NUM_BUCKETS}, {TICKET})"],
        identifier=list(KEY_COLUMNS),
    )
    before_version, before = lake.version, table.current_snapshot_id
    batch = upsert_batch(table.to_df(), 0.01, 0.01, seed=7).localCheckpoint()
    result = rowops.merge(batch, table, on=list(KEY_COLUMNS), strategy=encoding)
    after = table.current_snapshot_id
    assert before is not None and after is not None
    feed = lambda: table.changes(start=before_version, end=lake.version)  # noqa: E731
    feed_s, feed_runs = timed(feed, runs)
    naive_s, naive_runs = timed(lambda: naive_diff(table, before, after), runs)
    floor_s, floor_runs = timed(lambda: touched_files(table, before, after), runs)
    counts = {r[0]: r[1] for r in feed().groupBy("_change_type").count().collect()}
    changed_keys = naive_diff(table, before, after).count()
    diff = file_diff(table.files(before), table.files(after))
    return {
        "encoding": encoding,
        "rows": rows.count(),
        "merge": {"updated": result.rows_updated, "inserted": result.rows_inserted},
        "feed_counts": counts,
        "naive_changed_keys": changed_keys,
        "files_read": {"before": len(diff.read_before), "added": len(diff.added)},
        "feed_s": feed_s,
        "naive_s": naive_s,
        "touched_s": floor_s,
        "runs": {"feed": feed_runs, "naive": naive_runs, "touched": floor_runs},
        "feed_vs_naive": feed_s / naive_s,
        "feed_vs_touched": feed_s / floor_s,
    }


def report(results: list[dict[str, Any]], sf: float, out: Path) -> None:
    stem = out / f"changes-sf{sf:g}"
    doc = {
        "sf": sf,
        "targets": {"feed_vs_naive": FEED_TARGET, "feed_vs_touched": FLOOR_TARGET},
        "results": results,
    }
    stem.with_suffix(".json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = [
        f"# Change feed of one Case 2 batch, TPC-DS store_sales SF {sf:g}",
        "",
        "Median wall time of computing every change to its last row (`tpcds/bench_changes.py`). Targets:"
        f" feed <= {FEED_TARGET}x naive, <= {FLOOR_TARGET}x touched. A Case 2 batch touches every bucket, so"
        " the touched files are every data file: `touched / naive` is the least any feed can reach against"
        " the naive diff.",
        "",
        "| encoding | feed s | naive diff s | touched files s | feed / naive | feed / touched | touched / naive | changes (feed) | changed keys (naive) |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in results:
        ok = lambda v, t: "met" if v <= t else "missed"  # noqa: E731
        counts = ", ".join(f"{k} {v}" for k, v in sorted(r["feed_counts"].items()))
        lines.append(
            f"| {r['encoding']} | {r['feed_s']:.2f} | {r['naive_s']:.2f} | {r['touched_s']:.2f} | "
            f"{r['feed_vs_naive']:.2f} ({ok(r['feed_vs_naive'], FEED_TARGET)}) | "
            f"{r['feed_vs_touched']:.2f} ({ok(r['feed_vs_touched'], FLOOR_TARGET)}) | "
            f"{r['touched_s'] / r['naive_s']:.2f} | {counts} | {r['naive_changed_keys']} |"
        )
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.25
    for i, (key, label) in enumerate(
        (("feed_s", "changes()"), ("naive_s", "naive diff"), ("touched_s", "touched files"))
    ):
        ax.bar([x + i * width for x in range(len(results))], [r[key] for r in results], width, label=label)
    ax.set_xticks([x + width for x in range(len(results))], [r["encoding"] for r in results])
    ax.set_ylabel("seconds (median)")
    ax.set_title(f"Change feed of one Case 2 batch, SF {sf:g}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(stem.with_suffix(".png"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--data", default="data/tpcds")
    parser.add_argument("--out", default="tpcds/results")
    parser.add_argument("--encodings", nargs="*", default=list(ENCODINGS))
    parser.add_argument("--report-only", action="store_true", help="rewrite .md/.png from the .json")
    args = parser.parse_args(argv)
    if args.report_only:
        saved = json.loads((Path(args.out) / f"changes-sf{args.sf:g}.json").read_text())
        report(saved["results"], args.sf, Path(args.out))
        return
    source = generate_store_sales(args.sf, Path(args.data) / f"sf{args.sf:g}")
    with tempfile.TemporaryDirectory(prefix="bench-changes-") as scratch:
        lake = rowops.Lakehouse(Path(scratch) / "lake")
        results = []
        for encoding in args.encodings:
            results.append(measure(lake, source, encoding, args.runs))
            print(json.dumps(results[-1]), flush=True)
    report(results, args.sf, Path(args.out))


if __name__ == "__main__":
    main()
