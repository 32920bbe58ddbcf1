"""Progress of a long command on stderr (issue 31): what is being done, and how far.

On a terminal a Rich bar (transient: it is gone when the command prints its answer);
elsewhere nothing, unless ``PROCURE_PROGRESS=plain`` asks for one line per step (logs,
CI). ``PROCURE_PROGRESS=off`` silences it on a terminal too. Never on stdout, so
``--json`` output stays one JSON document.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from solver.common.console import err
from solver.common.progress import Receiver, reporting


def progress_mode(console: Any = err) -> str:
    """``rich``, ``plain`` or ``off`` (the environment's ``PROCURE_PROGRESS``, else rich on
    a terminal and off elsewhere)."""
    wanted = os.environ.get("PROCURE_PROGRESS", "").strip().lower()
    if wanted in ("rich", "plain", "off"):
        return wanted
    return "rich" if console.is_terminal else "off"


def _plain(console: Any) -> Receiver:
    started = time.perf_counter()
    last: list[str] = [""]

    def receive(what: str, done: int | None, total: int | None) -> None:
        if what == last[0]:
            return
        last[0] = what
        count = f" ({done}/{total} done)" if done is not None and total else ""
        console.print(f"procure: {time.perf_counter() - started:6.1f} s  {what}{count}",
                      markup=False, highlight=False)

    return receive


@contextmanager
def stderr_progress(console: Any = err) -> Iterator[None]:
    """Show what the stages inside the block report (:mod:`solver.common.progress`)."""
    mode = progress_mode(console)
    if mode == "off":
        with reporting(None):
            yield
        return
    if mode == "plain":
        with reporting(_plain(console)):
            yield
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                   MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True)
    task = bar.add_task("starting", total=None)

    def receive(what: str, done: int | None, total: int | None) -> None:
        bar.update(task, description=what, completed=done or 0,
                   total=total if done is not None and total else None)

    with bar, reporting(receive):
        yield
