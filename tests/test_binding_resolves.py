"""Issue 31: the binding list's re-solves (one whole MIP per limit, SLO, deadline and pinned
precision: most of a portfolio's `procure solve`) run in forked processes for a large
table. The list must be the one found in one process."""

from __future__ import annotations

import os

import pytest

from solver.analysis import binding
from solver.analysis.explain import solve_rfq
from solver.common.progress import reporting
from solver.rfq.schema import validate_rfq


@pytest.fixture
def at_limits(catalog, rfq_data):
    rfq_data["budget_usd"] = None
    rfq_data["constraints"].update({"max_nodes": 11, "max_gpus": 84, "max_power_kw": 81.9,
                                    "max_rack_units": 44})
    return validate_rfq(rfq_data, catalog)


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
    assert len(one.binding) >= 2  # the case has something to compare
    cost = one.cost.tco_usd
    assert all(abs(b.saving_usd - (cost - b.relaxed_cost_usd)) <= 0.02 for b in one.binding)


def test_issue_31_run_steps_keeps_the_order_and_raises_a_child_error():
    steps = [lambda i=i: {"i": i, "pid": os.getpid()} if i % 3 else None for i in range(7)]
    found = binding.run_steps(steps, 2)
    assert [e and e["i"] for e in found] == [e and e["i"] for e in (s() for s in steps)]
    assert all(e["pid"] != os.getpid() for e in found if e)  # computed in the children

    def boom():
        raise ValueError("step failed")
    with pytest.raises(ValueError, match="step failed"):
        binding.run_steps([steps[1], boom, steps[2]], 2)


def test_issue_31_binding_re_solves_report_progress():
    seen = []
    steps = [lambda: None, lambda: {"x": 1}]
    with reporting(lambda what, done, total: seen.append((what, done, total))):
        binding.run_steps(steps, 1)
    assert seen == [("binding constraints: re-solving 2 relaxations", 0, 2),
                    ("binding constraints: re-solving 2 relaxations", 1, 2)]
