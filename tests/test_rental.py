"""Buy or rent (issue 16): rental offers as catalog data, rented candidates in the MIP,
outputs, and known answers (short job rents, 24/7 service owns, forbid = today's plan,
brute force on a small instance, bad rental.csv rows exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from in_process import procure

from solver.analysis.explain import solve_rfq
from solver.catalog.load import load_catalog
from solver.catalog.rental_offers import COLUMNS
from solver.common.errors import InputError
from solver.optimize.candidates import build_candidates
from solver.optimize.linear import Constraint
from solver.optimize.mip import cand_var
from solver.optimize.plan_model import Plan
from solver.optimize.solve import run_mip
from solver.rfq.schema import validate_rfq

HEADER = ",".join(COLUMNS)
ROW = ("my-h100,h100-sxm,8,ib-ndr-400,on_demand,2.50,0,gpu-cloud,"
       "https://example.com/prices,2026-06")


def _rfq(catalog, workloads, **top):
    data = {"id": "rental-test", "horizon_years": 3, "rental": "allow", **top,
            "workloads": workloads}
    return validate_rfq(data, catalog, source="test")


SHORT_JOB = {"name": "tune", "kind": "lora", "model": "llama-3.1-8b",
             "dataset_tokens": 50_000_000, "deadline_hours": 48}
SERVICE = {"name": "chat", "kind": "inference", "model": "llama-3.1-70b",
           "concurrency": 256, "qps": 20, "input_tokens": 2000, "output_tokens": 400,
           "ttft_ms": 2000, "tpot_ms": 50}


def test_builtin_offers_are_sourced_and_dated(catalog):
    assert catalog.rental, "catalog/rental.csv ships offers"
    for offer in catalog.rental.values():
        assert offer.gpu in catalog.gpus and offer.fabric in catalog.fabrics
        assert offer.source.startswith("http") and len(offer.as_of) >= 4
        assert offer.usd_per_gpu_hour > 0
    gpus = {o.gpu for o in catalog.rental.values()}
    assert {"h100-sxm", "h200-sxm", "mi300x", "l40s", "l4", "rtx-pro-6000"} <= gpus
    types = {o.price_type for o in catalog.rental.values()}
    assert {"on_demand", "reserved_1y", "reserved_3y"} <= types


def test_short_job_rents_below_break_even(catalog):
    rfq = _rfq(catalog, [SHORT_JOB])
    plan = solve_rfq(rfq, catalog).to_json()
    work = plan["workloads"][0]
    assert work["sourcing"] == "rented"
    assert plan["cost"]["rental_usd"] > 0
    assert plan["cluster"]["total_nodes"] == 0
    row = plan["buy_vs_rent"][0]
    assert row["hours_used"] < row["breakeven_hours"]
    assert row["rented_usd"] < row["owned_usd"]
    rent = work["rental"][0]
    offer = catalog.rental[rent["offer"]]
    hours = work["predicted"]["hours_to_complete"]
    expected = rent["instances"] * offer.gpus_per_instance * offer.usd_per_gpu_hour * max(
        hours, offer.min_term_hours)
    rate = rent["instances"] * offer.gpus_per_instance * offer.usd_per_gpu_hour
    assert rent["usd"] == pytest.approx(expected, abs=rate * 0.005 + 0.01)  # hours to 0.01 h
    assert rent["usd"] == pytest.approx(rent["gpu_hours"] * offer.usd_per_gpu_hour, abs=0.01)


BUSY_SERVICE = {"name": "chat", "kind": "inference", "model": "llama-3.1-8b",
                "concurrency": 1024, "qps": 80, "input_tokens": 2000, "output_tokens": 400,
                "ttft_ms": 2000, "tpot_ms": 50, "target_utilization": 1.0}


def test_always_on_service_over_three_years_owns(catalog):
    """Seven RTX Pro 6000s busy 24/7 for three years: renting them by the hour costs more
    than owning an 8-GPU box (break-even well below 100 % utilisation)."""
    rfq = _rfq(catalog, [BUSY_SERVICE], constraints={"gpus": ["rtx-pro-6000"]})
    plan = solve_rfq(rfq, catalog).to_json()
    assert plan["status"] == "optimal"
    assert plan["workloads"][0]["sourcing"] == "owned"
    assert plan["cost"]["rental_usd"] == 0
    row = plan["buy_vs_rent"][0]
    assert row["owned_usd"] < row["rented_usd"]
    assert row["breakeven_utilization"] < 1.0  # owning wins above this share of the horizon


def _without_keys(plan):
    work = [{k: v for k, v in w.items() if k not in ("sourcing", "rental")}
            for w in plan["workloads"]]
    cost = {k: v for k, v in plan["cost"].items() if k != "rental_usd"}
    bom = {k: v for k, v in plan["bill_of_materials"].items() if k != "rental"}
    return plan["cluster"], work, cost, bom


@pytest.mark.parametrize("workloads", [[SHORT_JOB], [SERVICE, SHORT_JOB]])
def test_forbid_reproduces_the_buy_only_plan(catalog, workloads):
    no_offers = catalog.model_copy(update={"rental": {}})
    today = solve_rfq(_rfq(no_offers, workloads), no_offers).to_json()
    default = solve_rfq(validate_rfq({"id": "rental-test", "horizon_years": 3,
                                      "workloads": workloads}, catalog), catalog).to_json()
    assert _without_keys(default) == _without_keys(today)  # the default is forbid
    forbid = solve_rfq(_rfq(catalog, workloads, rental="forbid"), catalog).to_json()
    assert _without_keys(forbid) == _without_keys(today)
    assert forbid["cost"]["rental_usd"] == 0
    assert all(w["sourcing"] == "owned" for w in forbid["workloads"])


def test_only_rents_everything(catalog):
    plan = solve_rfq(_rfq(catalog, [SERVICE, SHORT_JOB], rental="only"), catalog).to_json()
    assert plan["status"] == "optimal"
    assert plan["cluster"]["total_nodes"] == 0
    assert {w["sourcing"] for w in plan["workloads"]} == {"rented"}
    bom = plan["bill_of_materials"]
    assert bom["rental"]["total_usd"] == pytest.approx(plan["cost"]["rental_usd"], abs=0.02)
    assert bom["tco_usd"] == pytest.approx(plan["cost"]["tco_usd"], abs=0.02)


def test_brute_force_small_instance(catalog):
    """One job: the MIP's optimum equals the cheapest of every option enumerated by hand
    (each rented option's cost from the offer row, with no storage bought - issue 28; each
    owned option re-solved alone, with its storage)."""
    rfq = _rfq(catalog, [SHORT_JOB], constraints={"gpus": ["h100-sxm", "l40s"]})
    table = build_candidates(catalog, rfq)
    cands = table.candidates["tune"]
    assert any(c.rented for c in cands) and any(not c.rented for c in cands)
    assert table.storage["tune"].usd > 0  # what the owned options buy and rented ones do not
    costs = []
    for cand in cands:
        if cand.rented:
            offer = catalog.rental[cand.rental.id]
            by_hand = cand.gpus * offer.usd_per_gpu_hour * max(cand.hours_to_complete,
                                                               offer.min_term_hours)
            assert cand.rental_usd == pytest.approx(by_hand)
            costs.append(by_hand)
        else:
            fixed = [Constraint("pick", {cand_var(cand): 1.0}, "==", 1.0)]
            solution = run_mip(table, rfq, extra=fixed)
            assert solution.status == "optimal"
            costs.append(solution.objective)
    best = run_mip(table, rfq)
    assert best.objective == pytest.approx(min(costs), rel=1e-6)


def test_rented_gpus_do_not_count_against_owned_limits(catalog):
    rfq = _rfq(catalog, [SHORT_JOB], constraints={"max_gpus": 1, "max_nodes": 1})
    plan = solve_rfq(rfq, catalog).to_json()
    assert plan["workloads"][0]["sourcing"] == "rented"
    assert plan["workloads"][0]["gpus"] > 1


def test_budget_counts_rental(catalog):
    plan = solve_rfq(_rfq(catalog, [SERVICE], rental="only", budget_usd=1000), catalog).to_json()
    assert plan["status"] == "infeasible"


def _overlay(tmp_path: Path, text: str) -> str:
    (tmp_path / "rental.csv").write_text(text)
    return str(tmp_path)


def test_overlay_replaces_and_adds_rows(tmp_path):
    builtin = load_catalog()
    first = next(iter(builtin.rental.values()))
    row = ROW + "\n" + ",".join([first.id, first.gpu, str(first.gpus_per_instance),
                                 first.fabric, first.price_type, "0.01",
                                 str(first.min_term_hours), first.provider_class,
                                 "https://example.com/quote", "2026-07"])
    cat = load_catalog(_overlay(tmp_path, HEADER + "\n" + row + "\n"))
    assert cat.rental["my-h100"].usd_per_gpu_hour == 2.5
    assert cat.rental[first.id].usd_per_gpu_hour == 0.01
    assert len(cat.rental) == len(builtin.rental) + 1


BAD_ROWS = [
    (HEADER + "\n" + ROW.replace("h100-sxm", "h999"), "line 2.gpu"),
    (HEADER + "\n" + ROW.replace("2.50", "cheap"), "line 2.usd_per_gpu_hour"),
    (HEADER + "\n" + ROW.replace("2.50", "-1"), "line 2.usd_per_gpu_hour"),
    (HEADER + "\n" + ROW.replace("on_demand", "spot"), "line 2.price_type"),
    (HEADER + "\n" + ROW.replace("ib-ndr-400", "warp"), "line 2.fabric"),
    (HEADER + "\n" + ROW.replace(",8,", ",3,"), "line 2.gpus_per_instance"),
    (HEADER + "\n" + ROW + "\n" + ROW, "line 3.offer_id"),
    (HEADER.replace(",as_of", "") + "\n" + ROW, "header"),
    (HEADER + "\n" + ROW + ",extra", "line 2"),
]


@pytest.mark.parametrize(("text", "where"), BAD_ROWS)
def test_bad_rental_rows_are_clean_errors(tmp_path, text, where):
    with pytest.raises(InputError) as info:
        load_catalog(_overlay(tmp_path, text + "\n"))
    message = str(info.value)
    assert "rental.csv" in message and where in message


def test_bad_rental_csv_exits_2(tmp_path):
    directory = _overlay(tmp_path, HEADER + "\n" + ROW.replace("h100-sxm", "h999") + "\n")
    result = procure("catalog", "validate", "--catalog", directory)
    assert result.returncode == 2
    assert "line 2.gpu" in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_rental_switch_is_validated(catalog):
    with pytest.raises(InputError):
        _rfq(catalog, [SHORT_JOB], rental="sometimes")


def test_reprice_follows_the_horizon_and_the_offer_price(catalog):
    """What-if/sensitivity reuse the candidates: a rented service's cost scales with the
    horizon, and a changed offer price reprices it."""
    from solver.analysis.whatif import reprice
    from solver.optimize.costs import CostParams

    rfq = _rfq(catalog, [BUSY_SERVICE], rental="only")
    table = build_candidates(catalog, rfq)
    longer = rfq.model_copy(update={"horizon_years": 6})
    again = reprice(table, catalog, longer)
    assert again.params == CostParams.from_catalog(catalog, 6)
    for old, new in zip(table.candidates["chat"], again.candidates["chat"], strict=True):
        assert new.rental_usd == pytest.approx(2 * old.rental_usd)
    offer = table.candidates["chat"][0].rental
    cheaper = catalog.model_copy(update={"rental": {
        **catalog.rental, offer.id: offer.model_copy(update={"usd_per_gpu_hour": 0.01})}})
    repriced = reprice(table, cheaper, rfq).candidates["chat"][0]
    assert repriced.rental_usd == pytest.approx(
        table.candidates["chat"][0].rental_usd * 0.01 / offer.usd_per_gpu_hour)


def test_schedule_is_one_period_bought_at_month_zero(catalog):
    plan = solve_rfq(_rfq(catalog, [BUSY_SERVICE, SHORT_JOB],
                          constraints={"gpus": ["rtx-pro-6000", "h100-sxm"]}), catalog).to_json()
    (period,) = plan["schedule"]
    assert period["start_month"] == 0 and period["months"] == 36
    assert period["nodes_bought"] == plan["cluster"]["total_nodes"]
    assert period["gpus_bought"] == plan["cluster"]["total_gpus"]
    assert period["capex_usd"] == plan["cost"]["capex_usd"]
    assert period["rental_usd"] == plan["cost"]["rental_usd"]
    assert {name: run["sourcing"] for name, run in period["runs"].items()} == {
        w["name"]: w["sourcing"] for w in plan["workloads"]}
    infeasible = solve_rfq(_rfq(catalog, [SERVICE], rental="only", budget_usd=1000), catalog).to_json()
    assert infeasible["schedule"] == []


def test_explain_asks_buy_or_rent_even_when_renting_is_forbidden(catalog):
    """The default RFQ forbids renting; explain still re-solves with rental: allow and says
    what renting would save (a one-off job) - and says nothing when renting is allowed."""
    from solver.analysis.explain import counterfactuals
    from solver.optimize.candidates import build_candidates

    rfq = _rfq(catalog, [SHORT_JOB], rental="forbid")
    table = build_candidates(catalog, rfq)
    plan = solve_rfq(rfq, catalog, table=table).to_json()
    assert plan["cost"]["rental_usd"] == 0
    alts = counterfactuals(rfq, catalog, Plan.model_validate(plan), table, "highs")
    rent = next(a for a in alts if "renting allowed" in a["alternative"])
    assert rent["delta_usd"] < 0 and "would save" in rent["why"]
    assert rent["tco_usd"] == pytest.approx(plan["cost"]["tco_usd"] + rent["delta_usd"])
    allowed = _rfq(catalog, [SHORT_JOB], rental="allow")
    table = build_candidates(catalog, allowed)
    plan = solve_rfq(allowed, catalog, table=table).to_json()
    assert not any("renting allowed" in a["alternative"]
                   for a in counterfactuals(allowed, catalog, Plan.model_validate(plan), table, "highs"))


def test_solve_prints_buy_or_rent_with_break_evens():
    """`procure solve` (not only explain) shows the buy/rent choice of a one-off job and
    where owning would start to win."""
    scenario = Path(__file__).resolve().parent.parent / "scenarios" / "rent-oneoff-jobs.yaml"
    result = procure("solve", str(scenario))
    assert result.returncode == 0, result.stderr
    block = result.stdout.split("Buy or rent (each workload alone)")[1]
    assert "chosen rented" in block and "break-even" in block
    assert "break-even horizon" in block and "months of 24/7 use" in block
