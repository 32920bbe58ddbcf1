"""A plan on consumer cards beside its datacenter-licensed alternative (issue 32).

GeForce cards (catalog ``datacenter_use: false``) are often the cheapest way to serve a
model, but NVIDIA's GeForce driver licence excludes datacenter deployment; whether the
buyer's site is a datacenter is the buyer's call. So a plan that picks such a card carries
``licensed_alternative``: the same RFQ re-solved with ``constraints.datacenter_grade_only:
true`` (every consumer card excluded, owned and rented), its TCO, capex and what it costs
more in the RFQ's objective. Under a time limit the re-solve runs only when the time left
allows about as long again as the plan took (it is bounded by what is left; a re-solve
that runs out says so); otherwise the field says it was skipped.
"""

from __future__ import annotations

from solver.catalog.data import Catalog
from solver.optimize.backends import DEFAULT_SOLVER
from solver.optimize.plan_model import LicensedAlternative, Plan
from solver.optimize.solve import solve_table
from solver.rfq.schema import Rfq

LIMIT_MARGIN = 0.1
"""Share of a time limit kept free after the re-solve (the plan's own presentation)."""


def consumer_gpus(catalog: Catalog, plan: Plan) -> list[str]:
    """The plan's GPUs (bought, or rented for a workload) not licensed for datacenter use,
    in the order the plan names them."""
    used: list[str] = []
    for entry in plan.workloads:
        for gpu_id in [lay.gpu for lay in entry.layouts] if entry.layouts else [entry.gpu]:
            if gpu_id not in used:
                used.append(gpu_id)
    for node in plan.cluster.nodes:
        if node.gpu not in used:
            used.append(node.gpu)
    return [g for g in used if g in catalog.gpus and not catalog.gpus[g].datacenter_use]


def _objective(plan: Plan) -> float | None:
    if plan.cost is None or not plan.feasible:
        return None
    return plan.cost.capex_usd if plan.objective == "capex" else plan.cost.tco_usd


def cluster_words(plan: Plan) -> str:
    """What a plan buys (and rents), in words."""
    owned = ", ".join(f"{n.count} x {n.server} with {n.gpus_per_node} x {n.gpu}"
                      for n in plan.cluster.nodes)
    rented = sorted({r.gpu for w in plan.workloads for r in w.rental or []})
    if rented:
        owned = (owned + "; " if owned else "") + "rents " + ", ".join(rented)
    return owned or "nothing owned"


def licensed_alternative(rfq: Rfq, catalog: Catalog, plan: Plan, *,
                         solver: str = DEFAULT_SOLVER, time_left: float | None = None,
                         plan_seconds: float = 0.0,
                         time_limit: float | None = None) -> LicensedAlternative | None:
    """The cheapest plan on datacenter-licensed GPUs beside ``plan`` (None when ``plan``
    has no consumer card or no plan). ``time_left``: seconds of the run's time limit left
    (None: no limit); ``plan_seconds``: what ``plan`` took, the estimate of the re-solve;
    ``time_limit``: the whole limit (a share of it is kept free)."""
    consumer = consumer_gpus(catalog, plan)
    base = _objective(plan)
    if not consumer or base is None:
        return None
    what = ("the same RFQ re-solved with " + ", ".join(consumer)
            + " and every other consumer card excluded (datacenter-licensed GPUs only)")
    empty = {"consumer_gpus": consumer, "tco_usd": None, "capex_usd": None, "extra_usd": None,
             "cluster": None}
    budget = None
    if time_left is not None:
        budget = time_left - LIMIT_MARGIN * (time_limit or time_left)
        if budget < max(plan_seconds, 0.05):
            return LicensedAlternative(**empty, status="skipped", note=(
                "not computed: the time limit leaves too little time to re-solve without "
                f"{', '.join(consumer)} (run without --time-limit to see it)"))
    licensed_rfq = rfq.model_copy(update={"constraints": rfq.constraints.model_copy(
        update={"datacenter_grade_only": True})})
    alternative, _ = solve_table(licensed_rfq, catalog, solver=solver, time_limit=budget)
    cost = _objective(alternative)
    if cost is None or alternative.cost is None:
        if alternative.status == "timeout":
            return LicensedAlternative(**empty, status="timeout", note=(
                "not found within the time limit left: " + what))
        return LicensedAlternative(**empty, status="infeasible", note=(
            "no plan on datacenter-licensed GPUs meets the RFQ: " + what))
    status = "optimal" if alternative.status == "optimal" else "feasible"
    return LicensedAlternative(
        consumer_gpus=consumer, status=status, tco_usd=round(alternative.cost.tco_usd, 2),
        capex_usd=round(alternative.cost.capex_usd, 2), extra_usd=round(cost - base, 2),
        cluster=cluster_words(alternative), note=what)
