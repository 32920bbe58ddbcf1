"""The purchase schedule of a plan (contract: ``schedule`` in the solve JSON).

A list of periods, each ``{start_month, months, nodes_bought, gpus_bought, capex_usd,
rental_usd, runs}``. A plan solved for one demand level buys everything at month 0 and has
one period covering the horizon; ``runs`` says, per workload, whether it runs on owned or
rented capacity and on how many GPUs. (Demand that changes over time: docs/rental.md.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from solver.catalog.data import Catalog
from solver.common.errors import InputError, Problem
from solver.optimize.backends import DEFAULT_SOLVER, get_backend
from solver.optimize.bounds import tighten_bounds
from solver.optimize.linear import LinearModel
from solver.optimize.mip import (
    Demand,
    needs_n_plus_1,
    node_loss,
    planned_demand,
    replica_bound,
    stack_choice,
    stack_var,
    target_utilization,
    units_lost,
)
from solver.optimize.plan_model import Plan
from solver.optimize.records import CandidateTable
from solver.rfq.schema import AnyWorkload, Rfq


def single_period(plan: dict[str, Any], horizon_years: float) -> list[dict[str, Any]]:
    """The one-period schedule of a plan: everything bought at month 0."""
    cluster, cost = plan["cluster"], plan["cost"]
    runs = {w["name"]: {"sourcing": w.get("sourcing", "owned"), "gpus": w["gpus"]}
            for w in plan["workloads"]}
    return [{"start_month": 0, "months": round(12 * horizon_years, 3),
             "nodes_bought": cluster["total_nodes"], "gpus_bought": cluster["total_gpus"],
             "capex_usd": cost["capex_usd"], "rental_usd": cost.get("rental_usd", 0.0),
             "runs": runs}]


# --------------------------------------------------------------------------- phased model
HOURS_PER_MONTH = 8760.0 / 12.0


@dataclass(frozen=True)
class Period:
    start_month: float
    months: float


def has_demand_over_time(rfq: Rfq) -> bool:
    return any(w.kind == "inference" and w.periods for w in rfq.workloads)


def periods_of(rfq: Rfq) -> list[Period]:
    """The union of every workload's period boundaries, up to the horizon."""
    horizon = 12.0 * rfq.horizon_years
    cuts = {0.0, horizon}
    for work in rfq.workloads:
        start = 0.0
        for period in (work.periods if work.kind == "inference" else None) or []:
            start += period.months
            if start < horizon - 1e-9:
                cuts.add(round(start, 6))
    bounds = sorted(cuts)
    return [Period(a, b - a) for a, b in zip(bounds, bounds[1:], strict=False)]


def demand_at(spec: AnyWorkload, month: float) -> Any:
    """A serving workload's demand in force at ``month`` (its last period holds on), as
    capacity to buy: divided by the workload's ``target_utilization`` like the one-period
    MIP's demand (solver/optimize/mip.py planned_demand)."""
    periods = spec.periods if spec.kind == "inference" else None
    if not periods:
        return planned_demand(spec)
    start = 0.0
    chosen = periods[-1]
    for period in periods:
        if month < start + period.months - 1e-9:
            chosen = period
            break
        start += period.months
    util = target_utilization(spec)
    return Demand(float(f"{float(chosen.concurrency or 0) / util:.12g}"),
                  float(f"{float(chosen.qps or 0.0) / util:.12g}"))


