"""Catalog page: browse GPUs, servers, fabrics, models, vendor profiles and the cost model with
their sources; edit prices as a session overlay and download it as ``prices.csv`` (the
overlay format ``procure … --catalog DIR`` reads)."""

from __future__ import annotations

import csv
import io
from datetime import date
from typing import Any

import pandas as pd
import streamlit as st

from solver.catalog.data import MAX_PRICE_USD
from solver.catalog.load import ENTERED_SOURCE, check_price
from solver.common.errors import InputError
from solver.common.spreadsheet import safe_row

from .. import state

EDITOR_KEY = "catalog_price_editor"
EDITOR_VERSION = "catalog_price_editor_version"
REFUSED_KEY = "catalog_prices_refused"


def _gpus(cat: Any, overlay: dict[str, float]) -> pd.DataFrame:
    rows = []
    for gpu in cat.gpus.values():
        tf = gpu.dense_tflops
        rows.append({"id": gpu.id, "name": gpu.name,
                     "price": overlay.get(gpu.id, gpu.price_usd), "memory GB": gpu.memory_gb,
                     "BW GB/s": gpu.mem_bw_gbs, "BF16 TFLOPS": tf.get("bf16"),
                     "FP8": tf.get("fp8"), "FP4": tf.get("fp4"), "TDP W": gpu.tdp_w,
                     "form": gpu.form_factor, "link": gpu.intra_node_link,
                     "link GB/s": gpu.intra_node_gbs,
                     "price as of": gpu.price_as_of, "price source": gpu.price_source,
                     "source": gpu.source, "as of": gpu.as_of})
    return in_words(pd.DataFrame(rows))


PROVENANCE = ("source", "as_of", "note", "price_source", "price_as_of", "nic_price_source",
              "nic_price_as_of", "datacenter_use_source")
"""Columns shown last: where a figure was read (the key columns come first, issue 32)."""
HIDDEN = ("architecture", "config")
"""Not shown: the parsed config.json (its figures are columns already) and its file path."""


def _cell(value: Any) -> Any:
    """A table cell in words: lists joined, mappings as ``key: value``, nothing as '—'
    (never a Python list, a dict or a grey None)."""
    if value is None:
        return "—"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value) or "—"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items()) or "—"
    return value


def _text(value: Any) -> str:
    """One cell as text (a column with gaps is text throughout: Arrow takes one type)."""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _entries(table: dict[str, Any], overlay: dict[str, float], price_field: str
             ) -> pd.DataFrame:
    rows = []
    for entry in table.values():
        row = entry.model_dump(mode="json")
        if price_field in row:
            row[price_field] = overlay.get(entry.id, row[price_field])
        first = {k: v for k, v in row.items() if k in ("id", "name")}
        rest = {k: v for k, v in row.items() if k not in first and k not in PROVENANCE
                and k not in HIDDEN}
        last = {k: row[k] for k in PROVENANCE if k in row}
        rows.append({k: v for k, v in {**first, **rest, **last}.items()})
    return in_words(pd.DataFrame(rows))


def in_words(frame: pd.DataFrame) -> pd.DataFrame:
    """A column with a gap, a list or a mapping shown in words (no grey None, no Python
    list on screen)."""
    for column in frame.columns:
        values = frame[column].tolist()
        if any(v is None or isinstance(v, list | tuple | dict) for v in values) or \
                frame[column].isna().any():
            frame[column] = [_text(_cell(None if isinstance(v, float) and v != v else v))
                             for v in values]
    return frame


def money(frame: pd.DataFrame) -> dict[str, Any]:
    """Column settings: prices (``price``, ``*_usd``) in whole dollars, named in words."""
    return {c: st.column_config.NumberColumn(
        c.removesuffix("_usd").replace("_", " "),
        format="dollar", step=1)
        for c in frame.columns if c == "price" or str(c).endswith("_usd")}


def _vendor_filter(cat: Any, frame: pd.DataFrame, kind: str, vendor: str) -> pd.DataFrame:
    if not vendor:
        return frame
    profile = cat.vendors[vendor]
    return frame[[profile.allows(kind, i) for i in frame["id"]]]


def _text_filter(frame: pd.DataFrame, text: str) -> pd.DataFrame:
    if not text:
        return frame
    mask = frame.astype(str).apply(lambda col: col.str.contains(text, case=False,
                                                                regex=False)).any(axis=1)
    return frame[mask]


