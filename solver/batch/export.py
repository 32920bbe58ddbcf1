"""Export a batch store: CSV or Parquet (one row per RFQ), XLSX (summary + a sheet per RFQ).

Every export streams from the SQLite store (:class:`~solver.batch.store.ResultStore`), so
memory stays flat in the number of RFQs: CSV rows are written as they are read, Parquet in
record batches, and XLSX through openpyxl's write-only workbook.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from solver.batch.store import ResultStore
from solver.common.outputs import check_output_path
from solver.common.spreadsheet import SafeSheet, cell_text
from solver.common.wording import COST_TERMS, cost_label
from solver.optimize.plan_model import Plan

EXPORT_COLUMNS = ("rfq", "status", "tco_usd", "capex_usd", "total_nodes", "total_gpus", "gpu",
                  "fabric", "coupled", "error", "power_kw", "rack_units", "source",
                  "catalog_version", "solve_seconds", "created_at")
EXPORT_SUFFIXES = (".csv", ".parquet", ".xlsx")
PARQUET_BATCH_ROWS = 1000
_ILLEGAL_XLSX = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
USD_FORMAT = '"$"#,##0'


def check_export_path(path: str | Path, *, store: str | Path | None = None,
                      inputs: Iterable[str | Path] = ()) -> Path:
    """A valid ``--export`` path (suffix known, folder exists, writable; not the results
    ``store`` nor one of the ``inputs``: :func:`solver.common.outputs.check_output_path`)
    or a usage error."""
    return check_output_path(path, "--export", suffixes=EXPORT_SUFFIXES, inputs=inputs,
                             store=store)


def export(store: ResultStore, path: str | Path, run_id: int | None = None) -> Path:
    """Write the store (one run's rows when ``run_id`` is given) to ``path`` by its suffix."""
    path = check_export_path(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        export_csv(store, path, run_id)
    elif suffix == ".parquet":
        export_parquet(store, path, run_id)
    else:
        export_xlsx(store, path, run_id)
    return path


def _record(row: Any) -> dict[str, Any]:
    record = {column: row[column] for column in EXPORT_COLUMNS}
    if record["coupled"] is not None:
        record["coupled"] = bool(record["coupled"])
    return record


def _records(store: ResultStore, run_id: int | None) -> Iterator[dict[str, Any]]:
    for row in store.rows(run_id, ", ".join(EXPORT_COLUMNS)):
        yield _record(row)


def export_csv(store: ResultStore, path: Path, run_id: int | None = None) -> None:
    """One row per RFQ with the contract columns first."""
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=EXPORT_COLUMNS)
        writer.writeheader()
        for record in _records(store, run_id):
            writer.writerow({key: cell_text(value) for key, value in record.items()})


def export_parquet(store: ResultStore, path: Path, run_id: int | None = None) -> None:
    """One row per RFQ, written in record batches."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {"tco_usd": pa.float64(), "capex_usd": pa.float64(), "total_nodes": pa.int64(),
             "total_gpus": pa.int64(), "coupled": pa.bool_(), "power_kw": pa.float64(),
             "rack_units": pa.int64(), "solve_seconds": pa.float64()}
    schema = pa.schema([(c, types.get(c, pa.string())) for c in EXPORT_COLUMNS])
    with pq.ParquetWriter(path, schema) as writer:
        chunk: list[dict[str, Any]] = []
        for record in _records(store, run_id):
            chunk.append(record)
            if len(chunk) >= PARQUET_BATCH_ROWS:
                writer.write_batch(pa.RecordBatch.from_pylist(chunk, schema=schema))
                chunk = []
        if chunk:
            writer.write_batch(pa.RecordBatch.from_pylist(chunk, schema=schema))


# --- XLSX -----------------------------------------------------------------------------


class _Sheets:
    """Excel sheet names: at most 31 characters, no []:*?/\\, unique ignoring case."""

    def __init__(self) -> None:
        self._used: set[str] = set()

    def name(self, wanted: str) -> str:
        base = re.sub(r"[\[\]:*?/\\]", "_", _ILLEGAL_XLSX.sub("_", wanted)).strip("'") or "rfq"
        candidate, n = base[:31], 1
        while candidate.lower() in self._used:
            n += 1
            tag = f"~{n}"
            candidate = base[: 31 - len(tag)] + tag
        self._used.add(candidate.lower())
        return candidate


def export_xlsx(store: ResultStore, path: Path, run_id: int | None = None) -> None:
    """A summary sheet (one row per RFQ, linked) plus one sheet per RFQ."""
    from openpyxl import Workbook

    workbook = Workbook(write_only=True)
    summary = SafeSheet(workbook.create_sheet("Summary"))  # every row formula-safe
    widths = {"rfq": 28, "status": 11, "gpu": 18, "fabric": 12, "error": 60, "source": 40,
              "created_at": 24, "catalog_version": 14}
    _widths(summary, [widths.get(c, 13) for c in EXPORT_COLUMNS])
    summary.freeze_panes = "B2"
    summary.append(_header(summary, EXPORT_COLUMNS))
    names = _Sheets()
    names.name("Summary")
    for row in store.rows(run_id, ", ".join(EXPORT_COLUMNS) + ", plan_json, input"):
        sheet_name = names.name(row["rfq"])
        summary.append(_summary_row(summary, _record(row), sheet_name))
        _rfq_sheet(SafeSheet(workbook.create_sheet(sheet_name)), row)
    workbook.save(path)


def _header(sheet: Any, titles: tuple[str, ...] | list[str]) -> list[Any]:
    from openpyxl.cell import WriteOnlyCell
    from openpyxl.styles import Alignment, Font, PatternFill

    cells = []
    for title in titles:
        cell = WriteOnlyCell(sheet, value=title)
        cell.font = Font(bold=True, color="FFFFFF")
        cell.fill = PatternFill("solid", fgColor="305496")
        cell.alignment = Alignment(vertical="center")
        cells.append(cell)
    return cells


def _cell(sheet: Any, value: Any, number_format: str | None = None, bold: bool = False) -> Any:
    from openpyxl.cell import WriteOnlyCell
    from openpyxl.styles import Font

    if isinstance(value, str):  # control characters are not allowed in XLSX text
        value = _ILLEGAL_XLSX.sub("\ufffd", value)
    cell = WriteOnlyCell(sheet, value=cell_text(value))
    if number_format:
        cell.number_format = number_format
    if bold:
        cell.font = Font(bold=True)
    return cell


def _widths(sheet: Any, widths: list[float]) -> None:
    from openpyxl.utils import get_column_letter

    for index, width in enumerate(widths, start=1):
        sheet.column_dimensions[get_column_letter(index)].width = width


_FORMATS = {"tco_usd": USD_FORMAT, "capex_usd": USD_FORMAT, "power_kw": "0.0",
            "solve_seconds": "0.000"}


def _summary_row(sheet: Any, record: dict[str, Any], sheet_name: str) -> list[Any]:
    cells = []
    for column in EXPORT_COLUMNS:
        cell = _cell(sheet, record[column], _FORMATS.get(column))
        if column == "rfq":
            cell.hyperlink = f"#'{sheet_name}'!A1"
            cell.style = "Hyperlink"
        cells.append(cell)
    return cells


def _rfq_sheet(sheet: Any, detail: Any) -> None:
    """One RFQ: status, workloads, cluster layout and cost breakdown (or the error)."""
    _widths(sheet, [30, 16, 16, 11, 16, 8, 8, 8, 8, 12, 12, 12, 12, 12, 14])
    sheet.append([_cell(sheet, f"RFQ {detail['rfq']}", bold=True)])
    sheet.append(["status", detail["status"]])
    sheet.append(["source", detail["source"]])
    if detail["error"]:
        sheet.append(["reason", detail["error"]])
    plan = _stored_plan(detail["plan_json"])
    if plan is None and detail["plan_json"]:
        sheet.append(["plan", "stored by another procure version (its JSON does not match "
                              "docs/plan.md): run procure batch again to refresh it"])
        return
    if plan is None or not plan.workloads:
        if detail["input"] and detail["status"] != "invalid":
            _input_workloads(sheet, detail["input"])
        return
    sheet.append([])
    sheet.append([_cell(sheet, "Workloads", bold=True)])
    titles = ["name", "kind", "model", "precision", "gpu", "tp", "pp", "dp", "gpus",
              "memory GB/GPU", "utilization", "TTFT ms", "TPOT ms", "tokens/s", "hours"]
    sheet.append(_header(sheet, titles))
    for work in plan.workloads:
        memory, predicted = work.memory, work.predicted
        sheet.append([work.name, work.kind, work.model, work.precision, work.gpu, work.tp,
                      work.pp, work.dp, work.gpus,
                      _cell(sheet, memory.total_gb, "0.0"),
                      _cell(sheet, memory.utilization, "0%"),
                      _cell(sheet, predicted.ttft_ms, "#,##0"),
                      _cell(sheet, predicted.tpot_ms, "0.0"),
                      _cell(sheet, predicted.tokens_per_s, "#,##0"),
                      _cell(sheet, predicted.hours_to_complete, "0.0")])
    cluster = plan.cluster
    sheet.append([])
    sheet.append([_cell(sheet, "Layout", bold=True)])
    sheet.append(_header(sheet, ["gpu", "server", "gpus per node", "nodes"]))
    for node in cluster.nodes:
        sheet.append([node.gpu, node.server, node.gpus_per_node, node.count])
    for label, value, fmt in (("total nodes", cluster.total_nodes, "0"),
                              ("total GPUs", cluster.total_gpus, "0"),
                              ("fabric", cluster.fabric, None),
                              ("coupled", cluster.coupled, None),
                              ("power kW", cluster.power_kw, "0.0"),
                              ("rack units", cluster.rack_units, "0")):
        sheet.append([label, _cell(sheet, value, fmt)])
    if plan.cost is None:
        return
    sheet.append([])
    sheet.append([_cell(sheet, "Cost breakdown", bold=True)])
    sheet.append(_header(sheet, ["item", "USD"]))
    for key, value in plan.cost.model_dump().items():  # the terms, then capex and TCO bold
        bold = key not in COST_TERMS
        sheet.append([_cell(sheet, cost_label(key), bold=bold),
                      _cell(sheet, value, USD_FORMAT, bold=bold)])


def _stored_plan(plan_json: str | None) -> Plan | None:
    """The typed plan of a stored result; None when there is none or it does not validate
    (a store written by another procure version)."""
    if not plan_json:
        return None
    try:
        return Plan.model_validate_json(plan_json)
    except ValidationError:
        return None


def _input_workloads(sheet: Any, input_json: str) -> None:
    """For an RFQ without a plan: the workloads it asked for."""
    try:
        rfq = json.loads(input_json)
    except json.JSONDecodeError:
        return
    sheet.append([])
    sheet.append([_cell(sheet, "Workloads asked for", bold=True)])
    titles = ["name", "kind", "model", "precision", "concurrency", "input tokens",
              "output tokens", "deadline hours"]
    sheet.append(_header(sheet, titles))
    for work in rfq.get("workloads") or []:
        sheet.append([work.get("name"), work.get("kind"), work.get("model"),
                      work.get("precision"), work.get("concurrency"), work.get("input_tokens"),
                      work.get("output_tokens"), work.get("deadline_hours")])
