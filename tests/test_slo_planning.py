"""Serving SLOs under load (issue 10): utilisation headroom, n+1 redundancy, SLO margins,
the new RFQ fields' errors and `procure estimate --qps/--engine/--percentile`.

Every check is a property of the plan the solver returns (capacity recounted from the
plan's own placement, margins recomputed from their parts), never a stored figure.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml
from bom_checks import assert_valid_placement
from in_process import procure

from solver.analysis.explain import solve_rfq
from solver.optimize.candidates import build_candidates
from solver.optimize.costs import CostParams, NodeCost
from solver.optimize.mip import planned_demand
from solver.optimize.placement import place
from solver.optimize.plan import chosen, cost_breakdown
from solver.optimize.plan_model import Plan
from solver.optimize.records import Candidate, CandidateTable, NodeType
from solver.optimize.solve import run_mip
from solver.physics.layout import Estimate, Layout, MemoryBreakdown, Prediction, Workload
from solver.rfq.schema import Rfq, validate_rfq

ROOT = Path(__file__).resolve().parent.parent


def chat_rfq(catalog, **fields):
    """A small online workload (an 8B model, a few replicas) with the given serving fields."""
    workload = {"name": "chat", "kind": "inference", "model": "llama-3.1-8b",
                "precision": "fp8", "concurrency": 200, "qps": 6, "input_tokens": 1500,
                "output_tokens": 300, "ttft_ms": 1500, "tpot_ms": 40, **fields}
    return validate_rfq({"id": "slo-test", "constraints": {"vendor": "kentino"},
                         "workloads": [workload]}, catalog)


def solved(catalog, rfq):
    """(plan, table) of an RFQ, solved with an explicit candidate table."""
    table = build_candidates(catalog, rfq)
    plan = solve_rfq(rfq, catalog, table=table, explain=False).to_json()
    assert plan["status"] == "optimal", plan["infeasibility"]
    return plan, table


def group_capacity(table: CandidateTable, workload: str) -> dict[str, Candidate]:
    """Candidate of every placement group id prefix (``name#replica``) of one workload."""
    return {c.name: c for c in table.candidates[workload]}


def capacity_from_placement(plan, table, workload: str, down: str | None = None
                            ) -> tuple[float, float]:
    """Concurrency and requests/s of a workload's replicas in the plan's placement, without
    the groups that touch node ``down`` (a spanning replica dies with any of its nodes)."""
    by_name = group_capacity(table, workload)
    groups, lost = set(), set()
    for node in plan["placement"]:
        for run in node["runs"]:
            if run["workload"] != workload:
                continue
            groups.add(run["group"])
            if node["node"] == down:
                lost.add(run["group"])
    alive = [by_name[g.rsplit("#", 1)[0]] for g in groups - lost]
    return (sum(c.concurrency_capacity for c in alive), sum(c.qps_capacity for c in alive))


# --- (a) utilisation headroom -------------------------------------------------------------

def test_capacity_bought_covers_demand_over_target_utilization(catalog):
    costs = []
    for util in (1.0, 0.8, 0.5):
        rfq = chat_rfq(catalog, target_utilization=util)
        plan, table = solved(catalog, rfq)
        conc, qps = capacity_from_placement(plan, table, "chat")
        assert conc >= 200 / util - 1e-6 and qps >= 6 / util - 1e-6
        entry = plan["workloads"][0]
        assert entry["utilization"] == pytest.approx(max(200 / conc, 6 / qps), abs=1e-3)
        assert entry["utilization"] <= util + 1e-3
        costs.append(plan["cost"]["tco_usd"])
    # less utilisation allowed -> at least as much bought (the feasible set only shrinks)
    assert costs == sorted(costs)


def test_lower_target_utilization_never_buys_less_capacity_than_it_needs(catalog):
    """Capacity bought at each utilisation is at least what every higher utilisation needs
    (demand / u is decreasing in u), and the plan's own statement agrees."""
    bought = {}
    for util in (0.9, 0.6, 0.3):
        plan, table = solved(catalog, chat_rfq(catalog, target_utilization=util))
        bought[util] = capacity_from_placement(plan, table, "chat")
    for low in bought:
        for high in bought:
            if low < high:
                assert bought[low][0] >= 200 / high and bought[low][1] >= 6 / high


# --- (b) n+1 -----------------------------------------------------------------------------

def assert_survives_any_node_down(plan, table, spec):
    need = planned_demand(spec)
    for node in plan["placement"]:
        conc, qps = capacity_from_placement(plan, table, spec.name, down=node["node"])
        assert conc >= need.concurrency - 1e-6, (node["node"], conc, need)
        assert qps >= need.qps - 1e-6, (node["node"], qps, need)


@pytest.mark.parametrize("fields", [
    {"redundancy": "n+1"},
    {"redundancy": "n+1", "target_utilization": 0.6, "slo_percentile": 99},
    {"redundancy": "n+1", "model": "llama-3.1-70b", "concurrency": 32, "qps": 1},
])
def test_n_plus_1_plan_meets_demand_with_any_node_down(catalog, fields):
    rfq = chat_rfq(catalog, **fields)
    plan, table = solved(catalog, rfq)
    assert_valid_placement(plan)
    assert plan["cluster"]["total_nodes"] >= 2
    assert_survives_any_node_down(plan, table, rfq.workloads[0])
    spare = plan["workloads"][0]["n_plus_1"]
    worst = min(capacity_from_placement(plan, table, "chat", down=n["node"])
                for n in plan["placement"])
    assert spare["concurrency_one_node_down"] == pytest.approx(worst[0], abs=1e-3)
    # the same RFQ without n+1 costs no more
    plain = chat_rfq(catalog, **{**fields, "redundancy": "none"})
    cheaper, _ = solved(catalog, plain)
    assert cheaper["cost"]["tco_usd"] <= plan["cost"]["tco_usd"] + 1e-6


def test_explain_prices_the_n_plus_1_insurance(catalog):
    from solver.analysis.explain import counterfactuals

    rfq = chat_rfq(catalog, redundancy="n+1")
    plan, table = solved(catalog, rfq)
    alternatives = counterfactuals(rfq, catalog, Plan.model_validate(plan), table, "highs")
    insurance = [a for a in alternatives if "n+1" in a["alternative"]]
    assert len(insurance) == 1 and insurance[0]["feasible"]
    assert insurance[0]["delta_usd"] <= 0
    assert "n+1" in insurance[0]["why"]


# a synthetic instance: several candidates of one workload on two node types (in-node
# replicas of different sizes mix on one node, which the n+1 bound must cover)
PARAMS = CostParams(horizon_years=3, electricity_usd_per_kwh=0.12, pue=1.4, load_factor=0.7,
                    operations_usd_per_node_year=8000, node_engineering_usd_per_year=15000,
                    multinode_overhead_factor=4.5, shared_storage_usd=25000,
                    shared_storage_usd_per_node=3000, rack_unit_usd_per_year=300,
                    frontend_switch_usd=3000, frontend_ports_per_switch=48,
                    frontend_ports_per_node=1, frontend_cable_usd=50)
MEM = MemoryBreakdown(1, 0, 0, 0, 1, 96, 0.01, 0.01)


def _node(gpus: int, price: float) -> NodeType:
    cost = NodeCost(gpus_usd=gpus * price, server_usd=20000 + 1000 * gpus,
                    power_usd=gpus * 1500.0, operations_usd=70000.0, power_kw=0.6 * gpus + 1,
                    rack_units=4)
    return NodeType("srv", f"g{gpus}", gpus, cost)


def _cand(nt: NodeType, gpus: int, conc: float, qps: float, nodes: int = 1) -> Candidate:
    layout = Layout(model="m", gpu=nt.gpu, precision="fp8", tp=gpus, gpus_per_node=nt.gpus)
    est = Estimate(layout, Workload(kind="inference"), True, True, MEM,
                   Prediction(tokens_per_s=100.0, tokens_per_s_per_gpu=100.0 / gpus))
    return Candidate("w", "inference", nt.key, layout, est, gpus, nodes, "none", 0.0, conc,
                     qps, name=f"w|{nt.key}|{gpus}|{nodes}")


@pytest.mark.parametrize("seed", range(12))
def test_n_plus_1_formulation_on_mixed_candidates(seed):
    rng = random.Random(seed)
    n8, n4 = _node(8, rng.choice([3000, 8000])), _node(4, rng.choice([3000, 8000]))
    cands = [_cand(n8, g, conc=g * rng.uniform(5, 15), qps=g * rng.uniform(0.2, 1.0))
             for g in (1, 2, 4)]
    cands += [_cand(n4, g, conc=g * rng.uniform(5, 15), qps=g * rng.uniform(0.2, 1.0))
              for g in (1, 4)]
    table = CandidateTable({n8.key: n8, n4.key: n4}, {}, {"w": cands}, PARAMS, {})
    base = dict(name="w", kind="inference", model="m", input_tokens=1000, output_tokens=100,
                concurrency=rng.choice([10, 40, 120]), qps=rng.choice([None, 3.0]),
                target_utilization=rng.choice([1.0, 0.8, 0.5]))
    costs = {}
    for redundancy in ("none", "n+1"):
        rfq = Rfq.model_validate({"id": "t", "workloads": [dict(base, redundancy=redundancy)]})
        spec = rfq.workloads[0]
        solution = run_mip(table, rfq, solver="highs")
        assert solution.status == "optimal"
        costs[redundancy] = cost_breakdown(table, solution.values)["tco_usd"]
        if redundancy == "n+1":
            nodes = {k: round(solution.values.get(f"N[{k}]", 0.0)) for k in table.node_types}
            plan = {"placement": place(table, nodes, chosen(table, solution))}
            assert_survives_any_node_down(plan, table, spec)
    assert costs["none"] <= costs["n+1"] + 1e-6


# --- (c) bad values exit 2 through the command line ---------------------------------------



@pytest.mark.parametrize("field, value", [
    ("engine", "tgi"), ("slo_percentile", 80), ("slo_percentile", "p90"),
    ("target_utilization", 0), ("target_utilization", 1.5), ("target_utilization", True),
    ("redundancy", "n+2"), ("redundancy", 1),
])
def test_bad_serving_fields_exit_2(tmp_path, field, value):
    workload = {"name": "chat", "kind": "inference", "model": "llama-3.1-8b",
                "concurrency": 8, "input_tokens": 100, "output_tokens": 100, field: value}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"id": "bad", "workloads": [workload]}))
    result = procure("solve", str(path))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert f"workloads[0].{field}" in result.stderr and str(path) in result.stderr


