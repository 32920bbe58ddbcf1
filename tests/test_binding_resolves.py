"""Issue 31: the binding list's re-solves carry a cutoff (the base plan's cost less the
smallest saving that binds), so a relaxation that cannot bind is proven so instead of being
solved to its optimum, and run in forked processes for a large table. The list must be the
one found without the cutoff, in one process."""

from __future__ import annotations

import math

import pytest
from test_mip_scale import INSTALLED, TWO_STACKS, _same, _toy

from solver.analysis import binding
from solver.analysis.explain import solve_rfq
from solver.optimize.backends import BACKENDS
from solver.optimize.mip import build_model
from solver.rfq.schema import validate_rfq


@pytest.mark.parametrize("backend", INSTALLED)
def test_issue_31_a_cutoff_keeps_an_optimum_below_it_and_proves_none_above(backend):
    """Backend.solve(cutoff=...): the same optimum when it lies below the cutoff, and
    none below it when no point beats it: ``infeasible``, or (CP-SAT, whose cutoff is
    loosened by its integer scaling) a point not below it (cased models; the toy model
    without cases)."""
    solver = BACKENDS[backend]
    instances = [build_model(table, rfq) for table, rfq in TWO_STACKS[:8]]
    checked = 0
    for model in [_toy([]), _toy([{"s": 1.0}, {"s": 0.0}]), *instances]:
        free = solver.solve(model, 120)
        if free.status != "optimal" or free.objective is None:
            continue
        best = free.objective
        above = solver.solve(model, 120, cutoff=best + max(1.0, 1e-6 * abs(best)))
        assert above.status == "optimal" and _same(above.objective, best)
        below = solver.solve(model, 120, cutoff=best - max(1e-3, 1e-6 * abs(best)))
        assert below.status == "infeasible" or (
            below.status == "optimal" and _same(below.objective, best)), (below, best)
        checked += 1
    assert checked >= 6


def _entries(plan) -> list[tuple]:
    return [(b.constraint, b.kind, b.value, b.relaxed_to, b.relaxed_cost_usd, b.saving_usd)
            for b in plan.binding]


@pytest.fixture
def at_limits(catalog, rfq_data):
    rfq_data["budget_usd"] = None
    rfq_data["constraints"].update({"max_nodes": 11, "max_gpus": 84, "max_power_kw": 81.9,
                                    "max_rack_units": 44})
    return validate_rfq(rfq_data, catalog)


def test_issue_31_binding_list_is_the_one_found_without_a_cutoff(catalog, at_limits,
                                                                  monkeypatch):
    """A plan at its limits (the least nodes, GPUs, power and rack units it can have; a
    vendor, a GPU list, SLOs, deadlines): the binding list with the re-solves' cutoff
    equals the list re-solved to every relaxed optimum (the same constraints, relaxed costs
    and savings, in the same order)."""
    rfq = at_limits
    with_cutoff = solve_rfq(rfq, catalog, binding=True)
    assert with_cutoff.status == "optimal"
    monkeypatch.setattr(binding.Base, "cutoff", lambda self: None)
    without = solve_rfq(rfq, catalog, binding=True)
    assert _entries(with_cutoff) == _entries(without)
    assert len(without.binding) >= 2  # the case has something to compare
    cost = with_cutoff.cost.tco_usd
    assert all(math.isclose(b.saving_usd, cost - b.relaxed_cost_usd, abs_tol=0.02)
               for b in with_cutoff.binding)


def test_issue_31_binding_re_solves_in_processes_give_the_same_list(catalog, at_limits,
                                                                    monkeypatch):
    """The re-solves dealt to two forked processes (the size threshold lowered so that a
    small RFQ takes that path): the same entries, relaxed clusters included, in order."""
    one = solve_rfq(at_limits, catalog, binding=True)
    calls = []
    real = binding.run_steps
    monkeypatch.setattr(binding, "PARALLEL_MIN_CANDIDATES", 0)
    monkeypatch.setattr(binding, "run_steps",
                        lambda steps, workers=1: calls.append(workers) or real(steps, workers))
    two = solve_rfq(at_limits, catalog, binding=True, workers=2)
    assert calls == [2]
    assert [b.model_dump() for b in two.binding] == [b.model_dump() for b in one.binding]
    assert len(one.binding) >= 2


def test_issue_31_run_steps_keeps_the_order_and_raises_a_child_error():
    steps = [lambda i=i: {"i": i} if i % 3 else None for i in range(7)]
    assert binding.run_steps(steps, 2) == [s() for s in steps]

    def boom():
        raise ValueError("step failed")
    with pytest.raises(ValueError, match="step failed"):
        binding.run_steps([steps[1], boom, steps[2]], 2)
