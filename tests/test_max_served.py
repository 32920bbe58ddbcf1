"""Issue 29: the best plan within a budget (``objective: max_served``) - the served share is
maximised (priority-weighted), then the TCO; checked against brute force on small random
instances, on the real catalog, and in what an infeasible budget says it buys."""

from __future__ import annotations

import itertools
import json
import math
import random
from pathlib import Path

import pytest
from test_mip import (
    PARAMS,
    SWEEP_BACKENDS,
    plan_cost,
    random_instance,
    rfq_of,
    search_size,
    stated,
)

from solver.catalog.load import load_catalog
from solver.optimize.mip import replica_bound, served_share
from solver.optimize.records import CandidateTable
from solver.optimize.solve import run_mip
from solver.rfq.schema import validate_rfq

JOBS = ("lora", "qlora", "full_finetune", "pretrain")


def brute_force_served(table: CandidateTable, rfq) -> tuple[float, float] | None:
    """(largest priority-weighted share served, lowest TCO that serves it) by enumerating
    every replica count up to what meets the full demand. A serving workload's share is
    counted in whole per cent of its demand, a job is run (1) or not (0)."""
    specs = {s.name: s for s in rfq.workloads}
    names = list(table.candidates)
    flat = [c for name in names for c in table.candidates[name]]
    ranges = [range(2) if c.is_job else range(replica_bound(c, stated(specs[c.workload])) + 1)
              for c in flat]
    best: tuple[float, float] | None = None
    for counts in itertools.product(*ranges):
        value = 0.0
        ok = True
        for name in names:
            sel = [(c, n) for c, n in zip(flat, counts, strict=True) if c.workload == name]
            spec = specs[name]
            if spec.kind in JOBS:
                runs = sum(n for _, n in sel)
                ok &= runs <= 1
                value += spec.priority * runs
                continue
            need = stated(spec)
            percent = 100
            for demand, capacity in ((need.concurrency, "concurrency_capacity"),
                                     (need.qps, "qps_capacity")):
                if demand:
                    have = sum(getattr(c, capacity) * n for c, n in sel)
                    percent = min(percent, math.floor(100 * have / demand + 1e-9))
            value += spec.priority * percent / 100
        if not ok:
            continue
        cost = plan_cost(table, rfq, flat, counts, "tco")
        if cost is None:
            continue
        key = (round(value, 9), -cost)
        if best is None or key > (round(best[0], 9), -best[1]):
            best = (value, cost)
    return best


def _served_instances(count: int, seed: int):
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        table, base = random_instance(rng)
        specs = [{**s.model_dump(exclude_none=True, exclude={"precision", "precisions"}),
                  "priority": rng.choice([1.0, 2.0, 0.5])} for s in base.workloads]
        for s in specs:  # the dump fills defaults a job or a batch does not take back
            if s["kind"] != "inference":
                s.pop("recurrence", None)
        rfq = rfq_of(specs, objective="max_served",
                     budget_usd=rng.choice([120_000, 250_000, 400_000, 900_000]),
                     max_nodes=base.constraints.max_nodes)
        size = search_size(table, rfq)
        if size is not None and size <= 3000:
            out.append((table, rfq))
    return out


INSTANCES = _served_instances(60, seed=20261205)


@pytest.mark.parametrize("backend", SWEEP_BACKENDS)  # CBC under the `slow` marker
def test_max_served_matches_brute_force(backend):
    """Issue 29: on 60 random instances the MIP's served share and its TCO equal the
    enumeration's (share first, then cost)."""
    assert PARAMS.horizon_years == 3
    mismatches = []
    partial = 0
    for index, (table, rfq) in enumerate(INSTANCES):
        expected = brute_force_served(table, rfq)
        solution = run_mip(table, rfq, solver=backend)
        assert solution.status == "optimal", (index, solution)
        specs = {s.name: s for s in rfq.workloads}
        value = sum(specs[n].priority * served_share(solution.values, n, specs[n].kind)
                    for n in table.candidates)
        assert expected is not None  # serving nothing is always within budget
        if abs(value - expected[0]) > 1e-6 or \
                abs((solution.objective or 0.0) - expected[1]) > 1e-6 * max(1.0, expected[1]):
            mismatches.append((index, expected, (value, solution.objective)))
        full = sum(s.priority for s in rfq.workloads)
        partial += expected[0] < full - 1e-9
    assert not mismatches, mismatches[:5]
    assert 10 <= partial <= 55, partial  # the sample has budgets that bind and that do not


