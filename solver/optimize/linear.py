"""A plain mixed-integer linear program and what a solve returns, with no solver attached.

:class:`LinearModel` holds variables (bounds, integrality), named constraints and a linear
objective to minimise; :class:`Solution` is a backend's answer in our statuses. The MIP
(:mod:`solver.optimize.mip`) builds models, :mod:`solver.optimize.bounds` tightens them and
:mod:`solver.optimize.backends` solves them; :func:`verified` checks every returned point
against the model it claims to solve.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Literal

Status = Literal["optimal", "feasible", "timeout", "infeasible", "error"]
FOUND: tuple[Status, ...] = ("optimal", "feasible")
FEASIBILITY_TOL = 1e-6  # row violation allowed, relative to max(1, |rhs|, row scale)
INTEGRALITY_TOL = 1e-6
Sense = Literal["<=", ">=", "=="]


class TimeLimitReached(Exception):
    """The run's time limit ran out before a model could be built (its candidates, or the
    MIP itself)."""


def deadline_passed(deadline: float | None) -> bool:
    """Whether ``deadline`` (a ``time.perf_counter()`` instant; None: no limit) has passed."""
    return deadline is not None and time.perf_counter() > deadline


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
    #: optional cases: variable fixings such that every feasible point has a feasible point
    #: of the same objective in one of them (e.g. one vendor stack each, solver/optimize/mip.py).
    #: :meth:`Backend.solve` then solves the cases one by one, each with the best objective
    #: so far as a cutoff, and returns the best: the same optimum, found on smaller models
    #: whose relaxations are tighter.
    cases: list[dict[str, float]] = field(default_factory=list)

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


def check_solution(model: LinearModel, values: dict[str, float]) -> list[str]:
    """What ``values`` violates in ``model``: bounds, integrality, rows (empty = feasible).

    Tolerances: integrality ``INTEGRALITY_TOL``; a row may miss its right-hand side by
    ``FEASIBILITY_TOL`` × max(1, |rhs|, largest |a_i x_i|) (a solver's own tolerance on
    dollar-sized rows)."""
    problems: list[str] = []
    for name, var in model.variables.items():
        value = values.get(name)
        if value is None or not math.isfinite(value):
            problems.append(f"{name} has no value")
            continue
        if value < var.low - INTEGRALITY_TOL or (
                var.high is not None and value > var.high + INTEGRALITY_TOL):
            problems.append(f"{name} = {value:g} outside [{var.low:g}, {var.high}]")
        if var.integer and abs(value - round(value)) > INTEGRALITY_TOL:
            problems.append(f"{name} = {value:g} is not integral")
    if problems:
        return problems
    for con in model.constraints:
        terms = [a * values[n] for n, a in con.coeffs.items()]
        lhs = math.fsum(terms)
        scale = max([1.0, abs(con.rhs)] + [abs(t) for t in terms])
        tol = FEASIBILITY_TOL * scale
        if (con.sense == "<=" and lhs > con.rhs + tol) or (
                con.sense == ">=" and lhs < con.rhs - tol) or (
                con.sense == "==" and abs(lhs - con.rhs) > tol):
            problems.append(f"row {con.name}: {lhs:,.9g} {con.sense} {con.rhs:,.9g} fails")
    return problems


def objective_value(model: LinearModel, values: dict[str, float]) -> float:
    """The model's objective at ``values`` (recomputed, not the solver's figure)."""
    return math.fsum(c * values[n] for n, c in model.objective.items()) \
        + model.objective_constant


def verified(model: LinearModel, solution: Solution) -> Solution:
    """``solution`` re-checked against the original model: integer variables snapped to
    integers, the objective recomputed; a point that violates the model becomes an error."""
    if solution.status not in FOUND:
        return solution
    values = {n: (float(round(solution.values.get(n, 0.0))) if v.integer
                  else float(solution.values.get(n, 0.0)))
              for n, v in model.variables.items()}
    raw = {n: float(solution.values.get(n, math.nan)) for n in model.variables}
    problems = check_solution(model, raw) or check_solution(model, values)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return Solution("error", {}, None, 0.0, solution.seconds, solution.backend,
                        f"{solution.backend} returned a point that violates the model: "
                        f"{problems[0]}{more}")
    return Solution(solution.status, values, objective_value(model, values), solution.gap,
                    solution.seconds, solution.backend, solution.message)
