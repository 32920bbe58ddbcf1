"""Shared console helpers for the command line: printing input errors, exit codes."""

from __future__ import annotations

import sys
from typing import NoReturn

from rich.console import Console

from solver.common.errors import InputError, SolverError

EXIT_OK = 0
EXIT_SOLVER_ERROR = 1
"""The solver failed (not an answer about the RFQ): like a bug, exit 1 - never 3."""
EXIT_INVALID = 2
EXIT_INFEASIBLE = 3
PROBLEMS_SHOWN = 50
EXIT_TIMEOUT = 4
"""The time limit ran out before any plan was found (not an answer about the RFQ)."""

out = Console(highlight=False)  # a terminal: Rich wraps long lines at word boundaries
err = Console(stderr=True, highlight=False, soft_wrap=True)
if not out.is_terminal:  # piped or captured: wide enough that tables never truncate ids
    out = Console(highlight=False, soft_wrap=True, width=200)


def fail_input(exc: InputError) -> NoReturn:
    """Print every problem of an invalid input (file, field, value, reason) and exit 2."""
    err.print(f"[bold red]invalid input[/] ({len(exc.problems)} problem"
              f"{'s' if len(exc.problems) != 1 else ''}):")
    for problem in exc.problems[:PROBLEMS_SHOWN]:
        err.print(f"  - {problem}", markup=False)
    if len(exc.problems) > PROBLEMS_SHOWN:
        err.print(f"  ... and {len(exc.problems) - PROBLEMS_SHOWN} more", markup=False)
    sys.exit(EXIT_INVALID)


def fail_solver(exc: SolverError) -> NoReturn:
    """A solver failure in one line, exit 1: it says nothing about whether a plan exists."""
    err.print(f"solver error: {exc}; the solver failed on this model, which says nothing "
              "about whether a plan exists - try another --solver", markup=False)
    sys.exit(EXIT_SOLVER_ERROR)
