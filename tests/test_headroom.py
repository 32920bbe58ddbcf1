"""Of the plans at the optimum's cost, the one with the most capacity (solve.with_headroom).

The cost MIP is indifferent to GPUs of a bought node that no workload needs: a node costs
the same whether six or eight of its GPUs run replicas. ``with_headroom`` re-solves with the
cost held at the optimum's and the workloads' capacity maximised. Checked here against an
independent brute force over small random instances (every replica count up to what the
optimum's budget could buy), and on the shipped scenario where the cost optimum left two of
eight GPUs idle."""

from __future__ import annotations

import itertools
import math
import random

from test_mip import cand, node, plan_cost, rfq_of, spec, stated, table_of

from solver.optimize.mip import cand_var
from solver.optimize.solve import headroom_weights, idle_gpus, run_mip, with_headroom


def _instance(rng: random.Random):
    types = [node("s8", "a", 8, 8000), node("s4", "a", 4, 6000)]
    cands, specs = [], []
    for w in range(rng.randint(1, 2)):
        name = f"w{w}"
        specs.append(spec(name, "inference", concurrency=rng.randint(5, 60)))
        for i in range(rng.randint(1, 3)):
            nt = rng.choice(types)
            gpus = rng.choice([g for g in (1, 2, 4) if g <= nt.gpus])
            cands.append(cand(name, "inference", nt, gpus,
                              conc=rng.randint(4, 30) * gpus, tag=str(i)))
    return types, cands, rfq_of(specs)


def _score(cands, counts, rfq) -> float:
    """Capacity over planned demand, summed over the workloads (independent of the code)."""
    needs = {s.name: stated(s).concurrency for s in rfq.workloads}
    return sum(c.concurrency_capacity * n / needs[c.workload]
               for c, n in zip(cands, counts, strict=True))


