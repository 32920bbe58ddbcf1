"""End-to-end solving on the real catalog: backends agree, time limits, explanations."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from solver.analysis.explain import counterfactuals, solve_rfq
from solver.optimize.backends import installed_backends
from solver.optimize.candidates import build_candidates
from solver.optimize.plan_model import Plan
from solver.physics.performance import estimate
from solver.rfq.schema import load_rfq, validate_rfq

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


@pytest.mark.parametrize("name", ["portfolio-lab.yaml", "finetune-70b-full-cluster.yaml",
                                  "api-throughput-replicas.yaml"])
def test_every_backend_finds_the_same_optimum(catalog, name):
    rfq = load_rfq(SCENARIOS / name, catalog)
    table = build_candidates(catalog, rfq)
    costs = {}
    for backend in installed_backends():
        plan = solve_rfq(rfq, catalog, solver=backend, table=table, explain=False).to_json()
        assert plan["status"] == "optimal", backend
        costs[backend] = plan["cost"]["tco_usd"]
    reference = costs["cbc"]
    for backend, cost in costs.items():
        assert cost == pytest.approx(reference, rel=1e-6), (backend, costs)


def test_time_limit_returns_a_plan(catalog):
    rfq = load_rfq(SCENARIOS / "portfolio-lab.yaml", catalog)
    plan = solve_rfq(rfq, catalog, time_limit=10.0).to_json()  # bounds candidates + MIP together
    assert plan["status"] in ("optimal", "feasible")
    assert plan["gap"] >= 0
    assert plan["cost"]["tco_usd"] > 0


def test_latency_is_reported_at_each_replicas_share_of_the_load(catalog):
    """Regression (issue 4): TPOT in the plan is at concurrency / replicas, not less."""
    rfq = validate_rfq({"id": "r", "constraints": {"gpus": ["rtx-pro-6000"]}, "workloads": [
        {"name": "chat", "kind": "inference", "model": "llama-3.1-8b", "precision": "fp8",
         "concurrency": 600, "input_tokens": 2000, "output_tokens": 400, "tpot_ms": 30}]},
        catalog)
    table = build_candidates(catalog, rfq)
    # several layouts tie at the optimum here (pp 1/2 on one 8-GPU box): a backend may return
    # one layout type or a mix of equal cost, so each layout used is checked at its share
    plan = solve_rfq(rfq, catalog, table=table, explain=False).to_json()
    entry = plan["workloads"][0]
    layouts = entry.get("layouts") or [{**entry, "replicas": entry["dp"]}]
    picks = []
    for used in layouts:
        cand = next(c for c in table.candidates["chat"] if c.layout.gpu == used["gpu"]
                    and c.layout.tp == used["tp"] and c.layout.pp == used["pp"]
                    and c.layout.gpus_per_node == used["gpus_per_node"]
                    and c.layout.precision == used["precision"])
        picks.append((cand, used["replicas"]))
    assert sum(n for _, n in picks) >= 2
    # replicas take the load in proportion to their capacity
    total = sum(c.concurrency_capacity * n for c, n in picks)
    worst = 0.0
    for cand, _ in picks:
        share = math.ceil(600 * cand.concurrency_capacity / total - 1e-9)
        assert share < 600  # each replica carries its share, not the whole load
        at_share = estimate(catalog, cand.layout,
                            replace(cand.estimate.workload, concurrency=share))
        worst = max(worst, at_share.predicted.tpot_ms)
    assert entry["predicted"]["tpot_ms"] == pytest.approx(worst, rel=0.02)
    assert entry["predicted"]["tpot_ms"] <= 30 + 1e-6


def test_counterfactual_two_small_boxes_cost_more_with_overhead(catalog):
    rfq = load_rfq(SCENARIOS / "one-box-not-two.yaml", catalog)
    table = build_candidates(catalog, rfq)
    plan = solve_rfq(rfq, catalog, table=table).to_json()
    alternatives = {a["alternative"]: a for a in counterfactuals(rfq, catalog, Plan.model_validate(plan), table)}
    four = alternatives["cheapest plan with 4-GPU boxes instead of 8-GPU boxes"]
    assert four["feasible"] and four["delta_usd"] > 0
    assert four["cluster"]["total_nodes"] == 2 and four["cluster"]["coupled"]
    assert "multi-node overhead" in four["why"]


def test_more_demand_never_costs_less(catalog):
    costs = []
    for concurrency in (8, 32, 128, 512):
        rfq = validate_rfq({"id": "r", "constraints": {"vendor": "kentino"}, "workloads": [
            {"name": "chat", "kind": "inference", "model": "qwen2.5-14b",
             "concurrency": concurrency, "input_tokens": 1000, "output_tokens": 200,
             "tpot_ms": 50}]}, catalog)
        costs.append(solve_rfq(rfq, catalog, explain=False).to_json()["cost"]["tco_usd"])
    assert costs == sorted(costs)


def test_tighter_deadline_never_costs_less(catalog):
    costs = []
    for deadline in (400, 100, 40, 20):
        rfq = validate_rfq({"id": "r", "constraints": {"vendor": "kentino"}, "workloads": [
            {"name": "tune", "kind": "lora", "model": "llama-3.1-70b", "precision": "bf16",
             "dataset_tokens": 300_000_000, "deadline_hours": deadline}]}, catalog)
        plan = solve_rfq(rfq, catalog, explain=False).to_json()
        assert plan["workloads"][0]["predicted"]["hours_to_complete"] <= deadline
        costs.append(plan["cost"]["tco_usd"])
    assert costs == sorted(costs)


def test_infeasible_deadline_names_the_deadline_that_could_be_met(catalog):
    rfq = validate_rfq({"id": "r", "constraints": {"vendor": "kentino", "max_nodes": 1},
                        "workloads": [{"name": "tune", "kind": "full_finetune",
                                       "model": "llama-3.1-8b", "dataset_tokens": 10**10,
                                       "deadline_hours": 1}]}, catalog)
    plan = solve_rfq(rfq, catalog).to_json()
    assert plan["status"] == "infeasible"
    closest = plan["infeasibility"]["closest"]["tune"]
    assert closest["deadline_hours"] > 1
    assert "deadline_hours" in plan["infeasibility"]["to_fix"]


def test_infeasible_model_names_gpus_that_fit(catalog):
    rfq = validate_rfq({"id": "r", "constraints": {"gpus": ["l4"], "max_nodes": 1},
                        "workloads": [{"name": "big", "kind": "full_finetune",
                                       "model": "llama-3.1-70b", "dataset_tokens": 10**6,
                                       "deadline_hours": 10000}]}, catalog)
    plan = solve_rfq(rfq, catalog).to_json()
    assert plan["status"] == "infeasible"
    info = plan["infeasibility"]
    assert info["reasons"] and info["to_fix"]
