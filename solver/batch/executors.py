"""Where batch RFQs are solved: in the driver, a local process pool, or a Dask cluster.

Every executor takes a stream of :class:`SolveTask` and yields :class:`SolveOutcome` in
completion order, with a bounded number of tasks in flight, so the driver's memory does not
grow with the batch. Workers only compute: they return outcomes, and the driver alone writes
the store. The plan is serialised to JSON on the worker, which keeps the driver light.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
import traceback
import tracemalloc
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Protocol

from solver.analysis.explain import solve_rfq
from solver.catalog.data import Catalog
from solver.common.childproc import die_with_parent
from solver.common.errors import InputError, Problem, short
from solver.optimize.backends import DEFAULT_SOLVER, release_solver_threads
from solver.optimize.candidate_workers import default_workers
from solver.optimize.plan_model import Plan
from solver.rfq.schema import Rfq

SolveFn = Callable[..., Plan]
"""``solve_fn(rfq, catalog, solver=..., time_limit=...) -> Plan`` (docs/plan.md)."""

IN_FLIGHT_PER_WORKER = 4
PARENT_CHECK_SECONDS = 0.5
DASK_RFQS_PER_TASK = 4
"""RFQs per Dask task: amortises the scheduler's per-task cost (~ms) over fast solves."""
PLAN_STATUSES = ("optimal", "feasible", "infeasible", "error")


@dataclass(frozen=True)
class SolveTask:
    """One valid RFQ to solve."""

    rfq_id: str
    source: str
    input_hash: str
    rfq: Rfq
    input_json: str
    validate_seconds: float


@dataclass(frozen=True)
class SolveOutcome:
    """What a worker sends back: status, plan JSON or error, headline numbers, time."""

    task: SolveTask
    status: str
    plan_json: str | None
    error: str | None
    metrics: dict[str, Any]
    solve_seconds: float


def default_solve(rfq: Rfq, catalog: Catalog, *, solver: str = DEFAULT_SOLVER,
                  time_limit: float | None = None) -> Plan:
    """The real solver, without the decision-path annotation (not needed in a batch)."""
    return solve_rfq(rfq, catalog, solver=solver, time_limit=time_limit, explain=False)


def plan_metrics(plan: Plan) -> dict[str, Any]:
    """The headline numbers of a plan: TCO, capex, nodes, GPUs, GPU mix, fabric."""
    cluster, cost = plan.cluster, plan.cost
    gpus = sorted({node.gpu for node in cluster.nodes})
    return {
        "tco_usd": cost.tco_usd if cost else None, "capex_usd": cost.capex_usd if cost else None,
        "total_nodes": cluster.total_nodes, "total_gpus": cluster.total_gpus,
        "gpu": "+".join(gpus) or None,
        "fabric": cluster.fabric if gpus else None,
        "coupled": None if not gpus else int(cluster.coupled),
        "power_kw": cluster.power_kw, "rack_units": cluster.rack_units,
    }


def _plan_error(plan: Plan) -> str | None:
    info = plan.infeasibility
    if not info:
        return None
    text = "; ".join(info.reasons)
    if info.to_fix:
        text += f". To fix: {info.to_fix}"
    return text or None


def execute(task: SolveTask, catalog: Catalog, solve_fn: SolveFn, solver: str,
            time_limit: float | None) -> SolveOutcome:
    """Solve one task; never raises (an exception becomes status ``error``)."""
    started = time.perf_counter()
    try:
        plan = solve_fn(task.rfq, catalog, solver=solver, time_limit=time_limit)
        status: str = plan.status
        if status == "timeout":  # no plan within --time-limit: recorded as an error
            status = "error"
        if status not in PLAN_STATUSES:
            raise ValueError(f"solver returned unknown status {status!r}")
        plan_json = json.dumps(plan.to_json(), separators=(",", ":"), allow_nan=False)
        return SolveOutcome(task, status, plan_json, _plan_error(plan), plan_metrics(plan),
                            time.perf_counter() - started)
    except Exception as exc:  # noqa: BLE001 - one bad RFQ never stops the batch
        where = traceback.extract_tb(exc.__traceback__)[-1:]
        at = f" (at {where[0].filename}:{where[0].lineno})" if where else ""
        why = f"{type(exc).__name__}: {short(str(exc), 300, quote=False)}{at}"
        return SolveOutcome(task, "error", None, why, {}, time.perf_counter() - started)


