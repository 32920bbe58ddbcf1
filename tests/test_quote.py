"""`procure quote` (issue 12 item 2): a self-contained HTML/XLSX quote whose totals equal the plan."""

from __future__ import annotations

import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from solver.analysis.explain import counterfactuals, solve_rfq
from solver.common.wording import usd
from solver.optimize.candidates import build_candidates
from solver.optimize.plan_model import BillOfMaterials, BomLine, Margin, Opex, RentalBill
from solver.report.quote import quote_context, render_html, write_quote
from solver.rfq.schema import load_rfq

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"


class Cells(HTMLParser):
    """Text of every <td>, keyed by its class and id, plus every tag seen."""

    def __init__(self) -> None:
        super().__init__()
        self.by_class: dict[str, list[str]] = {}
        self.by_id: dict[str, str] = {}
        self.tags: list[tuple[str, dict]] = []
        self._open: list[tuple[str, dict]] = []
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag in ("td", "p"):
            self._open.append((tag, attrs))
            self._text = []

    def handle_data(self, data):
        self._text.append(data)

    def handle_endtag(self, tag):
        if tag in ("td", "p") and self._open:
            _, attrs = self._open.pop()
            text = "".join(self._text).strip()
            for cls in (attrs.get("class") or "").split():
                self.by_class.setdefault(cls, []).append(text)
            if attrs.get("id"):
                self.by_id[attrs["id"]] = text


def _dollars(text: str) -> float:
    return float(text.replace("$", "").replace(",", ""))


@pytest.fixture(scope="module")
def coupled(catalog):
    rfq = load_rfq(SCENARIOS / "finetune-70b-full-cluster.yaml", catalog)
    table = build_candidates(catalog, rfq)
    plan = solve_rfq(rfq, catalog, table=table)
    return rfq, plan, counterfactuals(rfq, catalog, plan, table)


def _contract_bom(plan) -> BillOfMaterials:
    """A bill of materials built by hand from the plan's cluster and cost."""
    cost = plan["cost"]
    lines = []
    for node in plan["cluster"]["nodes"]:
        gpus = node["count"] * node["gpus_per_node"]
        lines.append({"sku": node["gpu"], "description": "GPU", "quantity": gpus,
                      "unit_price_usd": cost["gpus_usd"] / gpus, "price_type": "list",
                      "as_of": "2026-04", "source": "catalog",
                      "line_total_usd": cost["gpus_usd"]})
        lines.append({"sku": node["server"], "description": "server", "quantity": node["count"],
                      "unit_price_usd": cost["servers_usd"] / node["count"],
                      "price_type": "list", "as_of": "2026-08", "source": "catalog",
                      "line_total_usd": cost["servers_usd"]})
    for key in ("network_usd", "storage_usd"):
        lines.append({"sku": key, "description": key, "quantity": 1,
                      "unit_price_usd": cost[key], "price_type": "estimate",
                      "as_of": "2026-08", "source": "catalog", "line_total_usd": cost[key]})
    capex = sum(x["line_total_usd"] for x in lines)
    return BillOfMaterials(
        lines=[BomLine(**line, category="gpus_usd") for line in lines], capex_usd=capex,
        opex_per_year=Opex(lines=[], total_usd=3000.0),
        rental=RentalBill(lines=[], total_usd=0.0), horizon_years=3.0,
        tco_usd=capex + 9000.0)


def test_html_totals_equal_the_plan_with_a_contract_bom(catalog, coupled):
    rfq, typed, alternatives = coupled
    typed = typed.model_copy(update={"bill_of_materials": _contract_bom(typed.to_json())})
    html = render_html(quote_context(typed, rfq, catalog, alternatives))
    plan = typed.to_json()
    cells = Cells()
    cells.feed(html)
    line_totals = [_dollars(t) for t in cells.by_class["line-total"]]
    assert len(line_totals) == len(plan["bill_of_materials"]["lines"])
    assert sum(line_totals) == pytest.approx(plan["bill_of_materials"]["capex_usd"],
                                             abs=len(line_totals))
    assert cells.by_id["capex"] == usd(plan["bill_of_materials"]["capex_usd"])
    assert _dollars(cells.by_id["capex"]) == pytest.approx(plan["cost"]["capex_usd"], abs=1)
    assert usd(plan["cost"]["tco_usd"]) in html
    # the coupled fine-tune's fabric (RDMA by the vendor's policy since issue 15)
    assert "valid until" in html and plan["cluster"]["fabric"] in html and "<svg" in html
    from solver.report.customer import customer_text, is_renting_hint

    assert rfq.rental == "forbid"  # a buy quote: no "renting would be cheaper" (issue 32)
    shown = [alt for alt in alternatives if not is_renting_hint(alt["alternative"])]
    assert len(shown) < len(alternatives)
    for alt in alternatives:
        assert (customer_text(alt["alternative"]) in html) == (alt in shown)


