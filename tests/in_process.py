"""``procure ARGS`` run in the test's own process: what a subprocess would give (exit code,
stdout, stderr) without paying the interpreter's start and the imports again (about 0.6 s a
call on the 2-core CI machine). Tests of what only a real process shows (the start-up
import set, signals, `python -m solver.cli`, terminal width from the environment) keep
their subprocesses. An exception that escapes ``main`` is not caught here: it fails the
test, as a traceback on stderr would."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Ran:
    """The parts of :class:`subprocess.CompletedProcess` the tests read."""

    returncode: int
    stdout: str
    stderr: str


def procure(*args: str) -> Ran:
    """Run the ``procure`` command line with ``args`` in this process."""
    from solver.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    argv, debug = sys.argv, os.environ.pop("PROCURE_DEBUG", None)
    sys.argv = ["procure", *args]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
                code = 0
            except SystemExit as done:
                code = done.code if isinstance(done.code, int) else (0 if done.code is None
                                                                     else 1)
    finally:
        sys.argv = argv
        if debug is not None:
            os.environ["PROCURE_DEBUG"] = debug
    return Ran(code, out.getvalue(), err.getvalue())
