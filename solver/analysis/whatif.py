"""Helpers shared by the Pareto frontier and the sensitivity report.

A *scenario* re-solves the MIP of :mod:`solver.optimize.mip` on a modified candidate table: with some
candidates removed (ε-constraints), with one workload's candidates rebuilt at another SLO,
or with its cost coefficients recomputed for new prices (no physics re-run).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from solver.analysis import cluster
from solver.analysis.explain import solve_rfq
from solver.catalog.data import Catalog
from solver.common.errors import InputError, Problem
from solver.common.progress import report
from solver.optimize.backends import DEFAULT_SOLVER
from solver.optimize.candidates import build_candidates
from solver.optimize.costs import CostParams, coupled_node_network_usd, node_cost
from solver.optimize.linear import Solution
from solver.optimize.mip import fabric_var, node_var
from solver.optimize.plan import cost_breakdown
from solver.optimize.plan_model import Period, Plan
from solver.optimize.records import Candidate, CandidateTable, NodeType
from solver.optimize.rental import reprice_rented
from solver.optimize.storage import training_storage
from solver.rfq.schema import AnyWorkload, Rfq, TrainingWorkload, validate_rfq

Signature = tuple[tuple[tuple[str, int], ...], str]


@dataclass(frozen=True)
class Outcome:
    """One solved scenario: its status, cost terms and the cluster bought."""

    status: str
    cost: dict[str, float] | None
    signature: Signature | None
    table: CandidateTable
    solution: Solution

    @property
    def feasible(self) -> bool:
        return self.status in ("optimal", "feasible")

    @property
    def tco_usd(self) -> float | None:
        return self.cost["tco_usd"] if self.cost else None

    def objective_usd(self, objective: str) -> float | None:
        if not self.cost:
            return None
        return self.cost["capex_usd" if objective == "capex" else "tco_usd"]


def outcome(table: CandidateTable, solution: Solution) -> Outcome:
    """Cost terms and cluster signature of a solution."""
    if solution.status not in ("optimal", "feasible"):
        return Outcome(solution.status, None, None, table, solution)
    return Outcome(solution.status, cost_breakdown(table, solution.values),
                   signature(table, solution.values), table, solution)


def signature(table: CandidateTable, values: dict[str, float]) -> Signature:
    """What is bought: node types with counts, and the fabric (``none`` if independent)."""
    nodes = tuple(sorted((key, round(values.get(node_var(key), 0.0)))
                         for key in table.node_types
                         if round(values.get(node_var(key), 0.0)) > 0))
    fabric = next((f for f in table.fabrics if round(values.get(fabric_var(f), 0.0)) == 1),
                  "none")
    return nodes, fabric


def describe(sig: Signature | None) -> str:
    """``2 × pcie-8gpu/rtx-pro-6000x8, fabric none`` (or ``infeasible``)."""
    if sig is None:
        return "infeasible"
    nodes, fabric = sig
    return ", ".join(f"{count} × {key}" for key, count in nodes) + f", fabric {fabric}"


def gpu_counts(table: CandidateTable, sig: Signature | None) -> dict[str, int]:
    """GPUs bought per GPU SKU."""
    counts: dict[str, int] = {}
    if sig is None:
        return counts
    for key, count in sig[0]:
        node = table.node_types[key]
        counts[node.gpu] = counts.get(node.gpu, 0) + node.gpus * count
    return counts


def with_candidates(table: CandidateTable, workload: str,
                    candidates: list[Candidate]) -> CandidateTable:
    """The table with one workload's candidate list replaced."""
    return replace(table, candidates={**table.candidates, workload: candidates})


def rebuild_workload(catalog: Catalog, rfq: Rfq, table: CandidateTable, spec: AnyWorkload,
                     all_sizes: bool = False) -> CandidateTable:
    """Re-run the estimate stage for one (modified) workload only, keeping the others."""
    alone = rfq.model_copy(update={"workloads": [spec]})
    fresh = build_candidates(catalog, alone, all_sizes=all_sizes, params=table.params)
    rejected = {**table.rejected, spec.name: fresh.rejected.get(spec.name, [])}
    storage = {k: v for k, v in table.storage.items() if k != spec.name}
    storage.update(fresh.storage)
    return replace(table, candidates={**table.candidates, spec.name: fresh.candidates[spec.name]},
                   rejected=rejected, storage=storage)


