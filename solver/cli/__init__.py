"""`procure` sub-commands, one module per command group; each exposes ``register(app)``."""

from solver.common import clock  # noqa: E402,F401 - first of all: --time-limit counts from here
