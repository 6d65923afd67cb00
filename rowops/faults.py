"""Fault injection for failure-atomicity tests.

Set ``ROWOPS_FAULT=<point>`` and the operation raises :class:`InjectedFault` when it reaches that
point. Points:

* ``before-commit``: all files written, the lake version not yet attempted (cleanable);
* ``manifests-merged``: a commit's manifests (merged ones included) written, its manifest list not yet
  (``commit/row_delta.py`` removes what it wrote);
* ``after-commit``: the lake version was committed, the operation has not returned yet (files stay);
* ``commit-unknown``: the put-if-absent of the lake version fails as if storage broke mid-write;
* ``hide-written-file``: the listing of a Spark write misses one file, as when an executor wrote
  where the driver cannot see.
"""

from __future__ import annotations

import os

from rowops.errors import RowOpsError


class InjectedFault(RowOpsError):
    """A simulated crash at a named point (tests only)."""

    help = "Unset ROWOPS_FAULT: it is for failure tests only."


def active(point: str) -> bool:
    """Whether ``ROWOPS_FAULT`` names ``point``."""
    return os.environ.get("ROWOPS_FAULT") == point


def check(point: str) -> None:
    """Raise :class:`InjectedFault` if ``ROWOPS_FAULT`` names ``point``."""
    if active(point):
        raise InjectedFault(f"injected fault at {point}")


def check_os(point: str) -> None:
    """Raise an ``OSError`` (a simulated storage failure) if ``ROWOPS_FAULT`` names ``point``."""
    if active(point):
        raise OSError(f"injected storage failure at {point}")