def schedule_for(catalog: Catalog, rfq: Rfq, table: CandidateTable, plan: dict[str, Any],
                 time_limit: float | None = None) -> list[dict[str, Any]]:
    """The plan's schedule: one period, or - when a workload gives demand over time - the
    phased purchase of :func:`phased`, solved with the plan's own MIP backend (its
    comparison with buying everything at month 0 - the plan itself - goes to
    ``plan['phasing']``). Phasing is kept only when it costs less than the plan."""
    if has_demand_over_time(rfq) and plan.get("cost"):
        headline = float(plan["cost"]["tco_usd"])
        stacks = {catalog.gpus[node["gpu"]].stack for node in plan["cluster"]["nodes"]}
        result = phased(catalog, rfq, table, plan.get("solver"), time_limit,
                        stack=next(iter(stacks)) if len(stacks) == 1 else None)
        if result is not None and result[1]["tco_usd"] < headline - 0.5:
            schedule, summary = result
            summary["buy_all_now_tco_usd"] = round(headline, 2)
            summary["saving_usd"] = round(headline - summary["tco_usd"], 2)
            plan["phasing"] = summary
            return schedule
        why = ("a workload needs nodes coupled over a fabric, or the phased model found no "
               "plan in time" if result is None else
               "buying in steps costs no less than buying everything now")
        plan.setdefault("warnings", []).append(
            f"demand over time: no phased schedule ({why}); everything is bought at month 0")
    return single_period(plan, table.params.horizon_years)


def _usable(cand: Any) -> bool:
    """Candidates the phased model takes: rented ones and owned in-node ones."""
    return cand.rented or not cand.spanning


def phased(catalog: Catalog, rfq: Rfq, table: CandidateTable, solver: str | None = None,
           time_limit: float | None = None, stack: str | None = None
           ) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    r"""Buy capacity per period, rent to bridge (docs/rental.md, "Demand over time").

    Periods p (start S_p months, length L_p), node types t, candidates c (owned in-node or
    rented). Variables: B[t,p] nodes bought at the start of p (N[t,p] = Σ_{q≤p} B[t,q]:
    capacity stays), x[c,p] serving units in p, y[c] ∈ {0,1} the one candidate of a job
    (jobs and batch inference run once, in the first period), W[p] front-end switches bought.
    Objective: Σ B[t,p] (capex_t (1-δ)^{S_p/12} + opex_t (H - S_p)/H)
    + Σ rented x[c,p] k_c $/GPU-h max(730 L_p, min_term) + Σ y[c] (rental_c + storage)
    + Σ W[p] switch (1-δ)^{S_p/12}, δ = costs.hardware_price_decline_per_year.
    Rows: demand of every serving workload in every period; packing
    Σ_{c on t} g_c x[c,p] (+ jobs in p=1) ≤ k_t N[t,p]; front-end ports ≤ R Σ_{q≤p} W[q];
    limits on the final owned estate; budget. The rules of the one-period MIP
    (solver/optimize/mip.py) carry over: ``redundancy: n+1`` in every period (the capacity
    left after the largest one-node loss of the candidates used in that period meets the
    period's demand: a[c,p] ∈ {0,1} "c is used in p", Σ m x[·,p] - ℓ_c a[c,p] ≥ D_p,
    x[c,p] ≤ x̄ a[c,p]), one accelerator stack for owned nodes unless
    ``constraints.mixed_vendors`` (B[t,p] ≤ M v[s(t)], Σ v ≤ 1), the RFQ's solver and the
    time left. ``stack``: the plan's accelerator stack (CUDA or ROCm); the schedule buys the
    plan's stack only (without it the phased model chose its own: a ROCm schedule under a
    CUDA plan). None when a workload has no usable candidate or no plan is found."""
    setup = _setup(catalog, rfq, table)
    if setup is None:
        return None
    model = _phased_model(rfq, table, setup)
    if stack is not None:
        for other in {node.stack for node in table.node_types.values()} - {stack}:
            if stack_var(other) in model.variables:  # one-stack rows present: choose none
                model.variables[stack_var(other)] = replace(model.variables[stack_var(other)],
                                                            high=0.0)
    periods, cands, once, factor, fe_cable = setup
    backend = get_backend(solver or DEFAULT_SOLVER)
    solution = backend.solve(model, time_limit)
    if solution.status not in ("optimal", "feasible"):
        return None
    schedule = _periods_out(table, cands, once, periods, solution.values, factor, fe_cable)
    summary: dict[str, Any] = {"tco_usd": round(solution.objective or 0.0, 2),
                               "buy_all_now_tco_usd": None,
                               "hardware_price_decline_per_year": _decline(catalog)}
    return schedule, summary