def test_html_bom_is_the_plans_own_and_totals_match(catalog, coupled):
    rfq, typed, alternatives = coupled
    html = render_html(quote_context(typed, rfq, catalog, alternatives))
    plan = typed.to_json()
    bom = plan["bill_of_materials"]  # built by the planner (branch cost)
    cells = Cells()
    cells.feed(html)
    line_totals = [_dollars(t) for t in cells.by_class["line-total"]]
    assert len(line_totals) == len(bom["lines"])
    for shown, line in zip(line_totals, bom["lines"], strict=True):
        assert shown == pytest.approx(line["line_total_usd"], abs=0.5)
    assert _dollars(cells.by_id["capex"]) == pytest.approx(bom["capex_usd"], abs=0.5)
    # each line is rounded to the cent, the MIP's capex is not: half a cent per line at most
    assert bom["capex_usd"] == pytest.approx(plan["cost"]["capex_usd"],
                                             abs=0.005 * len(bom["lines"]))
    assert usd(plan["cost"]["tco_usd"]) in html
    for line in bom["lines"]:
        assert line["sku"] in html and line["as_of"] in html


def test_html_is_self_contained(catalog, coupled):
    rfq, plan, alternatives = coupled
    html = render_html(quote_context(plan, rfq, catalog, alternatives))
    cells = Cells()
    cells.feed(html)
    for tag, attrs in cells.tags:
        assert tag not in ("link", "script", "img", "iframe")
        assert not str(attrs.get("src", "")).startswith("http")
    assert "@media print" in html
    assert _dollars(cells.by_id["capex"]) == pytest.approx(plan.cost.capex_usd, abs=1)


def test_margins_are_rendered_when_the_plan_has_them(catalog):
    rfq = load_rfq(SCENARIOS / "chat-70b-one-node.yaml", catalog)
    plan = solve_rfq(rfq, catalog)
    margin = Margin(slo="tpot", percentile=90, target_ms=50.0, predicted_ms=41.5, margin=0.17,
                    met=True, basis="p90")
    first = plan.workloads[0].model_copy(update={"margins": {"tpot_ms": margin}})
    plan = plan.model_copy(update={"workloads": [first, *plan.workloads[1:]]})
    html = render_html(quote_context(plan, rfq, catalog))
    assert "TPOT p90" in html and "41.5 ms" in html and "margin 17%" in html


def test_xlsx_bom_capex_equals_the_plan(catalog, coupled, tmp_path):
    from openpyxl import load_workbook

    rfq, plan, alternatives = coupled
    path = tmp_path / "quote.xlsx"
    write_quote(path, plan, rfq, catalog, alternatives)
    sheet = load_workbook(path)["Bill of materials"]
    rows = list(sheet.iter_rows(values_only=True))
    assert rows[-1][0] == "Capex"
    assert rows[-1][-1] == pytest.approx(plan.cost.capex_usd)
    assert sum(r[-1] for r in rows[1:-1]) == pytest.approx(rows[-1][-1])


def test_quote_cli(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "solver.cli.main", *args], capture_output=True,
                              text=True, cwd=tmp_path, timeout=300)

    ok = run("quote", str(SCENARIOS / "chat-70b-one-node.yaml"), "-o", "q.html")
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "q.html").read_text().startswith("<!DOCTYPE html>")
    bad = run("quote", str(SCENARIOS / "chat-70b-one-node.yaml"), "-o", "q.pdf")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and ".html" in bad.stderr
    infeasible = run("quote", str(SCENARIOS / "infeasible-budget.yaml"), "-o", "i.html")
    assert infeasible.returncode == 3
    assert "raise the budget to $" in (tmp_path / "i.html").read_text()


def test_xlsx_carries_each_workloads_notes_as_the_html_does(catalog, tmp_path):
    """The workbook's Workloads sheet has the notes the HTML quote prints under each
    workload (engine, what idle GPUs carry at no extra cost, unit cost, calibration), one
    cell per note with its bracketed aside joined on."""
    from openpyxl import load_workbook

    from solver.common.wording import serving_lines

    rfq = load_rfq(SCENARIOS / "chat-70b-one-node.yaml", catalog)
    plan = solve_rfq(rfq, catalog)
    path = tmp_path / "quote.xlsx"
    write_quote(path, plan, rfq, catalog, [])
    rows = list(load_workbook(path)["Workloads"].iter_rows(values_only=True))
    start = rows.index(("Workload", "Note", *[None] * (len(rows[0]) - 2)))
    notes = [row[1] for row in rows[start + 1:]]
    html = render_html(quote_context(plan, rfq, catalog))
    lines = serving_lines(plan.workloads[0].model_dump(mode="json"))
    assert len(notes) == len([line for line in lines if not line.startswith(("  ", "("))])
    room = plan.workloads[0].headroom
    assert room is not None
    headroom_note = next(n for n in notes if n.startswith("at no extra cost"))
    assert f"{room.capacity:.0f} concurrent requests" in headroom_note
    assert f"the cheapest layout: {room.cheapest_capacity:.0f}" in headroom_note
    assert "at no extra cost" in html
