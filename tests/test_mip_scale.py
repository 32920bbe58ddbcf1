"""The MIP at scale (issue 18 part 2): the tightened formulation has exactly the optimum of
the former one.

``build_model(..., reference=True)`` builds the former model: n+1 rows with one "used"
binary and one big-M row per candidate, no rounded demand rows, no vendor-stack cases; the
default builds the loss levels (one binary per distinct one-node loss, ordered), the
rounded rows and the cases. Both must give the same optimal objective on random instances,
on the shipped scenarios and on seeded portfolios with n+1 workloads; every plan of the
new formulation survives losing any one node (tests/test_slo_planning.py checks that on
solved RFQs; here the level rows are checked against the definition directly).
"""

from __future__ import annotations

import dataclasses
import math
import random
from pathlib import Path

import pytest
from test_mip import random_instance

from solver.optimize.backends import BACKENDS, installed_backends
from solver.optimize.candidates import build_candidates
from solver.optimize.linear import LinearModel
from solver.optimize.mip import (
    build_model,
    cand_var,
    needs_n_plus_1,
    planned_demand,
    units_lost,
)
from solver.rfq.portfolio import portfolio_rfq, scenario_rfqs
from solver.rfq.schema import load_rfq, validate_rfq

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted(p for p in (ROOT / "scenarios").iterdir()
                   if p.suffix in (".yaml", ".yml", ".json"))
INSTALLED = installed_backends()


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-7, abs_tol=1e-4)


def _n_plus_1_instances(count: int, seed: int):
    """Random instances of tests/test_mip.py with ``redundancy: n+1`` on every online
    workload (and a random target utilisation)."""
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        table, rfq = random_instance(rng)
        if not any(s.kind == "inference" for s in rfq.workloads):
            continue
        rfq = rfq.model_copy(update={"workloads": [
            s.model_copy(update={"redundancy": "n+1",
                                 "target_utilization": rng.choice([1.0, 0.8, 0.5])})
            if s.kind == "inference" else s for s in rfq.workloads]})
        out.append((table, rfq))
    return out


INSTANCES = _n_plus_1_instances(60, seed=18)


def _solve(model, backend="highs"):
    return BACKENDS[backend].solve(model, 120)


@pytest.mark.parametrize("backend", [b for b in ("highs", "cpsat") if b in INSTALLED])
def test_loss_levels_have_the_reference_optimum_on_random_instances(backend):
    mismatches = []
    for index, (table, rfq) in enumerate(INSTANCES):
        new = _solve(build_model(table, rfq), backend)
        old = _solve(build_model(table, rfq, reference=True), backend)
        if new.status != old.status or not _same(new.objective, old.objective):
            mismatches.append((index, new.status, new.objective, old.status, old.objective))
    assert not mismatches


def test_loss_level_plans_survive_any_one_node_down():
    """On every solved random instance: capacity bought minus the largest one-node loss of
    the candidates used (the definition of the module docstring) still meets the demand."""
    checked = 0
    for table, rfq in INSTANCES:
        solution = _solve(build_model(table, rfq))
        if solution.status != "optimal":
            continue
        for spec in rfq.workloads:
            if not needs_n_plus_1(spec):
                continue
            demand = planned_demand(spec)
            used = [c for c in table.candidates[spec.name]
                    if solution.values[cand_var(c)] > 0.5]
            for need, capacity in ((demand.concurrency, "concurrency_capacity"),
                                   (demand.qps, "qps_capacity")):
                if not need:
                    continue
                bought = sum(getattr(c, capacity) * solution.values[cand_var(c)] for c in used)
                loss = max(units_lost(table, c) * getattr(c, capacity) for c in used)
                assert bought - loss >= need - 1e-6 * max(1.0, need)
                checked += 1
    assert checked > 20


def test_one_binary_per_distinct_loss_level():
    """The level binaries: one per distinct positive one-node loss but the smallest (always
    on), instead of one per candidate."""
    for table, rfq in INSTANCES[:20]:
        model = build_model(table, rfq)
        for spec in rfq.workloads:
            if not needs_n_plus_1(spec):
                continue
            demand = planned_demand(spec)
            cands = table.candidates[spec.name]
            for label, need, capacity in (("concurrency", demand.concurrency,
                                           "concurrency_capacity"),
                                          ("qps", demand.qps, "qps_capacity")):
                levels = {units_lost(table, c) * getattr(c, capacity) for c in cands} - {0.0}
                binaries = [n for n in model.variables if n.startswith(f"b_{label}[{spec.name}#")]
                assert len(binaries) == (max(0, len(levels) - 1) if need else 0)
        assert not [n for n in model.variables if n.startswith("a[")]