def prices_csv(cat: Any, overlay: dict[str, float],
               days: dict[str, str] | None = None) -> str:
    """The overlay as ``prices.csv`` (id,price_usd,as_of,source) for ``--catalog DIR``: each
    price a quote entered on its day, as the dashboard's plans label it."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["id", "price_usd", "as_of", "source"])
    today = date.today().isoformat()
    for entry_id, price in sorted(overlay.items()):
        if state.price_path(cat, entry_id) is not None:
            day = (days or {}).get(entry_id, today)
            writer.writerow(safe_row([entry_id, f"{price:g}", day,
                                      ENTERED_SOURCE.format(day=day)]))
    return buffer.getvalue()


def _price_rows(cat: Any, overlay: dict[str, float]) -> pd.DataFrame:
    rows = []
    for kind, table, field in (("GPU", cat.gpus, "price_usd"),
                               ("server", cat.servers, "price_usd"),
                               ("fabric NIC", cat.fabrics, "nic_price_usd")):
        for entry_id, entry in table.items():
            if kind == "fabric NIC" and entry_id == "none":
                continue
            base = float(getattr(entry, field))
            rows.append({"id": entry_id, "kind": kind, "catalog USD": base,
                         "your USD": float(overlay.get(entry_id, base))})
    return pd.DataFrame(rows)


def _editor_key() -> str:
    """The price editor's widget key: a new one after a refused price, so the grid shows
    the prices in force again instead of the refused figure."""
    return f"{EDITOR_KEY}-{st.session_state.get(EDITOR_VERSION, 0)}"


def _save_overlay(cat: Any) -> None:
    """Apply the prices typed in the editor; a price ``prices.csv`` would refuse (zero,
    negative, beyond the largest price) is refused here with its reason."""
    edited = st.session_state.get(_editor_key()) or {}
    frame = _price_rows(cat, state.price_overlay())
    overlay = state.price_overlay()
    typed: list[str] = []
    refused: list[str] = []
    for index, change in (edited.get("edited_rows") or {}).items():
        if "your USD" not in change:
            continue
        row = frame.iloc[int(index)]
        value = change["your USD"]
        if value is None or abs(float(value) - row["catalog USD"]) < 0.005:  # unset
            overlay.pop(row["id"], None)
            continue
        try:
            price = check_price(value, "Catalog page", row["id"])
        except InputError as exc:
            problem = exc.problems[0]
            refused.append(f"{row['kind']} {row['id']}: ${float(value):,.0f} refused - "
                           f"{problem.reason}; the price stays "
                           f"${overlay.get(row['id'], row['catalog USD']):,.0f}")
            continue
        overlay[row["id"]] = price
        typed.append(row["id"])
    state.set_price_overlay(overlay, typed)
    st.session_state[REFUSED_KEY] = refused
    if refused:  # show the prices in force, not the refused figure
        st.session_state[EDITOR_VERSION] = st.session_state.get(EDITOR_VERSION, 0) + 1


def _reset_overlay() -> None:
    state.set_price_overlay({})
    st.session_state[REFUSED_KEY] = []
    st.session_state[EDITOR_VERSION] = st.session_state.get(EDITOR_VERSION, 0) + 1


def render() -> None:
    """The Catalog page."""
    st.title("Catalog")
    cat = state.catalog()
    overlay = state.price_overlay()
    st.caption(f"Catalog version {cat.version}: {len(cat.gpus)} GPUs, {len(cat.servers)} "
               f"servers, {len(cat.fabrics)} fabrics, {len(cat.models)} models, "
               f"{len(cat.vendors)} vendor profiles. Every figure carries its source and date.")
    cols = st.columns([2, 4])
    vendor = cols[0].selectbox("vendor profile", [""] + list(cat.vendors), key="cat_vendor",
                               format_func=lambda v: v or "(all)")
    text = cols[1].text_input("search (any column)", key="cat_text")
    tabs = st.tabs(["GPUs", "Servers", "Fabrics", "Models", "Vendors", "Cost model",
                    "Edit prices"])
    with tabs[0]:
        frame = _vendor_filter(cat, _gpus(cat, overlay), "gpus", vendor)
        forms = sorted(frame["form"].unique())
        picked = st.multiselect("form factor", forms, default=forms, key="cat_form")
        min_mem = st.slider("min memory (GB)", 0, int(frame["memory GB"].max() or 0), 0,
                            key="cat_mem")
        frame = frame[frame["form"].isin(picked) & (frame["memory GB"] >= min_mem)]
        st.dataframe(_text_filter(frame, text), hide_index=True,
                     column_config={"source": st.column_config.TextColumn(width="large"),
                                    **money(frame)})
    with tabs[1]:
        frame = _vendor_filter(cat, _entries(cat.servers, overlay, "price_usd"), "servers",
                               vendor)
        st.dataframe(_text_filter(frame, text), hide_index=True, column_config=money(frame))
    with tabs[2]:
        frame = _vendor_filter(cat, _entries(cat.fabrics, overlay, "nic_price_usd"),
                               "fabrics", vendor)
        st.dataframe(_text_filter(frame, text), hide_index=True, column_config=money(frame))
    with tabs[3]:
        frame = _entries(cat.models, {}, "")
        st.dataframe(_text_filter(frame, text), hide_index=True, column_config=money(frame))
    with tabs[4]:
        frame = _entries(cat.vendors, {}, "")
        st.dataframe(_text_filter(frame, text), hide_index=True, column_config=money(frame))
    with tabs[5]:
        rows = [{"parameter": name, **param.model_dump()}
                for name, param in cat.costs]
        st.dataframe(_text_filter(pd.DataFrame(rows), text), hide_index=True)
    with tabs[6]:
        st.markdown("Change a price in the **your USD** column: it applies to this session's "
                    "Plan, Pareto and What-if pages at once. Download it as `prices.csv`, put "
                    "it in a folder, and run `procure solve RFQ --catalog FOLDER` to use it "
                    "from the command line.")
        for message in st.session_state.get(REFUSED_KEY) or []:
            st.error(message, icon=":material/block:")
        st.data_editor(_price_rows(cat, overlay), key=_editor_key(), hide_index=True,
                       disabled=["id", "kind", "catalog USD"], on_change=_save_overlay,
                       args=(cat,),
                       column_config={"your USD": st.column_config.NumberColumn(
                           max_value=MAX_PRICE_USD, step=1.0, format="%.0f",
                           help="your price in USD, more than 0: plans, the quote and the "
                                "export call it a quote entered today"),
                           "catalog USD": st.column_config.NumberColumn(format="%.0f")})
        cols = st.columns([2, 2, 6])
        cols[0].download_button("Download prices.csv",
                                prices_csv(cat, overlay, state.price_days()),
                                file_name="prices.csv", mime="text/csv",
                                disabled=not overlay)
        cols[1].button("Reset all prices", on_click=_reset_overlay, disabled=not overlay)
        if overlay:
            cols[2].info(f"{len(overlay)} price(s) overridden this session.")
