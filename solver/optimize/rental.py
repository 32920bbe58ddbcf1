"""Rented capacity: candidates on rental offers, their cost, and buy-versus-rent figures.

Every workload may run on bought nodes (the rest of the solver) or on rented instances of a
rental offer (``catalog/rental.csv``, :mod:`solver.catalog.rental_offers`). A rented candidate reuses
the same physics (:func:`solver.physics.performance.best_layout`) on the offer's GPU, with the
offer's instance size as the node size and the offer's fabric between instances. Its *unit*
is whole instances:

* a job (training) rents ``m`` instances (m = 1, or 2, 4, ... over the offer's fabric) for
  exactly the job's hours: ``m × k × $/GPU-h × max(hours_to_complete, min_term_hours)``;
* a batch-inference replica is rented for the deadline window:
  ``units × k × $/GPU-h × max(deadline_hours, min_term_hours)``;
* an always-on serving replica is rented for every hour of the horizon:
  ``units × k × $/GPU-h × max(8760 × horizon_years, min_term_hours)`` (a reserved term
  shorter than the horizon is renewed at the same price - an assumption).

A serving layout smaller than the instance runs ``k / s`` replicas per instance (one unit =
one instance, capacity × k/s), so an 8-GPU instance is never billed for one GPU's work.

Rented GPUs do not count against the RFQ's owned limits (``max_nodes``, ``max_gpus``,
``max_power_kw``, ``max_rack_units``: they are in someone else's datacenter) but their cost
counts in the objective and against ``budget_usd``. Rented instances need no bought fabric,
switches, front-end ports or shared storage, and pay no multi-node engineering overhead (the
provider operates the cluster); a rented training job buys no checkpoint and dataset
storage either: they stay on the rented instances' own disks, in the hourly price (issue 28:
a rented fine-tune paid 73 % of its cost for storage capex), and the plan's warnings say so. The RFQ's ``rental`` switch: ``allow`` (default) lets the MIP choose,
``forbid`` reproduces the buy-only plan, ``only`` rents everything. ``constraints.gpus``
and ``datacenter_grade_only`` apply to rented GPUs too; the vendor profile does not (it
says what an integrator builds, not what a cloud rents).
"""

from __future__ import annotations

import math
from typing import Any

from solver.catalog.data import Catalog
from solver.optimize.costs import HOURS_PER_YEAR, CostParams, NodeCost
from solver.optimize.mip import demand_of, replica_bound
from solver.optimize.plan_model import BuyVsRent, Plan
from solver.optimize.records import (
    POWERS_OF_TWO,
    Candidate,
    CandidateTable,
    NodeType,
    batch_request_too_slow,
    physics_workload,
    precisions_for,
    usable_serving,
)
from solver.physics.layout import TRAINING_KINDS, expert_tag
from solver.physics.performance import best_layout
from solver.rfq.schema import AnyWorkload, Rfq, TrainingWorkload

RENTED_PREFIX = "rent:"
MAX_RENTED_INSTANCES = 64
JOB_SIZES_KEPT = 3  # meeting sizes kept per offer and precision (larger ones cost more)


def rental_mode(rfq: Rfq) -> str:
    return rfq.rental


def owned_allowed(rfq: Rfq) -> bool:
    """Whether bought nodes may run workloads (``rental: only`` rents everything)."""
    return rental_mode(rfq) != "only"


def allowed_offers(catalog: Catalog, rfq: Rfq) -> list[Any]:
    """Offers the RFQ may rent: none when ``rental: forbid``; else those whose GPU the
    RFQ allows (``constraints.gpus``, ``datacenter_grade_only``)."""
    if rental_mode(rfq) == "forbid":
        return []
    c = rfq.constraints
    out = []
    for offer in catalog.rental.values():
        gpu = catalog.gpus.get(offer.gpu)
        if gpu is None or (c.gpus is not None and offer.gpu not in c.gpus):
            continue
        if c.datacenter_grade_only and not gpu.datacenter_use:
            continue
        out.append(offer)
    return out


def offer_fabric(rfq: Rfq, offer: Any) -> str:
    """The offer's fabric, or ``none`` when the RFQ's ``constraints.fabrics`` excludes it."""
    allowed = rfq.constraints.fabrics
    if offer.fabric != "none" and allowed is not None and offer.fabric not in allowed:
        return "none"
    return offer.fabric


