"""Customer words: what a quote (HTML, XLSX) and the dashboard may say to a buyer.

The plan, the catalog and the analyses speak to the analyst: catalog notes
(``ASSUMPTION (...)``), file names, RFQ field names (``rental: allow``), long source notes with
every URL read. The customer sees sourced facts in plain words instead: a price's type and
date and the sites it was read from (:func:`customer_source`), sentences without file paths
or RFQ settings (:func:`customer_text`), and bill-of-materials lines in units one can order
(:func:`orderable_line`).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlparse

PRICE_WORDS: dict[str, str] = {
    "msrp": "list price (MSRP)",
    "list": "list price",
    "street": "street price",
    "quote": "vendor quote",
    "entered": "quote",
    "derived": "derived from published prices",
    "assumption": "our estimate",
    "estimate": "our estimate",
}
"""A bill-of-materials line's ``price_type`` in customer words."""

NOT_A_SOURCE = ("grokipedia.", "wikipedia.", "docs.google.", "raw.githubusercontent.",
                "github.com", "easymanua.ls", "cupdf.com")
"""Hosts a customer is not pointed to: encyclopaedias, private sheets, code, scanned PDFs."""
MAX_HOSTS = 3

_URL = re.compile(r"https?://[^\s)\]|,;'\"]+")
_FILE_REF = re.compile(
    r"\s*\((?:see |cf\. )?(?:[\w.-]+/)*[\w.-]+\.(?:md|csv|yaml|yml|py|json)"
    r"(?:[^)]*)\)|(?:[\w.-]+/)+[\w.-]+\.(?:md|csv|yaml|yml|py|json)\b|\b[\w-]+\.md\b")
_PRECISIONS = re.compile(r"\[((?:'[a-z0-9]+'(?:, )?)+)\]")

PHRASES: tuple[tuple[str, str], ...] = (
    ("; set rental: allow to plan it", ""),
    (" (rental: allow)", ""),
    ("Set constraints.datacenter_grade_only: true to exclude consumer cards",
     "Ask us for datacenter-grade GPUs only to exclude consumer cards"),
    ("constraints.datacenter_grade_only: true", "datacenter-grade GPUs only"),
    ("pinned by the RFQ's precision", "the precision requested"),
    ("allowed by the RFQ's precisions", "one of the precisions allowed"),
    ("the same RFQ", "the same requirements"),
    ("the RFQ's", "the requested"),
    (" (prices.csv overlay)", ""),
    (" (a --catalog overlay's rental.csv)", ""),
    ("the catalog's prices", "list and market prices"),
)
"""Analyst phrases and their customer wording, applied in this order."""

RFQ_FIELD_WORDS: dict[str, str] = {
    "rental": "renting", "budget_usd": "budget", "horizon_years": "horizon",
    "max_nodes": "most servers", "max_gpus": "most GPUs", "max_power_kw": "power limit",
    "max_rack_units": "rack space", "datacenter_grade_only": "datacenter-grade GPUs only",
    "mixed_vendors": "mixed GPU vendors", "deadline_hours": "deadline",
    "target_utilization": "target utilisation", "slo_percentile": "SLO percentile",
    "ttft_ms": "time to first token", "tpot_ms": "time per output token",
    "growth_per_year": "growth per year", "dataset_tokens": "dataset size",
    "input_tokens": "prompt length", "output_tokens": "answer length",
    "coupled_training_fabric": "training fabric", "seq_len": "sequence length",
    "max_kw_per_rack": "power per rack", "lan_ports": "free LAN ports",
    "continuous_load_factor": "continuous-load share",
    "disaggregated": "prefill/decode disaggregation",
}
"""RFQ fields a sentence may name, in the customer's words."""


def source_hosts(source: str | None) -> list[str]:
    """The web sites a catalog source cites (``www.`` dropped, encyclopaedias and private
    documents left out), in order, at most :data:`MAX_HOSTS`."""
    hosts: list[str] = []
    for url in _URL.findall(str(source or "")):
        host = urlparse(url).netloc.lower().removeprefix("www.")
        if host and host not in hosts and not any(bad in host for bad in NOT_A_SOURCE):
            hosts.append(host)
    return hosts[:MAX_HOSTS]


