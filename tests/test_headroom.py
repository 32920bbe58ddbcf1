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
from dataclasses import replace

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


def _brute_force(table, cands, rfq, kept=None):
    """(cheapest cost, most capacity at that cost) over every replica count a plan of the
    cheapest cost could hold, at least ``kept`` (the cheapest plan's counts: replicas are
    only added) where given; None when nothing meets the demand."""
    needs = {s.name: stated(s) for s in rfq.workloads}
    floor = kept or [0] * len(cands)

    def plans(bound):
        for counts in itertools.product(*(range(low, max(low, b) + 1)
                                          for low, b in zip(floor, bound, strict=True))):
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
    """The cheapest cost is the brute force's; every replica of the cost optimum is kept;
    where it left GPUs idle, the capacity is the most any plan of that cost with at least
    those replicas carries."""
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
        cheapest, _ = expected
        assert base.status == "optimal"
        kept = [round(base.values.get(cand_var(c), 0.0)) for c in cands]
        result = with_headroom(table, rfq, base, solver="highs")
        counts = [round(result.values.get(cand_var(c), 0.0)) for c in cands]
        assert math.isclose(result.objective, cheapest, rel_tol=1e-9)
        assert math.isclose(plan_cost(table, rfq, cands, counts, "tco"), cheapest,
                            rel_tol=1e-9)
        assert all(n >= k for n, k in zip(counts, kept, strict=True))  # only added
        before, after = _score(cands, kept, rfq), _score(cands, counts, rfq)
        if idle_gpus(table, rfq, base.values):
            most = _brute_force(table, cands, rfq, kept)[1]
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
    """The plan's ``headroom`` of a workload: the capacity its layouts carry (the plan's own
    figure), the cheapest layouts' (from the cost optimum), the demand it is sized for and
    the GPUs added; the terminal says it in words."""
    from pathlib import Path

    from solver.analysis.explain import solve_rfq
    from solver.common.wording import headroom_lines
    from solver.optimize.candidates import build_candidates
    from solver.optimize.mip import planned_demand
    from solver.rfq.schema import load_rfq

    rfq = load_rfq(Path(__file__).parent.parent / "scenarios" / "chat-70b-one-node.yaml",
                   catalog)
    plan = solve_rfq(rfq, catalog, explain=False).to_json()
    table = build_candidates(rfq.catalog(catalog), rfq)
    base = run_mip(table, rfq)
    used = [(c, round(base.values.get(cand_var(c), 0.0))) for c in table.candidates["chat"]]
    entry = plan["workloads"][0]
    room = entry["headroom"]
    assert room["unit"] == "concurrent requests"
    assert room["capacity"] == entry["predicted"]["max_concurrency"]
    assert room["cheapest_capacity"] == sum(c.concurrency_capacity * n for c, n in used)
    assert room["sized_for"] == planned_demand(rfq.workloads[0]).concurrency
    assert room["gpus_added"] == entry["gpus"] - sum(c.gpus * n for c, n in used) > 0
    first, second = headroom_lines(entry)
    assert first == (f"at no extra cost: {room['capacity']:.0f} concurrent requests on "
                     f"{room['gpus_added']} more GPUs")
    assert f"the cheapest layout: {room['cheapest_capacity']:.0f}," in second
    assert not any("no extra cost" in w for w in plan["warnings"])  # not a risk


def test_an_idle_gpu_speeds_up_a_job():
    """A service needs six of a node's eight GPUs; the cheapest plan runs the job on one
    GPU (it meets the deadline); at the same cost the job takes two and finishes sooner."""
    from solver.optimize.solve import headroom_records

    n8 = node("s8", "a", 8, 8000)
    cands = [cand("chat", "inference", n8, 2, conc=10, tag="tp2"),
             cand("tune", "lora", n8, 1, hours=80.0, tag="one"),
             cand("tune", "lora", n8, 2, hours=45.0, tag="two")]
    table = table_of([n8], cands)
    rfq = rfq_of([spec("chat", "inference", concurrency=30), spec("tune", "lora")])
    found = run_mip(table, rfq)
    # both jobs cost the same on the bought node: start from the optimum with the one-GPU
    # job, whichever of the two the solver returned
    base = replace(found, values={**found.values, cand_var(cands[1]): 1.0,
                                  cand_var(cands[2]): 0.0})
    assert idle_gpus(table, rfq, base.values) == 1  # 3 x TP2 + the job on one GPU
    result = with_headroom(table, rfq, base, solver="highs")
    assert result.objective == base.objective
    assert round(result.values[cand_var(cands[2])]) == 1  # the two-GPU job
    room = headroom_records(table, rfq, base, result)
    assert set(room) == {"tune"}
    assert (room["tune"].unit, room["tune"].capacity, room["tune"].cheapest_capacity,
            room["tune"].gpus_added) == ("hours", 45.0, 80.0, 1)
    assert room["tune"].sized_for == rfq.workloads[1].planned_hours


