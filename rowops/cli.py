"""The ``rowops`` command line: pipelines, table inspection and maintenance (a thin layer on the facade).

Exit codes (``EXIT_*``): 0 success (also a skipped, already committed batch), 2 bad config or input
(also usage errors), 75 a retryable commit conflict (``EX_TEMPFAIL``: run it again), 1 any other
failure. ``--json`` prints one JSON document on stdout (errors too); progress goes to stderr: a rich
spinner on a terminal, plain log lines otherwise.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from rowops.cli_text import (
    commit_line,
    describe_lines,
    describe_table,
    error_message,
    parse_duration,
    snapshot_line,
    storage_options,
)
from rowops.errors import (
    CommitConflictError,
    InvalidInputError,
    NoSuchTableError,
    RowOpsError,
)
from rowops.exec.spark.session import use_log_level
from rowops.lakehouse import Lakehouse
from rowops.pipeline import PipelineConfig, load_config, runner

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2
EXIT_RETRY = 75  # EX_TEMPFAIL (sysexits.h): a conflict; the same command can succeed when run again

app = typer.Typer(help="rowops: row-level operations, pipelines and maintenance on Iceberg tables.")
pipeline_app = typer.Typer(help="Scheduled upsert pipelines (TOML configs).")
app.add_typer(pipeline_app, name="pipeline")
log = logging.getLogger("rowops.cli")
T = TypeVar("T")


class Context:
    """Global options, shared by every command."""

    def __init__(self, lake: str | None, options: dict[str, str], as_json: bool) -> None:
        self.lake_location, self.storage_options, self.as_json = lake, options, as_json
        self.out = Console(soft_wrap=True)
        self.err = Console(stderr=True, soft_wrap=True)

    def lake(self, create: bool = False) -> Lakehouse:
        """The lake of ``--lake``; it must exist (only ``rowops init`` creates one)."""
        if not self.lake_location:
            raise InvalidInputError("no lake given", help="Pass --lake PATH_OR_URI or set ROWOPS_LAKE.")
        return Lakehouse(self.lake_location, storage_options=self.storage_options, create=create)

    def emit(self, document: Any, text: Callable[[], list[str]]) -> None:
        """The command's result: JSON with ``--json``, else text lines."""
        if self.as_json:
            print(json.dumps(document, indent=2, default=str, sort_keys=True))
        else:
            for line in text():
                self.out.print(line, highlight=False, markup=False)

    @contextmanager
    def progress(self, steps: int = 1) -> Iterator[Callable[[str], None]]:
        """A callback for step names: a rich progress bar on a terminal, log lines otherwise."""
        if not (self.err.is_terminal and not self.as_json):
            yield lambda step: log.info(step)
            return
        columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
        with Progress(*columns, console=self.err, transient=True) as bar:
            task = bar.add_task("starting", total=steps)
            started = False

            def advance(step: str) -> None:
                nonlocal started
                bar.update(task, description=step, advance=1 if started else 0)
                started = True

            yield advance
            bar.update(task, completed=steps)


def exit_code(exc: BaseException) -> int:
    """The exit code of an error: 2 bad input, 75 retryable conflict, 1 anything else."""
    if isinstance(exc, CommitConflictError):
        return EXIT_RETRY if exc.retry_safe else EXIT_FAILURE
    if isinstance(exc, InvalidInputError | NoSuchTableError):
        return EXIT_BAD_INPUT
    return EXIT_FAILURE


def _pipeline_lake(state: Context, config: str) -> tuple[PipelineConfig, Lakehouse]:
    """The parsed pipeline config and the lake it names (``--lake`` / ``ROWOPS_LAKE`` first)."""
    parsed = load_config(config)
    return parsed, runner.lake_for(parsed, state.lake_location, state.storage_options)


def _guarded(ctx: typer.Context, action: Callable[[Context], T]) -> T:
    """Run a command; rowops errors become a message (or JSON) and their exit code. The cause (a Spark
    or parser error) is logged at DEBUG (``-vv``)."""
    state: Context = ctx.obj
    try:
        return action(state)
    except RowOpsError as exc:
        code = exit_code(exc)
        message = error_message(exc, state.lake_location)
        log.debug("%s", type(exc).__name__, exc_info=exc)
        if state.as_json:
            error = {"status": "failed", "error": type(exc).__name__, "message": message, "exit_code": code}
            print(json.dumps(error, indent=2, sort_keys=True))
        state.err.print(f"error: {message}", highlight=False, markup=False)
        raise typer.Exit(code) from None


