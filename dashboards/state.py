"""Session state and caches of the dashboard: the one place with Streamlit cache decorators.

Everything that solves goes through a cached function keyed by plain values: the RFQ as
canonical JSON, the ``--catalog`` directory, and the price overlay and what-if overrides as
tuples of ``(override path, value)`` (the scenario language of :mod:`solver.rfq.overrides`).
The library does the work; this module only remembers answers.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import streamlit as st
import yaml

from solver.catalog.data import Catalog
from solver.catalog.load import load_catalog
from solver.common.errors import InputError
from solver.optimize.plan_model import Plan
from solver.rfq.schema import Rfq, validate_rfq

CATALOG_ENV = "PROCURE_DASHBOARD_CATALOG"
SCENARIOS_ENV = "PROCURE_DASHBOARD_SCENARIOS"
DEFAULT_EXAMPLE = "chat-70b-one-node"
SOLVER = "highs"  # the CLI's default backend (solver.optimize.backends.DEFAULT_SOLVER)

Pairs = tuple[tuple[str, Any], ...]
PricePairs = tuple[tuple[str, float, str], ...]
"""Typed prices: (entry id, USD, ISO day entered)."""

# session keys
RFQ_DATA = "rfq_data"          # the active RFQ (validated), as a plain dict
RFQ_SOURCE = "rfq_source"      # where it came from (example name, upload, form)
PRICE_OVERLAY = "price_overlay"  # {entry id: price USD}: the Catalog page's session overlay
PRICE_DAYS = "price_overlay_days"  # {entry id: ISO day the price was typed}

NAV_PAGES = "nav_pages"         # {url path: st.Page} of this session's navigation (shell)


def nav_page(url_path: str) -> Any:
    """The app's ``st.Page`` for a URL path (None when a page runs alone, as in tests)."""
    return (st.session_state.get(NAV_PAGES) or {}).get(url_path)


# --- catalog and examples ---------------------------------------------------------------

def catalog_dir() -> str | None:
    """The ``--catalog DIR`` the dashboard was started with (None: the built-in catalog)."""
    return os.environ.get(CATALOG_ENV) or None


@st.cache_resource(show_spinner=False)
def _catalog(directory: str | None) -> Catalog:
    return load_catalog(directory)


def catalog() -> Catalog:
    """The catalog the dashboard runs on (without the session's price overlay)."""
    return _catalog(catalog_dir())


def examples_dir() -> Path | None:
    """Where the example RFQs are: installed package data, the source tree, or the env var."""
    candidates = [os.environ.get(SCENARIOS_ENV)]
    here = Path(__file__).resolve().parent
    candidates += [str(here.parent / "procure_scenarios"), str(here.parent / "scenarios")]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


def examples() -> dict[str, Path]:
    """Example RFQ files by name (file stem), sorted."""
    folder = examples_dir()
    if folder is None:
        return {}
    files = [p for p in folder.iterdir() if p.suffix.lower() in (".yaml", ".yml", ".json")]
    return {p.stem: p for p in sorted(files)}


@st.cache_data(show_spinner=False)
def _example_data(path: str) -> Any:
    from solver.rfq.schema import parse_text

    file = Path(path)
    return parse_text(file.read_text(encoding="utf-8"), file.name, file.suffix.lower())


def load_example(name: str) -> dict[str, Any]:
    """Parse and validate one example; raises InputError when it is not valid."""
    path = examples()[name]
    rfq = validate_rfq(_example_data(str(path)), catalog(), path.name, base_dir=path.parent)
    return rfq_to_data(rfq)


# --- the active RFQ ---------------------------------------------------------------------

def rfq_to_data(rfq: Rfq) -> dict[str, Any]:
    """A validated RFQ as the plain dict of the file format (defaults and Nones dropped)."""
    return rfq.model_dump(mode="json", exclude_none=True, exclude_defaults=False)