def reprice(table: CandidateTable, catalog: Catalog, rfq: Rfq) -> CandidateTable:
    """The same candidates with every cost coefficient recomputed for new prices/costs.

    Physics does not depend on prices, electricity, PUE, horizon or the overhead factor, so
    only node costs, per-candidate network cost and the cost parameters change.
    """
    params = CostParams.from_catalog(catalog, rfq.horizon_years)
    node_types = {
        key: NodeType(node.server, node.gpu, node.gpus,
                      node_cost(params, catalog.servers[node.server], catalog.gpus[node.gpu],
                               node.gpus), fabric_nics=node.fabric_nics, stack=node.stack,
                      hosts=node.hosts)
        for key, node in table.node_types.items()}
    fabrics = {fid: catalog.fabrics[fid] for fid in table.fabrics}
    candidates: dict[str, list[Candidate]] = {}
    for name, cands in table.candidates.items():
        out = []
        for cand in cands:
            if cand.rented:  # rental price and billed hours (horizon) from the new values

                cand = reprice_rented(cand, catalog, rfq, params)
            if cand.spanning:
                server = catalog.servers[table.node_types[cand.node_type].server]
                network = cand.nodes_spanned * coupled_node_network_usd(
                    server, catalog.fabrics[cand.fabric])
                cand = replace(cand, network_usd=network)
            out.append(cand)
        candidates[name] = out
    specs = {spec.name: spec for spec in rfq.workloads}
    storage = {name: training_storage(catalog, params, spec) for name, spec in specs.items()
               if name in table.storage and isinstance(spec, TrainingWorkload)}
    return replace(table, node_types=node_types, fabrics=fabrics, candidates=candidates,
                   params=params, storage=storage)


# --------------------------------------------------------------------------- what-if sweeps
SWEEP_KINDS = {
    "rental-price": "every rental offer's $/GPU-hour multiplied by the value (1 = catalog)",
    "growth": "every serving workload's demand growth per year (0.5 = +50 % a year), "
              "from its month-0 demand",
}


def parse_sweep(text: str) -> tuple[str, list[float]]:
    """``rental-price=0.5,1,1.5`` -> ("rental-price", [0.5, 1.0, 1.5]); InputError
    (exit 2) naming the problem otherwise."""
    kind, sep, values = text.partition("=")
    kind = kind.strip()

    def bad(reason: str) -> InputError:
        return InputError([Problem("--sweep", kind or text, text, reason)])

    if not sep or kind not in SWEEP_KINDS:
        raise bad("expected KIND=V1,V2,... with KIND one of " + ", ".join(SWEEP_KINDS))
    try:
        numbers = [float(v) for v in values.split(",") if v.strip()]
    except ValueError:
        raise bad("values must be numbers separated by commas") from None
    if not numbers or len(numbers) > 50:
        raise bad("give 1 to 50 values")
    low = 0.0 if kind == "rental-price" else -0.9
    if any(not (v == v and v not in (float("inf"), float("-inf"))) or v < low or
           (kind == "rental-price" and v == 0) or v > 100 for v in numbers):
        raise bad("rental-price multipliers must be > 0; growth must be > -0.9 (and "
                  "every value at most 100)")
    return kind, numbers


def with_rental_prices(catalog: Catalog, factor: float) -> Catalog:
    """The catalog with every rental offer's $/GPU-hour multiplied by ``factor``."""
    offers = {key: offer.model_copy(update={
        "usd_per_gpu_hour": offer.usd_per_gpu_hour * factor})
        for key, offer in catalog.rental.items()}
    return catalog.model_copy(update={"rental": offers})


def with_growth(catalog: Catalog, rfq: Rfq, growth: float) -> Rfq:
    """The RFQ with every serving (``inference``) workload growing by ``growth`` a year
    from its month-0 demand (the first period's demand, before any growth the RFQ gave);
    jobs unchanged. InputError when the RFQ has no serving workload."""
    data = rfq.model_dump(mode="json", exclude_none=True)
    serving = 0
    for work, spec in zip(data["workloads"], rfq.workloads, strict=True):
        if spec.kind != "inference":
            continue
        serving += 1
        before = spec.growth_per_year or 0.0
        periods = spec.periods
        for key in ("qps", "concurrency"):
            first = getattr(periods[0] if periods else spec, key)
            if first is None:
                work.pop(key, None)
                continue
            base = first / (1.0 + before)
            work[key] = (max(1, round(base)) if key == "concurrency"
                         else float(f"{base:.9g}"))
        work.pop("periods", None)
        work["growth_per_year"] = growth
    if not serving:
        raise InputError([Problem("--sweep", "growth", None,
                                  "the RFQ has no serving (inference) workload to grow")])
    return validate_rfq(data, catalog, source=f"{rfq.id} (growth {growth:g})")


