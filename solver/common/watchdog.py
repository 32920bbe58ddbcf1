"""The last guard of ``procure solve --time-limit`` (issue 31): an answer on time even when
the solver does not stop.

The limit is checked where the time goes (docs/performance.md, "A limit that holds"), and
HiGHS is handed what is left. But HiGHS does not look at its clock inside presolve: on a
loaded 2-core machine the presolve of a 100-workload model ran 1.1-5.1 s past a limit of
0.2-2 s, and a 3 s limit ended after 4.6-5.0 s. Nothing in the process can stop it there.

So the ``procure`` process (:func:`solver.cli.main.entry`, never a test's in-process call)
arms a timer for the moment half the allowed slack is spent, ``limit x 1.05 + 0.15 s``
after the process's start (the bound is ``limit x 1.1 + 0.3 s``). If no plan is in hand
by then, the timer's thread writes the time-out answer (status ``timeout``, exit 4, as if
the solver had stopped) and ends the process. A plan in hand is always written: the
solve :func:`claim`\\ s the output as soon as its MIP returns one, and from then on the
timer stays quiet, whatever the plan's assembly takes. Without a plan the answer says
that none was found in time, even where an infeasibility was proven but its relaxations
were still being re-solved."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import NoReturn

from solver.common.clock import STARTED_S

FIRE_SHARE, FIRE_S = 1.05, 0.15
"""The timer fires ``limit x FIRE_SHARE + FIRE_S`` seconds after the process's start."""

_guard = threading.Lock()
_armed = False
_owner: str | None = None  # "answer" (the solve writes it) or "timer" (the timer does)
_process_owned = False


def own_process() -> None:
    """Called by the console script: this process may be ended by the timer (tests calling
    :func:`solver.cli.main.main` in-process never are)."""
    global _process_owned
    _process_owned = True


def fires_at(limit_s: float) -> float:
    """Seconds after the process's start at which the timer of ``limit_s`` fires."""
    return limit_s * FIRE_SHARE + FIRE_S


def claim() -> None:
    """A plan is in hand: this thread writes the answer, the timer stays quiet from now on.
    If the timer has fired already it is writing the time-out and ending the process: this
    thread waits for that (two answers must not mix on stdout)."""
    global _owner
    with _guard:
        if not _armed or _owner in (None, "answer"):
            if _armed:
                _owner = "answer"
            return
    threading.Event().wait()  # the timer's thread ends the process


def _fire(answer: Callable[[], int], stdout_fd: int) -> None:
    global _owner
    with _guard:
        if _owner is not None:
            return
        _owner = "timer"
    code = 4
    with contextlib.suppress(OSError):  # the solver may have fd 1 on /dev/null (its banner)
        sys.stdout.flush()
        os.dup2(stdout_fd, 1)
    with contextlib.suppress(Exception):  # the time-out answer, however it fails
        code = answer()
    end_process(code)


def end_process(code: int) -> NoReturn:
    """Flush stdout and stderr and end the process at once with ``code`` (no interpreter
    teardown; the console script's exit and the timer's share it). Both run in the console
    script's process, whose streams are never None (``entry`` gives a process started
    without one /dev/null)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream
            stream.flush()
    os._exit(code)


@contextlib.contextmanager
def armed(limit_s: float | None, answer: Callable[[], int]) -> Iterator[None]:
    """Within the block, on the console script's process with a limit: unless a plan is
    claimed first, at :func:`fires_at` ``(limit_s)`` write ``answer()`` (it returns the exit
    code) and end the process. Leaving the block claims the output."""
    global _armed, _owner
    if limit_s is None or not _process_owned:
        yield
        return
    try:  # the real stdout, whatever fd 1 points at when the timer fires
        stdout_fd: int | None = os.dup(1)
    except OSError:  # no stdout to write to (closed): nothing to guard
        stdout_fd = None
    if stdout_fd is None:
        yield
        return
    wait = max(0.0, STARTED_S + fires_at(limit_s) - time.perf_counter())
    timer = threading.Timer(wait, _fire, (answer, stdout_fd))
    timer.daemon = True
    with _guard:
        _armed, _owner = True, None
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        claim()
        with _guard:
            _armed, _owner = False, None
        os.close(stdout_fd)