def rfq_yaml(data: dict[str, Any]) -> str:
    """The RFQ as YAML text, keys in the contract's order."""
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def set_active(data: dict[str, Any], source: str) -> None:
    """Make a validated RFQ (as dict) the one every page works on."""
    st.session_state[RFQ_DATA] = data
    st.session_state[RFQ_SOURCE] = source


def ensure_defaults() -> None:
    """Start a fresh session on the default example, so every page has something to show."""
    if RFQ_DATA in st.session_state:
        return
    st.session_state[PRICE_OVERLAY] = {}
    names = examples()
    name = DEFAULT_EXAMPLE if DEFAULT_EXAMPLE in names else next(iter(names), None)
    if name is None:
        st.session_state[RFQ_DATA] = None
        st.session_state[RFQ_SOURCE] = ""
        return
    try:
        set_active(load_example(name), f"example {name}")
    except InputError:
        st.session_state[RFQ_DATA] = None
        st.session_state[RFQ_SOURCE] = ""


def active() -> tuple[dict[str, Any] | None, str]:
    """The active RFQ dict (or None) and where it came from."""
    return st.session_state.get(RFQ_DATA), st.session_state.get(RFQ_SOURCE, "")


def active_key() -> str | None:
    """The active RFQ as canonical JSON (the cache key), or None."""
    data, _ = active()
    return None if data is None else json.dumps(data, sort_keys=True)


# --- the price overlay ------------------------------------------------------------------

def price_overlay() -> dict[str, float]:
    return dict(st.session_state.get(PRICE_OVERLAY) or {})


def set_price_overlay(overlay: dict[str, float], typed: list[str] | None = None) -> None:
    """The session's typed prices; ``typed``: ids typed just now (entered today)."""
    import datetime as dt

    st.session_state[PRICE_OVERLAY] = dict(overlay)
    days = {k: v for k, v in (st.session_state.get(PRICE_DAYS) or {}).items() if k in overlay}
    for entry_id in typed or []:
        days[entry_id] = dt.date.today().isoformat()
    st.session_state[PRICE_DAYS] = days


def price_days() -> dict[str, str]:
    """The day each typed price was entered (ISO dates; absent: today)."""
    return dict(st.session_state.get(PRICE_DAYS) or {})


def price_path(cat: Catalog, entry_id: str) -> str | None:
    """The override path of an entry's price (fabrics: the NIC price, as in prices.csv)."""
    if entry_id in cat.gpus:
        return f"gpu.{entry_id}.price_usd"
    if entry_id in cat.servers:
        return f"server.{entry_id}.price_usd"
    if entry_id in cat.fabrics:
        return f"fabric.{entry_id}.nic_price_usd"
    return None


def price_pairs() -> PricePairs:
    """The session's typed prices as ``(id, USD, day entered)`` (sorted: a stable cache
    key); :func:`scenario` applies them as quotes entered that day."""
    import datetime as dt

    cat = catalog()
    days = price_days()
    today = dt.date.today().isoformat()
    return tuple((entry_id, float(price), days.get(entry_id, today))
                 for entry_id, price in sorted(price_overlay().items())
                 if price_path(cat, entry_id) is not None)


# --- cached library calls ---------------------------------------------------------------

def scenario(rfq_json: str, directory: str | None, pairs: PricePairs) -> tuple[Catalog, Rfq]:
    """Catalog and validated RFQ with the override pairs applied."""
    from solver.catalog.load import entered_prices

    cat = _catalog(directory)
    by_day: dict[str, dict[str, float]] = {}
    for entry_id, price, day in pairs:  # typed prices: quotes entered that day
        by_day.setdefault(day, {})[entry_id] = price
    for day, prices in sorted(by_day.items()):
        cat = entered_prices(cat, prices, day)
    rfq = validate_rfq(json.loads(rfq_json), cat, "dashboard")
    return cat, rfq


