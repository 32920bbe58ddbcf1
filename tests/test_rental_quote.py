"""Buy or rent in the customer quote (issue 16): the purchase schedule, the rented lines and
the buy/rent comparison with its break-evens appear in the HTML and the XLSX when the plan
has them, with figures equal to the plan; a plan that buys everything at month 0 and rents
nothing gets the quote of the first version."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.analysis.explain import solve_rfq
from solver.common.wording import usd
from solver.report.quote import quote_context, render_html, write_quote
from solver.rfq.schema import load_rfq
from tests.test_quote import Cells, _dollars

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
FIRST_SHEETS = ["Summary", "Bill of materials", "Workloads", "Assumptions"]


def _solved(catalog, name):
    rfq = load_rfq(SCENARIOS / f"{name}.yaml", catalog)
    return rfq, solve_rfq(rfq, catalog)


@pytest.fixture(scope="module")
def hybrid(catalog):
    """A busy service on an owned box and a one-off LoRA on a rented instance."""
    return _solved(catalog, "hybrid-service-and-job")


@pytest.fixture(scope="module")
def growing(catalog):
    """A chat service doubling every year: bought in three steps."""
    return _solved(catalog, "growing-chat-service")


def _cells(html):
    cells = Cells()
    cells.feed(html)
    return cells


def test_quote_shows_rented_lines_and_the_buy_rent_comparison(catalog, hybrid):
    rfq, plan = hybrid
    assert plan.to_json()["cost"]["rental_usd"] > 0
    html = render_html(quote_context(plan, rfq, catalog))
    cells = _cells(html)
    rented = [r for w in plan.to_json()["workloads"] for r in w.get("rental") or []]
    totals = [_dollars(t) for t in cells.by_class["rental-total"]]
    assert totals == [pytest.approx(r["usd"], abs=0.5) for r in rented]
    assert _dollars(cells.by_id["rental-sum"]) == pytest.approx(plan.to_json()["cost"]["rental_usd"],
                                                                abs=0.5)
    for rent in rented:
        assert rent["offer"] in html
    # break-even utilisation and horizon of every workload, as in the plan
    rows = plan.to_json()["buy_vs_rent"]
    assert cells.by_class["breakeven-util"] == [f"{r['breakeven_utilization']:.1%}"
                                                for r in rows]
    assert cells.by_class["breakeven-months"] == [f"{r['breakeven_months']:,.1f}"
                                                  for r in rows]
    for row in rows:
        assert row["why"] in html
    # one period: everything at month 0, the rental in it
    (capex,) = cells.by_class["period-capex"]
    (rental,) = cells.by_class["period-rental"]
    assert capex == usd(plan.to_json()["schedule"][0]["capex_usd"])
    assert rental == usd(plan.to_json()["cost"]["rental_usd"])
    assert "rented cloud instances" in cells.by_id["summary"]


def test_quote_shows_the_phased_purchase_schedule(catalog, growing):
    rfq, plan = growing
    assert len(plan.to_json()["schedule"]) == 3 and plan.to_json().get("phasing")
    html = render_html(quote_context(plan, rfq, catalog))
    cells = _cells(html)
    shown = [_dollars(t) for t in cells.by_class["period-capex"]]
    assert shown == [pytest.approx(p["capex_usd"], abs=0.5) for p in plan.to_json()["schedule"]]
    assert "12–24 (12 mo)" in html
    phasing = cells.by_id["phasing"]
    assert usd(plan.to_json()["phasing"]["tco_usd"]) in phasing
    assert usd(plan.to_json()["phasing"]["buy_all_now_tco_usd"]) in phasing
    assert 'id="rental"' not in html  # nothing rented: no rental table
    assert 'id="buy-rent"' not in html  # renting not allowed in this RFQ


def test_xlsx_has_schedule_rental_and_buy_rent_sheets(catalog, hybrid, growing, tmp_path):
    from openpyxl import load_workbook

    rfq, plan = hybrid
    path = tmp_path / "hybrid.xlsx"
    write_quote(path, plan, rfq, catalog)
    book = load_workbook(path)
    assert book.sheetnames == FIRST_SHEETS + ["Schedule", "Rental", "Buy or rent"]
    rental = list(book["Rental"].iter_rows(values_only=True))
    assert rental[-1][0] == "Rental total"
    assert rental[-1][7] == pytest.approx(plan.to_json()["cost"]["rental_usd"], abs=0.02)
    compare = list(book["Buy or rent"].iter_rows(values_only=True))
    header = compare[0]
    util = header.index("Break-even utilisation")
    horizon = header.index("Break-even horizon (months)")
    for row, expected in zip(compare[1:], plan.to_json()["buy_vs_rent"], strict=True):
        assert row[0] == expected["workload"]
        assert row[util] == expected["breakeven_utilization"]
        assert row[horizon] == expected["breakeven_months"]
    rfq, plan = growing
    path = tmp_path / "growing.xlsx"
    write_quote(path, plan, rfq, catalog)
    book = load_workbook(path)
    assert book.sheetnames == FIRST_SHEETS + ["Schedule"]
    rows = list(book["Schedule"].iter_rows(values_only=True))
    periods = rows[1:1 + len(plan.to_json()["schedule"])]
    assert [r[0] for r in periods] == [p["start_month"] for p in plan.to_json()["schedule"]]
    assert [r[2] for r in periods] == [p["nodes_bought"] for p in plan.to_json()["schedule"]]
    assert [r[4] for r in periods] == [p["capex_usd"] for p in plan.to_json()["schedule"]]
    assert rows[-2][4] == plan.to_json()["phasing"]["buy_all_now_tco_usd"]


def test_quote_without_schedule_or_rental_is_unchanged(catalog, tmp_path):
    """Buying everything at month 0 with renting forbidden: no schedule, rental or
    buy-rent section, and the workbook of the first version."""
    from openpyxl import load_workbook

    rfq, plan = _solved(catalog, "chat-70b-one-node")
    context = quote_context(plan, rfq, catalog)
    assert context["schedule"] == [] and context["rentals"] == []
    assert context["buy_rent"] == [] and context["phasing"] is None
    html = render_html(context)
    for marker in ('id="schedule"', 'id="rental"', 'id="buy-rent"', "Purchase schedule"):
        assert marker not in html
    assert "rented" not in _cells(html).by_id["summary"]
    path = tmp_path / "q.xlsx"
    write_quote(path, plan, rfq, catalog)
    assert load_workbook(path).sheetnames == FIRST_SHEETS
