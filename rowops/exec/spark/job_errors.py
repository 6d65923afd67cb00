"""Spark's analysis and runtime errors translated into rowops errors, at one boundary."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.errors import AnalysisException

from rowops.errors import (
    InvalidExpressionError,
    MissingFileError,
    NullKeyError,
    NullValueError,
    RowOpsError,
    SparkJobError,
    ValueOutOfRangeError,
)
from rowops.exec.checks.store_assignment import NULL_MARKER, OUT_OF_RANGE_MARKER
from rowops.exec.spark.compat import JOB_ERRORS

_PYTHON_ERROR = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception): ")


def _marked(text: str, marker: str) -> str | None:
    """The first line of a rowops error raised inside a Spark job (after its marker), if any."""
    if marker not in text:
        return None
    return text[text.index(marker) :].splitlines()[0].split(": ", 1)[-1]


def _job_error(context: str, exc: Exception) -> RowOpsError:
    """The rowops error of a failed Spark job: rowops' own markers first, else Spark's root cause."""
    text = str(exc)
    if (null := _marked(text, NULL_MARKER)) is not None:
        error = NullKeyError if "identifier field" in null else NullValueError
        return error(f"NULL in a required column: {null}")
    if (overflow := _marked(text, OUT_OF_RANGE_MARKER)) is not None:
        return ValueOutOfRangeError(f"A value does not fit its column in {context}: {overflow}")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    causes = [line.removeprefix("Caused by: ") for line in lines if line.startswith("Caused by: ")]
    heads = [line.lstrip(": ") for line in lines if not line.startswith(("An error occurred", "at "))]
    summary = causes[-1] if causes else heads[0] if heads else type(exc).__name__
    python = [line for line in lines if _PYTHON_ERROR.match(line)]
    if python and ("Traceback" in summary or "Python worker" in summary):
        summary = python[-1]  # a Python worker's error: its last line says what went wrong
    if "FileNotFoundException" in summary or summary.startswith("FileNotFoundError"):  # e.g. executors
        # that do not share the driver's disk (a JVM reader's or a Python task's, e.g. exec/arrow_rewrite);
        # Spark's readers say the file "does not exist", pyarrow's "No such file": say it either way
        detail = summary[:500] if "does not exist" in summary else f"the file does not exist: {summary[:500]}"
        return MissingFileError(f"Spark found no file it had to read in {context}: {detail}")
    return SparkJobError(f"Spark failed in {context}: {summary[:500]}")


@contextmanager
def spark_errors(context: str) -> Iterator[None]:
    """Translate Spark's analysis and runtime errors into rowops errors at one boundary."""
    try:
        yield
    except AnalysisException as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip() and not line.startswith("==")]
        if "[PATH_NOT_FOUND]" in str(exc):  # a file of the table listed on the driver is gone
            raise MissingFileError(
                f"Spark found no file it had to read in {context}: {lines[0][:500]}"
            ) from exc
        raise InvalidExpressionError(f"Invalid SQL in {context}: {' '.join(lines[:3])[:500]}") from exc
    except JOB_ERRORS as exc:
        raise _job_error(context, exc) from exc