def _scenario_pairs(catalog):
    for path in SCENARIOS:
        rfq = load_rfq(path, catalog)
        yield path, rfq, build_candidates(catalog, rfq)


def test_loss_levels_have_the_reference_optimum_on_the_scenarios(catalog):
    checked = 0
    for path, rfq, table in _scenario_pairs(catalog):
        if not any(needs_n_plus_1(s) for s in rfq.workloads):
            continue
        new = _solve(build_model(table, rfq))
        old = _solve(build_model(table, rfq, reference=True))
        assert new.status == old.status, path.name
        assert _same(new.objective, old.objective), path.name
        checked += 1
    assert checked >= 1


POOL_BEFORE = ("deepseek-r1-rack",)
"""Scenarios added after these seeds were chosen: drawing from them reshuffles every seeded
portfolio (with it, seed 2 at 3 workloads and seed 5 at 4 drew 405B workloads whose reference
model HiGHS and CP-SAT did not prove optimal within the limits). The instances stay the ones
the exactness checks were written on; the shipped scenarios themselves are checked above."""


def _n_plus_1_portfolio(catalog, size: int, seed: int):
    """A seeded portfolio (solver/rfq/portfolio.py) with n+1 on every online workload."""
    rfqs = [r for r in scenario_rfqs() if r.get("id") not in POOL_BEFORE]
    data = portfolio_rfq(size, seed, limits=False, rfqs=rfqs)
    for work in data["workloads"]:
        if work.get("kind", "inference") == "inference":
            work["redundancy"] = "n+1"
    rfq = validate_rfq(data, catalog)
    fits = build_candidates(catalog, rfq).candidates
    data["workloads"] = [w for w in data["workloads"] if fits[w["name"]]]
    rfq = validate_rfq(data, catalog)
    return rfq, build_candidates(catalog, rfq)


@pytest.mark.parametrize("seed", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_loss_levels_have_the_reference_optimum_on_small_portfolios(catalog, seed):
    rfq, table = _n_plus_1_portfolio(catalog, 3, seed)
    new = _solve(build_model(table, rfq))
    old = _solve(build_model(table, rfq, reference=True))
    assert new.status == old.status == "optimal"
    assert _same(new.objective, old.objective)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [3, 4, 5])
def test_backends_agree_on_n_plus_1_portfolios(catalog, seed):
    """4-workload portfolios with n+1 on every online workload: the reference formulation
    (HiGHS) and the level formulation on every installed backend reach one optimum (6
    workloads: the reference model does not prove optimality in minutes). CP-SAT needs
    610 s to prove seed 5 optimal on a 2-core machine (2026-12-07, after the kernel-factor
    refit; 465 s after the serving refit earlier that day, whose portfolios differed); under
    load 600 s ran out once in .ci/run (status feasible), so each solve gets 1,800 s."""
    rfq, table = _n_plus_1_portfolio(catalog, 4, seed)
    old = BACKENDS["highs"].solve(build_model(table, rfq, reference=True), 1800)
    assert old.status == "optimal"
    for backend in INSTALLED:
        new = BACKENDS[backend].solve(build_model(table, rfq), 1800)
        assert new.status == "optimal", backend
        assert _same(new.objective, old.objective), backend


def test_reference_flag_changes_only_the_n_plus_1_and_rounded_rows():
    table, rfq = INSTANCES[0]
    plain = rfq.model_copy(update={"workloads": [
        s.model_copy(update={"redundancy": "none"}) if s.kind == "inference" else s
        for s in rfq.workloads]})
    a = build_model(table, plain)
    b = build_model(table, plain, reference=True)
    assert set(a.variables) == set(b.variables)
    assert [c.name for c in a.constraints if "_rounded[" not in c.name] == \
        [c.name for c in b.constraints]
    assert not b.cases


