"""A large RFQ's first candidate build in forked processes (issue 18, candidates at scale).

A first build of a 50-workload portfolio is ~110 k physics estimates, each computed in
pure Python; the workloads are independent, so on a machine with more than one core the
build is shared out. Workloads whose physics coincide (same model and kind: they probe
the same layouts, and every estimate after the first is a memo hit) stay in one process,
and the groups go to the processes largest first, each process taking the next group
when it is free. Each child inherits the catalog, the RFQ and the warm memos of this
process by ``fork`` and sends back plain candidate lists; the table is assembled in the
RFQ's workload order, so it is the same table a single process builds
(``tests/test_candidates_identical.py``).

Each child dies with this process, whatever ends it (SIGTERM, SIGKILL:
:func:`solver.common.childproc.die_with_parent`; SIGTERM also kills the pool's processes
first where there is no parent-death signal).

The memos this process would have filled stay with the children, so only a first build
that nothing after it re-estimates gains: ``procure solve`` asks for it
(:func:`solver.optimize.solve.solve_table` ``workers``); Pareto, sensitivity and batch
workers, which rebuild warm, do not.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

from solver.common.childproc import die_with_parent, kill_children_on_sigterm
from solver.common.limits import usable_cores
from solver.optimize.backends import release_solver_threads

PARALLEL_MIN_WORKLOADS = 8
"""Fewer workloads build in this process: forking and sending the candidates back costs
~0.1 s, more than a small RFQ's whole build."""

T = TypeVar("T")
_TASK: list[Callable[[int], Any]] = []
"""The per-workload build of the current :func:`map_workloads` call, set before the
children are forked (they inherit it; a closure could not be sent to them)."""


def default_workers() -> int:
    """The cores this process may use: the processes of a first build, and the default of
    ``procure batch --workers``."""
    return usable_cores()


def workload_groups(keys: list[Any]) -> list[list[int]]:
    """Indices of the workloads grouped by ``keys`` (what their physics share), largest
    group first (ties: first seen first)."""
    groups: dict[Any, list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    return sorted(groups.values(), key=lambda g: (-len(g), g[0]))


def map_workloads(task: Callable[[int], T], keys: list[Any], workers: int,
                  min_count: int = PARALLEL_MIN_WORKLOADS) -> list[T] | None:
    """``[task(i) for i in range(len(keys))]``, computed in up to ``workers`` forked
    processes, a group of equal ``keys`` per process at a time; None (nothing computed)
    when that is not worth it or not possible here: one worker, fewer than ``min_count``
    tasks (:data:`PARALLEL_MIN_WORKLOADS` workloads), one group, or no ``fork``. (The
    binding list's re-solves use it too: ``solver.analysis.binding``.)
    An exception in a child (an ``InputError``, the time limit) is raised here."""
    groups = workload_groups(keys)
    workers = min(workers, len(groups))
    if workers <= 1 or len(keys) < min_count:
        return None
    import multiprocessing  # here: a small RFQ's solve never loads the process machinery
    from concurrent.futures import ProcessPoolExecutor

    if "fork" not in multiprocessing.get_all_start_methods():
        return None
    release_solver_threads()  # a solve here before: children must not wait for its pool
    _TASK[:] = [task]
    results: dict[int, T] = {}
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                               initializer=die_with_parent, initargs=(os.getpid(),))
    try:
        with kill_children_on_sigterm(lambda: list(getattr(pool, "_processes", None) or ())):
            for done in pool.map(_run_group, groups):
                results.update(done)
    finally:  # on an error, the groups not started are dropped (the time limit: stop soon)
        pool.shutdown(wait=True, cancel_futures=True)
        _TASK.clear()
    return [results[index] for index in range(len(keys))]


def _run_group(indices: list[int]) -> list[tuple[int, Any]]:
    """In a child: the task of every workload of one group."""
    task = _TASK[0]
    return [(index, task(index)) for index in indices]
