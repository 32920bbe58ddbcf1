"""Solver backends behind one small interface (conventions.md §5).

A :class:`LinearModel` is a plain mixed-integer linear program (variables with bounds and
integrality, named constraints, a linear objective to minimise). Each backend has a name,
says whether it is installed, solves, and maps its own statuses onto ours: ``optimal``,
``feasible`` (time limit hit with a plan in hand, gap > 0), ``infeasible`` or ``error``.
Solver libraries are imported lazily.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

Status = Literal["optimal", "feasible", "infeasible", "error"]
Sense = Literal["<=", ">=", "=="]


@dataclass
class Var:
    name: str
    low: float = 0.0
    high: float | None = None
    integer: bool = True


@dataclass
class Constraint:
    name: str
    coeffs: dict[str, float]
    sense: Sense
    rhs: float


@dataclass
class LinearModel:
    """A MILP: minimise ``objective`` subject to ``constraints``."""

    name: str = "procure"
    variables: dict[str, Var] = field(default_factory=dict)
    constraints: list[Constraint] = field(default_factory=list)
    objective: dict[str, float] = field(default_factory=dict)
    objective_constant: float = 0.0

    def var(self, name: str, low: float = 0.0, high: float | None = None,
            integer: bool = True) -> str:
        if name in self.variables:
            raise ValueError(f"duplicate variable {name}")
        self.variables[name] = Var(name, low, high, integer)
        return name

    def add(self, name: str, coeffs: dict[str, float], sense: Sense, rhs: float) -> None:
        self.constraints.append(Constraint(name, {k: v for k, v in coeffs.items() if v}, sense,
                                           rhs))


@dataclass(frozen=True)
class Solution:
    status: Status
    values: dict[str, float]
    objective: float | None
    gap: float
    seconds: float
    backend: str
    message: str = ""


class Backend:
    name = "base"

    def available(self) -> bool:
        raise NotImplementedError

    def solve(self, model: LinearModel, time_limit: float | None = None) -> Solution:
        raise NotImplementedError


def _gap(objective: float | None, bound: float | None) -> float:
    if objective is None or bound is None or not math.isfinite(bound):
        return 0.0
    return abs(objective - bound) / max(1e-9, abs(objective))


class PulpBackend(Backend):
    """PuLP with CBC (bundled) or HiGHS (highspy)."""

    def __init__(self, name: Literal["cbc", "highs"]):
        self.name = name

    def available(self) -> bool:
        try:
            import pulp
        except ImportError:
            return False
        if self.name == "cbc":
            return pulp.PULP_CBC_CMD(msg=False).available()
        return pulp.HiGHS(msg=False).available()

    def solve(self, model: LinearModel, time_limit: float | None = None) -> Solution:
        import pulp

        from solver.childproc import tie_pulp_children

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
        values = {n: (v.value() or 0.0) for n, v in variables.items()}
        objective = pulp.value(problem.objective)
        sol_status = getattr(problem, "sol_status", None)
        if status_text == "Optimal":
            # PuLP reports a time-limited CBC run with a solution as "Optimal" but sets
            # sol_status to LpSolutionIntegerFeasible; map it to feasible.
            status: Status = "optimal"
            gap = 0.0
            if sol_status == pulp.LpSolutionIntegerFeasible:
                status = "feasible"
                gap = _gap(objective, self._relaxation_bound(model))
            return Solution(status, values, objective, gap, seconds, self.name)
        if status_text == "Infeasible":
            return Solution("infeasible", {}, None, 0.0, seconds, self.name)
        if status_text == "Not Solved" and objective is not None and sol_status in (
                pulp.LpSolutionIntegerFeasible, pulp.LpSolutionOptimal):
            gap = _gap(objective, self._relaxation_bound(model))
            return Solution("feasible", values, objective, gap, seconds, self.name)
        return Solution("error", {}, None, 0.0, seconds, self.name,
                        f"{self.name} returned {status_text}")


    def _relaxation_bound(self, model: LinearModel) -> float | None:
        """A valid lower bound for a time-limited run: the LP relaxation's optimum (so the
        reported gap is an upper bound on the true one)."""
        relaxed = LinearModel(model.name, {n: Var(n, v.low, v.high, False)
                                           for n, v in model.variables.items()},
                              model.constraints, model.objective, model.objective_constant)
        solution = PulpBackend(self.name).solve(relaxed)
        return solution.objective if solution.status == "optimal" else None


class CpSatBackend(Backend):
    """OR-Tools CP-SAT. Continuous variables and fractional coefficients are scaled to
    integers (costs to 1/1000 USD; capacities conservatively: a constraint's left side is
    rounded towards infeasibility), so a CP-SAT plan is always feasible for the original."""

    name = "cpsat"
    SCALE = 1000

    def available(self) -> bool:
        try:
            from ortools.sat.python import cp_model  # noqa: F401
        except ImportError:
            return False
        return True

    def solve(self, model: LinearModel, time_limit: float | None = None) -> Solution:
        from ortools.sat.python import cp_model

        start = time.perf_counter()
        cp = cp_model.CpModel()
        for v in model.variables.values():
            if not v.integer:
                return Solution("error", {}, None, 0.0, 0.0, self.name,
                                f"cpsat needs integer variables ({v.name} is continuous)")
        variables = {v.name: cp.NewIntVar(int(math.ceil(v.low)),
                                          int(v.high if v.high is not None else 10**9), v.name)
                     for v in model.variables.values()}
        for con in model.constraints:
            scale = _integer_scale(list(con.coeffs.values()) + [con.rhs])
            coeffs = {n: c * scale for n, c in con.coeffs.items()}
            rhs = con.rhs * scale
            if con.sense == "<=":
                expr = sum(math.ceil(c - 1e-9) * variables[n] for n, c in coeffs.items())
                cp.Add(expr <= math.floor(rhs + 1e-9))
            elif con.sense == ">=":
                expr = sum(math.floor(c + 1e-9) * variables[n] for n, c in coeffs.items())
                cp.Add(expr >= math.ceil(rhs - 1e-9))
            else:
                expr = sum(round(c) * variables[n] for n, c in coeffs.items())
                cp.Add(expr == round(rhs))
        cp.Minimize(sum(round(c * self.SCALE) * variables[n] for n, c in model.objective.items()))
        solver = cp_model.CpSolver()
        solver.parameters.num_search_workers = 2
        if time_limit is not None:
            solver.parameters.max_time_in_seconds = float(time_limit)
        code = solver.Solve(cp)
        seconds = time.perf_counter() - start
        if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            values = {n: float(solver.Value(v)) for n, v in variables.items()}
            objective = sum(c * values[n] for n, c in model.objective.items()) \
                + model.objective_constant
            status: Status = "optimal" if code == cp_model.OPTIMAL else "feasible"
            bound = solver.BestObjectiveBound() / self.SCALE + model.objective_constant
            gap = 0.0 if status == "optimal" else _gap(objective, bound)
            return Solution(status, values, objective, gap, seconds, self.name)
        if code == cp_model.INFEASIBLE:
            return Solution("infeasible", {}, None, 0.0, seconds, self.name)
        return Solution("error", {}, None, 0.0, seconds, self.name,
                        f"cpsat returned {solver.StatusName(code)}")


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """Silence native libraries that write to file descriptor 1 (keeps --json output clean)."""
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
    "highs": PulpBackend("highs"),
    "cpsat": CpSatBackend(),
}


def get_backend(name: str) -> Backend:
    """A backend by name; raises ValueError for unknown or uninstalled ones."""
    if name not in BACKENDS:
        raise ValueError(f"unknown solver {name!r}; choose one of {', '.join(BACKENDS)}")
    backend = BACKENDS[name]
    if not backend.available():
        raise ValueError(f"solver {name!r} is not installed")
    return backend


def installed_backends() -> list[str]:
    return [name for name, backend in BACKENDS.items() if backend.available()]