# --- vendor-stack cases (solver/optimize/backends.py Backend._solve_cases) ---------------------------
def _two_stack_instances(count: int, seed: int):
    """Random instances whose node types are spread over CUDA and ROCm (one stack per
    cluster: build_model sets one case per stack)."""
    rng = random.Random(seed)
    out = []
    for table, rfq in _n_plus_1_instances(count * 3, seed):
        types = {k: dataclasses.replace(t, stack=rng.choice(["cuda", "rocm"]))
                 for k, t in table.node_types.items()}
        if len({t.stack for t in types.values()}) < 2:
            continue
        out.append((dataclasses.replace(table, node_types=types), rfq))
        if len(out) == count:
            break
    return out


TWO_STACKS = _two_stack_instances(30, seed=1818)


@pytest.mark.parametrize("backend", INSTALLED)
def test_stack_cases_have_the_optimum_of_the_whole_model(backend):
    """Solving case by case (each stack fixed, a cutoff from the best so far) gives the
    optimum of the whole model solved at once (HiGHS), on every installed backend."""
    assert len(TWO_STACKS) >= 20
    mismatches, split = [], 0
    for index, (table, rfq) in enumerate(TWO_STACKS):
        model = build_model(table, rfq)
        assert len(model.cases) in (0, 2)  # none when the bounds leave one stack of use
        split += len(model.cases) == 2
        whole = build_model(table, rfq)
        whole.cases = []
        by_cases = BACKENDS[backend].solve(model, 120)
        at_once = BACKENDS["highs"].solve(whole, 120)
        if by_cases.status != at_once.status or not _same(by_cases.objective,
                                                          at_once.objective):
            mismatches.append((index, by_cases.status, by_cases.objective, at_once.status,
                               at_once.objective))
    assert not mismatches
    assert split >= 10


def _toy(cases):
    """min x + 2y + 10t, x + y ≥ 3, x ≤ 2s, y ≤ 2(1 - s) + 3t: optimum 14 (s = 1, x = 2,
    y = 1, t = 1); the cases fix s (and t). Also the warm-start tests' cased model."""
    model = LinearModel()
    for name, high in (("x", 5), ("y", 5), ("s", 1), ("t", 1)):
        model.var(name, 0, high)
    model.objective = {"x": 1.0, "y": 2.0, "t": 10.0}
    model.add("demand", {"x": 1.0, "y": 1.0}, ">=", 3.0)
    model.add("x_on_s", {"x": 1.0, "s": -2.0}, "<=", 0.0)
    model.add("y_off_s", {"y": 1.0, "s": 2.0, "t": -3.0}, "<=", 2.0)
    model.cases = cases
    return model


@pytest.mark.parametrize("backend", INSTALLED)
def test_case_statuses(backend):
    solver = BACKENDS[backend]
    # s = 1: x ≤ 2, y ≤ 3t → x = 2, y = 1, t = 1: 14; s = 0: y ≤ 2 + 3t → y = 3, t = 1: 16
    # (or x = 0, y = 2 fails the demand) -> optimum 14 whatever the order
    for cases in ([{"s": 1.0}, {"s": 0.0}], [{"s": 0.0}, {"s": 1.0}]):
        solution = solver.solve(_toy(cases))
        assert solution.status == "optimal" and _same(solution.objective, 14.0)
        whole = solver.solve(_toy([]))
        assert _same(whole.objective, 14.0)
    # every case infeasible (t fixed 0 and s fixed): infeasible, never a timeout
    solution = solver.solve(_toy([{"s": 1.0, "t": 0.0}, {"s": 0.0, "t": 0.0}]))
    assert solution.status == "infeasible"
    # a fixing outside a variable's bounds is an empty case
    solution = solver.solve(_toy([{"s": 2.0}, {"s": 1.0}]))
    assert solution.status == "optimal" and _same(solution.objective, 14.0)
    # every fixing outside the bounds: the whole model is solved
    solution = solver.solve(_toy([{"s": 2.0}, {"s": 3.0}]))
    assert solution.status == "optimal" and _same(solution.objective, 14.0)


@pytest.mark.parametrize("backend", INSTALLED)
def test_a_cutoff_below_the_optimum_finds_no_better_point(backend):
    solution = BACKENDS[backend]._solve(_toy([]), 60, cutoff=13.0)
    assert solution.status != "error"
    assert solution.status == "infeasible" or solution.objective >= 14.0 - 1e-6
    solution = BACKENDS[backend]._solve(_toy([]), 60, cutoff=20.0)
    assert solution.status == "optimal" and _same(solution.objective, 14.0)