def test_batch_inference_takes_an_engine_but_no_slo_fields(tmp_path, catalog):
    batch = {"name": "b", "kind": "batch_inference", "model": "llama-3.1-8b",
             "requests": 1000, "input_tokens": 100, "output_tokens": 100,
             "deadline_hours": 10, "engine": "sglang"}
    rfq = validate_rfq({"id": "b", "workloads": [batch]}, catalog)
    assert rfq.workloads[0].engine == "sglang"
    path = tmp_path / "batch.yaml"
    path.write_text(yaml.safe_dump({"id": "b", "workloads": [{**batch, "redundancy": "n+1"}]}))
    assert procure("validate", str(path)).returncode == 2


# --- (d) margins --------------------------------------------------------------------------

def test_margins_are_consistent(catalog):
    rfq = chat_rfq(catalog, slo_percentile=95, redundancy="n+1")
    plan, _ = solved(catalog, rfq)
    margins = plan["workloads"][0]["margins"]
    assert set(margins) == {"ttft_ms", "tpot_ms"}
    for metric, m in margins.items():
        assert m["slo"] == metric.removesuffix("_ms") and m["percentile"] == 95
        assert m["target_ms"] == getattr(rfq.workloads[0], metric)
        assert m["margin"] == pytest.approx(1 - m["predicted_ms"] / m["target_ms"], abs=1e-3)
        assert m["predicted_ms"] <= m["target_ms"] and m["met"]
        assert m["basis"] in ("p95", "median")


