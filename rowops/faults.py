"""Fault injection for failure-atomicity tests.

Set ``ROWOPS_FAULT=<point>`` and the operation raises :class:`InjectedFault` when it reaches that
point. Points: ``before-commit`` (all files written, lake version not yet committed).
"""

from __future__ import annotations

import os


class InjectedFault(RuntimeError):
    """A simulated crash at a named point."""


def check(point: str) -> None:
    """Raise :class:`InjectedFault` if ``ROWOPS_FAULT`` names ``point``."""
    if os.environ.get("ROWOPS_FAULT") == point:
        raise InjectedFault(f"injected fault at {point}")
