"""What a long run is doing, for whoever shows it (issue 31): ``procure`` on stderr (Rich),
the dashboard in a Streamlit progress bar.

The stages call :func:`report` (what is being done, and how far: ``done`` of ``total``
when countable); a presenter installs a receiver around its call with :func:`reporting`.
Without a receiver :func:`report` does nothing, so library callers and tests see no
change. The receiver is ambient (a context variable) rather than a parameter of every
stage: solve, Pareto and sensitivity all reach the candidate build and the MIP.

A forked process (the candidate workers, sensitivity's workers) inherits the receiver, but
only the process that installed it is told: a child's reports would draw over the parent's
bar.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

Receiver = Callable[[str, int | None, int | None], None]
"""``(what, done, total)``: ``done``/``total`` None when the step is not countable."""

_RECEIVER: ContextVar[tuple[int, Receiver] | None] = ContextVar("procure_progress",
                                                                default=None)


def report(what: str, done: int | None = None, total: int | None = None) -> None:
    """Tell the installed receiver (if any, and only in the process that installed it)."""
    installed = _RECEIVER.get()
    if installed is None or installed[0] != os.getpid():
        return
    installed[1](what, done, total)


@contextmanager
def reporting(receiver: Receiver | None) -> Iterator[None]:
    """Send :func:`report` calls made inside the block to ``receiver`` (None: to nobody)."""
    token = _RECEIVER.set((os.getpid(), receiver) if receiver is not None else None)
    try:
        yield
    finally:
        _RECEIVER.reset(token)
