"""Issue 28: every binding constraint of a plan with the price of its next relaxation,
found by re-solving - checked here against independent solves of the relaxed RFQs."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
import yaml

from solver.analysis.explain import solve_rfq
from solver.report.quote import quote_context
from solver.rfq.schema import validate_rfq


def _rag(ttft_ms: float, vendor: str = "kentino") -> dict:
    """A 72B RAG service with 24k-token prompts (the issue's SLO-dominated case)."""
    return {"id": "rag", "constraints": {"vendor": vendor},
            "workloads": [{"name": "rag", "kind": "inference", "model": "qwen2.5-72b",
                           "concurrency": 32, "input_tokens": 24000, "output_tokens": 300,
                           "ttft_ms": ttft_ms, "tpot_ms": 80}]}


def _tco(catalog, data) -> float:
    plan = solve_rfq(validate_rfq(data, catalog), catalog, explain=False)
    assert plan.status == "optimal"
    return plan.cost.tco_usd


@pytest.fixture(scope="module")
def rag_plan(catalog):
    return solve_rfq(validate_rfq(_rag(5000), catalog), catalog, binding=True)


def test_issue_28_an_slo_dominated_plan_names_the_slo_and_its_saving(catalog, rag_plan):
    base = rag_plan.cost.tco_usd
    by_name = {b.constraint: b for b in rag_plan.binding}
    ttft = by_name["workloads.rag.ttft_ms"]
    assert ttft.kind == "slo" and ttft.relaxed_to == "10000 ms"
    assert ttft.saving_usd == pytest.approx(base - _tco(catalog, _rag(10000)), abs=0.02)
    assert ttft.saving_usd > 0.5 * base  # the SLO dominates the cost
    vendor = by_name["constraints.vendor"]
    assert vendor.saving_usd == pytest.approx(base - _tco(catalog, _rag(5000, "open")),
                                              abs=0.02)
    savings = [b.saving_usd for b in rag_plan.binding]
    assert savings == sorted(savings, reverse=True) and min(savings) >= 1.0
    # TPOT 80 ms: doubling it buys nothing cheaper, so it is not listed
    tpot_loose = copy.deepcopy(_rag(5000))
    tpot_loose["workloads"][0]["tpot_ms"] = 160
    if "workloads.rag.tpot_ms" not in by_name:
        assert _tco(catalog, tpot_loose) == pytest.approx(base, abs=0.5)


def test_issue_28_quote_shows_the_relaxation_and_its_saving(catalog, rag_plan):
    rfq = validate_rfq(_rag(5000), catalog)
    context = quote_context(rag_plan, rfq, catalog)
    # issue 32: the quote names the SLO in words, not by its RFQ field (ttft_ms)
    line = next(line for line in context["binding"] if "time to first token" in line)
    saving = next(b for b in rag_plan.binding if b.constraint.endswith("ttft_ms")).saving_usd
    assert "10000 ms" in line and f"${saving:,.0f}" in line


def test_issue_28_explain_leads_with_the_dominant_constraint(tmp_path):
    path = tmp_path / "rag.yaml"
    path.write_text(yaml.safe_dump(_rag(5000)))
    result = subprocess.run([sys.executable, "-m", "solver.cli.main", "explain", str(path)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()  # issue 32: wrapped at the width, indented
    first = " ".join(ln.strip() for ln in lines[:2])
    assert first.startswith("Dominant constraint:") and "binds" in first and "saves $" in first


def test_issue_28_power_binding_names_the_stated_limit(catalog):
    data = {"id": "p", "constraints": {"vendor": "open", "max_power_kw": 10},
            "workloads": [{"name": "chat", "kind": "inference", "model": "llama-3.1-8b",
                           "precision": "fp8", "concurrency": 1200, "input_tokens": 2000,
                           "output_tokens": 400, "ttft_ms": 3000, "tpot_ms": 60,
                           # aggregated: the power limit binds (cheaper disaggregated units,
                           # 9 GPUs at 7.9 kW, fit within it: then nothing about power binds)
                           "disaggregated": False}]}
    plan = solve_rfq(validate_rfq(data, catalog), catalog, binding=True)
    power = next(b for b in plan.binding if b.constraint == "constraints.max_power_kw")
    lifted = copy.deepcopy(data)
    del lifted["constraints"]["max_power_kw"]
    lifted_plan = solve_rfq(validate_rfq(lifted, catalog), catalog, explain=False)
    assert power.saving_usd == pytest.approx(plan.cost.tco_usd - lifted_plan.cost.tco_usd,
                                             abs=0.02)
    needed = lifted_plan.cluster.power_kw / 0.8  # the circuit that carries it at 80 %
    assert power.relaxed_to.startswith(f"{needed:,.1f} kW")


def test_issue_28_every_plan_json_has_binding_empty_when_nothing_binds(tmp_path):
    """A small chat service with loose SLOs and no limits: nothing binds, the list is
    empty (not missing)."""
    data = {"id": "loose", "workloads": [{"name": "chat", "kind": "inference",
                                           "model": "llama-3.1-8b", "precision": "fp8",
                                           "concurrency": 4, "input_tokens": 500,
                                           "output_tokens": 100, "ttft_ms": 60000,
                                           "tpot_ms": 1000}]}
    path = tmp_path / "loose.yaml"
    path.write_text(yaml.safe_dump(data))
    result = subprocess.run([sys.executable, "-m", "solver.cli.main", "solve", str(path),
                             "--json"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["binding"] == []


def _racked(facility: dict) -> dict:
    return {"id": "r", "constraints": {"vendor": "open"}, "facility": facility,
            "workloads": [{"name": "chat", "kind": "inference", "model": "llama-3.1-8b",
                           "precision": "fp8", "concurrency": 1200, "input_tokens": 2000,
                           "output_tokens": 400, "ttft_ms": 3000, "tpot_ms": 60}]}


def test_issue_28_facility_racks_binding_is_priced_by_lifting_them(catalog):
    """One 10 kW rack (8 kW continuous): the racks bind; lifting them is re-solved and its
    saving equals an independent solve without racks; the racks that plan fills are named
    (its power over 8 kW per rack, rounded up). A power cap that comes from the racks alone
    is not a max_power_kw entry (it crashed before)."""
    data = _racked({"max_kw_per_rack": 10, "racks": 1})
    plan = solve_rfq(validate_rfq(data, catalog), catalog, binding=True)
    assert plan.status == "optimal" and plan.cluster.power_kw <= 8.0
    racks = next(b for b in plan.binding if b.constraint == "facility.racks")
    assert not [b for b in plan.binding if b.constraint == "constraints.max_power_kw"]
    lifted = solve_rfq(validate_rfq(_racked({"max_kw_per_rack": 10}), catalog), catalog,
                       explain=False)
    assert racks.kind == "racks" and racks.value == "1 rack"
    assert racks.saving_usd == pytest.approx(plan.cost.tco_usd - lifted.cost.tco_usd, abs=0.02)
    assert racks.saving_usd >= 1.0
    filled = -(-lifted.cluster.power_kw // 8.0)
    assert filled > 1 and racks.relaxed_to.startswith(f"{filled:g} racks")


def test_issue_28_a_rack_limit_that_keeps_nodes_out_is_priced(catalog):
    """max_kw_per_rack 6 (4.8 kW continuous) keeps the 6.2 kW 8-GPU node out: lifting it
    (the whole RFQ rebuilt) saves what an independent solve without it saves."""
    data = _racked({"max_kw_per_rack": 6})
    plan = solve_rfq(validate_rfq(data, catalog), catalog, binding=True)
    entry = next(b for b in plan.binding if b.constraint == "facility.max_kw_per_rack")
    free = solve_rfq(validate_rfq(_racked({}), catalog), catalog, explain=False)
    assert entry.kind == "racks" and entry.value == "6 kW"
    assert entry.saving_usd == pytest.approx(plan.cost.tco_usd - free.cost.tco_usd, abs=0.02)


def test_issue_31_scope_rfq_prices_the_rfq_constraints_and_says_what_it_left_out(
        catalog, rag_plan):
    """A large portfolio re-solves ~two MIPs per workload for its binding list; scope 'rfq'
    (auto above BINDING_AUTO_MAX_WORKLOADS workloads) keeps the RFQ-level entries - the same
    ones, at the same savings - leaves each workload's own out and warns."""
    from solver.analysis.binding import BINDING_AUTO_MAX_WORKLOADS, prices_workloads

    rfq = validate_rfq(_rag(5000), catalog)
    short = solve_rfq(rfq, catalog, binding=True, binding_scope="rfq")
    full = {b.constraint: b.saving_usd for b in rag_plan.binding}
    kept = {b.constraint: b.saving_usd for b in short.binding}
    assert "workloads.rag.ttft_ms" in full and not any(c.startswith("workloads.") for c in kept)
    assert kept == {c: s for c, s in full.items() if not c.startswith("workloads.")}
    assert kept  # the vendor entry stays
    assert any("--binding all" in w for w in short.warnings)
    assert not any("--binding all" in w for w in rag_plan.warnings)
    many = rfq.model_copy(update={"workloads": rfq.workloads * (BINDING_AUTO_MAX_WORKLOADS + 1)})
    assert prices_workloads(rfq, "auto") and not prices_workloads(many, "auto")
    assert prices_workloads(many, "all") and not prices_workloads(rfq, "rfq")


def test_issue_27_keeping_a_moe_workload_aggregated_binds_with_the_disaggregated_saving(
        catalog):
    """The rack scenario with disaggregation left off (the default): the binding list
    prices allowing it, and the saving equals an independent solve with it allowed. A
    dense model's workload gets no such entry, even where disaggregating would save
    (api-throughput-replicas): no measured pool checks a dense model's disaggregated
    estimate."""
    from tests.test_scenarios import SCENARIOS

    rack = yaml.safe_load((SCENARIOS / "deepseek-r1-rack.yaml").read_text())
    kept = copy.deepcopy(rack)
    kept["workloads"][0]["disaggregated"] = False
    plan = solve_rfq(validate_rfq(kept, catalog), catalog, binding=True)
    by_name = {b.constraint: b for b in plan.binding}
    entry = by_name["workloads.r1.disaggregated"]
    assert entry.kind == "serving_mode" and entry.relaxed_to.startswith("true")
    allowed = _tco(catalog, rack)
    assert entry.relaxed_cost_usd == pytest.approx(allowed, abs=0.02)
    assert entry.saving_usd == pytest.approx(plan.cost.tco_usd - allowed, abs=0.02)
    assert entry.saving_usd > 0
    # in the quote, in words
    context = quote_context(plan, validate_rfq(kept, catalog), catalog)
    line = next(x for x in context["binding"] if "disaggregation" in x)
    assert "prefill/decode disaggregation = false" in line and "disaggregated =" not in line
    dense = yaml.safe_load((SCENARIOS / "api-throughput-replicas.yaml").read_text())
    dense_plan = solve_rfq(validate_rfq(dense, catalog), catalog, binding=True)
    assert not any(b.kind == "serving_mode" for b in dense_plan.binding or [])
