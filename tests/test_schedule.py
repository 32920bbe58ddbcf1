"""Demand over time (issue 16): periods / growth_per_year, the phased purchase schedule,
renting to bridge a peak, and the RFQ form's errors."""

from __future__ import annotations

import pytest

from solver.analysis.explain import solve_rfq
from solver.common.errors import InputError
from solver.rfq.schema import validate_rfq

CHAT = {"name": "chat", "kind": "inference", "model": "llama-3.1-8b", "input_tokens": 2000,
        "output_tokens": 400, "ttft_ms": 2000, "tpot_ms": 50}


def _rfq(catalog, chat, **top):
    data = {"id": "phased", "horizon_years": 3, "constraints": {"gpus": ["rtx-pro-6000"]},
            **top, "workloads": [{**CHAT, **chat}]}
    return validate_rfq(data, catalog, source="test")


def test_growth_expands_into_yearly_periods_and_the_peak(catalog):
    rfq = _rfq(catalog, {"concurrency": 256, "qps": 20, "growth_per_year": 1.0})
    work = rfq.workloads[0]
    assert [p.months for p in work.periods] == [12, 12, 12]
    assert [p.qps for p in work.periods] == [40, 80, 160]  # each year's end value
    assert work.qps == 160 and work.concurrency == 2048


def test_growth_makes_a_two_step_purchase_cheaper_than_buying_now(catalog):
    plan = solve_rfq(_rfq(catalog, {"concurrency": 256, "qps": 20, "growth_per_year": 1.0}),
                     catalog).to_json()
    bought = [p["nodes_bought"] for p in plan["schedule"]]
    assert bought[0] >= 1 and sum(bought[1:]) >= 1  # a second purchase later
    phasing = plan["phasing"]
    assert phasing["saving_usd"] > 0
    assert phasing["tco_usd"] < phasing["buy_all_now_tco_usd"]
    # buying everything at month 0 is exactly the plan solved for the peak demand
    assert phasing["buy_all_now_tco_usd"] == pytest.approx(plan["cost"]["tco_usd"], abs=0.02)
    assert [p["start_month"] for p in plan["schedule"]] == [0, 12, 24]
    assert {"start_month", "months", "nodes_bought", "gpus_bought", "capex_usd",
            "rental_usd"} <= set(plan["schedule"][0])


def test_schedule_costs_add_up_to_the_phased_total(catalog):
    """Recount the phased TCO from the schedule: capex per period, each bought node's
    power and operations from its purchase to the horizon, rental."""
    from solver.optimize.candidates import build_candidates

    rfq = _rfq(catalog, {"concurrency": 256, "qps": 20, "growth_per_year": 1.0})
    plan = solve_rfq(rfq, catalog).to_json()
    table = build_candidates(catalog, rfq)
    total = 0.0
    for period in plan["schedule"]:
        total += period["capex_usd"] + period["rental_usd"]
        for key, count in period["node_types_bought"].items():
            node = table.node_types[key].cost
            per_year = (node.power_usd + node.operations_usd) / rfq.horizon_years
            total += count * per_year * (36 - period["start_month"]) / 12
    assert total == pytest.approx(plan["phasing"]["tco_usd"], abs=1.0)


def test_renting_bridges_a_short_peak(catalog):
    # at full utilisation the later demand fills whole owned nodes (no remainder to rent)
    chat = {"periods": [{"months": 3, "concurrency": 2048, "qps": 160},
                        {"months": 33, "concurrency": 512, "qps": 40}],
            "target_utilization": 1.0}
    plan = solve_rfq(_rfq(catalog, chat, rental="allow"), catalog).to_json()
    first, later = plan["schedule"]
    assert first["runs"]["chat"]["rented_gpus"] > 0 and first["rental_usd"] > 0
    assert later["runs"]["chat"]["rented_gpus"] == 0
    assert later["start_month"] == 3 and later["months"] == 33
    forbid = solve_rfq(_rfq(catalog, chat), catalog).to_json()
    # buying only, the peak must be bought at month 0: phasing does not pay, so the plan
    # says so and keeps one period (issue 29: buy-all-now is the headline plan itself)
    assert "phasing" not in forbid and len(forbid["schedule"]) == 1
    assert any("costs no less than buying everything now" in w for w in forbid["warnings"])
    assert plan["phasing"]["tco_usd"] < forbid["cost"]["tco_usd"]


def test_without_periods_the_schedule_is_one_period(catalog):
    plan = solve_rfq(_rfq(catalog, {"concurrency": 256}), catalog).to_json()
    assert len(plan["schedule"]) == 1 and "phasing" not in plan


@pytest.mark.parametrize(("chat", "words"), [
    ({"concurrency": 8, "growth_per_year": 0.5, "periods": [{"months": 12, "qps": 1}]},
     "not both"),
    ({"periods": [{"months": 12}]}, "concurrency or qps"),
    ({"periods": [{"months": 0, "qps": 1}]}, "months"),
    ({"concurrency": 8, "growth_per_year": -0.95}, "growth_per_year"),
])
def test_bad_demand_over_time_is_a_clean_error(catalog, chat, words):
    with pytest.raises(InputError) as info:
        _rfq(catalog, chat)
    assert words in str(info.value)


def test_each_period_lists_what_it_buys_and_the_lines_add_up(catalog):
    """The schedule is a bill of materials per period: node types at that period's
    (declined) price, front-end cables and switches; the lines add up to the period's
    capex, and later periods pay less per node of the same type."""
    plan = solve_rfq(_rfq(catalog, {"concurrency": 256, "qps": 20, "growth_per_year": 1.0}),
                     catalog).to_json()
    schedule = plan["schedule"]
    assert len(schedule) >= 2
    unit: dict[str, list[float]] = {}
    for period in schedule:
        total = sum(line["total_usd"] for line in period["lines"])
        assert total == pytest.approx(period["capex_usd"], abs=0.05 * max(1, len(period["lines"])))
        for line in period["lines"]:
            assert line["total_usd"] == pytest.approx(line["qty"] * line["unit_usd"], abs=0.05)
            if line["item"] in period["node_types_bought"]:
                assert line["qty"] == period["node_types_bought"][line["item"]]
                unit.setdefault(line["item"], []).append(line["unit_usd"])
    assert any(len(prices) > 1 for prices in unit.values()) or len(unit) > 1
    for prices in unit.values():
        assert prices == sorted(prices, reverse=True)


@pytest.mark.parametrize("lan_ports", [0, 2, 4])
def test_phased_front_end_switch_only_once_the_site_lan_is_outgrown_issue_28(catalog,
                                                                             lan_ports):
    """Issue 28, phased: no front-end switch while the nodes owned so far fit the site's free
    LAN ports; from the period they outgrow them, enough 48-port switches for all of them
    (bought when needed: later is cheaper)."""
    rfq = _rfq(catalog, {"concurrency": 256, "qps": 20, "growth_per_year": 1.0},
               facility={"lan_ports": lan_ports})
    plan = solve_rfq(rfq, catalog).to_json()
    assert len(plan["schedule"]) >= 2
    ports_per_node = int(catalog.costs.frontend_ports_per_node.value)
    nodes = switches = 0
    for period in plan["schedule"]:
        nodes += period["nodes_bought"]
        switches += sum(line["qty"] for line in period["lines"]
                        if line["item"] == "frontend-switch")
        ports = ports_per_node * nodes
        assert switches == (0 if ports <= lan_ports else -(-ports // 48)), period
