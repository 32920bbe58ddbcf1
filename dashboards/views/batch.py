"""Batch page: upload a zip of RFQ files or a CSV batch, run it with a progress bar, filter
the results, download them as XLSX or CSV. Files live in a temp dir for the run only."""

from __future__ import annotations

import io
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from solver.common.errors import InputError, Problem
from solver.common.spreadsheet import cell_text

from .. import components, state
from ..uploads import MAX_ZIP_MEMBERS, unpack_batch

RESULT_KEY = "batch_result"
_number = st.column_config.NumberColumn
COLUMNS = {  # the export's field names, shown in words; money in whole dollars
    "rfq": "RFQ", "tco_usd": _number("TCO", format="dollar", step=1),
    "capex_usd": _number("capex", format="dollar", step=1), "total_nodes": "nodes",
    "total_gpus": "GPUs", "gpu": "GPU", "power_kw": "power (kW)", "rack_units": "rack units",
    "catalog_version": "catalog", "solve_seconds": _number("solve (s)", format="%.2f"),
    "created_at": "run at",
}


class _Progress:
    """A BatchObserver that drives a Streamlit progress bar."""

    def __init__(self) -> None:
        self.bar = st.progress(0.0, text="starting…")
        self.total = 0
        self.done = 0

    def start(self, total: int) -> None:
        self.total = max(total, 1)

    def advance(self, event: Any) -> None:
        self.done += 1
        self.bar.progress(min(self.done / self.total, 1.0),
                          text=f"{self.done}/{self.total} · {event.rfq_id}: {event.status}")


class _Scrub:
    """Replaces the run's temp paths in text: a file's upload folder becomes the upload's
    name (``rfqs.zip/a/chat.yaml``, ``chat.yaml``), anything else under the temp folder its
    path inside it. No download, table or message shows ``/tmp/procure-batch-…``."""

    def __init__(self, folder: Path, names: list[str]) -> None:
        pairs: list[tuple[str, str]] = []
        roots = dict.fromkeys([str(folder.resolve()), str(folder)])
        for root in roots:
            for index, name in enumerate(names):
                shown = f"{name}/" if Path(name).suffix.lower() == ".zip" else ""
                pairs.append((f"{root}/in/upload-{index}/", shown))
            pairs += [(f"{root}/in/", ""), (f"{root}/", ""), (root, "")]
        self.pairs = pairs

    def __call__(self, text: Any) -> Any:
        if not isinstance(text, str):
            return text
        for prefix, shown in self.pairs:
            text = text.replace(prefix, shown)
        return text

    def problems(self, exc: InputError) -> InputError:
        return InputError([Problem(self(p.file), p.field, self(p.value), self(p.reason))
                           for p in exc.problems])

    def xlsx(self, data: bytes) -> bytes:
        """The workbook with every text cell scrubbed (formats and sheets kept)."""
        from openpyxl import load_workbook

        book = load_workbook(io.BytesIO(data))
        for sheet in book.worksheets:
            for row in sheet.iter_rows():
                for cell in row:
                    if isinstance(cell.value, str):  # scrubbed, and still formula-safe
                        cell.value = cell_text(self(cell.value))
        out = io.BytesIO()
        book.save(out)
        return out.getvalue()


def _openable(sources: list[Path], folder: Path) -> dict[str, dict[str, Any]]:
    """Valid RFQs of the batch as the dashboard's plain dicts, by id (first source wins), so a
    result row can be opened in Plan. RFQs that name a file of the upload (a model
    config.json) are left out: the temp folder is gone after the run."""
    from solver.rfq.schema import iter_csv_rfqs, parse_text, validate_rfq

    cat = state.catalog()
    found: dict[str, dict[str, Any]] = {}
    for path in sources:
        try:
            if path.suffix.lower() == ".csv":
                rfqs = [r for _, r in iter_csv_rfqs(path, cat, confine=True)
                        if not isinstance(r, InputError)]
            else:
                parsed = parse_text(path.read_text(encoding="utf-8"), path.name,
                                    path.suffix.lower())
                rfqs = [validate_rfq(parsed, cat, path.name, base_dir=path.parent,
                                     confine=True)]
        except (InputError, OSError, UnicodeError, ValueError):
            continue
        for rfq in rfqs:
            data = state.rfq_to_data(rfq)
            if rfq.id not in found and str(folder) not in json.dumps(data):
                found[rfq.id] = data
    return found


def run(files: list[tuple[str, bytes]]) -> dict[str, Any]:
    """Unpack, run the batch into a temp SQLite store, read back the table and exports."""
    from solver.batch.export import export
    from solver.batch.runner import is_model_config, run_batch
    from solver.batch.store import ResultStore

    with tempfile.TemporaryDirectory(prefix="procure-batch-") as tmp:
        folder = Path(tmp)
        scrub = _Scrub(folder, [name for name, _ in files])
        try:
            sources = [path for path in unpack_batch(files, folder / "in")
                       if not is_model_config(path)]  # configs an RFQ names: not RFQs
            db = folder / "results.sqlite"
            summary = run_batch([str(p) for p in sources], db,
                                catalog_dir=state.catalog_dir(), workers=1,
                                observer=_Progress(), solver=state.SOLVER,
                                confine_models=True)  # uploads reach no server file
            with ResultStore(db) as store:
                export(store, folder / "results.csv", summary.run_id)
                export(store, folder / "results.xlsx", summary.run_id)
        except InputError as exc:
            raise scrub.problems(exc) from None
        table = pd.read_csv(folder / "results.csv")
        for column in table.columns:
            if not pd.api.types.is_numeric_dtype(table[column]):
                table[column] = table[column].map(lambda v: cell_text(scrub(v)))
        return {"table": table, "csv": table.to_csv(index=False).encode(),
                "xlsx": scrub.xlsx((folder / "results.xlsx").read_bytes()),
                "rfqs": _openable(sources, folder),
                "summary": {"total": summary.total, "by_status": summary.by_status,
                            "median": summary.median_tco_usd, "seconds": summary.wall_seconds,
                            "duplicates": [scrub(d) for d in summary.duplicates]}}


