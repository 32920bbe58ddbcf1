"""Served share against budget (issue 29): ``procure pareto --over budget``.

For a procurement team comparing budgets: the RFQ's cheapest full plan gives the budget that
serves everything; below it, each budget on an even grid is solved under
``objective: max_served`` (:mod:`solver.optimize.mip`), giving the largest priority-weighted
share of demand it serves and the cluster that serves it. One candidate table serves every
point (the candidates do not depend on the budget).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

from solver.analysis import cluster
from solver.catalog.data import Catalog
from solver.optimize.backends import DEFAULT_SOLVER
from solver.optimize.candidates import build_candidates
from solver.optimize.plan import assemble, weighted_served_share
from solver.optimize.records import CandidateTable
from solver.optimize.solve import run_mip
from solver.rfq.schema import Rfq

DEFAULT_POINTS = 8


def budget_curve(catalog: Catalog, rfq: Rfq, *, points: int | None = None,
                 solver: str = DEFAULT_SOLVER, progress: Any = None,
                 scheduler: str | None = None) -> dict[str, Any]:
    """The served share at ``points`` budgets from 1/points of the full-demand TCO up to it
    (plus the RFQ's own budget when it states one). ``progress(done, total)`` is called
    after each solve. The budgets are independent solves (one candidate table, one budget
    each): with ``scheduler`` (a Dask address, :mod:`solver.analysis.cluster`) each is a
    task on that cluster, and the points come back in budget order, the same as here."""
    catalog = rfq.catalog(catalog)
    count = points or DEFAULT_POINTS
    full_rfq = rfq.model_copy(update={"objective": "tco", "budget_usd": None})
    table = build_candidates(catalog, full_rfq)
    full = run_mip(table, full_rfq, solver=solver)
    result: dict[str, Any] = {"rfq": rfq.id, "over": "budget_usd", "points": [],
                              "full_demand_tco_usd": None,
                              "weights": {s.name: s.priority for s in rfq.workloads}}
    if full.status not in ("optimal", "feasible") or full.objective is None:
        result["reason"] = ("no plan serves the full demand even without a budget: see "
                            "`procure explain`")
        return result
    need = math.ceil(full.objective * 100.0 - 1e-6) / 100.0  # to the cent, never below
    result["full_demand_tco_usd"] = need
    budgets = sorted({round(need * k / count, 2) for k in range(1, count)} | {need}
                     | ({rfq.budget_usd} if rfq.budget_usd and rfq.budget_usd < need else set()))
    at_budget = partial(_budget_point, catalog, rfq, table, solver)
    if scheduler:
        with cluster.dask_client(scheduler) as client:
            result["points"] = cluster.map_on_cluster(client, at_budget, budgets, progress)
        return result
    for index, budget in enumerate(budgets):
        result["points"].append(at_budget(budget))
        if progress is not None:
            progress(index + 1, len(budgets))
    return result


def _budget_point(catalog: Catalog, rfq: Rfq, table: CandidateTable, solver: str,
                  budget: float) -> dict[str, Any]:
    """One budget's point (here or on a cluster worker): the largest served share it buys."""
    served_rfq = rfq.model_copy(update={"objective": "max_served", "budget_usd": budget})
    solution = run_mip(table, served_rfq, solver=solver)
    point: dict[str, Any] = {"budget_usd": budget, "status": solution.status}
    if solution.status in ("optimal", "feasible"):
        plan = assemble(catalog, served_rfq, table, solution)
        shares = {s.workload: s.served_fraction for s in plan.served or []}
        point.update({
            "served_share": round(weighted_served_share(plan, rfq) or 0.0, 4),
            "workloads": shares,
            "tco_usd": plan.cost.tco_usd if plan.cost else 0.0,
            "total_gpus": plan.cluster.total_gpus,
            "total_nodes": plan.cluster.total_nodes,
            "nodes": [{"gpu": n.gpu, "server": n.server, "count": n.count}
                      for n in plan.cluster.nodes]})
    return point


def budget_lines(result: dict[str, Any]) -> list[str]:
    """The curve as short lines (under 80 columns): budget, share served, GPUs, TCO."""
    if result.get("reason"):
        return [result["reason"]]
    lines = [f"Served share against budget for {result['rfq']} (everything served at "
             f"${result['full_demand_tco_usd']:,.0f})",
             f"{'budget':>14}  {'served':>7}  {'GPUs':>5}  {'TCO spent':>14}  per workload"]
    for point in result["points"]:
        budget = f"${point['budget_usd']:,.0f}"
        if "served_share" not in point:
            lines.append(f"{budget:>14}  {point['status']}")
            continue
        per = ", ".join(f"{name} {share:.0%}" for name, share in point["workloads"].items())
        spent = f"${point['tco_usd']:,.0f}"
        lines.append(f"{budget:>14}  {point['served_share']:>7.0%}  "
                     f"{point['total_gpus']:>5}  {spent:>14}  {per}")
    return lines