CATALOG = load_catalog()
CHAT = {"name": "chat", "kind": "inference", "model": "llama-3.1-8b", "concurrency": 64,
        "input_tokens": 2000, "output_tokens": 400, "ttft_ms": 2000, "tpot_ms": 60}


def _solve(data: dict):
    from solver.analysis.explain import solve_rfq

    return solve_rfq(validate_rfq(data, CATALOG), CATALOG)


def test_budget_that_binds_serves_a_share_and_says_what_is_given_up():
    """Issue 29: objective max_served returns a plan (not infeasible) with
    served_fraction < 1 when the budget binds, = 1 when it does not, at the same TCO as the
    cheapest full plan."""
    full = _solve({"id": "full", "workloads": [{**CHAT, "concurrency": 2048}],
                   "constraints": {"vendor": "open"}})
    assert full.feasible and full.cost is not None
    need = full.cost.tco_usd
    tight = _solve({"id": "tight", "objective": "max_served", "budget_usd": round(need * 0.5),
                    "workloads": [{**CHAT, "concurrency": 2048}],
                    "constraints": {"vendor": "open"}})
    assert tight.feasible and tight.cost is not None and tight.served
    share = tight.served[0].served_fraction
    assert 0 < share < 1
    assert tight.cost.tco_usd <= need * 0.5 + 1e-6
    assert tight.workloads[0].served_fraction == share
    assert "of 2,048 concurrent users" in tight.served[0].served
    # the served part is planned at its own load: utilisation against the served demand
    assert tight.workloads[0].demand is not None
    assert tight.workloads[0].demand.concurrency == math.floor(2048 * share + 1e-9)
    roomy = _solve({"id": "roomy", "objective": "max_served", "budget_usd": round(need * 2),
                    "workloads": [{**CHAT, "concurrency": 2048}],
                    "constraints": {"vendor": "open"}})
    assert roomy.served and roomy.served[0].served_fraction == 1.0
    assert roomy.cost is not None and roomy.cost.tco_usd == pytest.approx(need, rel=1e-9)


def test_priority_decides_which_workload_keeps_its_service():
    """Issue 29: two equal services and money for one: the one of higher priority is
    served, whichever is listed first."""
    big = {**CHAT, "concurrency": 2048}
    one = _solve({"id": "one", "workloads": [big], "constraints": {"vendor": "open"}})
    assert one.cost is not None
    budget = round(one.cost.tco_usd * 1.2)
    for first, second in ((1.0, 3.0), (3.0, 1.0)):
        plan = _solve({"id": "pick", "objective": "max_served", "budget_usd": budget,
                       "constraints": {"vendor": "open"},
                       "workloads": [{**big, "name": "a", "priority": first},
                                     {**big, "name": "b", "priority": second}]})
        assert plan.served is not None
        share = {s.workload: s.served_fraction for s in plan.served}
        winner, loser = ("b", "a") if second > first else ("a", "b")
        assert share[winner] == 1.0 and share[loser] < 1.0, share


def test_max_served_needs_a_budget():
    from solver.common.errors import InputError

    with pytest.raises(InputError) as info:
        validate_rfq({"id": "x", "objective": "max_served", "workloads": [CHAT]}, CATALOG)
    assert "needs budget_usd" in str(info.value.problems[0])


def test_infeasible_budget_says_what_it_buys(tmp_path: Path):
    """Issue 29: under the default objective an infeasible budget also says what the
    budget buys, workload by workload."""
    full = _solve({"id": "full", "workloads": [{**CHAT, "concurrency": 2048}],
                   "constraints": {"vendor": "open"}})
    assert full.cost is not None
    plan = _solve({"id": "short", "budget_usd": round(full.cost.tco_usd * 0.5),
                   "workloads": [{**CHAT, "concurrency": 2048}],
                   "constraints": {"vendor": "open"}})
    assert plan.status == "infeasible" and plan.infeasibility is not None
    buys = plan.infeasibility.budget_buys
    assert buys and 0 < buys[0].served_fraction < 1
    assert any("the most that can be served" in r and "of 2,048 concurrent users" in r
               for r in plan.infeasibility.reasons)
    dumped = json.loads(json.dumps(plan.to_json()))
    assert dumped["infeasibility"]["budget_buys"][0]["workload"] == "chat"


