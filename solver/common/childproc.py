"""Child processes die with their parent.

PuLP runs CBC as a separate program, and ``procure solve`` (a large RFQ's first candidate
build), ``procure sensitivity --workers N`` and ``procure batch`` fork worker processes.
When ``procure`` is killed (SIGTERM, SIGKILL, a timeout, a batch worker whose driver is
gone), those would otherwise keep running - at 100 % of a core, for minutes. On Linux every
child asks the kernel for SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``: set
between fork and exec for CBC, first thing after the fork for a Python worker,
:func:`die_with_parent`), and checks that the parent it was forked from is still there
(it may have died before the call). Where there is no such signal,
:func:`kill_children_on_sigterm` still takes the workers down with a terminated parent.
HiGHS (highspy) and CP-SAT solve in-process and need nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import Any

PR_SET_PDEATHSIG = 1
PR_GET_PDEATHSIG = 2


def _libc() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _prctl() -> Any:
    """libc's ``prctl`` on Linux, else None."""
    if not sys.platform.startswith("linux"):
        return None
    libc = _libc()
    return getattr(libc, "prctl", None) if libc is not None else None


def die_with_parent(parent: int) -> None:
    """In a child, right after the fork: get SIGKILL when the parent ``parent`` (strictly:
    the thread that forked this child) ends, and end now when it has already gone (this
    process was re-parented before the call). Nothing where the platform has no such
    signal."""
    prctl = _prctl()
    if prctl is None:
        return
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the call: nobody to wait for us
        os._exit(1)


def parent_death_signal() -> int:
    """The signal this process gets when its parent dies (0: none; Linux only)."""
    prctl = _prctl()
    if prctl is None:
        return 0
    value = ctypes.c_int(0)
    prctl(PR_GET_PDEATHSIG, ctypes.byref(value))
    return value.value


def parent_death_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get SIGKILL when this process (strictly: the
    thread that starts it) ends; None where the platform has no such signal."""
    if _prctl() is None:
        return None
    parent = os.getpid()
    return lambda: die_with_parent(parent)


@contextlib.contextmanager
def kill_children_on_sigterm(children: Callable[[], Iterable[int]]) -> Iterator[None]:
    """While the block runs, SIGTERM to this process first kills the worker processes
    ``children()`` names, then ends this process as SIGTERM would have (the handler before
    the block runs, or the default: termination). The parent-death signal does the same on
    Linux; this covers the platforms without one. Only the main thread can install it;
    elsewhere the block runs as is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is None:  # a handler not set from Python: treat as the default
        previous = signal.SIG_DFL

    def on_term(signum: int, frame: Any) -> None:
        for pid in list(children()):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        signal.signal(signal.SIGTERM, previous)
        if callable(previous):
            previous(signum, frame)
        else:
            os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived inside :func:`unwind_on_termination`: raised in the main
    thread so that ``with`` and ``finally`` blocks (a batch store's run lock) run."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _multiprocessing_children() -> list[int]:
    import multiprocessing

    return [child.pid for child in multiprocessing.active_children() if child.pid]


@contextlib.contextmanager
def unwind_on_termination(children: Callable[[], Iterable[int]] = _multiprocessing_children,
                          ) -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP kill the worker processes ``children()``
    names (default: this process's multiprocessing children) and unwind the block (raising
    :class:`Terminated`), so its cleanup runs; then the process ends by the same signal, as
    it would have without the block (exit status -SIGTERM / -SIGHUP). A signal this process
    ignores (``nohup``) or handles itself is left as it is; off the main thread, or in a
    process forked inside the block, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    owner = os.getpid()
    names = ("SIGTERM", "SIGHUP")
    signums = [getattr(signal, name) for name in names if hasattr(signal, name)]
    previous = {signum: signal.getsignal(signum) for signum in signums}
    taken = [signum for signum, handler in previous.items() if handler in (signal.SIG_DFL, None)]

    def on_signal(signum: int, _frame: Any) -> None:
        if os.getpid() != owner:  # a forked child inherited the handler: die as before
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        for pid in list(children()):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        raise Terminated(signum)

    for signum in taken:
        signal.signal(signum, on_signal)
    try:
        yield
    except Terminated as exc:
        for signum in taken:
            signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), exc.signum)  # ends here, by the signal
        raise  # pragma: no cover - only where the signal did not end the process
    finally:
        for signum in taken:
            signal.signal(signum, previous[signum] or signal.SIG_DFL)


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