def test_margins_only_for_stated_slos_and_shown_in_terminal(catalog):
    rfq = chat_rfq(catalog, tpot_ms=None)
    plan, _ = solved(catalog, rfq)
    assert set(plan["workloads"][0]["margins"]) == {"ttft_ms"}
    result = procure("solve", str(ROOT / "scenarios" / "chat-n-plus-1.yaml"))
    assert result.returncode == 0
    assert "TTFT" in result.stdout and "margin" in result.stdout
    assert "n+1" in result.stdout and "utilization" in result.stdout


# --- (e) estimate --qps --engine --percentile ---------------------------------------------

@pytest.mark.parametrize("args", [
    ("--qps", "4", "--engine", "sglang", "--percentile", "99"),
    ("--concurrency", "8", "--engine", "trtllm", "--percentile", "50"),
    ("--qps", "0.5",),
])
def test_estimate_serving_load_options(args):
    result = procure("estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "1",
                     "--kind", "inference", "--ttft-ms", "2000", "--tpot-ms", "50", *args,
                     "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    for key in ("ttft_ms", "tpot_ms", "ttft_ms_p90", "ttft_ms_p99", "tpot_ms_p90",
                "tpot_ms_p99", "ttft_ms_slo", "tpot_ms_slo"):
        assert key in data["predicted"]
    given = dict(zip(args[::2], args[1::2], strict=True))
    assert data["load"]["engine"] == given.get("--engine", "vllm")
    assert data["load"]["percentile"] == int(given.get("--percentile", 90))
    if "--qps" in given:
        assert data["load"]["qps"] == float(given["--qps"])
    plain = procure("estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "1",
                    "--kind", "inference", *args)
    assert plain.returncode == 0 and "Traceback" not in plain.stderr


@pytest.mark.parametrize("args", [
    ("--engine", "tgi"), ("--percentile", "80"), ("--qps", "0"), ("--qps", "-1"),
    ("--qps", "2", "--concurrency", "4"), ("--qps", "nan"),
])
def test_estimate_bad_serving_load_exits_2(args):
    result = procure("estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "1",
                     "--kind", "inference", *args)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
