"""The ``rowops`` command line's application: global options, the shared context, errors and exit codes.

The commands live by concern: ``pipelines.py``, ``inspection.py``, ``maintain.py``; ``text.py`` formats.

Exit codes (``EXIT_*``): 0 success (also a skipped, already committed batch), 2 bad config or input
(also usage errors), 3 a commit conflict (another writer committed first; ``--json`` says whether the
same command is safe to run again: ``retry_safe``), 1 any other failure. ``--json`` prints one JSON document on stdout (errors too); progress goes to stderr: a rich
spinner on a terminal, plain log lines otherwise.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
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
from rowops.exec.spark.compat import active_session, running_tasks
from rowops.exec.spark.session import use_log_level
from rowops.lakehouse import Lakehouse
from rowops.pipeline import PipelineConfig, load_config
from rowops.pipeline.lake import lake_for

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2
EXIT_CONFLICT = 3  # a commit conflict, retry-safe or not (the JSON error says which)

app = typer.Typer(help="rowops: row-level operations, pipelines and maintenance on Iceberg tables.")
pipeline_app = typer.Typer(help="Scheduled upsert pipelines (TOML configs).")
app.add_typer(pipeline_app, name="pipeline")
log = logging.getLogger("rowops.cli")
T = TypeVar("T")


class Context:
    """Global options, shared by every command."""

    def __init__(self, lake: str | None, options: dict[str, str], as_json: bool, quiet: bool = False) -> None:
        self.lake_location, self.storage_options, self.as_json = lake, options, as_json
        self.quiet = quiet
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
        elif not self.quiet:
            for line in text():
                self.out.print(line, highlight=False, markup=False)

    @contextmanager
    def progress(self, steps: int = 1) -> Iterator[Callable[[str], None]]:
        """A callback for step names: a rich progress bar on a terminal, log lines otherwise (nothing
        with ``--quiet``); both show Spark's running tasks (:func:`spark_tasks`) while a step runs."""
        if self.quiet:
            yield lambda step: None
            return
        if not (self.err.is_terminal and not self.as_json):
            with _ticking(log.info, lambda text: log.info("still %s", text), LOG_EVERY_S) as show:
                yield show
            return
        columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
        with Progress(*columns, console=self.err, transient=True) as bar:
            task = bar.add_task("starting", total=steps)
            started = False

            def advance(step: str) -> None:
                nonlocal started
                bar.update(task, description=step, advance=1 if started else 0)
                started = True

            def refresh(step: str) -> None:
                bar.update(task, description=step)

            with _ticking(advance, refresh, BAR_EVERY_S) as show:
                yield show
            bar.update(task, completed=steps)


LOG_EVERY_S, BAR_EVERY_S = 10.0, 0.5


def spark_tasks(spark: Any) -> str:
    """Spark's running work, e.g. `` (Spark: 3/8 tasks, 1 stage)``; empty when nothing runs."""
    running = running_tasks(spark)
    if not running or not running[0]:
        return ""
    stages, done, total = running
    return f" (Spark: {done}/{total} tasks, {stages} stage{'s' if stages > 1 else ''})"


@contextmanager
def _ticking(
    on_step: Callable[[str], None], on_refresh: Callable[[str], None], every: float
) -> Iterator[Callable[[str], None]]:
    """A step callback: ``on_step`` with each step's name, then ``on_refresh`` every ``every`` seconds
    while Spark runs tasks for it (a background thread), both with :func:`spark_tasks` appended."""
    current: list[Any] = []  # [step name, the session active in the thread that reported it]
    stop = threading.Event()

    def step(name: str) -> None:
        current[:] = [name, active_session()]
        on_step(name + spark_tasks(current[1]))

    def refresh() -> None:
        while not stop.wait(every):
            tasks = spark_tasks(current[1]) if current else ""
            if tasks:
                on_refresh(current[0] + tasks)

    ticker = threading.Thread(target=refresh, name="rowops-progress", daemon=True)
    ticker.start()
    try:
        yield step
    finally:
        stop.set()
        ticker.join()


def exit_code(exc: BaseException) -> int:
    """The exit code of an error: 2 bad input, 3 commit conflict, 1 anything else."""
    if isinstance(exc, CommitConflictError):
        return EXIT_CONFLICT
    if isinstance(exc, InvalidInputError | NoSuchTableError):
        return EXIT_BAD_INPUT
    return EXIT_FAILURE


def pipeline_lake(state: Context, config: str) -> tuple[PipelineConfig, Lakehouse]:
    """The parsed pipeline config and the lake it names (``--lake`` / ``ROWOPS_LAKE`` first)."""
    parsed = load_config(config)
    return parsed, lake_for(parsed, state.lake_location, state.storage_options)


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
            if isinstance(exc, CommitConflictError):
                error["retry_safe"] = exc.retry_safe
            print(json.dumps(error, indent=2, sort_keys=True))
        state.err.print(f"error: {message}", highlight=False, markup=False)
        raise typer.Exit(code) from None


def rowops_version() -> str:
    """The installed distribution's version (``unknown`` when run from a bare checkout)."""
    try:
        return version("rowops")
    except PackageNotFoundError:
        return "unknown"


def _print_version(value: bool) -> None:
    if value:
        print(f"rowops {rowops_version()}")
        raise typer.Exit(EXIT_OK)


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
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print nothing but errors (and --json's document).")
    ] = False,
    show_version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print rowops' version."),
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
        level=logging.WARNING
        if quiet
        else logging.INFO
        if verbose or not sys.stderr.isatty()
        else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    if verbose > 1:
        logging.getLogger("rowops").setLevel(logging.DEBUG)
    use_log_level("ERROR" if verbose > 1 else "FATAL")  # Spark logs a failed task's trace at ERROR
    ctx.obj = Context(lake, storage_options(storage_option or []), as_json, quiet)
