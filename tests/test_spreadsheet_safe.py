"""Formula-safe spreadsheets (issue 33): no text a customer, a price file or a batch input
controls becomes a live formula in a quote XLSX or a batch export.

The OWASP rule for CSV/XLSX injection: a text cell that begins with ``=``, ``+``, ``-``,
``@``, a tab or a carriage return is neutralised as text (a leading single quote; in XLSX a
string cell, never a formula); numbers stay numbers. Every writer is fed the same hostile
values and its file is read back: no formula cell, no text cell that a spreadsheet would
evaluate, and the hostile value itself present (neutralised), so a value that never
reached the file cannot pass.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest
from openpyxl import Workbook, load_workbook
from plans import cost, serving_entry, tiny_plan

from solver.common.spreadsheet import DANGEROUS_FIRST, cell_text, safe_row
from solver.optimize.plan_model import Cluster, NodeGroup, Plan

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
HOSTILE = ("=cmd|' /C calc'!A0", '=HYPERLINK("http://evil.example/x","click")', "@SUM(1)",
           "+1", "-1+1", "\t=1+1", "\r=1+1")
"""Payloads that a spreadsheet evaluates when they begin a cell (OWASP CSV injection)."""


def evaluable(text: str) -> bool:
    """Whether a spreadsheet would take this text as a formula (leading spaces skipped; a
    plain number such as ``-1.0`` in a CSV is a number, not a formula)."""
    try:
        float(text)
    except ValueError:
        return text.lstrip(" ")[:1] in DANGEROUS_FIRST
    return False


def xlsx_cells(data: bytes | Path) -> list[Any]:
    book = load_workbook(io.BytesIO(data) if isinstance(data, bytes) else data)
    return [cell for sheet in book.worksheets for row in sheet.iter_rows() for cell in row]


def assert_xlsx_safe(data: bytes | Path, expected: list[str]) -> list[str]:
    """No formula cell and no evaluable text; every expected (neutralised) text present."""
    cells = xlsx_cells(data)
    formulas = [c.coordinate for c in cells if c.data_type == "f"]
    assert formulas == [], formulas
    texts = [c.value for c in cells if isinstance(c.value, str)]
    live = [t for t in texts if evaluable(t)]
    assert live == [], live
    for text in expected:
        assert any(text in t for t in texts), (text, texts[:40])
    return texts


def assert_csv_safe(text: str, expected: list[str]) -> list[list[str]]:
    rows = list(csv.reader(io.StringIO(text)))
    cells = [cell for row in rows for cell in row]
    live = [cell for cell in cells if evaluable(cell)]
    assert live == [], live
    for value in expected:
        assert any(value in cell for cell in cells), (value, cells[:40])
    return rows


# --- the one function ---------------------------------------------------------------------


@pytest.mark.parametrize("value", HOSTILE)
def test_cell_text_neutralises_every_payload(value: str) -> None:
    shown = cell_text(value)
    assert shown == "'" + value
    assert not evaluable(shown)


@pytest.mark.parametrize("value", ["ACME GmbH", "l4", "a=b", "x-1", "", "'=already quoted",
                                   "https://example.com/a?b=c", "caf\u00e9"])
def test_cell_text_leaves_plain_text_alone(value: str) -> None:
    assert cell_text(value) == value


@pytest.mark.parametrize("value", [0, -1, -2.5, 1e30, None, True])
def test_numbers_and_empty_cells_stay_what_they_are(value: Any) -> None:
    assert cell_text(value) is value
    assert safe_row(["=x", value]) == ["'=x", value]


def test_leading_spaces_do_not_hide_a_formula() -> None:
    assert cell_text("  =1+1") == "'  =1+1"


def test_a_workbook_cell_is_text_not_a_formula(tmp_path: Path) -> None:
    book = Workbook()
    book.active.append(safe_row([*HOSTILE, -3, 2.5]))
    book.save(tmp_path / "x.xlsx")
    cells = xlsx_cells(tmp_path / "x.xlsx")
    assert [c.data_type for c in cells] == ["s"] * len(HOSTILE) + ["n", "n"]
    assert [c.value for c in cells[-2:]] == [-3, 2.5]


# --- the quote (issue 33: customer, prices.csv source, rental.csv source) -----------------


def _hostile_catalog(folder: Path, catalog: Any) -> str:
    """An overlay that re-prices every GPU at its own price and re-sources every rental
    offer, each with a hostile ``source``."""
    folder.mkdir()
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_ALL)
    writer.writerow(["id", "price_usd", "as_of", "source"])
    for index, gpu in enumerate(catalog.gpus.values()):
        writer.writerow([gpu.id, f"{gpu.price_usd:g}", "2026-11",
                         HOSTILE[index % len(HOSTILE)]])
    (folder / "prices.csv").write_text(buffer.getvalue(), encoding="utf-8")
    builtin = list(csv.DictReader((ROOT / "catalog" / "rental.csv").open(encoding="utf-8")))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(builtin[0]))
    writer.writeheader()
    long_enough = [value for value in HOSTILE if len(value.strip()) >= 3]  # sources need 3
    for index, row in enumerate(builtin):
        writer.writerow({**row, "source": long_enough[index % len(long_enough)]})
    (folder / "rental.csv").write_text(buffer.getvalue(), encoding="utf-8")
    return str(folder)


def _csv_field(value: str) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="", quoting=csv.QUOTE_ALL).writerow([value])
    return buffer.getvalue()


@pytest.mark.parametrize(("customer", "rental"), [("=cmd|' /C calc'!A0", "forbid"),
                                                 ("@SUM(1)", "only")])
def test_quote_xlsx_neutralises_customer_and_price_and_rental_sources(
        customer: str, rental: str, catalog: Any, tmp_path: Path) -> None:
    """Issue 33: the quote goes to customers; a hostile customer name, prices.csv source
    (what is bought: ``rental: forbid``) or rental.csv source (what is rented: ``rental:
    only``) was a live formula (a DDE payload runs a command)."""
    from solver.analysis.explain import solve_rfq
    from solver.catalog.load import load_catalog
    from solver.report.quote import write_quote
    from solver.rfq.schema import load_rfq, validate_rfq

    overlay = load_catalog(_hostile_catalog(tmp_path / "cat", catalog))
    data = load_rfq(SCENARIOS / "hybrid-service-and-job.yaml", overlay).model_dump(
        mode="json", exclude_none=True)
    rfq = validate_rfq({**data, "customer": customer, "rental": rental}, overlay, "h.yaml")
    plan = solve_rfq(rfq, overlay)
    assert plan.status == "optimal"
    if rental == "forbid":  # bought: the BOM lines carry the prices.csv sources
        assert plan.bill_of_materials is not None
        sources = {line.source for line in plan.bill_of_materials.lines}
    else:  # rented: the rental lines carry the rental.csv sources
        sources = {r.source for w in plan.workloads for r in w.rental or []}
    hostile_sources = sorted(s for s in sources if evaluable(s))
    assert hostile_sources, f"no hostile source reached the plan: {sources}"
    write_quote(tmp_path / "q.xlsx", plan, rfq, overlay)
    # issue 32: the quote shows a price's basis in customer words, never the raw source
    texts = assert_xlsx_safe(tmp_path / "q.xlsx", ["'" + customer])
    shown = [(s, text) for s in hostile_sources if s != customer for text in texts
             if s in text]
    assert not shown, shown
    book = load_workbook(tmp_path / "q.xlsx")
    assert book["Summary"]["B1"].value == "'" + customer
    money = [c.value for c in book["Bill of materials"]["H"][1:]]
    assert all(isinstance(v, int | float) for v in money)  # numbers stay numbers


# --- batch exports (RFQ ids, CSV batch cells, every text column) --------------------------


def _hostile_plan(rfq: Any, catalog: Any, **_: Any) -> Plan:
    """A plan whose every text field is hostile (what a solver never returns, but what the
    writers must survive: the export must not trust the plan's text; the kind is typed)."""
    gpu, fabric, server = HOSTILE[0], HOSTILE[1], HOSTILE[2]
    cluster = Cluster(nodes=[NodeGroup(gpu=gpu, server=server, gpus_per_node=8, count=1)],
                      total_nodes=1, total_gpus=8, fabric=fabric, coupled=False,
                      coupled_nodes=0, power_kw=1.0, rack_units=4)
    work = serving_entry(HOSTILE[3], HOSTILE[5], gpu, 1, precision=HOSTILE[6])
    return tiny_plan(rfq=rfq.id if rfq else "r", cluster=cluster, workloads=[work],
                     cost=cost(2.0, power_usd=-3.0))


def _hostile_batch(folder: Path) -> list[Path]:
    """A CSV batch whose id cells are hostile (invalid ids: recorded under the cell text),
    one valid RFQ, and an invalid YAML file that claims a hostile id."""
    folder.mkdir()
    rows = ["id,name,kind,model,concurrency,input_tokens,output_tokens"]
    rows += [f"{_csv_field(value)},chat,inference,llama-3.1-8b,4,500,100"
             for value in HOSTILE[:5]]
    rows.append("good-one,chat,inference,llama-3.1-8b,4,500,100")
    (folder / "batch.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (folder / "claims.yaml").write_text('id: "@SUM(1)+cmd"\nworkloads: 3\n', encoding="utf-8")
    return [folder / "batch.csv", folder / "claims.yaml"]


@pytest.mark.parametrize("suffix", [".csv", ".xlsx"])
def test_batch_export_neutralises_ids_and_every_text_column(suffix: str,
                                                            tmp_path: Path) -> None:
    """Issue 33: an RFQ id from a CSV batch cell or an invalid file became a live formula in
    the batch export; so would any text of a plan."""
    from solver.batch.runner import run_batch

    sources = _hostile_batch(tmp_path / "in")
    export = tmp_path / f"results{suffix}"
    summary = run_batch(sources, tmp_path / "r.sqlite", workers=1, solve_fn=_hostile_plan,
                        export=export)
    assert summary.by_status == {"invalid": 6, "optimal": 1}
    expected = ["'" + v for v in HOSTILE[:5]] + ["'@SUM(1)+cmd"]
    expected += ["'" + HOSTILE[0], "'" + HOSTILE[1]]  # the plan's gpu and fabric columns
    if suffix == ".csv":
        rows = assert_csv_safe(export.read_text(encoding="utf-8"), expected)
        header = rows[0]
        good = next(r for r in rows if r[0] == "good-one")
        assert good[header.index("tco_usd")] == "-1.0"  # a number stays a number
    else:
        texts = assert_xlsx_safe(export, expected + ["'" + HOSTILE[5]])
        assert "good-one" in texts
        summary_sheet = load_workbook(export)["Summary"]
        header = [c.value for c in summary_sheet[1]]
        tco = [r[header.index("tco_usd")] for r in summary_sheet.iter_rows(
            min_row=2, values_only=True) if r[0] == "good-one"]
        assert tco == [-1.0]


def test_parquet_export_keeps_values_as_data(tmp_path: Path) -> None:
    """Parquet is data, not a spreadsheet: values are kept as they are (not quoted)."""
    import pyarrow.parquet as pq

    from solver.batch.runner import run_batch

    run_batch(_hostile_batch(tmp_path / "in"), tmp_path / "r.sqlite", workers=1,
              solve_fn=_hostile_plan, export=tmp_path / "r.parquet")
    ids = pq.read_table(tmp_path / "r.parquet").column("rfq").to_pylist()
    assert set(HOSTILE[:5]) <= set(ids)


# --- the other CSV writers: Pareto points, what-if sweeps, the dashboard ------------------


def test_pareto_and_sweep_csv_neutralise_text(tmp_path: Path) -> None:
    from solver.cli.pareto import _sweep_csv
    from solver.report.charts import frontier_csv

    plan = _hostile_plan(None, None).to_json()  # a frontier point carries the plan JSON
    result = {"axes": ["tco_usd", "tpot_ms"], "points": [
        {"tco_usd": 10.0, "tpot_ms": -5.0, "plan": plan}]}
    frontier_csv(result, tmp_path / "f.csv")
    rows = assert_csv_safe((tmp_path / "f.csv").read_text(encoding="utf-8"),
                           ["'" + HOSTILE[0], "'" + HOSTILE[1]])
    assert rows[1][:2] == ["10.0", "-5.0"]
    sweep = [{"sweep": "growth", "points": [
        {"growth": -0.5, "status": "optimal", "tco_usd": 1.0, "rental_usd": 0.0,
         "capex_usd": 1.0, "choice": HOSTILE[2], "sourcing": {"chat": HOSTILE[3]},
         "cluster": HOSTILE[4]}]}]
    _sweep_csv(sweep, tmp_path / "s.csv")
    rows = assert_csv_safe((tmp_path / "s.csv").read_text(encoding="utf-8"),
                           ["'" + HOSTILE[2], "'" + HOSTILE[4]])
    assert rows[1][1] == "-0.5"


def test_dashboard_batch_downloads_are_formula_safe(tmp_path: Path) -> None:
    """The dashboard's batch page re-writes the export (temp paths scrubbed): its CSV and
    XLSX downloads keep the neutralised text."""
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    from tests.test_dashboard import PAGE_SCRIPT, TIMEOUT

    rows = ["id,name,kind,model,concurrency,input_tokens,output_tokens"]
    rows += [f"{_csv_field(v)},chat,inference,llama-3.1-8b,4,500,100" for v in HOSTILE[:5]]
    at = AppTest.from_string(PAGE_SCRIPT.format(root=str(ROOT), page="batch"),
                             default_timeout=TIMEOUT).run()
    at.file_uploader(key="batch_upload").upload(
        "=cmd.csv", ("\n".join(rows) + "\n").encode(), "text/csv").run()
    next(b for b in at.button if b.label == "Run batch").click().run()
    assert not at.exception
    result = at.session_state["batch_result"]
    expected = ["'" + v for v in HOSTILE[:5]]
    assert_csv_safe(result["csv"].decode(), expected)
    assert_xlsx_safe(result["xlsx"], expected)