def _brute_force(table, cands, rfq):
    """(cheapest cost, most capacity at that cost) over every replica count a plan of the
    cheapest cost could hold, or None when nothing meets the demand."""
    needs = {s.name: stated(s) for s in rfq.workloads}

    def plans(bound):
        for counts in itertools.product(*(range(b + 1) for b in bound)):
            if all(sum(c.concurrency_capacity * n for c, n in zip(cands, counts, strict=True)
                       if c.workload == name) >= need.concurrency - 1e-9
                   for name, need in needs.items()):
                cost = plan_cost(table, rfq, cands, counts, "tco")
                if cost is not None:
                    yield cost, counts

    # the cheapest plan never buys more replicas than alone meet a demand ...
    first = [math.ceil(needs[c.workload].concurrency / c.concurrency_capacity) for c in cands]
    found = list(plans(first))
    if not found:
        return None
    cheapest = min(cost for cost, _ in found)
    # ... but a plan of that cost may hold more: as many as the nodes it can afford
    afford = {key: math.floor(cheapest / t.cost.capex_usd) for key, t in table.node_types.items()}
    wide = [max(b, afford[c.node_type] * table.node_types[c.node_type].gpus // c.gpus)
            for b, c in zip(first, cands, strict=True)]
    best = max(_score(cands, counts, rfq) for cost, counts in plans(wide)
               if cost <= cheapest + 1e-6)
    return cheapest, best


def test_headroom_is_the_most_capacity_at_the_cheapest_cost_brute_force():
    rng = random.Random(2612)
    compared = gained = 0
    while compared < 25:
        types, cands, rfq = _instance(rng)
        table = table_of(types, cands)
        expected = _brute_force(table, cands, rfq)
        base = run_mip(table, rfq)
        if expected is None:
            assert base.status == "infeasible"
            continue
        cheapest, most = expected
        assert base.status == "optimal"
        result = with_headroom(table, rfq, base, solver="highs")
        counts = [round(result.values.get(cand_var(c), 0.0)) for c in cands]
        assert math.isclose(result.objective, cheapest, rel_tol=1e-9)
        assert math.isclose(plan_cost(table, rfq, cands, counts, "tco"), cheapest,
                            rel_tol=1e-9)
        before = _score(cands, [round(base.values.get(cand_var(c), 0.0)) for c in cands], rfq)
        after = _score(cands, counts, rfq)
        if idle_gpus(table, rfq, base.values):
            assert math.isclose(after, most, rel_tol=1e-9), (after, most)
        gained += after > before + 1e-9
        compared += 1
    assert gained >= 5  # idle GPUs of the cheapest plan were put to work, often


def test_headroom_weights_are_capacity_over_planned_demand():
    n8 = node("s8", "a", 8, 8000)
    table = table_of([n8], [cand("w", "inference", n8, 2, conc=30, qps=3.0, tag="a")])
    rfq = rfq_of([spec("w", "inference", concurrency=60, qps=6.0)])
    (weight,) = headroom_weights(table, rfq).values()
    assert math.isclose(weight, (30 / 60 + 3.0 / 6.0) / 2)  # the mean of the two shares


def test_no_idle_gpus_leaves_the_plan_as_it_is():
    n8 = node("s8", "a", 8, 8000)
    table = table_of([n8], [cand("w", "inference", n8, 4, conc=20, tag="a")])
    rfq = rfq_of([spec("w", "inference", concurrency=40)])
    base = run_mip(table, rfq)
    assert idle_gpus(table, rfq, base.values) == 0
    assert with_headroom(table, rfq, base, solver="highs") is base


def test_a_box_bought_for_six_gpus_runs_eight(catalog):
    """chat-70b-one-node: the cheapest plan buys one 8-GPU box; three TP2 replicas meet the
    demand and two GPUs were left idle. At the same cost the plan runs four."""
    from pathlib import Path

    from solver.optimize.candidates import build_candidates
    from solver.rfq.schema import load_rfq

    rfq = load_rfq(Path(__file__).parent.parent / "scenarios" / "chat-70b-one-node.yaml",
                   catalog)
    table = build_candidates(rfq.catalog(catalog), rfq)
    base = run_mip(table, rfq)
    result = with_headroom(table, rfq, base, solver="highs")
    assert idle_gpus(table, rfq, base.values) > 0
    assert idle_gpus(table, rfq, result.values) == 0
    assert math.isclose(result.objective, base.objective, rel_tol=1e-12)
    capacity = {name: sum(c.concurrency_capacity * round(values.get(cand_var(c), 0.0))
                          for c in table.candidates["chat"])
                for name, values in (("base", base.values), ("headroom", result.values))}
    assert capacity["headroom"] > capacity["base"]


def test_the_plan_says_what_the_idle_gpus_carry(catalog):
    """The plan's words name the capacity it carries, the cheapest layout's, and the GPUs it
    added - the figures of the plan itself and of the cheapest solution."""
    from pathlib import Path

    from solver.analysis.explain import solve_rfq
    from solver.optimize.candidates import build_candidates
    from solver.rfq.schema import load_rfq

    rfq = load_rfq(Path(__file__).parent.parent / "scenarios" / "chat-70b-one-node.yaml",
                   catalog)
    plan = solve_rfq(rfq, catalog, explain=False).to_json()
    table = build_candidates(rfq.catalog(catalog), rfq)
    base = run_mip(table, rfq)
    before = sum(c.concurrency_capacity * round(base.values.get(cand_var(c), 0.0))
                 for c in table.candidates["chat"])
    (note,) = [w for w in plan["warnings"] if "at no extra cost" in w]
    entry = plan["workloads"][0]
    added = entry["gpus"] - sum(c.gpus * round(base.values.get(cand_var(c), 0.0))
                                for c in table.candidates["chat"])
    assert note.startswith("chat: ")
    assert f"carries {entry['predicted']['max_concurrency']} concurrent requests" in note
    assert f"layout's {before:.0f} would meet" in note
    assert f"on {added} more GPUs" in note and added > 0
