"""Solver backends behind one small interface.

A :class:`LinearModel` is a plain mixed-integer linear program (variables with bounds and
integrality, named constraints, a linear objective to minimise). Each backend has a name,
says whether it is installed (without importing it), solves, and maps its own statuses onto
ours through its ``STATUS_MAP`` (cvxpy style): ``optimal``, ``feasible`` (time limit hit with
a plan in hand, gap ≥ 0), ``timeout`` (time limit hit before any plan was found — not an
answer about the RFQ), ``infeasible`` or ``error``. Every point a backend returns is checked
against the original model (:func:`check_solution`: bounds, integrality, every row within
tolerance) before it is reported; a point that fails is an ``error``, never a plan.
Solver libraries are imported lazily, and only the one asked for.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, Literal

from solver.common.childproc import tie_pulp_children
from solver.optimize.bounds import tighten_bounds
from solver.optimize.linear import (
    FOUND,
    INTEGRALITY_TOL,
    Constraint,
    LinearModel,
    Solution,
    Status,
    Var,
    objective_value,
    verified,
)


def map_status(backend: str, status_map: dict[object, Status], code: object,
               has_point: bool, time_limited: bool) -> Status:
    """Our status for a backend's own ``code``: a time limit with a point in hand is
    ``feasible``, without one ``timeout`` (never ``infeasible``); unknown codes are errors."""
    status = status_map.get(code, "error")
    if status == "timeout" and has_point:
        return "feasible"
    if status == "timeout" and not time_limited:
        return "error"
    if status in FOUND and not has_point:
        return "error"
    return status


class Backend:
    name = "base"
    #: the module whose presence says the backend is installed (found, not imported)
    module = ""
    #: the backend's own status codes → ours (cvxpy style)
    STATUS_MAP: dict[object, Status] = {}

    def available(self) -> bool:
        return _module_found(self.module)

    def solve(self, model: LinearModel, time_limit: float | None = None,
              initial: dict[str, float] | None = None) -> Solution:
        """Solve and re-check the point against the model (:func:`verified`); a model with
        ``cases`` is solved case by case (:meth:`_solve_cases`). ``initial``: a point to
        start from (a value for every variable, e.g. the previous plan of a sweep); a hint
        that only HiGHS uses, and only when it is feasible (for a case, when it lies in it)."""
        if len(model.cases) > 1:
            return verified(model, self._solve_cases(model, time_limit, initial))
        return verified(model, self._solve(model, time_limit, initial=initial))

    def _solve(self, model: LinearModel, time_limit: float | None,
               cutoff: float | None = None, initial: dict[str, float] | None = None
               ) -> Solution:
        """Solve ``model``; with ``cutoff``, only points of objective below it are of use
        (a run may then say ``infeasible`` when there is none); ``initial``: see
        :meth:`solve`."""
        raise NotImplementedError

    def _solve_cases(self, model: LinearModel, time_limit: float | None,
                     initial: dict[str, float] | None = None) -> Solution:
        """The best over ``model.cases`` (in their order), each case with the best objective
        found so far as its cutoff and an equal share of the time left. Optimal when every case is proven (optimal, or no point
        below the cutoff); ``feasible`` with the gap to the weakest case bound otherwise;
        ``infeasible`` only when every case is infeasible without a cutoff."""
        start = time.perf_counter()
        best: Solution | None = None
        bounds: list[float] = []  # lower bounds of the cases not proven
        unproven = False
        kept = [(case, f) for case, f in ((_fixed(model, f), f) for f in model.cases)
                 if case is not None]
        cases = [case for case, _ in kept]
        fixings = [f for _, f in kept]
        if not cases:  # every fixing outside the bounds: the cases say nothing
            return self._solve(model, time_limit, initial=initial)
        for index, case in enumerate(cases):
            remaining = None
            if time_limit is not None:  # an equal share of the time left, the last case all
                remaining = (time_limit - (time.perf_counter() - start)) / (len(cases) - index)
                if remaining <= 0:
                    unproven = True
                    bounds.append(-math.inf)
                    break
            cutoff = best.objective if best is not None else None
            in_case = initial is not None and all(  # the start lies in this case
                abs(initial.get(n, math.nan) - v) <= INTEGRALITY_TOL
                for n, v in fixings[index].items())
            solution = self._solve(case, remaining, cutoff,
                                   initial=initial if in_case else None)
            if solution.status == "error":
                return Solution("error", {}, None, 0.0, time.perf_counter() - start, self.name,
                                solution.message)
            found = solution.objective
            if solution.status in FOUND and found is not None and (
                    best is None or best.objective is None or found < best.objective):
                best = solution
            if solution.status == "feasible" and found is not None:
                unproven = True
                bounds.append(found - solution.gap * abs(found))
            elif solution.status == "timeout":
                unproven = True
                bounds.append(-math.inf)
        seconds = time.perf_counter() - start
        if best is None:
            status: Status = "timeout" if unproven else "infeasible"
            return Solution(status, {}, None, 0.0, seconds, self.name)
        if not unproven:
            return Solution("optimal", best.values, best.objective, 0.0, seconds, self.name)
        bound = min(bounds)
        gap = 1.0 if not math.isfinite(bound) else _gap(best.objective, bound)
        return Solution("feasible", best.values, best.objective, gap, seconds, self.name)


def _fixed(model: LinearModel, fixing: dict[str, float]) -> LinearModel | None:
    """A copy of ``model`` with the variables of ``fixing`` fixed (None: out of bounds)."""
    variables = dict(model.variables)
    for name, value in fixing.items():
        var = variables[name]
        if value < var.low - INTEGRALITY_TOL or (
                var.high is not None and value > var.high + INTEGRALITY_TOL):
            return None
        variables[name] = Var(name, value, value, var.integer)
    return LinearModel(model.name, variables, model.constraints, model.objective,
                       model.objective_constant)


def _with_cutoff(model: LinearModel, cutoff: float | None) -> LinearModel:
    """``model`` plus the row objective ≤ cutoff (loosened by 1e-7 relative, so that a
    backend's own rounding never cuts a better point) for backends without a cutoff
    option."""
    if cutoff is None:
        return model
    rhs = cutoff - model.objective_constant + 1e-7 * max(1.0, abs(cutoff))
    return LinearModel(model.name, model.variables,
                       model.constraints + [Constraint("cutoff", dict(model.objective), "<=",
                                                       rhs)],
                       model.objective, model.objective_constant)


def _module_found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _gap(objective: float | None, bound: float | None) -> float:
    if objective is None or bound is None or not math.isfinite(bound):
        return 0.0
    return max(0.0, objective - bound) / max(1e-9, abs(objective))


class PulpBackend(Backend):
    """PuLP with CBC (bundled binary, solved through an MPS file and a child process) or
    HiGHS (``highs-pulp``: PuLP's highspy interface; kept for comparison)."""

    module = "pulp"
    #: (PuLP status, PuLP solution status) → ours; a plan in hand is checked separately
    STATUS_MAP: dict[object, Status] = {
        ("Optimal", 1): "optimal",         # LpSolutionOptimal
        ("Optimal", 2): "timeout",         # LpSolutionIntegerFeasible: stopped on the limit
        ("Not Solved", 2): "timeout",
        ("Not Solved", 1): "timeout",
        ("Not Solved", 0): "timeout",      # LpSolutionNoSolutionFound
        ("Infeasible", -1): "infeasible",
        ("Infeasible", 0): "infeasible",
        ("Unbounded", -2): "error",
        ("Undefined", 0): "timeout",
    }

    def __init__(self, name: Literal["cbc", "highs-pulp"]):
        self.name = name
        self.engine: Literal["cbc", "highs-pulp"] = name

    def available(self) -> bool:
        if not _module_found("pulp"):
            return False
        if self.name != "cbc":
            return _module_found("highspy")
        import pulp

        return pulp.PULP_CBC_CMD(msg=False).available()

    def _solve(self, model: LinearModel, time_limit: float | None = None,
               cutoff: float | None = None, initial: dict[str, float] | None = None
               ) -> Solution:
        import pulp

        model = _with_cutoff(model, cutoff)

        tie_pulp_children()  # a killed procure leaves no CBC behind
        start = time.perf_counter()
        problem = pulp.LpProblem(model.name, pulp.LpMinimize)
        variables = {
            v.name: pulp.LpVariable(f"v{index}", lowBound=v.low, upBound=v.high,
                                    cat=pulp.LpInteger if v.integer else pulp.LpContinuous)
            for index, v in enumerate(model.variables.values())}
        problem += pulp.lpSum(c * variables[n] for n, c in model.objective.items()) \
            + model.objective_constant
        for index, con in enumerate(model.constraints):
            expr = pulp.lpSum(c * variables[n] for n, c in con.coeffs.items())
            if con.sense == "<=":
                problem += (expr <= con.rhs, f"c{index}")
            elif con.sense == ">=":
                problem += (expr >= con.rhs, f"c{index}")
            else:
                problem += (expr == con.rhs, f"c{index}")
        if self.name == "cbc":
            solver = pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit, gapRel=0.0,
                                       options=["allowableGap 0"])
        else:
            solver = pulp.HiGHS(msg=False, timeLimit=time_limit, gapRel=0.0)
        try:
            with _quiet_stdout():  # HiGHS prints a banner on stdout even with msg=False
                code = problem.solve(solver)
        except pulp.PulpSolverError as exc:
            return Solution("error", {}, None, 0.0, time.perf_counter() - start, self.name,
                            str(exc))
        seconds = time.perf_counter() - start
        status_text = pulp.LpStatus.get(code, "Undefined")
        sol_status = getattr(problem, "sol_status", 0)
        has_point = sol_status in (pulp.LpSolutionIntegerFeasible, pulp.LpSolutionOptimal) \
            and status_text in ("Optimal", "Not Solved")
        status = map_status(self.name, self.STATUS_MAP, (status_text, sol_status), has_point,
                            time_limit is not None)
        if status == "infeasible" and time_limit is not None and seconds >= 0.95 * time_limit:
            status = "timeout"  # stopped by the clock: infeasibility was not proven
        if status in FOUND:
            values = {n: (v.value() or 0.0) for n, v in variables.items()}
            objective = objective_value(model, values)
            gap = 0.0
            if status == "feasible":
                gap = _gap(objective, self._relaxation_bound(model))
            return Solution(status, values, objective, gap, seconds, self.name)
        message = "" if status != "error" else f"{self.name} returned {status_text}"
        return Solution(status, {}, None, 0.0, seconds, self.name, message)

    def _relaxation_bound(self, model: LinearModel) -> float | None:
        """A valid lower bound for a time-limited run: the LP relaxation's optimum (so the
        reported gap is an upper bound on the true one)."""
        relaxed = LinearModel(model.name, {n: Var(n, v.low, v.high, False)
                                           for n, v in model.variables.items()},
                              model.constraints, model.objective, model.objective_constant)
        solution = PulpBackend(self.engine).solve(relaxed)
        return solution.objective if solution.status == "optimal" else None


PROBING_OFF_COLUMNS = 500
"""HiGHS presolve probes binaries one by one; on the portfolio models (thousands of
binaries: candidates, loss levels) that took seconds and paid nothing back, while the
scenarios (under 320 columns, n+1 loss levels) solve faster with it. Measured with HiGHS
1.16 on 2 cores (docs/performance.md, "HiGHS probing"): off from this many columns."""
PROBING_RULE = {(1, 16): 15, (1, 17): 15}
"""Bit of the presolve rule "Probing" in ``presolve_rule_off``, per HiGHS (major, minor)
version checked (tests/test_backends.py reads HiGHS's own log to confirm it); the rules
are numbered by position and the list has changed between versions, so an unchecked
version keeps probing on."""


MIN_RUN_SECONDS = 0.01
"""The least time limit a backend is handed, and HiGHS is run with, when the time is (almost)
spent: the search still starts, and reports the time-out."""

SINGLE_THREAD_COLUMNS = 500
"""HiGHS runs a model of fewer columns than this on one thread (its ``threads`` option): on
the small models of a single RFQ (a scenario, a binding re-solve) HiGHS's second thread only
hands work back and forth (docs/performance.md, "One HiGHS thread for small models")."""

_POOL = threading.local()
"""``_POOL.threads``: the ``threads`` value the calling thread's HiGHS pool was started with
(None or unset before a run). HiGHS keeps one pool per thread that runs it, and refuses a run
that asks for another count."""


def _use_threads(highspy: Any, columns: int) -> int:
    """The ``threads`` option for a model of this many columns (0: HiGHS's default); restarts
    this thread's HiGHS pool when it runs with another count."""
    threads = 1 if columns < SINGLE_THREAD_COLUMNS else 0
    started = getattr(_POOL, "threads", None)
    if started is not None and started != threads:
        highspy.Highs.resetGlobalScheduler(True)
    _POOL.threads = threads
    return threads


def probing_rule_bit(solver: Any) -> int | None:
    """The ``presolve_rule_off`` bit that turns probing off in this HiGHS (a
    ``highspy.Highs``, whose version calls highspy's stubs do not declare), if known."""
    version = (solver.versionMajor(), solver.versionMinor())
    return PROBING_RULE.get(version)


class HighsBackend(Backend):
    """HiGHS in-process through ``highspy``: the model passed as row-wise arrays (no file,
    no child process, no PuLP expression building). Gap 0 (absolute and relative)."""

    name = "highs"
    module = "highspy"
    STATUS_MAP: dict[object, Status] = {
        "kOptimal": "optimal",
        "kModelEmpty": "optimal",
        "kInfeasible": "infeasible",
        "kTimeLimit": "timeout",
        "kIterationLimit": "timeout",
        "kSolutionLimit": "timeout",
        "kInterrupt": "timeout",
        "kHighsInterrupt": "timeout",
        "kUnboundedOrInfeasible": "error",  # every variable is bounded: should not happen
        "kUnbounded": "error",
    }

    def _solve(self, model: LinearModel, time_limit: float | None = None,
               cutoff: float | None = None, initial: dict[str, float] | None = None
               ) -> Solution:
        start = time.perf_counter()  # the time limit counts the conversion and imports too
        import highspy
        import numpy as np

        names = list(model.variables)
        index = {n: i for i, n in enumerate(names)}
        inf = highspy.kHighsInf
        lp = highspy.HighsLp()
        lp.num_col_ = len(names)
        lp.num_row_ = len(model.constraints)
        lp.col_cost_ = np.array([model.objective.get(n, 0.0) for n in names], dtype=float)
        lp.col_lower_ = np.array([model.variables[n].low for n in names], dtype=float)
        lp.col_upper_ = np.array([inf if model.variables[n].high is None
                                  else model.variables[n].high for n in names], dtype=float)
        lp.offset_ = model.objective_constant
        lower: list[float] = []
        upper: list[float] = []
        starts: list[int] = [0]
        cols: list[int] = []
        vals: list[float] = []
        for con in model.constraints:
            lower.append(-inf if con.sense == "<=" else con.rhs)
            upper.append(inf if con.sense == ">=" else con.rhs)
            cols.extend(index[n] for n in con.coeffs)
            vals.extend(con.coeffs.values())
            starts.append(len(cols))
        lp.row_lower_ = np.array(lower, dtype=float)
        lp.row_upper_ = np.array(upper, dtype=float)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = np.array(starts, dtype=np.int32)
        lp.a_matrix_.index_ = np.array(cols, dtype=np.int32)
        lp.a_matrix_.value_ = np.array(vals, dtype=float)
        lp.integrality_ = [highspy.HighsVarType.kInteger if model.variables[n].integer
                           else highspy.HighsVarType.kContinuous for n in names]
        with _quiet_stdout():  # the banner is printed before output_flag can be set
            solver = highspy.Highs()
            solver.setOptionValue("output_flag", False)
            solver.setOptionValue("mip_rel_gap", 0.0)
            solver.setOptionValue("mip_abs_gap", 0.0)
            if cutoff is not None:  # prunes every node that cannot beat it
                solver.setOptionValue("objective_bound", float(cutoff))
            probing = probing_rule_bit(solver) if len(names) >= PROBING_OFF_COLUMNS else None
            if probing is not None:
                solver.setOptionValue("presolve_rule_off", 1 << probing)
            solver.setOptionValue("threads", _use_threads(highspy, len(names)))
            solver.passModel(lp)
            if initial is not None and all(n in initial for n in names):
                point = highspy.HighsSolution()
                point.col_value = [float(initial[n]) for n in names]
                point.value_valid = True
                solver.setSolution(point)  # HiGHS checks it; an infeasible start is dropped
            if time_limit is not None:  # what is left after building the arrays above
                solver.setOptionValue("time_limit", max(
                    MIN_RUN_SECONDS, float(time_limit) - (time.perf_counter() - start)))
            solver.run()
        seconds = time.perf_counter() - start
        code = solver.getModelStatus().name
        info = solver.getInfo()
        if cutoff is not None and code in ("kObjectiveBound", "kInfeasible"):
            code = "kInfeasible"  # no point below the cutoff
        has_point = info.primal_solution_status == 2  # kSolutionStatusFeasible
        status = map_status(self.name, self.STATUS_MAP, code, has_point,
                            time_limit is not None)
        if status in FOUND:
            column = solver.getSolution().col_value
            values = {n: float(column[i]) for i, n in enumerate(names)}
            objective = objective_value(model, values)
            gap = 0.0 if status == "optimal" else _gap(objective, info.mip_dual_bound)
            return Solution(status, values, objective, gap, seconds, self.name)
        message = "" if status != "error" else f"highs returned {code}"
        return Solution(status, {}, None, 0.0, seconds, self.name, message)


class CpSatBackend(Backend):
    """OR-Tools CP-SAT. Continuous variables and fractional coefficients are scaled to
    integers (costs to 1/1000 USD; capacities conservatively: a constraint's left side is
    rounded towards infeasibility), so a CP-SAT plan is always feasible for the original.
    Every variable needs a finite upper bound (solver/optimize/bounds.py derives them)."""

    name = "cpsat"
    module = "ortools"
    SCALE = 1000
    STATUS_MAP: dict[object, Status] = {
        "OPTIMAL": "optimal",
        "FEASIBLE": "timeout",  # stopped before proving optimality: a plan in hand
        "INFEASIBLE": "infeasible",
        "UNKNOWN": "timeout",
        "MODEL_INVALID": "error",
    }

    def _solve(self, model: LinearModel, time_limit: float | None = None,
               cutoff: float | None = None, initial: dict[str, float] | None = None
               ) -> Solution:
        from ortools.sat.python import cp_model

        start = time.perf_counter()
        cp = cp_model.CpModel()
        for v in model.variables.values():
            if not v.integer:
                return Solution("error", {}, None, 0.0, 0.0, self.name,
                                f"cpsat needs integer variables ({v.name} is continuous)")
        if any(v.high is None for v in model.variables.values()):
            model = LinearModel(model.name, {n: Var(n, v.low, v.high, v.integer)
                                             for n, v in model.variables.items()},
                                model.constraints, model.objective, model.objective_constant)
            tighten_bounds(model)
        free = [v.name for v in model.variables.values() if v.high is None]
        if free:
            return Solution("error", {}, None, 0.0, 0.0, self.name,
                            f"cpsat needs bounded variables ({free[0]} has no upper bound)")
        variables = {v.name: cp.new_int_var(int(math.ceil(v.low - 1e-9)),
                                            int(math.floor((v.high or 0.0) + 1e-9)), v.name)
                     for v in model.variables.values()}  # every high is set (checked above)
        for con in model.constraints:
            scale = _integer_scale(list(con.coeffs.values()) + [con.rhs])
            coeffs = {n: c * scale for n, c in con.coeffs.items()}
            rhs = con.rhs * scale
            if con.sense == "<=":
                expr = sum(math.ceil(c - 1e-9) * variables[n] for n, c in coeffs.items())
                cp.add(expr <= math.floor(rhs + 1e-9))
            elif con.sense == ">=":
                expr = sum(math.floor(c + 1e-9) * variables[n] for n, c in coeffs.items())
                cp.add(expr >= math.ceil(rhs - 1e-9))
            else:
                expr = sum(round(c) * variables[n] for n, c in coeffs.items())
                cp.add(expr == round(rhs))
        goal = sum(round(c * self.SCALE) * variables[n] for n, c in model.objective.items())
        if cutoff is not None:  # on the scaled objective, loosened by its rounding at most
            margin = sum(0.5 * (model.variables[n].high or 0.0) for n in model.objective)
            margin += 1e-7 * max(1.0, abs(cutoff)) * self.SCALE
            cp.add(goal <= math.floor((cutoff - model.objective_constant) * self.SCALE
                                      + margin))
        cp.minimize(goal)
        solver = cp_model.CpSolver()
        solver.parameters.num_search_workers = 2
        if time_limit is not None:
            solver.parameters.max_time_in_seconds = float(time_limit)
        code = solver.StatusName(solver.Solve(cp))
        seconds = time.perf_counter() - start
        has_point = code in ("OPTIMAL", "FEASIBLE")
        status = map_status(self.name, self.STATUS_MAP, code, has_point, True)
        if status in FOUND:
            values = {n: float(solver.Value(v)) for n, v in variables.items()}
            objective = objective_value(model, values)
            bound = solver.BestObjectiveBound() / self.SCALE + model.objective_constant
            gap = 0.0 if status == "optimal" else _gap(objective, bound)
            return Solution(status, values, objective, gap, seconds, self.name)
        message = "" if status != "error" else f"cpsat returned {code}"
        if status == "timeout" and time_limit is None:
            status, message = "error", f"cpsat returned {code}"
        return Solution(status, {}, None, 0.0, seconds, self.name, message)


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """Silence native libraries that write to file descriptor 1 (keeps --json output clean),
    in the main thread only. File descriptor 1 belongs to the whole process: two threads
    (the dashboard's sessions run in threads) that each saved and restored it in turn could
    leave it pointing at /dev/null, and every later line printed was lost (seen with three
    threads solving at once). Off the main thread a banner on stdout harms nothing."""
    if threading.current_thread() is not threading.main_thread() or sys.stdout is None:
        yield  # (no stdout at all: the process was started with file descriptor 1 closed)
        return
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no real stdout (e.g. some embedded runners): nothing to protect
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _integer_scale(numbers: list[float]) -> int:
    """Smallest power of ten (≤ 1e6) that makes the numbers integral to 1e-9."""
    for power in range(7):
        scale = 10 ** power
        if all(abs(x * scale - round(x * scale)) < 1e-6 for x in numbers):
            return scale
    return 10 ** 6


BACKENDS: dict[str, Backend] = {
    "cbc": PulpBackend("cbc"),
    "highs": HighsBackend(),
    "cpsat": CpSatBackend(),
}
DEFAULT_SOLVER = "highs"
"""The default ``--solver``: HiGHS in-process was the fastest on every size of
bench/scale_bench.py and avoids CBC's file + child process (docs/performance.md)."""
#: backends for comparison only (bench/scale_bench.py); not offered on the command line
EXTRA_BACKENDS: dict[str, Backend] = {"highs-pulp": PulpBackend("highs-pulp")}


def get_backend(name: str) -> Backend:
    """A backend by name; raises ValueError for unknown or uninstalled ones."""
    if name not in BACKENDS:
        raise ValueError(f"unknown solver {name!r}; choose one of {', '.join(BACKENDS)}")
    backend = BACKENDS[name]
    if not backend.available():
        raise ValueError(f"solver {name!r} is not installed")
    return backend


def release_solver_threads() -> None:
    """Before forking worker processes: stop the HiGHS thread pool of the calling thread (the
    one that forks) if a solve there started it. A forked child inherits the pool's state but
    not its threads, and its first HiGHS solve would wait for them forever; the pool restarts
    on this thread's next solve."""
    highspy = sys.modules.get("highspy")
    if highspy is not None:
        highspy.Highs.resetGlobalScheduler(True)
        _POOL.threads = None


def installed_backends() -> list[str]:
    """The installed backends, found without importing any solver library."""
    return [name for name, backend in BACKENDS.items() if _module_found(backend.module)]
