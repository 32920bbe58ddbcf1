"""The binding list's re-solves are bounded in time: each relaxation gets at most
``binding.RELAXATION_LIMIT_S`` seconds; one stopped with a cheaper plan in hand is listed
as a lower bound (``proven: false``, "at least" in words); one stopped with none is named
in the plan's warnings, and the terminal does not then say that nothing binds."""

from __future__ import annotations

import dataclasses

import pytest

from solver.analysis import binding
from solver.analysis.explain import solve_rfq
from solver.common.wording import UNPRICED_WARNING, binding_lines
from solver.rfq.schema import validate_rfq


def _rag(vendor: str = "kentino") -> dict:
    """test_binding.py's SLO-dominated RAG service: its TTFT, vendor and TPOT bind."""
    return {"id": "rag", "constraints": {"vendor": vendor},
            "workloads": [{"name": "rag", "kind": "inference", "model": "qwen2.5-72b",
                           "concurrency": 32, "input_tokens": 24000, "output_tokens": 300,
                           "ttft_ms": 5000, "tpot_ms": 80}]}


@pytest.fixture(scope="module")
def exact(catalog):
    return solve_rfq(validate_rfq(_rag(), catalog), catalog, binding=True)


def test_every_re_solve_gets_the_relaxation_limit(catalog, monkeypatch):
    limits: list[float | None] = []
    real_mip, real_table = binding.run_mip, binding.solve_table

    def mip(*args, **kwargs):
        limits.append(kwargs.get("time_limit"))
        return real_mip(*args, **kwargs)

    def table(*args, **kwargs):
        limits.append(kwargs.get("time_limit"))
        return real_table(*args, **kwargs)

    monkeypatch.setattr(binding, "run_mip", mip)
    monkeypatch.setattr(binding, "solve_table", table)
    solve_rfq(validate_rfq(_rag(), catalog), catalog, binding=True)
    assert len(limits) >= 3  # two SLOs (their MIPs) and the vendor (a whole solve)
    assert all(limit is not None and 0 < limit <= binding.RELAXATION_LIMIT_S
               for limit in limits), limits


def test_a_re_solve_stopped_with_a_cheaper_plan_is_a_lower_bound(catalog, monkeypatch, exact):
    """The MIP stopped at its limit with a plan (status feasible): the entry keeps that
    plan's saving, marked unproven, and says "at least"."""
    real = binding.run_mip

    def stopped(*args, **kwargs):
        found = real(*args, **kwargs)
        return dataclasses.replace(found, status="feasible", gap=0.05)

    monkeypatch.setattr(binding, "run_mip", stopped)
    plan = solve_rfq(validate_rfq(_rag(), catalog), catalog, binding=True)
    by_name = {b.constraint: b for b in plan.binding}
    proven = {b.constraint: b for b in exact.binding}
    ttft = by_name["workloads.rag.ttft_ms"]
    assert ttft.proven is False and proven["workloads.rag.ttft_ms"].proven is None
    assert ttft.saving_usd == pytest.approx(proven["workloads.rag.ttft_ms"].saving_usd)
    written = {b["constraint"]: b for b in plan.to_json()["binding"]}
    assert written["workloads.rag.ttft_ms"]["proven"] is False
    assert "proven" not in written["constraints.vendor"]  # a whole solve, left exact
    line = binding_lines([ttft.model_dump()])[0]
    assert "saves at least $" in line
    assert "at least" not in binding_lines([proven["workloads.rag.ttft_ms"].model_dump()])[0]


def test_a_re_solve_stopped_without_a_plan_is_named_not_dropped(catalog, monkeypatch, exact):
    real = binding.run_mip

    def timeout(*args, **kwargs):
        found = real(*args, **kwargs)
        return dataclasses.replace(found, status="timeout", values={}, objective=None)

    monkeypatch.setattr(binding, "run_mip", timeout)
    plan = solve_rfq(validate_rfq(_rag(), catalog), catalog, binding=True)
    listed = {b.constraint for b in plan.binding}
    assert "workloads.rag.ttft_ms" not in listed
    assert "constraints.vendor" in listed  # a whole solve, not the MIP patched here
    warning = next(w for w in plan.warnings if w.startswith(UNPRICED_WARNING))
    assert "workloads.rag.ttft_ms" in warning and "15 s" in warning
    # the exact list has the TTFT entry: only the time ran out, not the saving
    assert "workloads.rag.ttft_ms" in {b.constraint for b in exact.binding}


def test_a_relaxation_without_any_plan_is_not_unpriced(catalog):
    """An infeasible relaxed MIP (none exists) is no binding and no warning."""
    entry = binding._not_found(
        binding.Solution("infeasible", {}, None, 0.0, 0.0, "highs"), "c", "slo", "1", "2")
    assert entry is None
    entry = binding._not_found(
        binding.Solution("timeout", {}, None, 0.0, 0.0, "highs"), "c", "slo", "1", "2")
    assert entry is not None and entry[binding.UNPRICED]


def test_terminal_does_not_say_nothing_binds_when_a_relaxation_was_not_priced(catalog,
                                                                              exact):
    import io

    from rich.console import Console

    from solver.cli.solve import print_plan

    def shown(plan) -> str:
        buffer = io.StringIO()
        print_plan(plan, console=Console(file=buffer, width=100))
        return buffer.getvalue()

    nothing = exact.model_copy(update={"binding": []})
    unpriced = nothing.model_copy(update={
        "warnings": [*exact.warnings, f"{UNPRICED_WARNING}facility.cooling: relaxed, ..."]})
    assert "relaxing any one saves nothing" in shown(nothing)
    text = shown(unpriced)
    assert "none found" in text and "saves nothing" not in text
    assert "not priced in time: facility.cooling" in text


def test_the_plan_contract_states_the_limit_the_code_uses():
    from solver.optimize.plan_model import Binding

    assert f"({binding.RELAXATION_LIMIT_S:g} s)" in Binding.model_fields["proven"].description