@st.cache_data(show_spinner=False, max_entries=64)
def solve_cached(rfq_json: str, directory: str | None, pairs: PricePairs) -> dict[str, Any]:
    """The plan (:class:`~solver.optimize.plan_model.Plan`) and the counterfactuals of
    ``explain``."""
    from solver.analysis.explain import counterfactuals, solve_rfq
    from solver.optimize.candidates import build_candidates

    from .progress import progress_bar

    cat, rfq = scenario(rfq_json, directory, pairs)
    with progress_bar("Solving"):
        table = build_candidates(cat, rfq)
        plan = solve_rfq(rfq, cat, solver=SOLVER, table=table, binding=True, alternative=True)
        alternatives = counterfactuals(rfq, cat, plan, table, SOLVER) if plan.feasible else []
    return {"plan": plan, "counterfactuals": alternatives}


@st.cache_resource(show_spinner=False, max_entries=8)
def _evaluator(rfq_json: str, directory: str | None, pairs: PricePairs) -> Any:
    from solver.analysis.sensitivity import Evaluator

    cat, rfq = scenario(rfq_json, directory, pairs)
    return Evaluator(cat, rfq, SOLVER)


@st.cache_data(show_spinner=False, max_entries=256)
def whatif_cached(rfq_json: str, directory: str | None, pairs: PricePairs,
                  whatif: Pairs) -> Plan:
    """The plan under what-if overrides, re-using the base candidate table where it can."""
    from solver.analysis.explain import solve_rfq
    from solver.rfq.overrides import apply_pairs

    ev = _evaluator(rfq_json, directory, pairs)
    table, rfq = ev.table_for(list(whatif))
    cat, _ = apply_pairs(ev.catalog, ev.rfq, list(whatif), "what-if")
    return solve_rfq(rfq, cat, solver=SOLVER, table=table)


@st.cache_data(show_spinner=False, max_entries=32)
def pareto_cached(rfq_json: str, directory: str | None, pairs: PricePairs, metric: str | None,
                  points: int | None) -> dict[str, Any]:
    """The Pareto frontier (``procure pareto --json``; each point's ``plan`` a
    :class:`~solver.optimize.plan_model.Plan`)."""
    from solver.analysis.pareto import frontier

    from .progress import progress_bar

    cat, rfq = scenario(rfq_json, directory, pairs)
    with progress_bar("Walking the frontier"):
        return frontier(cat, rfq, metric=metric, points=points, solver=SOLVER)


@st.cache_data(show_spinner=False, max_entries=32)
def budget_cached(rfq_json: str, directory: str | None, pairs: PricePairs, points: int
                  ) -> dict[str, Any]:
    """Served share against budget (``procure pareto --over budget --json``)."""
    from solver.analysis.budget import budget_curve

    cat, rfq = scenario(rfq_json, directory, pairs)
    return budget_curve(cat, rfq, points=points, solver=SOLVER)


@st.cache_data(show_spinner=False, max_entries=32)
def sensitivity_cached(rfq_json: str, directory: str | None, pairs: PricePairs) -> dict[str, Any]:
    """The sensitivity report: tornado rows and break-evens."""
    from solver.analysis.sensitivity import report

    from .progress import progress_bar

    cat, rfq = scenario(rfq_json, directory, pairs)
    with progress_bar("Sensitivity"):
        return report(cat, rfq, solver=SOLVER)


def metric_choices(data: dict[str, Any]) -> list[str]:
    """``workload:metric`` choices the Pareto frontier supports for this RFQ."""
    choices = []
    for workload in data.get("workloads", []):
        name, kind = workload["name"], workload["kind"]
        if kind == "inference":
            metrics = ["tpot_ms", "ttft_ms", "headroom", "failure_domains"]
        elif kind == "batch_inference":
            metrics = ["hours_to_complete", "headroom", "failure_domains"]
        else:
            metrics = ["hours_to_complete", "failure_domains"]
        choices += [f"{name}:{m}" for m in metrics]
    return choices