def test_a_batch_job_moves_to_a_faster_layout_at_the_same_cost():
    """No GPU idle: a batch job on two 4-GPU replicas (6 requests/s) or one 8-GPU replica
    (8 requests/s) of the same node costs the same; the plan takes the faster layout and
    says what it gains over the cost optimum's."""
    from solver.optimize.solve import headroom_records

    n8 = node("s8", "a", 8, 8000)
    cands = [cand("corpus", "batch_inference", n8, 4, qps=3.0, tag="half"),
             cand("corpus", "batch_inference", n8, 8, qps=8.0, tag="whole")]
    table = table_of([n8], cands)
    rfq = rfq_of([spec("corpus", "batch_inference", qps=5.0)])
    found = run_mip(table, rfq)
    base = replace(found, values={**found.values, cand_var(cands[0]): 2.0,
                                  cand_var(cands[1]): 0.0})
    assert idle_gpus(table, rfq, base.values) == 0
    result = with_headroom(table, rfq, base, solver="highs")
    assert math.isclose(result.objective, base.objective, rel_tol=1e-12)
    assert round(result.values[cand_var(cands[1])]) == 1
    assert round(result.values[cand_var(cands[0])]) == 0
    room = headroom_records(table, rfq, base, result)["corpus"]
    assert (room.unit, room.capacity, room.cheapest_capacity, room.gpus_added) == (
        "requests/s", 8.0, 6.0, 0)


def test_a_batch_job_never_gives_up_speed_to_a_service():
    """Service replicas weigh 1.6 each (32 users of 20 planned), the batch job's fast
    layout 2.5 (5 of 2 requests/s) and its slow one 1.0: a third service replica plus the
    slow layout (5.8) would outscore the plan's two plus the fast one (5.7) on the same
    node. The job keeps its speed; the plan stays as it is."""
    n8 = node("s8", "a", 8, 8000)
    cands = [cand("chat", "inference", n8, 2, conc=32, tag="tp2"),
             cand("corpus", "batch_inference", n8, 2, qps=2.0, tag="slow"),
             cand("corpus", "batch_inference", n8, 4, qps=5.0, tag="fast")]
    table = table_of([n8], cands)
    rfq = rfq_of([spec("chat", "inference", concurrency=20),
                  spec("corpus", "batch_inference", qps=2.0)])
    found = run_mip(table, rfq)
    base = replace(found, values={**found.values, cand_var(cands[0]): 2.0,
                                  cand_var(cands[1]): 0.0, cand_var(cands[2]): 1.0})
    assert idle_gpus(table, rfq, base.values) == 0
    result = with_headroom(table, rfq, base, solver="highs")
    assert round(result.values[cand_var(cands[2])]) == 1  # the fast layout stays
    assert round(result.values[cand_var(cands[0])]) == 2


def test_batch_corpus_one_box_finishes_at_the_fastest_single_layout_or_better(catalog):
    """Brute-force bound on a shipped scenario: on the plan's own nodes, no single layout
    of the batch job filling them carries more requests/s than the plan, at the same cost
    as the cost-only optimum."""
    from pathlib import Path

    from solver.analysis.explain import solve_rfq
    from solver.optimize.candidates import build_candidates
    from solver.optimize.mip import node_var
    from solver.rfq.schema import load_rfq

    rfq = load_rfq(Path(__file__).parent.parent / "scenarios" / "batch-corpus-one-box.yaml",
                   catalog)
    table = build_candidates(rfq.catalog(catalog), rfq)
    cheapest = run_mip(table, rfq)
    plan = solve_rfq(rfq, catalog, explain=False, table=table)
    assert math.isclose(plan.cost.tco_usd, cheapest.objective, abs_tol=0.01)  # cents
    nodes = {key: round(cheapest.values.get(node_var(key), 0.0)) for key in table.node_types}
    (name,) = table.candidates
    best = 0.0
    for c in table.candidates[name]:
        count = nodes.get(c.node_type, 0)
        fits = (count // c.nodes_spanned if c.spanning
                else table.node_types[c.node_type].gpus * count // c.gpus)
        best = max(best, fits * c.qps_capacity)
    was = sum(c.qps_capacity * round(cheapest.values.get(cand_var(c), 0.0))
              for c in table.candidates[name])
    now = plan.workloads[0].predicted.qps_capacity  # rounded to 3 decimals in the plan
    assert now >= best * (1 - 1e-4)
    assert now >= was * (1 - 1e-4)  # never slower than the cost optimum's layouts
