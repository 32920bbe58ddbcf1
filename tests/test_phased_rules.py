"""Issue 29: the phased purchase obeys the one-period MIP's rules - n+1 in every period, one
accelerator stack, the plan's solver - and buying everything at month 0 in the phased
model costs exactly what the headline plan costs (on every scenario with demand over time,
with and without n+1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.catalog.load import load_catalog
from solver.optimize.backends import get_backend
from solver.optimize.schedule import has_demand_over_time, phased_model
from solver.optimize.solve import solve_table
from solver.rfq.schema import load_rfq, validate_rfq

CATALOG = load_catalog()
SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
PERIOD_RFQS = [path for path in sorted(SCENARIOS.glob("*.yaml"))
               if has_demand_over_time(load_rfq(path, CATALOG))]


def _with_n_plus_1(rfq):
    work = [w.model_copy(update={"redundancy": "n+1"}) if w.kind == "inference" else w
            for w in rfq.workloads]
    return rfq.model_copy(update={"workloads": work})


def test_there_are_period_scenarios():
    assert PERIOD_RFQS, "no scenario with demand over time"


@pytest.mark.parametrize("redundancy", ["as stated", "n+1"])
@pytest.mark.parametrize("path", PERIOD_RFQS, ids=lambda p: p.stem)
def test_buy_now_in_the_phased_model_equals_the_headline(path, redundancy):
    rfq = load_rfq(path, CATALOG)
    if redundancy == "n+1":
        rfq = _with_n_plus_1(rfq)
    plan, table = solve_table(rfq, CATALOG)
    assert plan.feasible and plan.cost is not None and table is not None
    model = phased_model(CATALOG, rfq, table, buy_now=True)
    assert model is not None
    now = get_backend("highs").solve(model, None)
    assert now.status == "optimal"
    assert now.objective == pytest.approx(plan.cost.tco_usd, rel=1e-7)
    phasing = plan.phasing
    if phasing is not None:  # phased only when it pays; buy-now is the headline itself
        assert phasing.buy_all_now_tco_usd == plan.cost.tco_usd
        assert phasing.tco_usd < plan.cost.tco_usd
        assert phasing.saving_usd == pytest.approx(plan.cost.tco_usd - phasing.tco_usd,
                                                   abs=0.02)
        # one node type and demand peaking at the end: the estate at the end is the plan's
        if len(plan.cluster.nodes) == 1:
            assert sum(p.nodes_bought for p in plan.schedule) == plan.cluster.total_nodes


def test_n_plus_1_buys_a_spare_node_in_the_phased_schedule_too():
    """Issue 29's report: with n+1 the plan bought 4 nodes and the schedule 3."""
    rfq = load_rfq(SCENARIOS / "growing-chat-service.yaml", CATALOG)
    plain, _ = solve_table(rfq, CATALOG)
    spare, _ = solve_table(_with_n_plus_1(rfq), CATALOG)
    assert spare.cluster.total_nodes > plain.cluster.total_nodes
    assert sum(p.nodes_bought for p in spare.schedule) == spare.cluster.total_nodes
    assert sum(p.nodes_bought for p in plain.schedule) == plain.cluster.total_nodes


def test_phased_schedule_keeps_one_accelerator_stack():
    """Issue 29's report: the schedule bought an RTX PRO node under an MI355X plan with
    mixed_vendors false. Every period's purchases are of the plan's stack."""
    rfq = validate_rfq({
        "id": "stack", "horizon_years": 3, "constraints": {"vendor": "open"},
        "workloads": [{"name": "chat", "kind": "inference", "model": "llama-3.1-70b",
                       "concurrency": 64, "growth_per_year": 1.0, "input_tokens": 2000,
                       "output_tokens": 400, "ttft_ms": 2000, "tpot_ms": 60}]}, CATALOG)
    plan, table = solve_table(rfq, CATALOG)
    assert table is not None and plan.feasible
    stacks = {CATALOG.gpus[n.gpu].stack for n in plan.cluster.nodes}
    bought = {table.node_types[key].stack for period in plan.schedule
              for key in (period.node_types_bought or {})}
    assert len(stacks) == 1 and bought <= stacks, (stacks, bought)
