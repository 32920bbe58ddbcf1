"""Independent checks of a plan's placement and bill of materials (used by several tests)."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from solver.physics.layout import TRAINING_KINDS

COST_CATEGORIES = ("gpus_usd", "servers_usd", "network_usd", "storage_usd", "power_usd",
                   "operations_usd", "multinode_overhead_usd")
CENT = 0.01 + 1e-6


def assert_valid_placement(plan: dict[str, Any]) -> None:
    """No node over capacity, every replica/job placed once, spanning groups on whole nodes
    of one type, and exactly the bought nodes used."""
    placement = plan["placement"]
    bought = Counter()
    for entry in plan["cluster"]["nodes"]:
        bought[(entry["server"], entry["gpu"], entry["gpus_per_node"])] += entry["count"]
    listed = Counter((n["server"], n["gpu"], n["gpus"]) for n in placement)
    assert listed == bought
    assert len({n["node"] for n in placement}) == len(placement)
    groups: dict[str, list[tuple[dict, dict]]] = defaultdict(list)
    # busy and quiet hours (issue 29): a recurring job that runs only in the quiet hours is
    # placed in the quiet slot's own placement, on the same bought nodes
    quiet = next((s for s in plan.get("timetable") or [] if s["slot"] == "quiet"), None)
    if quiet is not None:
        assert [(n["node"], n["type"]) for n in quiet["placement"]] == \
            [(n["node"], n["type"]) for n in placement]
        busy = {run["workload"] for node in placement for run in node["runs"]}
        for node in quiet["placement"]:
            assert sum(run["gpus"] for run in node["runs"]) <= node["gpus"], node
            for run in node["runs"]:
                if run["workload"] not in busy:
                    groups[run["group"]].append((node, run))
    for node in placement:
        used = sum(run["gpus"] for run in node["runs"])
        assert used <= node["gpus"], node
        assert node["free_gpus"] == node["gpus"] - used
        for run in node["runs"]:
            groups[run["group"]].append((node, run))
    per_workload: Counter[str] = Counter()
    for group, parts in groups.items():
        run = parts[0][1]
        per_workload[run["workload"]] += 1
        assert sum(r["gpus"] for _, r in parts) == run["group_gpus"], group
        if run["nodes_spanned"] > 1:
            assert len(parts) == run["nodes_spanned"], group
            assert len({n["type"] for n, _ in parts}) == 1
            assert all(r["gpus"] == n["gpus"] for n, r in parts), "spanning: whole nodes"
        else:
            assert len(parts) == 1
    owned_somewhere = set()
    for work in plan["workloads"]:
        rented = work.get("rental") or []  # rented units run on no bought node (issue 16)
        if work["kind"] in TRAINING_KINDS:
            expected = 0 if rented else 1
        elif "layouts" in work:
            expected = sum(lay["replicas"] for lay in work["layouts"])
        else:
            expected = work["dp"]
        if work["kind"] not in TRAINING_KINDS and rented:
            expected = sum(lay["replicas"] for lay in work.get("layouts") or []
                           if not lay.get("rented")) if "layouts" in work else 0
        assert per_workload[work["name"]] == expected, work["name"]
        if expected:
            owned_somewhere.add(work["name"])
    assert set(per_workload) == owned_somewhere


def assert_bill_matches_cost(plan: dict[str, Any]) -> None:
    """The bill recomputed from the plan equals the MIP objective's breakdown to the cent."""
    bom = plan["bill_of_materials"]
    cost = plan["cost"]
    lines = bom["lines"]
    assert all(set(line) >= {"sku", "description", "quantity", "unit_price_usd", "price_type",
                             "as_of", "source", "line_total_usd"} for line in lines)
    assert all(abs(line["line_total_usd"] - line["quantity"] * line["unit_price_usd"]) < CENT
               for line in lines)
    assert abs(bom["capex_usd"] - sum(line["line_total_usd"] for line in lines)) < CENT
    assert abs(bom["capex_usd"] - cost["capex_usd"]) < CENT, (bom["capex_usd"], cost)
    assert abs(bom["tco_usd"] - cost["tco_usd"]) < CENT, (bom["tco_usd"], cost)
    totals: Counter[str] = Counter()
    for line in lines:
        totals[line["category"]] += line["line_total_usd"]
    for item in bom["opex_per_year"]["lines"]:
        totals[item["category"]] += item["usd_per_year"] * bom["horizon_years"]
    for key in COST_CATEGORIES:
        assert abs(totals[key] - cost[key]) < CENT, (key, totals[key], cost[key])