def _setup(catalog: Catalog, rfq: Rfq, table: CandidateTable) -> tuple[
        list[Period], dict[str, list[Any]], set[str], Any, float] | None:
    """The phased model's periods, usable candidates per workload, run-once workloads, the
    price factor of each period and the front-end cable cost per node."""
    periods = periods_of(rfq)
    cands = {name: [c for c in cs if _usable(c)] for name, cs in table.candidates.items()}
    if any(not cs for cs in cands.values()):
        return None
    decline = _decline(catalog)
    once = {s.name for s in rfq.workloads if s.kind != "inference"}  # jobs, batch: period 1

    def factor(p: int) -> float:
        return (1.0 - decline) ** (periods[p].start_month / 12.0)

    params = table.params
    return periods, cands, once, factor, params.frontend_ports_per_node * params.frontend_cable_usd


def phased_model(catalog: Catalog, rfq: Rfq, table: CandidateTable, *, buy_now: bool = False
                 ) -> LinearModel | None:
    """The model :func:`phased` solves (``buy_now``: every purchase at month 0, the
    reference that must cost what the one-period plan costs); None when a workload has no
    usable candidate."""
    setup = _setup(catalog, rfq, table)
    return None if setup is None else _phased_model(rfq, table, setup, buy_now)


def _phased_model(rfq: Rfq, table: CandidateTable, setup: Any, buy_now: bool = False
                  ) -> LinearModel:
    periods, cands, once, factor, fe_cable = setup
    specs = {s.name: s for s in rfq.workloads}
    model = LinearModel(name=f"phased-{rfq.id}")
    _purchase_vars(model, table, periods, factor, fe_cable)
    _unit_vars(model, table, cands, specs, once, periods)
    _demand_rows(model, cands, specs, once, periods)
    _packing_rows(model, table, cands, once, periods)
    _n_plus_1_rows(model, table, cands, specs, once, periods)
    _frontend(model, table, periods, factor, rfq.facility.lan_ports)
    _one_stack_rows(model, table, rfq, periods)
    _final_limits(model, table, rfq, len(periods) - 1)
    if buy_now:
        model = _buy_now(model, table, periods)
    tighten_bounds(model)
    return model


def _n_plus_1_rows(model: LinearModel, table: CandidateTable, cands: dict[str, list[Any]],
                   specs: dict[str, Any], once: set[str], periods: list[Period]) -> None:
    """``redundancy: n+1`` in every period: with c used in p (a[c,p]), the capacity left
    after losing what one node carries of c still meets the period's demand."""
    for name, cs in cands.items():
        spec = specs[name]
        if name in once or not needs_n_plus_1(spec):
            continue
        for p, period in enumerate(periods):
            demand = demand_at(spec, period.start_month)
            spare = node_loss(table, cs)
            for c in cs:
                used = model.var(f"a[{c.name},{p}]", 0, 1)
                high = replica_bound(c, demand, spare)
                model.variables[f"x[{c.name},{p}]"].high = float(high)
                model.add(f"used[{c.name},{p}]", {f"x[{c.name},{p}]": 1.0,
                                                  used: -float(high)}, "<=", 0.0)
            for label, need, capacity in (("conc", demand.concurrency, "concurrency_capacity"),
                                          ("qps", demand.qps, "qps_capacity")):
                if not need:
                    continue
                coeffs = {f"x[{c.name},{p}]": getattr(c, capacity) for c in cs}
                for c in cs:
                    lost = units_lost(table, c) * getattr(c, capacity)
                    if lost <= 0:
                        continue
                    model.add(f"n_plus_1_{label}[{c.name},{p}]",
                              {**coeffs, f"a[{c.name},{p}]": -lost}, ">=", need)


