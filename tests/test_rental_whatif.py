"""Buy or rent (issue 16): the residual value of a one-off job's hardware, the break-even
horizon, and what-if sweeps of the rental price and of demand growth - known answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from in_process import procure

from solver.analysis.explain import solve_rfq
from solver.analysis.whatif import parse_sweep, sweep, with_growth
from solver.catalog.load import load_catalog
from solver.common.errors import InputError
from solver.optimize.candidates import build_candidates
from solver.optimize.costs import CostParams
from solver.optimize.plan_model import BuyVsRent
from solver.optimize.rental import (
    buy_vs_rent,
    cumulative_costs,
    residual_params,
    residual_value_usd,
)
from tests.test_rental import BUSY_SERVICE, SHORT_JOB, _rfq

ROOT = Path(__file__).resolve().parent.parent
HOURS_PER_MONTH = 730.0


# --------------------------------------------------------------------------- residual value
def test_residual_value_formula_known_answers():
    # capex × fraction × (1 − decline)^(months/12)
    assert residual_value_usd(100_000, 0, 0.7, 0.21) == pytest.approx(70_000)
    assert residual_value_usd(100_000, 12, 0.7, 0.21) == pytest.approx(55_300)
    assert residual_value_usd(100_000, 24, 0.5, 0.0) == pytest.approx(50_000)
    assert residual_value_usd(100_000, -5, 0.7, 0.21) == pytest.approx(70_000)


def test_residual_factor_is_labelled_in_the_catalog(catalog):
    entry = catalog.costs.residual_value_fraction
    assert entry is not None and "ASSUMPTION" in entry.source + (entry.note or "")
    assert entry.as_of
    params = CostParams.from_catalog(catalog)
    fraction, decline = residual_params(params)
    assert fraction == entry.value and 0 < fraction <= 1
    assert decline == catalog.costs.hardware_price_decline_per_year.value


def test_residual_factor_follows_an_overlay(tmp_path):
    """A --catalog overlay's costs.yaml changes the resale factor like any other cost."""
    (tmp_path / "costs.yaml").write_text(
        "residual_value_fraction:\n  value: 0.25\n  source: test\n  as_of: '2026-12'\n")
    overlay = load_catalog(str(tmp_path))
    assert residual_params(CostParams.from_catalog(overlay))[0] == 0.25
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "costs.yaml").write_text(
        "residual_value_fraction:\n  value: 1.5\n  source: test\n  as_of: '2026-12'\n")
    with pytest.raises(InputError):
        load_catalog(str(bad))


@pytest.fixture(scope="module")
def short_job(catalog):
    rfq = _rfq(catalog, [SHORT_JOB])
    table = build_candidates(catalog, rfq)
    return rfq, table, solve_rfq(rfq, catalog, table=table)


def test_one_off_job_owned_and_resold_against_rented(short_job, catalog):
    """Buying the hardware, running the job and reselling it costs capex − resale value +
    running cost for the job's hours; the job still rents (reselling cannot win back the
    used-market discount of a 50M-token LoRA)."""
    rfq, table, plan = short_job
    (row,) = plan.to_json()["buy_vs_rent"]
    fraction, decline = residual_params(table.params)
    storage = table.storage["tune"].usd
    hardware = row["owned_capex_usd"] - storage
    months = row["hours_used"] / HOURS_PER_MONTH
    resale = hardware * fraction * (1 - decline) ** (months / 12)
    running = row["owned_running_usd_per_month"] / HOURS_PER_MONTH * row["hours_used"]
    assert row["residual_value_usd"] == pytest.approx(resale, abs=0.05)
    assert row["owned_resold_usd"] == pytest.approx(row["owned_capex_usd"] - resale + running,
                                                    rel=1e-3)
    assert row["rented_usd"] < row["owned_resold_usd"] < row["owned_usd"]
    # owning for the horizon = capex + running costs for every month of it
    assert row["owned_usd"] == pytest.approx(
        row["owned_capex_usd"] + 36 * row["owned_running_usd_per_month"], abs=0.5)
    # a perfect resale (100 %, no decline) leaves only storage and the job's running cost
    (perfect,) = buy_vs_rent(table, rfq, plan, residual=(1.0, 0.0))
    assert perfect.owned_resold_usd == pytest.approx(storage + running, abs=0.05)


def test_break_even_horizon_is_where_owning_and_renting_cost_the_same(catalog):
    """A 24/7 service: capex + running × t = rent $/h × t at t = break-even months, and
    owning wins over the three-year horizon because that point comes before month 36."""
    rfq = _rfq(catalog, [BUSY_SERVICE], constraints={"gpus": ["rtx-pro-6000"]})
    plan = solve_rfq(rfq, catalog)
    (row,) = plan.to_json()["buy_vs_rent"]
    months = row["breakeven_months"]
    assert 0 < months < 36
    own = row["owned_capex_usd"] + row["owned_running_usd_per_month"] * months
    rent = row["rent_usd_per_hour"] * HOURS_PER_MONTH * months
    assert own == pytest.approx(rent, rel=1e-3)
    series = cumulative_costs(BuyVsRent.model_validate(row), 3)
    assert series["buy_usd"][0] == row["owned_capex_usd"] and series["rent_usd"][0] == 0
    crossed = next(m for m, b, r in zip(series["month"], series["buy_usd"],
                                        series["rent_usd"], strict=True) if r > b)
    assert crossed == pytest.approx(months, abs=1.0)


