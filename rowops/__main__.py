"""``python -m rowops``: the ``rowops`` command line (``rowops/cli.py``)."""

from rowops.cli import main

main()
