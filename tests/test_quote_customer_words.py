"""Issue 32: the customer quote (HTML and XLSX) speaks the customer's words - no internal
notes (`ASSUMPTION (`, `NOTES`), no file names or paths, no RFQ field names; XLSX amounts
are numbers with number formats; bill-of-materials lines are orderable; a buy quote does not
say that renting would be cheaper."""

from __future__ import annotations

import html as htmllib
import re
from pathlib import Path

import pytest
from openpyxl import load_workbook

from solver.cli.schema import rfq_schema
from solver.cli.solve import plan_with_alternatives
from solver.report.customer import (
    customer_source,
    customer_text,
    model_words,
    orderable_line,
    source_title,
)
from solver.report.quote import figure_cell, quote_context, render_html, write_xlsx

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
FEW = ["hybrid-service-and-job.yaml", "batch-corpus-one-box.yaml",
       "own-model-from-config.yaml", "finetune-70b-full-cluster.yaml"]
ALL = sorted(p.name for p in SCENARIOS.iterdir() if p.suffix in (".yaml", ".json"))


def _internal() -> re.Pattern[str]:
    """What a customer document must never contain: notes, file names and paths, RFQ
    field names (snake_case ones anywhere, every field as ``field: value``)."""
    schema = rfq_schema()
    fields = {k for d in [schema, *schema["$defs"].values()] for k in d.get("properties", {})}
    snake = sorted(f for f in fields if "_" in f)
    return re.compile(
        r"\.md\b|NOTES|ASSUMPTION \(|grokipedia|\.csv\b|\.ya?ml\b|config\.json"
        r"|\b(?:docs|catalog|bench|solver|scenarios)/"
        rf"|\b(?:{'|'.join(snake)})\b|\b(?:{'|'.join(sorted(fields))}):\s")


def _texts_of_xlsx(path: Path) -> tuple[list[str], list[tuple[str, str, str]]]:
    """Every text cell of the workbook, and the text cells that hold a figure."""
    texts, figures = [], []
    for sheet in load_workbook(path):
        for row in sheet.iter_rows():
            for cell in row:
                if not isinstance(cell.value, str):
                    continue
                texts.append(cell.value)
                value = cell.value.strip()
                if re.fullmatch(r"\d{4}(-\d{2}){0,2}", value):
                    continue  # a date
                if re.fullmatch(r"[≤≥<>=$\s-]*\d[\d,.]*\s*(%|ms|h|s)?", value):
                    figures.append((sheet.title, cell.coordinate, value))
    return texts, figures


def _check_quote(name: str, tmp_path: Path) -> None:
    cat, rfq, plan, alternatives = plan_with_alternatives(SCENARIOS / name, None, "highs")
    for work in plan.workloads:  # issue 32: the unit price of every serving workload
        serving = work.kind in ("inference", "batch_inference")
        assert (work.cost_per_million_tokens_usd is not None) == (serving and plan.feasible)
    context = quote_context(plan, rfq, cat, alternatives)
    page = htmllib.unescape(render_html(context))
    internal = _internal()
    found = [page[max(0, m.start() - 40):m.end() + 20] for m in internal.finditer(page)]
    assert not found, f"{name} HTML: {found}"
    xlsx = tmp_path / f"{Path(name).stem}.xlsx"
    write_xlsx(xlsx, context)
    texts, figures = _texts_of_xlsx(xlsx)
    found = [t for t in texts if internal.search(t)]
    assert not found, f"{name} XLSX: {found}"
    assert not figures, f"{name} XLSX figures stored as text: {figures}"
    summary = load_workbook(xlsx)["Summary"]
    amounts = {row[0].value: row[1] for row in summary.iter_rows(min_row=5)}
    if plan.cost is not None and plan.feasible:
        tco = amounts["Total cost of ownership"]
        assert tco.value == pytest.approx(plan.cost.tco_usd, abs=0.5)
        assert "$" in tco.number_format
    if rfq.rental == "forbid":  # a buy quote does not undercut itself
        assert "renting allowed" not in page and not re.search(r"renting \S+ would save", page)
    for line in context["bom"]:
        assert float(line["order_quantity"]).is_integer()
        assert line["order_quantity"] * line["order_unit_usd"] == pytest.approx(
            line["line_total_usd"], abs=0.01)


@pytest.mark.parametrize("name", FEW)
def test_quote_has_no_internals_and_numeric_xlsx(name, tmp_path):
    _check_quote(name, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in ALL if n not in FEW])
def test_every_scenarios_quote_has_no_internals(name, tmp_path):
    """The rest of the shipped scenarios (slow: every one re-solves its alternatives)."""
    _check_quote(name, tmp_path)


def test_the_catalogs_notes_become_a_price_basis():
    source = ("ASSUMPTION (no public Ethernet ToR switch price found, e.g. Spectrum): see "
              "NOTES.md gaps")
    assert source_title(source) == "our estimate"
    assert customer_source("assumption", "2026-08", source) == "our estimate, 2026-08"
    cited = ("MSRP $8,565, retail in Apr 2026: https://www.newgearhub.com/review/x | "
             "[4U] https://grokipedia.com/page/4U (cites y) | https://docs.google.com/s/1")
    assert source_title(cited) == "newgearhub.com"  # no encyclopaedia, no private sheet
    assert customer_source("msrp", "2026-04", cited) == \
        "list price (MSRP), 2026-04; newgearhub.com"
    assert source_title("a reading of a spec sheet") == "published prices"


def test_sentences_lose_field_names_and_file_paths():
    assert customer_text("renting chat would save $43,227 over the horizon (rental "
                         "$157,154); set rental: allow to plan it (docs/rental.md)") == \
        "renting chat would save $43,227 over the horizon (rental $157,154)"
    assert customer_text("Set constraints.datacenter_grade_only: true to exclude consumer "
                         "cards.") == ("Ask us for datacenter-grade GPUs only to exclude "
                                       "consumer cards.")
    assert customer_text("allowed by the RFQ's precisions ['fp8', 'int4', 'fp4']") == \
        "one of the precisions allowed (FP8, INT4, FP4)"
    assert customer_text("raise max_nodes to 3 (see docs/performance.md)") == \
        "raise most servers to 3"
    assert model_words("/home/a/models/acme-support-32b/config.json") == "acme-support-32b"
    assert model_words("llama-3.1-70b") == "llama-3.1-70b"


def test_fractional_lines_become_one_lot_and_whole_ones_stay():
    lot = orderable_line({"sku": "storage-tb-x", "description": "storage, usable TB",
                          "quantity": 0.15, "unit_price_usd": 300.0,
                          "line_total_usd": 45.0})
    assert (lot["order_quantity"], lot["order_unit_usd"]) == (1, 45.0)
    assert "0.15 TB" in lot["description"] and "$300 per TB" in lot["description"]
    whole = orderable_line({"sku": "gpu", "description": "GPU", "quantity": 8.0,
                            "unit_price_usd": 8565.0, "line_total_usd": 68520.0})
    assert (whole["order_quantity"], whole["order_unit_usd"]) == (8, 8565.0)


def test_figures_become_numbers_with_their_format():
    assert figure_cell("1,478.5 ms") == (1478.5, '#,##0.0" ms"')
    assert figure_cell("≤ 2,000 ms") == (2000.0, '"≤ "#,##0" ms"')
    assert figure_cell("80%") == (0.8, "0%")
    assert figure_cell("$108,620") == (108620.0, '"$"#,##0')
    assert figure_cell("meets (margin 59%)") == ("meets (margin 59%)", None)