def instance_node(catalog: Catalog, offer: Any) -> Any:
    """A cost-free node type standing for one instance (for the physics only): the offer's
    GPU, ``gpus_per_instance`` GPUs, in the smallest catalog server that takes that GPU."""
    gpu = catalog.gpus[offer.gpu]
    servers = sorted((s for s in catalog.servers.values()
                      if s.takes(gpu) and s.gpu_slots >= offer.gpus_per_instance),
                     key=lambda s: s.gpu_slots)
    server = servers[0].id if servers else ""
    nics = servers[0].fabric_nics_per_node if servers else 1
    free = NodeCost(0.0, 0.0, 0.0, 0.0, 0.0, 0)
    return NodeType(server, gpu.id, offer.gpus_per_instance, free, fabric_nics=nics,
                    stack=gpu.stack)


def hours_used(spec: AnyWorkload, cand_hours: float | None, horizon_years: float) -> float:
    """Hours a rented unit is paid for before the minimum term: the job's run, the batch
    deadline window, or the whole horizon for always-on serving."""
    if spec.kind in TRAINING_KINDS:
        return float(cand_hours or 0.0)
    if spec.kind == "batch_inference":
        return float(spec.deadline_hours)
    return HOURS_PER_YEAR * horizon_years


def runs_over_horizon(spec: AnyWorkload, horizon_years: float) -> int:
    """How often a workload's rented units are paid for: every run of a recurring job
    (``recurrence``), else once (a one-off job, or serving rented for the horizon)."""
    if spec.kind == "inference":
        return 1
    return spec.runs(horizon_years)


def unit_cost_usd(offer: Any, gpus: int, hours: float) -> float:
    """USD of one rented unit of ``gpus`` GPUs used ``hours`` hours (minimum term applied)."""
    return gpus * offer.usd_per_gpu_hour * offer.billed_hours(hours)


def rented_candidates(catalog: Catalog, rfq: Rfq, spec: AnyWorkload, params: CostParams,
                      rejected: list[str]) -> list[Any]:
    """Every rented candidate of one workload (module docstring)."""
    out: list[Any] = []
    for offer in allowed_offers(catalog, rfq):
        node = instance_node(catalog, offer)
        if not node.server:
            rejected.append(f"{RENTED_PREFIX}{offer.id}: no catalog server models this GPU")
            continue
        for precision in precisions_for(spec, catalog.gpus[offer.gpu],
                                        catalog.model(spec.model)):
            if isinstance(spec, TrainingWorkload):
                out += _rented_jobs(catalog, rfq, spec, offer, node, precision, params,
                                    rejected)
            else:
                out += _rented_serving(catalog, rfq, spec, offer, node, precision, params,
                                       rejected)
    return out


def _instance_counts(rfq: Rfq, offer: Any) -> list[int]:
    """Instances one rented group may span: 1, and 2, 4, ... when the offer has a fabric."""
    if offer_fabric(rfq, offer) == "none":
        return [1]
    return [1] + [m for m in (2, 4, 8, 16, 32, 64) if m <= MAX_RENTED_INSTANCES]


def _rented_jobs(catalog: Catalog, rfq: Rfq, spec: TrainingWorkload, offer: Any, node: Any,
                 precision: str, params: CostParams, rejected: list[str]) -> list[Any]:
    """A job on ``m`` whole instances for m = 1, 2, 4, ...: the first sizes that meet the
    deadline (larger ones are faster but rarely cheaper; ``JOB_SIZES_KEPT`` are kept)."""
    workload = physics_workload(spec)
    total_tokens = spec.dataset_tokens * spec.epochs
    out: list[Any] = []
    for m in _instance_counts(rfq, offer):
        size = m * offer.gpus_per_instance
        fabric = offer_fabric(rfq, offer) if m > 1 else "none"
        est = best_layout(catalog, spec.model, offer.gpu, size, workload, precision=precision,
                          gpus_per_node=offer.gpus_per_instance, fabric=fabric,
                          server=node.server)
        if not est.fits or est.predicted.tokens_per_s <= 0:
            continue
        hours = total_tokens / est.predicted.tokens_per_s / 3600.0
        if hours > spec.deadline_hours:
            continue
        runs = runs_over_horizon(spec, params.horizon_years)
        cost = unit_cost_usd(offer, size, hours_used(spec, hours, params.horizon_years)) * runs
        out.append(Candidate(
            workload=spec.name, kind=spec.kind, node_type=RENTED_PREFIX + offer.id,
            layout=est.layout, estimate=est, gpus=size, nodes_spanned=m, fabric=fabric,
            network_usd=0.0, hours_to_complete=hours, rental=offer, rental_usd=cost, runs=runs,
            name=f"{spec.name}|{RENTED_PREFIX}{offer.id}|{precision}|tp{est.layout.tp}"
                 f"pp{est.layout.pp}dp{est.layout.dp}|{m}i|{fabric}"))
        if len(out) == JOB_SIZES_KEPT:
            break
    if not out:
        rejected.append(f"{RENTED_PREFIX}{offer.id} {precision}: no rented layout fits and "
                        "meets the deadline")
    return out