def _cli(monkeypatch, capsys, *args):
    import sys

    from solver.cli import main as cli

    monkeypatch.setattr(sys, "argv", ["procure", *args])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def test_pareto_over_budget_serves_more_with_more_money(monkeypatch, capsys, tmp_path):
    """Issue 29: `procure pareto --over budget`: the served share never falls as the budget
    grows, no point spends more than its budget, and the last budget serves everything."""
    csv_path = tmp_path / "budget.csv"
    code, out, err = _cli(monkeypatch, capsys, "pareto", str(SCENARIOS / "best-for-a-budget.yaml"),
                          "--over", "budget", "--points", "5", "--json", "--csv", str(csv_path))
    assert code == 0, err
    result = json.loads(out)
    points = result["points"]
    assert len(points) >= 5
    shares = [p["served_share"] for p in points]
    assert shares == sorted(shares)
    assert all(p["tco_usd"] <= p["budget_usd"] + 1e-6 for p in points)
    assert points[-1]["budget_usd"] == result["full_demand_tco_usd"]
    assert shares[-1] == 1.0 and shares[0] < 1.0
    assert any(p["budget_usd"] == 130000 for p in points)  # the RFQ's own budget is a point
    assert csv_path.read_text().splitlines()[0].startswith("budget_usd,served_share")
    code, _, err = _cli(monkeypatch, capsys, "pareto", str(SCENARIOS / "best-for-a-budget.yaml"),
                        "--over", "cost")
    assert code == 2 and "--over" in err and "'budget'" in err


def test_quote_and_explain_say_what_the_budget_gives_up():
    from solver.report.quote import quote_context

    rfq = validate_rfq({"id": "q", "objective": "max_served", "budget_usd": 130000,
                        "constraints": {"vendor": "open"},
                        "workloads": [{**CHAT, "concurrency": 2048}]}, CATALOG)
    from solver.analysis.explain import solve_rfq

    plan = solve_rfq(rfq, CATALOG)
    share = plan.served[0].served_fraction if plan.served else None
    assert share is not None and 0 < share < 1
    context = quote_context(plan, rfq, CATALOG)
    assert f"chat {share:.0%} served" in context["summary"]
    assert plan.warnings[0].startswith("budget $130,000 (objective max_served) does not serve")


@pytest.mark.parametrize("name", ["chat-70b-one-node", "hybrid-service-and-job",
                                  "portfolio-lab"])
def test_the_full_demand_budget_serves_everything(name):
    """Regression (issue 29): the sweep's last budget, the full plan's TCO, was rounded to
    the cent - below the TCO - and served 56 % of chat-70b-one-node."""
    from solver.analysis.budget import budget_curve
    from solver.rfq.schema import load_rfq

    rfq = load_rfq(SCENARIOS / f"{name}.yaml", CATALOG)
    result = budget_curve(CATALOG, rfq, points=2)
    last = result["points"][-1]
    assert last["budget_usd"] >= result["full_demand_tco_usd"]
    assert last["served_share"] == 1.0
    assert all(share == 1.0 for share in last["workloads"].values())


def test_the_budget_binds_a_max_served_plan_and_says_what_twice_as_much_serves():
    """Issues 28 and 29: under max_served with demand left unserved the budget binds; its
    relaxation (twice the budget) is re-solved and states the larger share it serves, which
    an independent solve at that budget confirms."""
    from solver.analysis.binding import binding_constraints
    from solver.optimize.plan import weighted_served_share as served_share
    from solver.optimize.solve import solve_table
    from solver.rfq.schema import load_rfq

    rfq = load_rfq(SCENARIOS / "best-for-a-budget.yaml", CATALOG)
    plan, table = solve_table(rfq, CATALOG)
    assert table is not None
    share = served_share(plan, rfq)
    assert share is not None and share < 1.0
    found = binding_constraints(rfq, CATALOG, plan, table)
    assert found and found[0]["kind"] == "budget" and found[0]["relaxed_to"] == "$260,000"
    assert all(b["served_share"] > share for b in found)
    double, _ = solve_table(rfq.model_copy(update={"budget_usd": 2 * rfq.budget_usd}), CATALOG)
    assert served_share(double, rfq) == pytest.approx(found[0]["served_share"], abs=1e-4)
