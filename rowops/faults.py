"""Fault injection for failure-atomicity tests.

Set ``ROWOPS_FAULT=<point>`` and the operation raises :class:`InjectedFault` when it reaches that
point. Points: ``before-commit`` (all files written, lake version not yet committed);
``hide-written-file`` (the listing of a Spark write misses one file, as when an executor wrote where
the driver cannot see).
"""

from __future__ import annotations

import os


class InjectedFault(RuntimeError):
    """A simulated crash at a named point."""


def active(point: str) -> bool:
    """Whether ``ROWOPS_FAULT`` names ``point``."""
    return os.environ.get("ROWOPS_FAULT") == point


def check(point: str) -> None:
    """Raise :class:`InjectedFault` if ``ROWOPS_FAULT`` names ``point``."""
    if active(point):
        raise InjectedFault(f"injected fault at {point}")
