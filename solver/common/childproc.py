"""Solver child processes die with their parent.

PuLP runs CBC as a separate program. When ``procure`` is killed (a timeout, SIGKILL, a batch
worker whose driver is gone), that program would otherwise keep running at 100 % of a core
until its own time limit, if any. On Linux the child asks the kernel for SIGKILL when its
parent dies (``prctl(PR_SET_PDEATHSIG)``, set between fork and exec); elsewhere nothing
changes. HiGHS (highspy) and CP-SAT solve in-process and need nothing.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

PR_SET_PDEATHSIG = 1


def _libc() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def parent_death_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get SIGKILL when this process (strictly: the
    thread that starts it) ends; None where the platform has no such signal."""
    if not sys.platform.startswith("linux"):
        return None
    libc = _libc()
    if libc is None or not hasattr(libc, "prctl"):
        return None
    parent = os.getpid()

    def hook() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the call: nobody to wait for us
            os._exit(1)

    return hook


class _Subprocess:
    """The ``subprocess`` module as one library sees it: ``Popen`` with the hook added."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)

    def Popen(self, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 - the module's name
        if kwargs.get("preexec_fn") is None:
            kwargs["preexec_fn"] = parent_death_hook()
        return self._module.Popen(*args, **kwargs)


def tie_pulp_children() -> None:
    """Make the solver programs PuLP starts (CBC) die with this process; idempotent."""
    try:
        from pulp.apis import coin_api
    except ImportError:
        return
    current = getattr(coin_api, "subprocess", None)
    if current is None or isinstance(current, _Subprocess) or parent_death_hook() is None:
        return
    coin_api.subprocess = _Subprocess(current)