def sweep(catalog: Catalog, rfq: Rfq, kind: str, values: list[float],
          solver: str | None = None, scheduler: str | None = None) -> dict[str, Any]:
    """Re-solve the RFQ at every value of one what-if knob (:data:`SWEEP_KINDS`) and say
    at each: the total cost, the rental in it, what is bought (and, with demand over time,
    when) and the buy / rent / hybrid choice per workload and overall.

    ``rental-price`` reprices the rented candidates of one candidate table (no physics
    re-run); an RFQ that forbids renting is swept with ``rental: allow`` (said in
    ``note``). ``growth`` rebuilds the RFQ with ``growth_per_year`` on every serving
    workload (the phased purchase schedule of docs/rental.md). The values are independent
    solves: with ``scheduler`` (a Dask address, :mod:`solver.analysis.cluster`) each is a
    task on that cluster, the points coming back in value order (the same as here)."""
    import time


    solver = solver or DEFAULT_SOLVER
    started = time.perf_counter()
    note = ""
    base_table = None
    if kind == "rental-price":
        if (rfq.rental or "forbid") == "forbid":
            rfq = rfq.model_copy(update={"rental": "allow"})
            note = "the RFQ forbids renting; the sweep allows it (rental: allow)"
        base_table = build_candidates(catalog, rfq)
    at_value = partial(_sweep_value, catalog, rfq, kind, solver, base_table)
    if scheduler:
        with cluster.dask_client(scheduler) as client:
            points = cluster.map_on_cluster(client, at_value, values, lambda done, total: report(
                f"Pareto: {kind} sweep on the Dask cluster", done, total))
    else:
        points = [at_value(value) for value in values]
    return {"rfq": rfq.id, "sweep": kind, "meaning": SWEEP_KINDS[kind], "values": values,
            "note": note, "points": points, "seconds": round(time.perf_counter() - started, 2)}


def _sweep_value(catalog: Catalog, rfq: Rfq, kind: str, solver: str,
                 base_table: CandidateTable | None, value: float) -> dict[str, Any]:
    """One value of a sweep (here or on a cluster worker); ``base_table``: rental-price's
    one table, repriced at the value."""
    if base_table is not None:  # rental-price: reprice the one table
        cat = with_rental_prices(catalog, value)
        plan = solve_rfq(rfq, cat, solver=solver, table=reprice(base_table, cat, rfq))
    else:
        plan = solve_rfq(with_growth(catalog, rfq, value), catalog, solver=solver)
    return sweep_point(kind, value, plan)


def sweep_point(kind: str, value: float, plan: Plan) -> dict[str, Any]:
    """One point of a sweep from its plan (``choice``: buy, rent or hybrid overall)."""
    point: dict[str, Any] = {kind: value, "status": plan.status}
    if plan.status == "error":  # the solver failed: no answer, said as such
        point["error"] = "; ".join(plan.infeasibility.reasons if plan.infeasibility else [])
    cost = plan.cost
    if not plan.feasible or cost is None:
        return {**point, "tco_usd": None, "choice": None}
    phasing = plan.phasing
    schedule = plan.schedule
    sourcing = (phased_sourcing(schedule) if phasing else
                {w.name: w.sourcing or "owned" for w in plan.workloads})
    kinds = set(sourcing.values())
    choice = ("buy" if kinds == {"owned"} else "rent" if kinds == {"rented"} else "hybrid")
    point.update({
        "tco_usd": phasing.tco_usd if phasing else cost.tco_usd,
        "buy_all_now_tco_usd": phasing.buy_all_now_tco_usd if phasing else cost.tco_usd,
        "capex_usd": cost.capex_usd,
        "rental_usd": (round(sum(p.rental_usd for p in schedule), 2) if phasing
                       else cost.rental_usd),
        "choice": choice, "sourcing": sourcing,
        "nodes_bought": [p.nodes_bought for p in schedule],
        "start_months": [p.start_month for p in schedule],
        "cluster": describe_schedule(schedule) if phasing else describe_cluster(plan),
    })
    return point


def phased_sourcing(schedule: list[Period]) -> dict[str, str]:
    """owned / rented / hybrid per workload over every period of a phased schedule."""
    out: dict[str, str] = {}
    names = {name for period in schedule for name in period.runs}
    for name in sorted(names):
        runs = [p.runs[name] for p in schedule if name in p.runs]
        owned = sum(run.owned_gpus or 0 for run in runs)
        rented = sum(run.rented_gpus or 0 for run in runs)
        out[name] = "hybrid" if owned and rented else "rented" if rented else "owned"
    return out


def describe_schedule(schedule: list[Period]) -> str:
    """Node types bought over a phased schedule, e.g. ``2 × pcie-8gpu/rtx-pro-6000x8``."""
    total: dict[str, int] = {}
    for period in schedule:
        for key, count in (period.node_types_bought or {}).items():
            total[key] = total.get(key, 0) + count
    return ", ".join(f"{n} × {key}" for key, n in sorted(total.items())) or "nothing bought"


def describe_cluster(plan: Plan) -> str:
    """``2 × pcie-8gpu/rtx-pro-6000x8`` or ``nothing bought``."""
    return ", ".join(f"{n.count} × {n.server}/{n.gpu}x{n.gpus_per_node}"
                     for n in plan.cluster.nodes) or "nothing bought"
