"""Run one batch of a pipeline: a thin entry point for schedulers (``rowops pipeline run`` underneath).

::

    spark-submit spark_jobs/upsert_pipeline.py conf/store_sales_pipeline.toml --batch-id 2024-06-01T10
    python -m spark_jobs.upsert_pipeline conf/store_sales_pipeline.toml --batch-id 2024-06-01T10 --json

Options before the config are the CLI's global ones (``--lake``, ``-o KEY=VALUE``, ``--json``); exit
codes are the CLI's: 0 done (or the batch was committed before), 2 bad config or input, 3 commit
conflict (``--json``: ``retry_safe``), 1 other failure.
"""

from __future__ import annotations

import sys

from rowops.cli import app

GLOBAL_FLAGS = ("--json", "--verbose", "-v", "-vv")
GLOBAL_OPTIONS = ("--lake", "--storage-option", "-o")


def cli_args(argv: list[str]) -> list[str]:
    """``[global options] CONFIG [--batch-id ID]`` as ``rowops [global options] pipeline run ...``.

    >>> cli_args(["--json", "--lake", "l", "p.toml", "--batch-id", "b1"])
    ['--json', '--lake', 'l', 'pipeline', 'run', 'p.toml', '--batch-id', 'b1']
    """
    head: list[str] = []
    rest = list(argv)
    while rest and (rest[0] in GLOBAL_FLAGS or rest[0] in GLOBAL_OPTIONS):
        head.append(rest.pop(0))
        if head[-1] in GLOBAL_OPTIONS and rest:
            head.append(rest.pop(0))
    return [*head, "pipeline", "run", *rest]


def main(argv: list[str] | None = None) -> None:
    app(cli_args(sys.argv[1:] if argv is None else argv), prog_name="upsert_pipeline")


if __name__ == "__main__":
    main()