def _one_stack_rows(model: LinearModel, table: CandidateTable, rfq: Rfq,
                    periods: list[Period]) -> None:
    """One accelerator stack for every owned node bought in any period (CUDA or ROCm),
    unless ``constraints.mixed_vendors``: the one-period MIP's rule."""
    if not stack_choice(model, table, rfq):
        return
    for key, node in table.node_types.items():
        gpus = sum(c.gpus * (model.variables[f"x[{c.name},{p}]"].high or 1)
                   for c in _owned_on(table, key)
                   for p in range(len(periods)) if f"x[{c.name},{p}]" in model.variables)
        bound = float(max(1, -(-gpus // node.gpus)))
        for p in range(len(periods)):
            model.add(f"vendor_stack[{key},{p}]", {f"B[{key},{p}]": 1.0,
                                                   stack_var(node.stack): -bound}, "<=", 0.0)


def _owned_on(table: CandidateTable, key: str) -> list[Any]:
    return [c for cs in table.candidates.values() for c in cs
            if not c.rented and c.node_type == key]




def _purchase_vars(model: LinearModel, table: CandidateTable, periods: list[Period],
                   factor: Any, fe_cable: float) -> None:
    """B[t,p]: nodes of type t bought at the start of period p, at the declined capex plus
    their front-end cables and power/operations for the rest of the horizon."""
    params = table.params
    horizon_months = 12.0 * params.horizon_years
    for key, node in table.node_types.items():
        per_year = (node.cost.power_usd + node.cost.operations_usd) / params.horizon_years
        for p, period in enumerate(periods):
            name = model.var(f"B[{key},{p}]", 0, None)
            model.objective[name] = (node.cost.capex_usd * factor(p) + fe_cable
                                     + per_year * (horizon_months - period.start_month) / 12.0)


def _unit_vars(model: LinearModel, table: CandidateTable, cands: dict[str, list[Any]],
               specs: dict[str, Any], once: set[str], periods: list[Period]) -> None:
    """x[c,p]: units of candidate c in period p (jobs and batch once, in the first period);
    rented units pay their billed hours, a job its rental and storage."""
    for name, cs in cands.items():
        storage = table.storage.get(name)
        for c in cs:
            if name in once:
                high = 1 if c.is_job else replica_bound(c, planned_demand(specs[name]))
                var = model.var(f"x[{c.name},0]", 0, high)
                model.objective[var] = c.rental_usd + (storage.usd if storage and not c.rented
                                                       else 0.0)
                continue
            for p, period in enumerate(periods):
                high = replica_bound(c, demand_at(specs[name], period.start_month))
                var = model.var(f"x[{c.name},{p}]", 0, high)
                if c.rented:
                    hours = c.rental.billed_hours(HOURS_PER_MONTH * period.months)
                    model.objective[var] = c.gpus * c.rental.usd_per_gpu_hour * hours


def _demand_rows(model: LinearModel, cands: dict[str, list[Any]], specs: dict[str, Any],
                 once: set[str], periods: list[Period]) -> None:
    """Demand: each serving workload in every period, jobs and batch once."""
    for name, cs in cands.items():
        spec = specs[name]
        if spec.kind in ("lora", "qlora", "full_finetune", "pretrain"):
            model.add(f"one_job[{name}]", {f"x[{c.name},0]": 1.0 for c in cs}, "==", 1.0)
            continue
        for p, period in enumerate(periods if name not in once else periods[:1]):
            demand = demand_at(spec, period.start_month)
            if demand.concurrency:
                model.add(f"conc[{name},{p}]", {f"x[{c.name},{p}]": c.concurrency_capacity
                                                for c in cs}, ">=", demand.concurrency)
            if demand.qps:
                model.add(f"qps[{name},{p}]", {f"x[{c.name},{p}]": c.qps_capacity
                                               for c in cs}, ">=", demand.qps)


def _packing_rows(model: LinearModel, table: CandidateTable, cands: dict[str, list[Any]],
                  once: set[str], periods: list[Period]) -> None:
    """Owned GPUs in use in period p fit on the nodes bought up to p."""
    for key, node in table.node_types.items():
        for p in range(len(periods)):
            coeffs: dict[str, float] = {}
            for name, cs in cands.items():
                if name in once and p > 0:
                    continue
                for c in cs:
                    if not c.rented and c.node_type == key:
                        coeffs[f"x[{c.name},{p}]"] = float(c.gpus)
            for q in range(p + 1):
                coeffs[f"B[{key},{q}]"] = -float(node.gpus)
            model.add(f"packing[{key},{p}]", coeffs, "<=", 0.0)

def _decline(catalog: Catalog) -> float:
    """``costs.hardware_price_decline_per_year`` (0 when the catalog has none)."""
    param = catalog.costs.hardware_price_decline_per_year
    value = float(param.value) if param is not None else 0.0
    if not 0.0 <= value < 0.9:
        raise InputError([Problem("costs.yaml", "hardware_price_decline_per_year.value", value,
                                  "must be in [0, 0.9)")])
    return value


def _frontend(model: Any, table: CandidateTable, periods: list[Period], factor: Any,
              lan_ports: int = 0) -> None:
    """Front-end ToR switches bought per period (single tier: an approximation above one
    switch's ports), enough for every owned node's front-end ports once they exceed the
    site's free LAN ports ``lan_ports`` (o[p] ∈ {0,1}: own switches from period p; the
    one-period MIP's rule, solver/optimize/network.py). Needs the x bounds (they size the
    big-M: the nodes every owned candidate of every period at its bound fills)."""
    p_ = table.params
    if not p_.frontend_ports_per_node:
        return
    fe = float(p_.frontend_ports_per_node)
    by_name = {c.name: c for cs in table.candidates.values() for c in cs}
    gpus: dict[str, float] = {}
    for name, var in model.variables.items():
        cand = by_name.get(name[2:name.rfind(",")]) if name.startswith("x[") else None
        if cand is not None and not cand.rented:
            gpus[cand.node_type] = gpus.get(cand.node_type, 0.0) + cand.gpus * (var.high or 1)
    big = fe * sum(math.ceil(g / table.node_types[key].gpus) for key, g in gpus.items())
    for p in range(len(periods)):
        var = model.var(f"W[{p}]", 0, None)
        model.objective[var] = p_.frontend_switch_usd * factor(p)
        ports = {f"B[{key},{q}]": fe for key in table.node_types for q in range(p + 1)}
        coeffs = {**ports, **{f"W[{q}]": -float(p_.frontend_ports_per_switch)
                              for q in range(p + 1)}}
        if lan_ports <= 0:
            model.add(f"frontend[{p}]", coeffs, "<=", 0.0)
            continue
        if big <= lan_ports:
            continue
        own = model.var(f"o_fe[{p}]", 0, 1)
        model.add(f"frontend_lan[{p}]", {**ports, own: -(big - lan_ports)}, "<=",
                  float(lan_ports))
        model.add(f"frontend[{p}]", {**coeffs, own: big}, "<=", big)


def _final_limits(model: Any, table: CandidateTable, rfq: Rfq, last: int) -> None:
    """The RFQ's owned limits on the estate at the end (capacity only grows)."""
    c = rfq.constraints
    nodes = table.node_types
    owned = {key: [f"B[{key},{q}]" for q in range(last + 1)] for key in nodes}
    rows = (("max_nodes", c.max_nodes, lambda n: 1.0),
            ("max_gpus", c.max_gpus, lambda n: float(n.gpus)),
            ("max_power_kw", rfq.facility.power_limit_kw(c.max_power_kw),
             lambda n: n.cost.power_kw),
            ("max_rack_units", c.max_rack_units, lambda n: float(n.cost.rack_units)))
    for label, limit, weight in rows:
        if limit is not None:
            model.add(label, {v: weight(nodes[k]) for k in nodes for v in owned[k]}, "<=",
                      float(limit))
    if rfq.budget_usd is not None:
        model.add("budget", dict(model.objective), "<=", rfq.budget_usd)


def _buy_now(model: Any, table: CandidateTable, periods: list[Period]) -> Any:
    """The same model with every purchase at month 0 (the buy-everything-now reference)."""
    from copy import deepcopy

    now = deepcopy(model)
    for p in range(1, len(periods)):
        for key in table.node_types:
            now.add(f"now[{key},{p}]", {f"B[{key},{p}]": 1.0}, "<=", 0.0)
        if f"W[{p}]" in now.variables:
            now.add(f"now[W,{p}]", {f"W[{p}]": 1.0}, "<=", 0.0)
    return now


def _periods_out(table: CandidateTable, cands: dict[str, list[Any]], once: set[str],
                 periods: list[Period], values: dict[str, float], factor: Any,
                 fe_cable: float) -> list[dict[str, Any]]:
    out = []
    params = table.params
    for p, period in enumerate(periods):
        nodes = {key: round(values.get(f"B[{key},{p}]", 0.0)) for key in table.node_types}
        switches = round(values.get(f"W[{p}]", 0.0))
        lines = _period_lines(table, nodes, switches, factor(p))
        capex = sum(n * (table.node_types[k].cost.capex_usd * factor(p) + fe_cable)
                    for k, n in nodes.items())
        capex += switches * params.frontend_switch_usd * factor(p)
        rental = 0.0
        runs: dict[str, dict[str, Any]] = {}
        for name, cs in cands.items():
            if name in once and p > 0:
                continue
            owned_gpus = rented_gpus = 0
            for c in cs:
                units = round(values.get(f"x[{c.name},{p}]", 0.0))
                if not units:
                    continue
                if c.rented:
                    rented_gpus += units * c.gpus
                    rental += (c.rental_usd if name in once else units * c.gpus
                               * c.rental.usd_per_gpu_hour
                               * c.rental.billed_hours(HOURS_PER_MONTH * period.months))
                else:
                    owned_gpus += units * c.gpus
            runs[name] = {"owned_gpus": owned_gpus, "rented_gpus": rented_gpus}
        out.append({"start_month": round(period.start_month, 3),
                    "months": round(period.months, 3),
                    "nodes_bought": sum(nodes.values()),
                    "gpus_bought": sum(n * table.node_types[k].gpus for k, n in nodes.items()),
                    "node_types_bought": {k: n for k, n in nodes.items() if n},
                    "capex_usd": round(capex, 2), "rental_usd": round(rental, 2),
                    "lines": lines, "runs": runs})
    return out


def _period_lines(table: CandidateTable, nodes: dict[str, int], switches: int,
                  factor: float) -> list[dict[str, Any]]:
    """What one period buys, line by line: each node type (server with its GPUs) at the
    period's declined price, their front-end cables, and the front-end switches."""
    params = table.params
    lines = []
    for key, count in nodes.items():
        if not count:
            continue
        cost = table.node_types[key].cost
        lines.append({"item": key, "description": f"node {key} (server + GPUs)",
                      "qty": count, "unit_usd": round(cost.capex_usd * factor, 2),
                      "total_usd": round(count * cost.capex_usd * factor, 2)})
    cables = sum(nodes.values()) * params.frontend_ports_per_node
    if cables and params.frontend_cable_usd:
        lines.append({"item": "frontend-cable", "description": "front-end Ethernet cable",
                      "qty": cables, "unit_usd": params.frontend_cable_usd,
                      "total_usd": round(cables * params.frontend_cable_usd, 2)})
    if switches:
        unit = params.frontend_switch_usd * factor
        lines.append({"item": "frontend-switch", "description": "front-end Ethernet switch (ToR)",
                      "qty": switches, "unit_usd": round(unit, 2),
                      "total_usd": round(switches * unit, 2)})
    return lines


def schedule_lines(plan: Plan) -> list[str]:
    """A phased schedule as short lines (fits 80 columns); empty for one period."""
    schedule = plan.schedule
    phasing = plan.phasing
    if len(schedule) < 2 or not phasing:
        return []
    out = [f"phased TCO ${phasing.tco_usd:,.0f}; buying all at month 0: "
           f"${phasing.buy_all_now_tco_usd or 0.0:,.0f}",
           f"(later hardware {phasing.hardware_price_decline_per_year:.0%} a year cheaper)"]
    for period in schedule:
        end = period.start_month + period.months
        runs = ", ".join(f"{name} {run.owned_gpus} owned + {run.rented_gpus} rented GPUs"
                         for name, run in period.runs.items())
        out.append(f"months {period.start_month:g}-{end:g}: buy {period.nodes_bought} "
                   f"node(s), {period.gpus_bought} GPUs, ${period.capex_usd:,.0f}; "
                   f"rent ${period.rental_usd:,.0f}")
        out.append(f"  {runs}")
    return out