# --------------------------------------------------------------------------- sweeps
def test_parse_sweep():
    assert parse_sweep("rental-price=0.5,1,1.5") == ("rental-price", [0.5, 1.0, 1.5])
    assert parse_sweep("growth=0, 0.5") == ("growth", [0.0, 0.5])
    for bad in ("rental-price", "price=1", "rental-price=a", "rental-price=0",
                "growth=-0.95", "rental-price="):
        with pytest.raises(InputError):
            parse_sweep(bad)


def test_rental_price_sweep_flips_buy_to_rent(catalog):
    """A busy service owns at catalog rental prices; at a tenth of them renting wins, and
    at ten times them the plan is the buy-only plan exactly."""
    rfq = _rfq(catalog, [BUSY_SERVICE], constraints={"gpus": ["rtx-pro-6000"]})
    result = sweep(catalog, rfq, "rental-price", [0.1, 1, 10])
    cheap, today, dear = result["points"]
    assert today["choice"] == "buy" and cheap["choice"] == "rent"
    assert cheap["sourcing"] == {"chat": "rented"} and cheap["cluster"] == "nothing bought"
    assert cheap["tco_usd"] == pytest.approx(cheap["rental_usd"])
    # renting everything at a tenth of the price costs a tenth of renting it at today's
    rented_today = solve_rfq(rfq.model_copy(update={"rental": "only"}), catalog)
    assert cheap["tco_usd"] == pytest.approx(0.1 * rented_today.cost.tco_usd, rel=1e-6)
    forbid = solve_rfq(rfq.model_copy(update={"rental": "forbid"}), catalog)
    assert dear["choice"] == "buy"
    assert dear["tco_usd"] == pytest.approx(forbid.cost.tco_usd, abs=0.01)
    assert today["tco_usd"] <= dear["tco_usd"]


def test_rental_price_sweep_allows_renting_when_the_rfq_forbids_it(catalog):
    rfq = _rfq(catalog, [SHORT_JOB], rental="forbid")
    result = sweep(catalog, rfq, "rental-price", [1])
    assert "allow" in result["note"]
    assert result["points"][0]["choice"] == "rent"


def test_growth_sweep_known_answers(catalog):
    """No growth: the phased plan is the one-period plan (nothing bought later); doubling
    a year: a second purchase later, cheaper than buying for the peak now."""
    chat = {"name": "chat", "kind": "inference", "model": "llama-3.1-8b",
            "concurrency": 256, "qps": 20, "input_tokens": 2000, "output_tokens": 400,
            "ttft_ms": 2000, "tpot_ms": 50}
    rfq = _rfq(catalog, [chat], rental="forbid", constraints={"gpus": ["rtx-pro-6000"]})
    grown = with_growth(catalog, rfq, 1.0)
    assert grown.workloads[0].growth_per_year == 1.0
    assert [p.qps for p in grown.workloads[0].periods] == [40, 80, 160]
    # sweeping from an RFQ that already grows starts from its month-0 demand again
    again = with_growth(catalog, grown, 0.5)
    assert [p.qps for p in again.workloads[0].periods] == [30, 45, 67.5]
    result = sweep(catalog, rfq, "growth", [0.0, 1.0])
    flat, double = result["points"]
    plain = solve_rfq(rfq, catalog)
    assert flat["tco_usd"] == pytest.approx(plain.cost.tco_usd, abs=0.02)
    assert sum(flat["nodes_bought"][1:]) == 0 and flat["choice"] == "buy"
    assert double["nodes_bought"][0] >= 1 and sum(double["nodes_bought"][1:]) >= 1
    assert double["tco_usd"] < double["buy_all_now_tco_usd"]
    with pytest.raises(InputError):
        with_growth(catalog, _rfq(catalog, [SHORT_JOB]), 0.5)


def test_pareto_sweep_cli(tmp_path):
    import json

    def run(*args):
        return procure("pareto", *args)

    scenario = str(ROOT / "scenarios" / "hybrid-service-and-job.yaml")
    ok = run(scenario, "--sweep", "rental-price=0.1,1", "--json", "--csv",
             str(tmp_path / "s.csv"))
    assert ok.returncode == 0, ok.stderr
    result = json.loads(ok.stdout)
    assert [p["choice"] for p in result["points"]] == ["rent", "hybrid"]
    assert (tmp_path / "s.csv").read_text().count("\n") == 3
    bad = run(scenario, "--sweep", "rental-price=cheap")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr + bad.stdout
