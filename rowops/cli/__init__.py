"""The ``rowops`` command line (``app.py``: options, context, exit codes; the commands by concern in ``pipelines.py``, ``inspection.py``, ``maintain.py``).

Exit codes (``EXIT_*``): 0 success (also a skipped, already committed batch), 2 bad config or input
(also usage errors), 3 a commit conflict (another writer committed first; ``--json`` says whether the
same command is safe to run again: ``retry_safe``), 1 any other failure.
"""

from __future__ import annotations

from rowops.cli import inspection, maintain, pipelines  # noqa: F401  (each registers its commands on app)
from rowops.cli.app import EXIT_BAD_INPUT, EXIT_CONFLICT, EXIT_FAILURE, EXIT_OK, app, exit_code
from rowops.cli.text import parse_duration

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_CONFLICT",
    "EXIT_FAILURE",
    "EXIT_OK",
    "app",
    "exit_code",
    "main",
    "parse_duration",
]


def main() -> None:
    """The console script."""
    app()


if __name__ == "__main__":
    main()