def _rented_serving(catalog: Catalog, rfq: Rfq, spec: AnyWorkload, offer: Any, node: Any, precision: str,
                    params: CostParams, rejected: list[str]) -> list[Any]:
    """Serving units on one offer: one instance running k/s replicas of an s-GPU layout
    (s = 1, 2, ... k), or - when none fits one instance - a replica over m instances."""
    workload = physics_workload(spec)
    k = offer.gpus_per_instance
    hours = hours_used(spec, None, params.horizon_years)
    out: list[Any] = []
    options = [(s, 1) for s in POWERS_OF_TWO if s <= k]
    for m in _instance_counts(rfq, offer)[1:]:
        options.append((m * k, m))
    for size, m in options:
        if m > 1 and out:
            break  # spanning only when no layout fits one instance
        fabric = offer_fabric(rfq, offer) if m > 1 else "none"
        est = best_layout(catalog, spec.model, offer.gpu, size, workload, precision=precision,
                          gpus_per_node=k, fabric=fabric, server=node.server)
        if not usable_serving(est) or batch_request_too_slow(spec, est):
            continue
        per_unit = max(1, k // size) if m == 1 else 1
        gpus = k if m == 1 else size
        out.append(Candidate(
            workload=spec.name, kind=spec.kind, node_type=RENTED_PREFIX + offer.id,
            layout=est.layout, estimate=est, gpus=gpus, nodes_spanned=m, fabric=fabric,
            network_usd=0.0,
            concurrency_capacity=float(est.predicted.max_concurrency or 0) * per_unit,
            qps_capacity=float(est.predicted.qps_capacity or 0.0) * per_unit,
            rental=offer, rental_usd=(unit_cost_usd(offer, gpus, hours)
                                      * runs_over_horizon(spec, params.horizon_years)),
            replicas_per_unit=per_unit, runs=runs_over_horizon(spec, params.horizon_years),
            name=f"{spec.name}|{RENTED_PREFIX}{offer.id}|{precision}|tp{est.layout.tp}"
                 f"pp{est.layout.pp}{expert_tag(est.layout)}x{per_unit}|{m}i|{fabric}"))
        if m > 1 and len(out) == 2:
            break
    if not out:
        rejected.append(f"{RENTED_PREFIX}{offer.id} {precision}: no rented layout serves it")
    return out


def reprice_rented(cand: Any, catalog: Catalog, rfq: Rfq, params: CostParams) -> Any:
    """A rented candidate with its cost recomputed for the catalog's current offer price
    and the horizon in ``params`` (the physics is unchanged; what-if and sensitivity)."""
    from dataclasses import replace

    offer = catalog.rental.get(cand.rental.id, cand.rental)
    spec = next(s for s in rfq.workloads if s.name == cand.workload)
    hours = hours_used(spec, cand.hours_to_complete, params.horizon_years)
    runs = runs_over_horizon(spec, params.horizon_years)
    return replace(cand, rental=offer, rental_usd=unit_cost_usd(offer, cand.gpus, hours) * runs,
                   runs=runs)


# --------------------------------------------------------------------------- MIP and plan
def sourcing_entry(picks: list[tuple[Any, int]]) -> dict[str, Any]:
    """``sourcing`` (owned | rented | hybrid) and the rented units of one workload."""
    rented = [(c, n) for c, n in picks if c.rented]
    owned = [(c, n) for c, n in picks if not c.rented]
    sourcing = "rented" if rented and not owned else "hybrid" if rented else "owned"
    entry: dict[str, Any] = {"sourcing": sourcing}
    if rented:
        entry["rental"] = [_rental_line(c, n) for c, n in rented]
    return entry


def _rental_line(cand: Any, units: int) -> dict[str, Any]:
    offer = cand.rental
    gpu_hours = cand.rental_usd * units / offer.usd_per_gpu_hour
    return {"offer": offer.id, "gpu": offer.gpu, "price_type": offer.price_type,
            "provider_class": offer.provider_class,
            "instances": units * max(1, cand.gpus // offer.gpus_per_instance),
            "gpus_per_instance": offer.gpus_per_instance, "fabric": cand.fabric,
            "replicas": units * cand.replicas_per_unit,
            "gpu_hours": round(gpu_hours, 4), "usd_per_gpu_hour": offer.usd_per_gpu_hour,
            "min_term_hours": offer.min_term_hours, "usd": round(cand.rental_usd * units, 2),
            **({"runs": cand.runs} if cand.runs > 1 else {}),
            "source": offer.source, "as_of": offer.as_of}


def add_sourcing(plan: dict[str, Any], picks: dict[str, list[tuple[Any, int]]]) -> None:
    """Mark every workload of a plan owned/rented/hybrid, with its rented units (in
    place); a rented serving unit's replicas count in ``dp`` / ``layouts[].replicas``."""
    for entry in plan["workloads"]:
        chosen = picks.get(entry["name"], [])
        entry.update(sourcing_entry(chosen))
        if entry["kind"] in TRAINING_KINDS:
            continue
        # a rented unit (one instance) runs replicas_per_unit replicas of its layout
        if "layouts" in entry:
            for lay, (cand, units) in zip(entry["layouts"], chosen, strict=True):
                lay["replicas"] = units * cand.replicas_per_unit
                lay["rented"] = cand.rented
        elif chosen and chosen[0][0].rented:
            entry["dp"] = chosen[0][1] * chosen[0][0].replicas_per_unit


def bom_rental(plan: dict[str, Any]) -> dict[str, Any]:
    """The bill of materials' rental section: one line per rented offer and workload
    (offer, GPU-hours, $/GPU-h, source, as_of); not capex, part of the TCO."""
    lines = []
    for entry in plan["workloads"]:
        for rent in entry.get("rental") or []:
            lines.append({"sku": f"rent-{rent['offer']}",
                          "description": f"{entry['name']}: {rent['instances']} x "
                                         f"{rent['gpus_per_instance']} {rent['gpu']} "
                                         f"({rent['price_type'].replace('_', ' ')}), GPU-hours",
                          "quantity": rent["gpu_hours"],
                          "unit_price_usd": rent["usd_per_gpu_hour"],
                          "price_type": rent["price_type"], "as_of": rent["as_of"],
                          "source": rent["source"], "line_total_usd": rent["usd"],
                          "category": "rental_usd"})
    return {"lines": lines, "total_usd": round(sum(line["line_total_usd"] for line in lines), 2)}


# --------------------------------------------------------------------------- buy vs rent
def buy_vs_rent(table: CandidateTable, rfq: Rfq, plan: Plan,
                residual: tuple[float, float] | None = None) -> list[BuyVsRent]:
    """For each workload: the cheapest owned-alone and rented-alone cost (each workload on
    its own, from the candidate table), the break-even hours of use over the horizon and
    the break-even utilisation above which owning wins, the break-even horizon (months of
    continuous use) and - for a one-off job - owning and reselling after the job
    (:func:`owned_horizon_terms`), and why the chosen one won. ``residual`` = (residual
    value fraction, yearly price decline); default :func:`residual_params`."""
    horizon_h = HOURS_PER_YEAR * table.params.horizon_years
    specs = {s.name: s for s in rfq.workloads}
    chosen = {e.name: e.sourcing or "owned" for e in plan.workloads}
    out = []
    for name, cands in table.candidates.items():
        spec = specs[name]
        own = _cheapest(table, spec, [c for c in cands if not c.rented])
        rent = _cheapest(table, spec, [c for c in cands if c.rented])
        row: dict[str, Any] = {"workload": name, "chosen": chosen.get(name),
                               "owned_usd": own[0] if own else None,
                               "rented_usd": rent[0] if rent else None}
        if own and rent:
            cand, units = rent[1], rent[2]
            per_hour = cand.gpus * units * cand.rental.usd_per_gpu_hour
            used = hours_used(spec, cand.hours_to_complete, table.params.horizon_years) \
                * cand.runs
            breakeven_h = own[0] / per_hour
            row.update({"rent_offer": cand.rental.id, "rent_usd_per_hour": round(per_hour, 2),
                        "hours_used": round(used, 1),
                        "breakeven_hours": round(breakeven_h, 1),
                        "breakeven_utilization": round(breakeven_h / horizon_h, 4)})
            row.update(owned_horizon_terms(table, spec, own, per_hour, used, residual))
        row["why"] = _why(row)
        out.append(BuyVsRent.model_validate(row))
    return out


def _cheapest(table: CandidateTable, spec: AnyWorkload, cands: list[Any]) -> tuple[float, Any, int] | None:
    """(USD, candidate, units) of the cheapest way to run one workload alone on these
    candidates: a job's cheapest candidate; serving: the cheapest candidate at the replica
    count that alone meets demand. Owned costs count whole nodes over the horizon plus
    network and job storage (switches excluded: an estimate for comparison)."""
    best: tuple[float, Any, int] | None = None
    demand = demand_of(spec)
    storage = table.storage.get(spec.name)
    for cand in cands:
        units = 1 if cand.is_job else replica_bound(cand, demand)
        if cand.rented:
            usd = cand.rental_usd * units
        else:
            node = table.node_types[cand.node_type]
            nodes = cand.nodes_spanned * units if cand.nodes_spanned > 1 else math.ceil(
                cand.gpus * units / node.gpus)
            usd = nodes * node.cost.tco_usd + cand.network_usd * units
        if storage is not None and cand.is_job and not cand.rented:
            usd += storage.usd
        if best is None or usd < best[0]:
            best = (round(usd, 2), cand, units)
    return best


def _why(row: dict[str, Any]) -> str:
    if row["owned_usd"] is None:
        return "only rented capacity runs it within the RFQ's limits"
    if row["rented_usd"] is None:
        return "no allowed rental offer runs it (or rental is forbidden)"
    used, even = row["hours_used"], row["breakeven_hours"]
    if row["rented_usd"] < row["owned_usd"]:
        return f"renting wins: used {used:,.0f} h, below the break-even {even:,.0f} h"
    return f"owning wins: used {used:,.0f} h, above the break-even {even:,.0f} h"


def resale_text(row: BuyVsRent) -> str:
    """A one-off job's buy-run-resell cost against renting, in words (<= 76 chars)."""
    resold = row.owned_resold_usd
    if resold is None or row.rented_usd is None:
        return ""
    verdict = "dearer than" if resold > row.rented_usd else "cheaper than"
    return (f"buy, run the job, resell at {row.residual_value_fraction or 0.0:.0%}: "
            f"{_usd(resold)} ({verdict} renting)")


# --------------------------------------------------------------------------- residual value
def residual_params(params: CostParams) -> tuple[float, float]:
    """(``residual_value_fraction``, ``hardware_price_decline_per_year``): the labelled
    factors of the resale value of owned hardware (``catalog/costs.yaml``)."""
    return params.residual_value_fraction, params.hardware_price_decline_per_year


def residual_value_usd(capex_usd: float, months: float, fraction: float,
                       decline: float) -> float:
    """Resale value of hardware bought for ``capex_usd`` and sold ``months`` later:
    ``capex × fraction × (1 − decline)^(months / 12)`` (docs/rental.md)."""
    return capex_usd * fraction * (1.0 - decline) ** (max(0.0, months) / 12.0)


def owned_horizon_terms(table: CandidateTable, spec: AnyWorkload, own: tuple[float, Any, int], per_hour: float,
                        used: float, residual: tuple[float, float] | None = None
                        ) -> dict[str, Any]:
    """Owned-alone cost split into what is paid up front and per month, the break-even
    horizon, and for a one-off job the cost of buying, running it and reselling.

    * ``owned_capex_usd``: nodes, their network and (a job's) storage, paid at month 0;
      ``owned_running_usd_per_month``: their power and operations per month;
    * ``breakeven_months``: months of continuous (24/7) use at which owning (capex +
      running × t) and renting (``rent_usd_per_hour`` × t) cost the same; above it owning
      wins; ``None`` when renting costs less per hour than running owned hardware;
    * a job (training) only: ``owned_resold_usd`` = capex − resale value after the job +
      running cost for the job's hours (storage is not resold); ``residual_value_usd`` the
      resale value (:func:`residual_value_usd`, factors of :func:`residual_params`)."""
    usd, cand, units = own
    node = table.node_types[cand.node_type]
    nodes = cand.nodes_spanned * units if cand.nodes_spanned > 1 else math.ceil(
        cand.gpus * units / node.gpus)
    horizon_h = HOURS_PER_YEAR * table.params.horizon_years
    running_total = nodes * (node.cost.power_usd + node.cost.operations_usd)
    running_h = running_total / horizon_h
    capex = usd - running_total
    storage = table.storage.get(spec.name)
    storage_usd = storage.usd if storage is not None and cand.is_job else 0.0
    hardware = capex - storage_usd
    out: dict[str, Any] = {
        "owned_capex_usd": round(capex, 2),
        "owned_running_usd_per_month": round(running_h * HOURS_PER_YEAR / 12.0, 2),
        # a job's storage is bought only when owning (a rented job keeps its data on the
        # instances' disks), so it is part of what owning must earn back
        "breakeven_months": (round(capex / (per_hour - running_h) / (HOURS_PER_YEAR / 12.0),
                                   2) if per_hour > running_h else None)}
    if cand.is_job and spec.kind != "inference" and spec.recurrence is None:
        fraction, decline = residual if residual is not None else residual_params(table.params)
        months = used / (HOURS_PER_YEAR / 12.0)
        resale = residual_value_usd(hardware, months, fraction, decline)
        out.update({"residual_value_fraction": fraction,
                    "residual_value_usd": round(resale, 2),
                    "owned_resold_usd": round(capex - resale + running_h * used, 2)})
    return out


def cumulative_costs(row: BuyVsRent, horizon_years: float, step_months: float = 1.0
                     ) -> dict[str, list[float]] | None:
    """Cumulative cost month by month of owning (capex at month 0, then running costs) and
    of renting (the rented capacity's $/h for the hours it is used, spread over time from
    month 0) for one ``buy_vs_rent`` row; ``None`` when the row lacks either side."""
    capex, running = row.owned_capex_usd, row.owned_running_usd_per_month
    per_hour, used = row.rent_usd_per_hour, row.hours_used
    if capex is None or running is None or per_hour is None or used is None:
        return None
    months: list[float] = []
    month = 0.0
    end = 12.0 * horizon_years
    while month <= end + 1e-9:
        months.append(round(month, 6))
        month += step_months
    per_month = HOURS_PER_YEAR / 12.0
    buy = [capex + running * m for m in months]
    rent = [per_hour * min(m * per_month, used) for m in months]
    return {"month": months, "buy_usd": [round(v, 2) for v in buy],
            "rent_usd": [round(v, 2) for v in rent]}


# --------------------------------------------------------------------------- wording
def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:,.0f}"


def rent_lines(plan: Plan) -> list[str]:
    """What the plan rents, one short line per offer and workload (fits 80 columns)."""
    out = []
    for entry in plan.workloads:
        for rent in entry.rental or []:
            term = rent.price_type.replace("_", " ")
            out.append(f"{entry.name}: {rent.instances} x {rent.gpus_per_instance} "
                       f"{rent.gpu} from {rent.offer} ({term})")
            out.append(f"  {rent.gpu_hours:,.1f} GPU-h x {rent.usd_per_gpu_hour:g} USD/GPU-h"
                       f" = {_usd(rent.usd)} (price as of {rent.as_of})")
    return out


def buy_vs_rent_lines(rows: list[BuyVsRent]) -> list[str]:
    """The buy-versus-rent comparison of ``plan.buy_vs_rent`` as lines of <= 78 chars."""
    out = []
    for row in rows:
        out.append(f"{row.workload}: chosen {row.chosen}; alone: own "
                   f"{_usd(row.owned_usd)}, rent {_usd(row.rented_usd)}")
        if row.breakeven_hours is not None:
            out.append(f"  rent {row.rent_offer} at {row.rent_usd_per_hour or 0.0:,.2f} USD/h; "
                       f"used {row.hours_used or 0.0:,.0f} h")
            out.append(f"  break-even {row.breakeven_hours:,.0f} h = "
                       f"{row.breakeven_utilization or 0.0:.1%} of the horizon: above it, "
                       "owning wins")
            out.append(f"  {breakeven_horizon_text(row)}")
            if resale_text(row):
                out.append(f"  {resale_text(row)}")
        out.append(f"  {row.why}")
    return out


def breakeven_horizon_text(row: BuyVsRent) -> str:
    """The break-even horizon of a ``buy_vs_rent`` row in words (<= 76 chars)."""
    months = row.breakeven_months
    if row.owned_capex_usd is None:
        return ""
    if months is None:
        return "break-even horizon: none (renting costs less per hour than running owned)"
    return f"break-even horizon: {months:,.1f} months of 24/7 use; longer, owning wins"
