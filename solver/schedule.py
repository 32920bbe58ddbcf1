"""The purchase schedule of a plan (contract: ``schedule`` in the solve JSON).

A list of periods, each ``{start_month, months, nodes_bought, gpus_bought, capex_usd,
rental_usd, runs}``. A plan solved for one demand level buys everything at month 0 and has
one period covering the horizon; ``runs`` says, per workload, whether it runs on owned or
rented capacity and on how many GPUs. (Demand that changes over time: docs/rental.md.)
"""

from __future__ import annotations

from typing import Any


def single_period(plan: dict[str, Any], horizon_years: float) -> list[dict[str, Any]]:
    """The one-period schedule of a plan: everything bought at month 0."""
    cluster, cost = plan["cluster"], plan["cost"]
    runs = {w["name"]: {"sourcing": w.get("sourcing", "owned"), "gpus": w["gpus"]}
            for w in plan["workloads"]}
    return [{"start_month": 0, "months": round(12 * horizon_years, 3),
             "nodes_bought": cluster["total_nodes"], "gpus_bought": cluster["total_gpus"],
             "capex_usd": cost["capex_usd"], "rental_usd": cost.get("rental_usd", 0.0),
             "runs": runs}]
