"""Spark jobs that say what they are: a description, a job group and tags per rowops operation.

Inside :func:`operation_jobs`, every Spark job the calling thread starts (and the driver threads it
hands work to, ``compat.thread_target``) carries:

* the job description ``rowops MERGE db.orders [position-delete] 2/4: scan 12 of 340 files``: the
  operation, the table, the encoding once chosen, and the step, updated by :func:`job_step`;
* the job group :attr:`OperationJobs.group` (``rowops-<operation>-<id>``), so that
  the SparkContext's ``cancelJobGroup(group)`` cancels the operation's jobs, which a failed
  operation answers by leaving every table as it was;
* the tags :data:`ROWOPS_TAG` (every rowops job) and :attr:`OperationJobs.tag` (this operation),
  added to the caller's own: ``sc.cancelJobsWithTag`` on classic Spark, ``spark.interruptTag`` on
  Spark Connect.

Each step is also logged at DEBUG on ``rowops.phases`` with the seconds the previous step took, and
the operation's end with its total (``logging.getLogger("rowops.phases").setLevel(logging.DEBUG)``).

The caller's description, group and tags are restored when the block ends, failed or not. Spark has
one job group per thread, so the caller's group is replaced while the operation runs (its tags are
kept: a tag is the way to reach rowops' jobs from an outer scope). Spark Connect has tags only: a
client cannot set a job's description or group, so there the tags carry the operation and the step
is not shown.

>>> describe_jobs("MERGE", "db.orders", "position-delete", "2/4: scan 12 of 340 files")
'rowops MERGE db.orders [position-delete] 2/4: scan 12 of 340 files'
>>> describe_jobs("compact", "db.t", None, "")
'rowops compact db.t'
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from pyspark.sql import SparkSession

from rowops.exec.spark.compat import enter_job_scope, leave_job_scope, set_job_description

ROWOPS_TAG = "rowops"
PHASES = logging.getLogger("rowops.phases")
_local = threading.local()  # the calling thread's innermost OperationJobs


def describe_jobs(operation: str, table: str, encoding: str | None, step: str) -> str:
    """The description of an operation's Spark jobs."""
    text = f"rowops {operation} {table}"
    if encoding:
        text += f" [{encoding}]"
    return f"{text} {step}" if step else text


def _tag_part(text: str) -> str:
    """``text`` as part of a Spark job tag (no commas; short, lower case).

    >>> _tag_part("MERGE db.Orders, x")
    'merge-db.orders-x'
    """
    return re.sub(r"[^a-z0-9._]+", "-", text.lower()).strip("-")[:80]


@dataclass
class OperationJobs:
    """The Spark jobs of one operation on one table (see the module's docstring)."""

    spark: SparkSession
    operation: str
    table: str
    encoding: str | None = None
    step: str = ""
    group: str = ""
    tag: str = ""
    started: float = 0.0
    step_started: float = 0.0

    @property
    def description(self) -> str:
        return describe_jobs(self.operation, self.table, self.encoding, self.step)

    def log_phase(self, ended: str) -> None:
        """Log at DEBUG that the step ``ended`` (its name, or the end of the operation) is over."""
        now = time.perf_counter()
        if PHASES.isEnabledFor(logging.DEBUG):
            finished = f"{self.step or 'start'} took {now - self.step_started:.2f} s"
            PHASES.debug("%s %s: %s; %s", self.operation, self.table, finished, ended)
        self.step_started = now


def current_jobs() -> OperationJobs | None:
    """The calling thread's innermost operation scope, if any."""
    return getattr(_local, "jobs", None)


@contextlib.contextmanager
def operation_jobs(spark: SparkSession, operation: str, table: str) -> Iterator[OperationJobs]:
    """Name, group and tag every Spark job the block starts as ``operation`` on ``table``.

    A scope nested in another one of this thread (a statement's write inside a pipeline batch)
    keeps the outer group, adds its own tag and describes its own jobs.
    """
    outer = current_jobs()
    key = uuid.uuid4().hex[:12]
    now = time.perf_counter()
    jobs = OperationJobs(spark, operation, table, group=f"rowops-{_tag_part(operation)}-{key}")
    jobs.started = jobs.step_started = now
    jobs.tag = f"rowops-{_tag_part(operation)}-{_tag_part(table)}-{key}"
    if outer is not None:
        jobs.group = outer.group
    group = jobs.group if outer is None else None
    saved = enter_job_scope(spark, group, jobs.description, (ROWOPS_TAG, jobs.tag))
    _local.jobs = jobs
    try:
        yield jobs
    finally:
        _local.jobs = outer
        leave_job_scope(spark, saved, restore_group=outer is None)
        jobs.log_phase(f"done in {time.perf_counter() - jobs.started:.2f} s")


def job_step(step: str, encoding: str | None = None) -> None:
    """Describe the calling thread's next Spark jobs as ``step`` of its operation (and, once chosen,
    its ``encoding``); nothing outside :func:`operation_jobs`."""
    jobs = current_jobs()
    if jobs is None:
        return
    jobs.log_phase(f"next: {step}")
    jobs.step = step
    if encoding is not None:
        jobs.encoding = encoding
    set_job_description(jobs.spark, jobs.description)