@app.callback()
def main_options(
    ctx: typer.Context,
    lake: Annotated[
        str | None,
        typer.Option("--lake", envvar="ROWOPS_LAKE", help="Lake root: a directory or s3://bucket/prefix."),
    ] = None,
    storage_option: Annotated[
        list[str] | None,
        typer.Option(
            "--storage-option", "-o", help="Storage option KEY=VALUE (pyiceberg FileIO names); repeatable."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document (for schedulers).")
    ] = False,
    verbose: Annotated[
        int,
        typer.Option(
            "--verbose",
            "-v",
            count=True,
            help="Log progress lines to stderr; -vv also the causes of errors and Spark's own errors.",
        ),
    ] = 0,
) -> None:
    """Global options."""
    logging.basicConfig(
        level=logging.INFO if verbose or not sys.stderr.isatty() else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    if verbose > 1:
        logging.getLogger("rowops").setLevel(logging.DEBUG)
    use_log_level("ERROR" if verbose > 1 else "FATAL")  # Spark logs a failed task's trace at ERROR
    ctx.obj = Context(lake, storage_options(storage_option or []), as_json)


# -- pipelines -------------------------------------------------------------------------------------
@pipeline_app.command("run")
def pipeline_run(
    ctx: typer.Context,
    config: Annotated[str, typer.Argument(help="The pipeline's TOML file.")],
    batch_id: Annotated[str | None, typer.Option("--batch-id", help="Overrides [pipeline].batch_id.")] = None,
) -> None:
    """Run one batch (a batch committed before is skipped: exit code 0)."""

    def action(state: Context) -> None:
        parsed, lake = _pipeline_lake(state, config)
        with state.progress(runner.steps(parsed)) as progress:
            metrics = runner.run(lake, parsed, batch_id, progress)
        state.emit(metrics.to_dict(), metrics.log_lines)

    _guarded(ctx, action)


@pipeline_app.command("validate")
def pipeline_validate(
    ctx: typer.Context,
    config: Annotated[str, typer.Argument(help="The pipeline's TOML file.")],
    batch_id: Annotated[str | None, typer.Option("--batch-id")] = None,
) -> None:
    """Check the config, the batch's source (schema, operation codes) and the targets; writes nothing."""

    def action(state: Context) -> None:
        parsed, lake = _pipeline_lake(state, config)
        metrics = runner.validate(lake, parsed, batch_id)
        state.emit(metrics.to_dict(), lambda: [f"{config}: valid", *metrics.log_lines()[1:]])

    _guarded(ctx, action)


@app.command("explain")
def explain(
    ctx: typer.Context,
    config: Annotated[str, typer.Argument(help="The pipeline's TOML file.")],
    batch_id: Annotated[str | None, typer.Option("--batch-id")] = None,
) -> None:
    """The plan of each target's MERGE for a batch (strategy and why, files, join); writes nothing."""

    def action(state: Context) -> None:
        parsed, lake = _pipeline_lake(state, config)
        plans = runner.explain(lake, parsed, batch_id)
        state.emit(plans, lambda: [f"-- {name}\n{plan}" for name, plan in plans.items()])

    _guarded(ctx, action)


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

    _guarded(ctx, action)


@app.command("tables")
def tables(ctx: typer.Context) -> None:
    """The names of the lake's tables, one a line (rowops describe TABLE: a table's snapshot and files)."""

    def action(state: Context) -> None:
        lake = state.lake()
        latest = lake.catalog.log.latest()
        names = latest.names()
        state.emit({"lake_version": latest.version, "tables": names}, lambda: names)

    _guarded(ctx, action)


@app.command("describe")
def describe(ctx: typer.Context, table: Annotated[str, typer.Argument(help="namespace.table")]) -> None:
    """Schema, partitioning, sort order, files and read debt of a table."""

    def action(state: Context) -> None:
        doc = describe_table(state.lake().table(table))
        state.emit(doc, lambda: describe_lines(doc))

    _guarded(ctx, action)


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

    _guarded(ctx, action)


# -- maintenance -----------------------------------------------------------------------------------
def _maintain(ctx: typer.Context, table: str, call: Callable[[Any], Any]) -> None:
    def action(state: Context) -> None:
        handle = state.lake().table(table)
        with state.progress() as progress:
            progress(f"maintaining {table}")
            result = call(handle)
        doc = {"table": table, **result.to_dict()}
        counts = {k: v for k, v in result.to_dict().items() if k != "paths"}
        paths = list(getattr(result, "paths", ()))
        state.emit(doc, lambda: [f"{table}: " + ", ".join(f"{k}={v}" for k, v in counts.items()), *paths])

    _guarded(ctx, action)


@app.command("compact")
def compact(
    ctx: typer.Context,
    table: Annotated[str, typer.Argument(help="namespace.table")],
    where: Annotated[str | None, typer.Option(help="Only files of partitions matching this filter.")] = None,
    max_bytes: Annotated[int | None, typer.Option(help="Budget: data bytes rewritten at most.")] = None,
    target_file_size: Annotated[int | None, typer.Option(help="Bytes per output file.")] = None,
) -> None:
    """Rewrite data files with their deletes applied, bin-packed and sorted (rows unchanged)."""
    _maintain(
        ctx, table, lambda t: t.compact(where=where, max_bytes=max_bytes, target_file_size=target_file_size)
    )


@app.command("expire-snapshots")
def expire_snapshots(
    ctx: typer.Context,
    table: Annotated[str, typer.Argument(help="namespace.table")],
    older_than: Annotated[
        str | None,
        typer.Option(help="Age like 7d, 12h, 0s (default: history.expire.max-snapshot-age-ms, 5 days)."),
    ] = None,
    retain_last: Annotated[
        int | None,
        typer.Option(help="Snapshots always kept (default: history.expire.min-snapshots-to-keep, 1)."),
    ] = None,
) -> None:
    """Expire old snapshots (never the current one, nor one a tag or an offered lake version needs)."""
    age = parse_duration(older_than) if older_than else None
    _maintain(ctx, table, lambda t: t.expire_snapshots(older_than=age, retain_last=retain_last))


@app.command("remove-orphans")
def remove_orphans(
    ctx: typer.Context,
    table: Annotated[str, typer.Argument(help="namespace.table")],
    older_than: Annotated[str, typer.Option(help="Safety age of removed files.")] = "3d",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List the files; delete nothing.")] = False,
) -> None:
    """Remove files of the table that no snapshot references (older than the safety age)."""
    age = parse_duration(older_than)
    _maintain(ctx, table, lambda t: t.remove_orphans(older_than=age, dry_run=dry_run))


@app.command("cleanup")
def cleanup(
    ctx: typer.Context,
    older_than: Annotated[str, typer.Option(help="Safety age of removed files.")] = "3d",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List the files; delete nothing.")] = False,
) -> None:
    """Remove files no lake version references from the lake's own tables (older than the safety age)."""
    age = parse_duration(older_than)

    def action(state: Context) -> None:
        result = state.lake().cleanup(older_than=age, dry_run=dry_run)
        verb = "would remove" if dry_run else "removed"
        state.emit(
            asdict(result),
            lambda: [
                f"{verb} {result.orphans_removed} files ({result.bytes_removed} bytes)",
                *result.removed,
            ],
        )

    _guarded(ctx, action)


@app.command("rewrite-manifests")
def rewrite_manifests(
    ctx: typer.Context, table: Annotated[str, typer.Argument(help="namespace.table")]
) -> None:
    """Merge the table's small manifests into target-size ones (metadata only; rows unchanged)."""
    _maintain(ctx, table, lambda t: t.rewrite_manifests())


@app.command("verify")
def verify(ctx: typer.Context) -> None:
    """Check every lake version, ref and snapshot: metadata, files, sizes, sequence numbers, row counts.
    Exit 0 when clean, 1 with the problems listed."""

    def action(state: Context) -> None:
        result = state.lake().verify()
        document = {
            "ok": result.ok,
            "versions": result.versions,
            "problems": [asdict(p) for p in result.problems],
            "refused": [list(r) for r in result.refused],
        }
        state.emit(document, result.lines)
        if not result.ok:
            raise typer.Exit(EXIT_FAILURE)

    _guarded(ctx, action)


def main() -> None:
    """The console script."""
    app()


if __name__ == "__main__":
    main()
