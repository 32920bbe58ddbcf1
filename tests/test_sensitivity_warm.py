"""Warm-started sensitivity sweeps (issue 18: repeated solves): every solve of a sweep
starts HiGHS from the previous plan. The start may only save time: each sweep point (the
samples and every bisection step) has the same objective, to 1e-6, as without it, the
sweep takes the same path, and the report is the same."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from test_mip_scale import _toy as cased_toy

import solver.analysis.sensitivity as sensitivity
from solver.optimize.backends import BACKENDS, installed_backends
from solver.optimize.linear import LinearModel
from solver.rfq.schema import load_rfq

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif("highs" not in installed_backends(), reason="needs highspy")


def _run(catalog: Any, rfq: Any, warm: bool, monkeypatch: Any,
         **kwargs: Any) -> tuple[dict[str, Any], list[tuple[Any, str, float | None, bool]]]:
    """The report, and every solve of it: (pairs, status, objective, started warm)."""
    calls: list[tuple[Any, str, float | None, bool]] = []
    solve = sensitivity.Evaluator.solve

    def recorded(self: sensitivity.Evaluator, pairs: list) -> Any:
        started = self.warm_start and self._last is not None
        out = solve(self, pairs)
        calls.append((pairs, out.status, out.solution.objective, started))
        return out

    with monkeypatch.context() as patch:
        patch.setattr(sensitivity, "WARM_START", warm)
        patch.setattr(sensitivity.Evaluator, "solve", recorded)
        rep = sensitivity.report(catalog, rfq, **kwargs)
    rep.pop("seconds")
    return rep, calls


def _same_sweep(catalog: Any, rfq: Any, monkeypatch: Any, **kwargs: Any) -> int:
    cold, cold_calls = _run(catalog, rfq, False, monkeypatch, **kwargs)
    warm, warm_calls = _run(catalog, rfq, True, monkeypatch, **kwargs)
    assert [c[0] for c in warm_calls] == [c[0] for c in cold_calls]  # same points, in order
    for (pairs, status, objective, _), (_, warm_status, warm_objective, _) in zip(
            cold_calls, warm_calls, strict=True):
        assert warm_status == status, pairs
        if objective is None:
            assert warm_objective is None, pairs
        else:
            assert math.isclose(warm_objective, objective, rel_tol=1e-6, abs_tol=1e-6), pairs
    assert warm == cold
    assert not any(c[3] for c in cold_calls)
    return sum(c[3] for c in warm_calls)


def test_warm_start_same_objectives_one_parameter(catalog, monkeypatch):
    rfq = load_rfq(ROOT / "scenarios" / "portfolio-lab.yaml", catalog)
    started = _same_sweep(catalog, rfq, monkeypatch, param="costs.electricity_usd_per_kwh",
                          range_text="0.05:0.6", samples=5)
    assert started >= 5


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["portfolio-lab.yaml", "chat-70b-one-node.yaml"])
def test_warm_start_same_objectives_full_report(catalog, monkeypatch, scenario):
    rfq = load_rfq(ROOT / "scenarios" / scenario, catalog)
    assert _same_sweep(catalog, rfq, monkeypatch) >= 20


def _knapsack() -> LinearModel:
    model = LinearModel()
    for i in range(6):
        model.var(f"x{i}", 0, 5)
        model.objective[f"x{i}"] = 3.0 + i
    model.add("cover", {f"x{i}": 2.0 + (i % 3) for i in range(6)}, ">=", 17.0)
    return model


def test_highs_start_feasible_infeasible_or_partial_gives_the_optimum():
    """A start is a hint: feasible, infeasible, or missing a variable (then unused), HiGHS
    returns the optimum of the model."""
    highs = BACKENDS["highs"]
    best = highs.solve(_knapsack())
    assert best.status == "optimal"
    feasible = {f"x{i}": 5.0 for i in range(6)}
    infeasible = {f"x{i}": 0.0 for i in range(6)}
    partial = {"x0": 1.0}
    for start in (feasible, infeasible, partial, best.values):
        solution = highs.solve(_knapsack(), initial=start)
        assert solution.status == "optimal"
        assert math.isclose(solution.objective, best.objective, rel_tol=1e-9)


def test_highs_start_with_cases_gives_the_optimum():
    """With cases, a start goes to the case it lies in only; any start, any case order:
    the optimum 14 (``cased_toy``: s = 1, x = 2, y = 1, t = 1)."""
    highs = BACKENDS["highs"]
    starts = [{"x": 2.0, "y": 1.0, "s": 1.0, "t": 1.0},   # the optimum (case s = 1)
              {"x": 0.0, "y": 3.0, "s": 0.0, "t": 1.0},   # feasible, case s = 0: 16
              {"x": 0.0, "y": 0.0, "s": 0.0, "t": 0.0}]   # infeasible
    for cases in ([{"s": 1.0}, {"s": 0.0}], [{"s": 0.0}, {"s": 1.0}]):
        for start in starts:
            solution = highs.solve(cased_toy(cases), initial=start)
            assert solution.status == "optimal"
            assert math.isclose(solution.objective, 14.0, rel_tol=1e-9)