def source_title(source: str | None) -> str:
    """Where a price was read, for the customer: the sites cited, ``our estimate`` for a
    labelled assumption, else ``published prices``."""
    text = str(source or "")
    if "ASSUMPTION" in text.upper():
        return "our estimate"
    entered = re.match(r"entered (\d{4}-\d{2}-\d{2})", text)
    if entered:
        return f"quote entered {entered.group(1)}"
    return ", ".join(source_hosts(text)) or "published prices"


def price_words(price_type: str | None) -> str:
    """A price type in customer words (``msrp`` -> ``list price (MSRP)``)."""
    key = str(price_type or "").strip().lower()
    return PRICE_WORDS.get(key, key.replace("_", " ") or "price")


def customer_source(price_type: str | None, as_of: str | None, source: str | None) -> str:
    """One price's basis for the customer: its type, its month and where it was read -
    ``list price (MSRP), 2026-04; newgearhub.com``, ``our estimate, 2026-08``, or for a
    price entered as a quote ``quote, entered 2026-12-05`` - never the catalog's notes."""
    kind = price_words(price_type)
    text = str(source or "")
    entered = re.match(r"entered (\d{4}-\d{2}-\d{2})", text)
    if str(price_type) in ("entered", "quote") and entered:
        return f"quote, entered {entered.group(1)}"
    words = kind + (f", {as_of}" if as_of else "")
    if kind == "our estimate" or "ASSUMPTION" in text.upper():
        return "our estimate" + (f", {as_of}" if as_of else "")
    hosts = source_hosts(text)
    return words + (f"; {', '.join(hosts)}" if hosts else "")


def customer_text(text: str) -> str:
    """A sentence of the plan or an analysis in customer words: no file names or paths,
    no RFQ settings (``rental: allow``, ``constraints.max_nodes``), no Python lists."""
    out = str(text)
    for old, new in PHRASES:
        out = out.replace(old, new)
    out = _FILE_REF.sub("", out)
    out = _PRECISIONS.sub(lambda m: "(" + ", ".join(
        p.strip("' ").upper() for p in m.group(1).split(",")) + ")", out)
    out = re.sub(r"\b(?:constraints|facility)\.([a-z_]+)", r"\1", out)
    for field, words in RFQ_FIELD_WORDS.items():
        out = re.sub(rf"\b{field}\b(?=:|\s*=)" if "_" not in field else rf"\b{field}\b",
                     words, out)
    return re.sub(r"\s{2,}", " ", out).replace(" .", ".").replace(" ;", ";").strip()


def model_words(model: str) -> str:
    """A workload's model for the customer: a catalog id as it is, a ``config.json`` path
    as the folder that names the model (``.../acme-support-32b/config.json`` ->
    ``acme-support-32b``), never the path."""
    text = str(model)
    if "/" not in text and "\\" not in text:
        return text
    parts = [p for p in re.split(r"[\\/]", text) if p]
    if len(parts) >= 2 and parts[-1].lower().endswith(".json"):
        return parts[-2]
    return re.sub(r"\.(json|yaml|yml)$", "", parts[-1]) if parts else text


def orderable_line(line: dict[str, Any]) -> dict[str, Any]:
    """A bill-of-materials line in a unit one orders: whole items as they are; a fractional
    quantity (checkpoint storage sized in TB, write bandwidth in GB/s) becomes one lot sized
    to it - the description states the size, the line total is unchanged."""
    quantity = float(line["quantity"])
    if quantity.is_integer():
        return {**line, "order_quantity": int(quantity), "order_unit_usd":
                line["unit_price_usd"]}
    unit = _unit_of(str(line.get("description", "")))
    return {**line, "order_quantity": 1, "order_unit_usd": line["line_total_usd"],
            "description": f"{line.get('description', '')} - one lot sized to "
                           f"{quantity:,.2f} {unit} at "
                           f"${float(line['unit_price_usd']):,.0f} per {unit}"}


def _unit_of(description: str) -> str:
    """The unit a fractional line is sized in, from its description (``TB``, ``GB/s``)."""
    for unit in ("GB/s", "TB", "GB", "kW", "hours", "h"):
        if unit in description:
            return unit
    return "unit"


def is_renting_hint(text: str) -> bool:
    """An alternative or warning that only says renting would be cheaper."""
    lowered = text.lower()
    return lowered.startswith("renting ") or "renting allowed" in lowered
