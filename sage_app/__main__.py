"""``python -m sage_app``: the ``sage`` command line."""

from sage_app.cli import main

main()
