"""The ``rowops`` command line's application: global options, the shared context, errors and exit codes.

The commands live by concern: ``pipelines.py``, ``inspection.py``, ``maintain.py``; ``text.py`` formats.

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
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from rowops.cli.text import (
    error_message,
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


def pipeline_lake(state: Context, config: str) -> tuple[PipelineConfig, Lakehouse]:
    """The parsed pipeline config and the lake it names (``--lake`` / ``ROWOPS_LAKE`` first)."""
    parsed = load_config(config)
    return parsed, runner.lake_for(parsed, state.lake_location, state.storage_options)


def guarded(ctx: typer.Context, action: Callable[[Context], T]) -> T:
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
