"""Terminal output that fits (issue 12 item 4): 80 columns, every layout, money as $1,234.

Each scenario's plan is rendered with a Rich console 80 columns wide; no cell may be cut
('…'), no line may be wider than 80, money never shows cents or scientific notation, every
layout of a workload is listed with TP×PP×DP = GPUs, and an infeasible RFQ's relaxation is
said in words.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from solver.analysis.explain import solve_rfq
from solver.cli.solve import print_plan
from solver.common.wording import assumptions, layout_rows, relaxations, usd
from solver.rfq.schema import load_rfq

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
NAMES = sorted(p.name for p in SCENARIOS.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
MONEY = re.compile(r"\$\d(?:[\d,]*\d)?(?:\.\d+)?(?:e[+-]?\d+)?")


def _render(plan, catalog, rfq, width: int = 80) -> str:
    console = Console(width=width, file=io.StringIO(), highlight=False, color_system=None)
    print_plan(plan, assumptions(catalog, rfq, plan.to_json()), rfq, console=console)
    return console.file.getvalue()


@pytest.fixture(scope="module")
def solved(catalog):
    plans = {}
    for name in NAMES:
        rfq = load_rfq(SCENARIOS / name, catalog)
        plans[name] = (rfq, solve_rfq(rfq, catalog, explain=False))
    return plans


@pytest.mark.parametrize("name", NAMES)
def test_plan_fits_80_columns_with_whole_dollars(catalog, solved, name):
    rfq, plan = solved[name]
    text = _render(plan, catalog, rfq)
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    prices = "\n".join(line for line in text.splitlines()  # issue 32: unit prices in cents
                       if "per million" not in line)
    for amount in MONEY.findall(prices):
        assert re.fullmatch(r"\$\d{1,3}(,\d{3})*(\.\d+)?", amount), amount
        if "." in amount:  # only electricity prices ($0.12/kWh) carry decimals
            assert amount.startswith("$0."), amount
    assert f"horizon {rfq.horizon_years:g} years" in text and "PUE" in text
    if plan.to_json()["status"] == "optimal":
        assert usd(plan.to_json()["cost"]["tco_usd"]) in text
        for node in plan.to_json()["cluster"]["nodes"]:
            assert f"price {node['gpu']}" in text  # prices with their dates


@pytest.mark.parametrize("name", [n for n in NAMES if "infeasible" not in n])
def test_every_layout_listed_and_counts_add_up(catalog, solved, name):
    rfq, plan = solved[name]
    text = _render(plan, catalog, rfq)
    for entry in plan.to_json()["workloads"]:
        rows = layout_rows(entry)
        assert sum(r["gpus"] for r in rows) == entry["gpus"]
        for row in rows:
            if row["mode"] == "disaggregated":  # issue 27: units of prefill + decode pools
                lay = next(lay for lay in entry.get("layouts") or [entry]
                           if lay.get("mode") == "disaggregated")
                unit = lay["prefill"]["gpus"] + lay["decode"]["gpus"]
                assert row["gpus"] == unit * row["dp"]
                flat = " ".join(text.split())  # the pools' line may wrap
                assert f"unit ({unit} GPUs, {row['dp']}×): {row['layout']}" in flat
                continue
            # attention data parallelism (issue 27): tp x attention-DP ranks per stage
            assert row["tp"] * row["attention_dp"] * row["pp"] * row["dp"] == row["gpus"]
            assert f"{row['tp']}×{row['pp']}×{row['dp']}" in text
            if row["ep"] > 1:
                assert row["layout"] in text
        if entry.get("layouts"):
            assert len(rows) == len(entry["layouts"]) >= 2
    data = plan.to_json()
    total = data["cluster"]["total_gpus"]
    if data.get("timetable"):  # busy and quiet hours share GPUs (issue 29): per slot
        for slot in data["timetable"]:
            assert sum(r["owned_gpus"] for r in slot["runs"]) <= total
    else:
        assert sum(w["gpus"] for w in data["workloads"]  # rented GPUs are not bought (issue 16)
                   if w.get("sourcing", "owned") == "owned") <= total


def test_two_layouts_both_shown(catalog, solved):
    # whichever shipped plan mixes layouts in one workload (the MIP's choice, not pinned)
    rfq, plan, entry = next((rfq, plan, w) for rfq, plan in solved.values()
                            for w in plan.to_json()["workloads"] if len(w.get("layouts", [])) > 1)
    text = _render(plan, catalog, rfq)
    shapes = [f"{lay['tp']}×{lay['pp']}×{lay['replicas']}" for lay in entry["layouts"]]
    assert all(shape in text for shape in shapes)
    spec = next(w for w in rfq.workloads if w.name == entry["name"])
    demand = getattr(spec, "concurrency", None)
    assert demand is None or entry["predicted"]["max_concurrency"] >= demand


def test_infeasible_relaxation_in_words(catalog, solved):
    rfq, plan = solved["infeasible-budget.yaml"]
    text = _render(plan, catalog, rfq)
    needed = plan.to_json()["infeasibility"]["closest"]["budget_usd"]
    assert f"raise the budget to ${needed:,.0f}" in " ".join(text.split())
    assert "that buys" in text and "{" not in text
    assert "e+" not in text


def test_relaxation_words_for_limits_and_workloads():
    info = {"closest": {"constraints.max_nodes": 3, "chat": {"deadline_hours": 41.25},
                        "big": {"gpus_that_fit": ["h100-sxm"]}}}
    words = relaxations(info)
    assert words[0] == "allow 3 nodes (max_nodes)"
    assert "extend the deadline to at least 41.2 h" in words[1]
    assert "h100-sxm" in words[2]
    assert usd(1_522_250.4) == "$1,522,250" and usd(-5) == "-$5"


def test_sensitivity_report_fits_80_columns_with_whole_cluster_names(monkeypatch):
    """The tornado table keeps to numbers; where the plan flips is listed below it, so a
    cluster description is never cut to 'pcie-8gpu…' in a narrow column."""
    import solver.cli.pareto as pareto_cli

    console = Console(width=80, file=io.StringIO(), highlight=False, color_system=None)
    monkeypatch.setattr(pareto_cli, "out", console)
    clusters = ["1 × pcie-4gpu/rtx-5090x4, 1 × pcie-8gpu/rtx-pro-6000x8, fabric none",
                "2 × hgx-h100-8gpu/h100-sxmx8, fabric ib-ndr-400"]
    row = {"label": "demand growth (×)", "low": 0.5, "high": 4.0, "tco_low_usd": 145777.0,
           "tco_high_usd": 581144.0, "swing_usd": 435367.0,
           "flips": [{"at": 1.52995, "to": clusters[0]}, {"at": 3.0612, "to": clusters[1]}]}
    flat = dict(row, label="PUE", flips=[], swing_usd=5201.0)
    pareto_cli._print_report({"rfq": "x", "objective": "tco", "solves": 9, "seconds": 0.1,
                              "base": {"tco_usd": 200381.0, "cluster": clusters[0]},
                              "parameters": [row, flat]})
    text = console.file.getvalue()
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    words = text.split()
    for cluster in clusters:  # every node type and fabric id whole, in order
        ids = [w.strip(",") for w in cluster.split() if "/" in w or w.startswith("ib-")]
        assert all(i in words or f"{i}," in words for i in ids), (cluster, text)
    assert "at 1.53 →" in text and "at 3.06 →" in text  # rounded for reading (issue 32)


def test_what_if_sweep_fits_80_columns_without_cutting_node_types(monkeypatch):
    """`procure pareto --sweep`: a long 'bought' cell wraps inside its column (node type
    ids folded, never cut to '…')."""
    import solver.cli.pareto as pareto_cli

    console = Console(width=80, file=io.StringIO(), highlight=False, color_system=None)
    monkeypatch.setattr(pareto_cli, "out", console)
    point = {"growth": 1.0, "choice": "buy", "status": "optimal", "tco_usd": 373546.0,
             "rental_usd": 0.0, "sourcing": {"chat": "owned"},
             "cluster": "1 × pcie-4gpu/rtx-pro-6000x2, 2 × pcie-8gpu/rtx-pro-6000x8",
             "nodes_bought": [1, 1, 1], "start_months": [0, 12, 24]}
    pareto_cli._print_sweep({"sweep": "growth", "rfq": "growing-chat-service",
                             "meaning": "demand growth per year", "points": [point],
                             "note": "", "seconds": 0.2})
    text = console.file.getvalue()
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    cells = "".join(line.split("│")[-2].strip() for line in text.splitlines()
                    if line.count("│") == 7)  # the 'bought' column, rows joined
    assert "pcie-4gpu/rtx-pro-6000x2" in cells and "pcie-8gpu/rtx-pro-6000x8" in cells