def _filters(table: pd.DataFrame) -> pd.DataFrame:
    cols = st.columns([3, 3, 4])
    statuses = sorted(table["status"].dropna().unique())
    chosen = cols[0].multiselect("status", statuses, default=statuses, key="batch_status")
    gpus = sorted(table["gpu"].dropna().astype(str).unique())
    chosen_gpus = cols[1].multiselect("GPU", gpus, key="batch_gpu",
                                      placeholder="any GPU")
    text = cols[2].text_input("RFQ id contains", key="batch_text")
    shown = table[table["status"].isin(chosen)]
    if chosen_gpus:
        shown = shown[shown["gpu"].astype(str).isin(chosen_gpus)]
    if text:
        shown = shown[shown["rfq"].astype(str).str.contains(text, case=False, regex=False)]
    priced = shown["tco_usd"].dropna()
    if len(priced) > 1 and priced.min() < priced.max():
        # in thousands of dollars: the slider's format cannot group digits ($1723432)
        least, most = math.floor(priced.min() / 1000), math.ceil(priced.max() / 1000)
        low, high = st.slider("TCO range (thousands of dollars)", least, most, (least, most),
                              step=1, format="$%dk", key="batch_tco")
        low, high = low * 1000, high * 1000
        shown = shown[shown["tco_usd"].isna() | shown["tco_usd"].between(low, high)]
    return shown


def render() -> None:
    """The Batch page."""
    st.title("Batch")
    st.caption("Evaluate many RFQs at once: a zip of .yaml/.json files, a CSV batch (one "
               "workload per row, RFQ keys repeated), or several files. Invalid and infeasible "
               f"RFQs are recorded, not fatal. At most {MAX_ZIP_MEMBERS} files; for bigger "
               "batches use `procure batch`.")
    components.overlay_note()
    if state.price_overlay():
        st.caption("Note: batches run on the catalog without the session price overlay "
                   "(download the overlay from the Catalog page and use `procure batch "
                   "--catalog`).")
    uploads = st.file_uploader("RFQ files, a zip of them, or a CSV batch",
                               type=["zip", "csv", "yaml", "yml", "json"],
                               accept_multiple_files=True, key="batch_upload")
    if st.button("Run batch", type="primary", disabled=not uploads):
        files = [(f.name, f.getvalue()) for f in uploads or []]
        try:
            st.session_state[RESULT_KEY] = run(files)
        except InputError as exc:
            st.session_state.pop(RESULT_KEY, None)
            components.show_problems(exc, "Cannot run this batch")
    result = st.session_state.get(RESULT_KEY)
    if not result:
        return
    summary = result["summary"]
    cols = st.columns(4)
    cols[0].metric("RFQs", summary["total"])
    cols[1].metric("with a plan", sum(n for s, n in summary["by_status"].items()
                                      if s in ("optimal", "feasible")))
    cols[2].metric("infeasible / invalid",
                   f"{summary['by_status'].get('infeasible', 0)} / "
                   f"{summary['by_status'].get('invalid', 0)}")
    cols[3].metric("median TCO", "-" if summary["median"] is None
                   else f"${summary['median']:,.0f}")
    for duplicate in summary["duplicates"]:
        st.warning(f"duplicate id: {duplicate}")
    table = result["table"]
    shown = _filters(table)
    # whole dollars rounded as on the Plan page (the column format alone would cut cents)
    display = shown.assign(**{c: shown[c].round(0) for c in ("tco_usd", "capex_usd")
                              if c in shown},
                           **({"error": shown["error"].fillna("")} if "error" in shown else {}))
    st.dataframe(display, hide_index=True, column_config=COLUMNS)
    st.caption(f"{len(shown)} of {len(table)} RFQs shown · ran in {summary['seconds']:.1f} s")
    _open_in_plan(shown, result.get("rfqs") or {})
    cols = st.columns(4)
    cols[0].download_button("Download XLSX", result["xlsx"], file_name="batch-results.xlsx",
                            mime="application/vnd.openxmlformats-officedocument."
                                 "spreadsheetml.sheet")
    cols[1].download_button("Download CSV", result["csv"], file_name="batch-results.csv",
                            mime="text/csv")


OPEN_KEY = "batch_open"


def _open_in_plan(shown: pd.DataFrame, rfqs: dict[str, dict[str, Any]]) -> None:
    """Pick a result row and open its RFQ as the active scenario on the Plan page."""
    ids = [str(r) for r in shown["rfq"].dropna().astype(str) if str(r) in rfqs]
    if not ids:
        return
    ids = list(dict.fromkeys(ids))
    cols = st.columns([4, 2, 4], vertical_alignment="bottom")
    rfq_id = cols[0].selectbox("Open a result in Plan", ids, key=OPEN_KEY,
                               help="makes this RFQ the active scenario (and the Scenario "
                                    "form) and shows its plan, decision path and quote")
    if cols[1].button("Open in Plan", key="batch_open_button", icon=":material/dns:"):
        from . import scenario

        data = rfqs[rfq_id]
        state.set_active(data, f"batch {rfq_id}")
        scenario.load_into_form(data)
        target = state.nav_page("plan")
        if target is not None:
            st.switch_page(target)
        st.success(f"**{rfq_id}** is now the active RFQ: see the **Plan** page.")