def crashed(task: SolveTask, why: str) -> SolveOutcome:
    """The outcome of a task whose worker died."""
    return SolveOutcome(task, "error", None, why, {}, 0.0)


class Executor(Protocol):
    """Solves a stream of tasks, yielding outcomes as they finish."""

    def run(self, tasks: Iterable[SolveTask]) -> Iterator[SolveOutcome]: ...

    def close(self) -> None: ...


class InlineExecutor:
    """Solve in the driver process, one at a time (``--workers 1``)."""

    def __init__(self, catalog: Catalog, solve: Callable[[SolveTask, Catalog], SolveOutcome]):
        self._catalog, self._solve = catalog, solve

    def run(self, tasks: Iterable[SolveTask]) -> Iterator[SolveOutcome]:
        for task in tasks:
            yield self._solve(task, self._catalog)

    def close(self) -> None:
        pass


_WORKER: dict[str, Any] = {}


def _init_worker(catalog: Catalog, solve: Callable[[SolveTask, Catalog], SolveOutcome],
                 parent: int) -> None:
    die_with_parent(parent)  # SIGKILL when the driver dies (Linux); the thread below elsewhere
    _WORKER["catalog"], _WORKER["solve"] = catalog, solve
    if tracemalloc.is_tracing():  # a forked worker inherits a profiled driver's tracing
        tracemalloc.stop()
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()


def _exit_with_parent(parent_pid: int) -> None:
    """End this worker when the driver is gone (killed with SIGKILL: no clean shutdown)."""
    while True:
        time.sleep(PARENT_CHECK_SECONDS)
        if os.getppid() != parent_pid:
            os._exit(1)


def _pool_execute(task: SolveTask) -> SolveOutcome:
    return _WORKER["solve"](task, _WORKER["catalog"])


