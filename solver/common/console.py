"""Shared console helpers for the command line: printing input errors, exit codes."""

from __future__ import annotations

import io
import math
import os
import sys
from typing import IO, NoReturn, cast

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

PIPED_WIDTH = 100
"""Columns of piped or captured output when ``COLUMNS`` does not say (issue 32)."""
MIN_WIDTH, MAX_WIDTH = 40, 1000


def terminal_width(default: int = PIPED_WIDTH) -> int:
    """The width to print at when not on a terminal: ``COLUMNS`` when it is a sane number,
    else ``default``."""
    text = os.environ.get("COLUMNS", "").strip()
    if text.isdigit() and MIN_WIDTH <= int(text) <= MAX_WIDTH:
        return int(text)
    return default


def _round_significant(value: float, digits: int) -> float:
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


def readable(value: float, low: float | None = None, high: float | None = None,
             digits: int = 3) -> str:
    """``value`` rounded for reading (issue 32: ``0.765625`` is ``0.766``): ``digits``
    significant figures, or, given the interval ``[low, high]`` it is known within (a
    break-even found by bisection), the fewest (two or more) whose rounding stays inside
    it. Thousands separated; no trailing zeros after the point."""
    if not math.isfinite(value) or value == 0:
        return f"{value:g}"
    bracket = low is not None and high is not None and low <= value <= high
    for used in range(2 if bracket else digits, 7 if bracket else digits + 1):
        rounded = _round_significant(value, used)
        if not bracket or (low is not None and high is not None and low <= rounded <= high):
            break
    decimals = max(0, used - 1 - math.floor(math.log10(abs(rounded or value))))
    text = f"{rounded:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _size(text: str) -> int:
    """Width of a line as byte-counting tools see it (UTF-8 bytes >= characters)."""
    return len(text.encode("utf-8"))


def wrap_columns(text: str, width: int, first: str = "", indent: str = "") -> list[str]:
    """``text`` wrapped at word boundaries so that no line exceeds ``width`` in characters
    nor in UTF-8 bytes (``×``, ``·``, ``—`` count as 2-3); a word longer than a line (a
    URL) is split."""
    lines: list[str] = []
    line = first
    fresh = True  # nothing but the indent on this line yet
    for word in text.split():
        candidate = line + ("" if fresh else " ") + word
        if _size(candidate) <= width:
            line, fresh = candidate, False
            continue
        if not fresh:
            lines.append(line)
            line, fresh = indent, True
        while _size(line + word) > width:  # a word longer than a line: split it
            room = width - _size(line)
            cut = max(1, len(word.encode("utf-8")[:room].decode("utf-8", "ignore")))
            lines.append(line + word[:cut])
            word, line = word[cut:], indent
        line, fresh = line + word, False
    lines.append(line)
    return [ln.rstrip() for ln in lines]


def print_wrapped(con: Console, text: str, first: str = "", indent: str = "  ",
                  style: str | None = None) -> None:
    """Print ``first`` + ``text`` wrapped at the console's width, continuation lines
    indented (a warning's second line starts under its text, not at column 0)."""
    lines = wrap_columns(text, max(MIN_WIDTH, con.width), first, indent)
    for index, line in enumerate(lines):
        if index == 0 and first and style:
            con.print(f"[{style}]{first.rstrip()}[/] ", end="")
            con.print(line[len(first):], markup=False, soft_wrap=True)
        else:
            con.print(line, markup=False, soft_wrap=True)


class _PipedStdout(io.TextIOBase):
    """Standard output as Rich sees it when piped: it reports an ASCII encoding, so tables
    get ASCII borders (``+--+``) whose width in bytes is their width in columns (``awk
    'length > 80'`` counts bytes); the text itself is written as it is, to whatever
    ``sys.stdout`` is at the time (pytest swaps it)."""

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "ascii"

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()

    def isatty(self) -> bool:
        return False


out = Console(highlight=False)  # a terminal: Rich wraps long lines at word boundaries
err = Console(stderr=True, highlight=False, soft_wrap=True)  # one line per problem
if not out.is_terminal:  # piped or captured: COLUMNS, else 100 columns
    out = Console(file=cast(IO[str], _PipedStdout()), highlight=False, width=terminal_width())


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
