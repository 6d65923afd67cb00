"""``python -m rowops``: the ``rowops`` command line (``rowops/cli/``)."""

from rowops.cli import main

main()