class LocalPoolExecutor:
    """A local process pool; the catalog is sent once to each worker process."""

    def __init__(self, catalog: Catalog, solve: Callable[[SolveTask, Catalog], SolveOutcome],
                 workers: int) -> None:
        self._args = (catalog, solve)
        self._workers = workers
        self._pool = self._new_pool()

    def _new_pool(self) -> ProcessPoolExecutor:
        release_solver_threads()
        return ProcessPoolExecutor(self._workers, initializer=_init_worker,
                                   initargs=(*self._args, os.getpid()))

    def run(self, tasks: Iterable[SolveTask]) -> Iterator[SolveOutcome]:
        limit = self._workers * IN_FLIGHT_PER_WORKER
        in_flight: dict[Future[SolveOutcome], SolveTask] = {}
        pending = iter(tasks)
        exhausted = False
        while True:
            while not exhausted and len(in_flight) < limit:
                task = next(pending, None)
                if task is None:
                    exhausted = True
                    break
                in_flight[self._pool.submit(_pool_execute, task)] = task
            if not in_flight:
                return
            done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            broken = False
            for future in done:
                task = in_flight.pop(future)
                try:
                    yield future.result()
                except BrokenProcessPool:
                    broken = True
                    yield crashed(task, "a worker process died while this RFQ was in flight "
                                        "(out of memory or a solver crash); re-run to retry")
            if broken:
                for task in in_flight.values():
                    yield crashed(task, "a worker process died while this RFQ was in flight; "
                                        "re-run to retry")
                in_flight.clear()
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = self._new_pool()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class DaskExecutor:
    """A Dask distributed cluster: an existing scheduler, or a LocalCluster started here.

    The catalog is scattered once to every worker; the workers need ``procure`` installed
    (same version) but no access to the driver's files.
    """

    def __init__(self, catalog: Catalog, solve: Callable[[SolveTask, Catalog], SolveOutcome],
                 scheduler: str | None, workers: int | None,
                 local_options: dict[str, Any] | None = None) -> None:
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError:
            raise InputError([Problem("--executor", "dask", None,
                                      "dask is not installed: pip install 'procure[cluster]'"
                                      )]) from None
        self._cluster = None
        try:
            if scheduler:
                self._client = Client(scheduler, timeout="20s")
            else:
                options: dict[str, Any] = {"n_workers": workers or default_workers(),
                                           "threads_per_worker": 1, "dashboard_address": None}
                options.update(local_options or {})
                self._cluster = LocalCluster(**options)
                self._client = Client(self._cluster)
        except OSError as exc:
            raise InputError([Problem("--scheduler", "", scheduler,
                                      f"cannot reach the Dask scheduler: {exc}")]) from None
        self._solve = solve
        self._catalog = self._client.scatter(catalog, broadcast=True)

    @property
    def threads(self) -> int:
        """Worker threads across the cluster."""
        return max(1, sum(self._client.nthreads().values()))

    def run(self, tasks: Iterable[SolveTask]) -> Iterator[SolveOutcome]:
        from dask.distributed import as_completed

        limit = self.threads * IN_FLIGHT_PER_WORKER
        in_flight: dict[Any, list[SolveTask]] = {}  # by the future's key
        completed = as_completed()
        for chunk in _chunks(tasks, DASK_RFQS_PER_TASK):
            future = self._client.submit(_solve_chunk, chunk, self._catalog, self._solve,
                                         pure=False)
            in_flight[future.key] = chunk
            completed.add(future)
            while completed.count() >= limit:
                yield from self._collect(next(completed), in_flight)
        for future in completed:
            yield from self._collect(future, in_flight)

    @staticmethod
    def _collect(future: Any, in_flight: dict[str, list[SolveTask]]) -> list[SolveOutcome]:
        chunk = in_flight.pop(future.key)
        try:
            return future.result()
        except Exception as exc:  # noqa: BLE001 - a lost worker fails its RFQs, not the batch
            return [crashed(task, f"Dask task failed: {type(exc).__name__}: {exc}; re-run "
                                  "to retry") for task in chunk]
        finally:
            future.release()

    def close(self) -> None:
        self._client.close()
        if self._cluster is not None:
            self._cluster.close()


def _chunks(tasks: Iterable[SolveTask], size: int) -> Iterator[list[SolveTask]]:
    chunk: list[SolveTask] = []
    for task in tasks:
        chunk.append(task)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _solve_chunk(chunk: list[SolveTask], catalog: Catalog,
                 solve: Callable[[SolveTask, Catalog], SolveOutcome]) -> list[SolveOutcome]:
    return [solve(task, catalog) for task in chunk]


def make_executor(kind: str, catalog: Catalog, solve_fn: SolveFn, solver: str,
                  time_limit: float | None, workers: int | None, scheduler: str | None,
                  dask_options: dict[str, Any] | None = None) -> Executor:
    """Build the executor named by ``--executor`` (local | dask)."""
    solve = functools.partial(_execute_with, solve_fn=solve_fn, solver=solver,
                              time_limit=time_limit)
    if kind == "dask":
        return DaskExecutor(catalog, solve, scheduler, workers, dask_options)
    if kind != "local":
        raise InputError([Problem("--executor", "", kind, "use local or dask")])
    if scheduler:
        raise InputError([Problem("--scheduler", "", scheduler,
                                  "only meaningful with --executor dask")])
    count = workers or default_workers()
    if count <= 1:
        return InlineExecutor(catalog, solve)
    return LocalPoolExecutor(catalog, solve, count)


def _execute_with(task: SolveTask, catalog: Catalog, *, solve_fn: SolveFn, solver: str,
                  time_limit: float | None) -> SolveOutcome:
    return execute(task, catalog, solve_fn, solver, time_limit)
