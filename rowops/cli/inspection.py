"""``rowops init|tables|describe|history|changes``: the lake and its tables, read-only (``init`` creates)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from rowops.cli.app import Context, app, guarded
from rowops.cli.text import (
    change_lines,
    change_row,
    commit_line,
    describe_lines,
    describe_table,
    snapshot_line,
)
from rowops.errors import InvalidInputError


# -- inspection ------------------------------------------------------------------------------------
@app.command("init")
def init(ctx: typer.Context) -> None:
    """Create an empty lake at --lake (the other commands never create one); an existing lake is kept."""

    def action(state: Context) -> None:
        lake = state.lake(create=True)
        version = lake.version
        state.emit(
            {"lake": lake.location, "lake_version": version},
            lambda: [f"lake {lake.location}: version {version}, {len(lake.list_tables())} tables"],
        )

    guarded(ctx, action)


@app.command("tables")
def tables(ctx: typer.Context) -> None:
    """The names of the lake's tables, one a line (rowops describe TABLE: a table's snapshot and files)."""

    def action(state: Context) -> None:
        lake = state.lake()
        latest = lake.catalog.log.latest()
        names = latest.names()
        state.emit({"lake_version": latest.version, "tables": names}, lambda: names)

    guarded(ctx, action)


@app.command("describe")
def describe(ctx: typer.Context, table: Annotated[str, typer.Argument(help="namespace.table")]) -> None:
    """Schema, partitioning, sort order, files and read debt of a table."""

    def action(state: Context) -> None:
        doc = describe_table(state.lake().table(table))
        state.emit(doc, lambda: describe_lines(doc))

    guarded(ctx, action)


@app.command("history")
def history(
    ctx: typer.Context,
    table: Annotated[
        str | None, typer.Argument(help="A table: its snapshots; none: the lake's versions.")
    ] = None,
) -> None:
    """Lake versions (transactions, tables, rows, pipeline batches), or a table's snapshots with metrics."""

    def action(state: Context) -> None:
        lake = state.lake()
        if table is None:
            commits = lake.history()
            state.emit([c.__dict__ for c in commits], lambda: [commit_line(c) for c in commits])
            return
        snapshots = lake.table(table).snapshots()
        state.emit(snapshots, lambda: [snapshot_line(s) for s in snapshots])

    guarded(ctx, action)


@app.command("changes")
def changes(
    ctx: typer.Context,
    table: Annotated[str, typer.Argument(help="namespace.table")],
    start: Annotated[
        int | None, typer.Option("--from", help="Lake version after which (default: 0).")
    ] = None,
    end: Annotated[
        int | None, typer.Option("--to", help="Lake version up to which (default: newest).")
    ] = None,
    net: Annotated[bool, typer.Option("--net", help="One net change per row over the range.")] = False,
    fmt: Annotated[str, typer.Option("--format", help="table, json, or parquet (into --out).")] = "table",
    out: Annotated[str | None, typer.Option("--out", help="The directory --format parquet writes.")] = None,
) -> None:
    """The change feed of a table: rows inserted, deleted and updated by each lake version in a range."""

    def action(state: Context) -> None:
        df = state.lake().table(table).changes(start=start, end=end, net=net)
        if fmt == "parquet":
            if not out:
                raise InvalidInputError(
                    "--format parquet needs --out DIR", help="Pass --out DIR; nothing was written."
                )
            target = out if "://" in out else str(Path(out).resolve())  # Spark's working directory may differ
            df.write.mode("errorifexists").parquet(target)  # the rows go from the executors to the files
            state.emit({"table": table, "out": out}, lambda: [f"changes of {table} written to {out}"])
            return
        if fmt not in ("table", "json"):
            raise InvalidInputError(f"unknown --format {fmt!r}", help="Use --format table, json or parquet.")
        rows = [change_row(r.asDict()) for r in df.toLocalIterator()]
        if fmt == "json" or state.as_json:
            print(json.dumps(rows, indent=2, sort_keys=True))
        else:
            state.emit(rows, lambda: change_lines(rows))

    guarded(ctx, action)
