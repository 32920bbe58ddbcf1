"""``python -m solver.cli``: the same as the ``procure`` command."""

from solver.cli.main import entry

entry()
