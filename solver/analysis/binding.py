"""Every constraint at its limit, with the price of its next relaxation (issue 28).

A constraint *binds* when relaxing it one step makes the optimum cheaper. Each step is
found by re-solving, never estimated:

- limits (``max_nodes``, ``max_gpus``, ``max_power_kw`` with the facility's continuous load,
  ``max_rack_units``): the MIP on the same candidate table with the limit lifted;
- serving SLOs (``ttft_ms``, ``tpot_ms``) and job deadlines (``deadline_hours``): twice the
  target, that workload's candidates rebuilt;
- precision pinned by the RFQ (``precision`` / ``precisions``): the default policy (a
  quantised checkpoint's own format, else bf16 or fp8);
- a MoE serving workload kept aggregated (``disaggregated: false``, the default): allowed
  separate prefill and decode pools, its candidates rebuilt (issue 27; dense models are
  left out: no measured pool checks their disaggregated estimate);
- the vendor profile, the GPU list, ``datacenter_grade_only``, ``facility.cooling: air``
  (or ``liquid``) and ``facility.max_kw_per_rack`` (when it keeps a node type out): lifted,
  the whole RFQ rebuilt.

A budget never binds a feasible plan of the cost objectives: it limits the very cost that
is minimised, so lifting it cannot lower the optimum. Under ``objective: max_served`` with
demand left unserved (issue 29) a relaxation binds when it serves a larger
priority-weighted share (``served_share``; ``saving_usd`` is then negative when it costs
more), the budget first among them (twice the budget). ``facility.racks`` is lifted on the
same candidate table (its rack row and the power it caps go; the racks the cheaper plan then
fills are named). Each saving is in the
RFQ's objective (TCO, or capex), USD; the list runs from the largest saving down, so the
first entry is the dominant constraint.

Each re-solve (its candidates and its MIP) has at most :data:`RELAXATION_LIMIT_S` seconds. A
relaxation can make the MIP far harder than the plan's own: lifting a 50-workload
portfolio's ``cooling: liquid`` multiplies its candidates by 11 (828 -> 9,308) and took
120 s to prove, for a plan solved in 1.2 s. One that runs out of time with a cheaper plan
in hand is listed with ``proven: false`` (the relaxed optimum costs at most that plan, so
the saving is at least the one stated); one with none is named in the plan's warnings
(:attr:`BindingReport.unpriced`), never dropped silently.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from functools import partial
from typing import Any

from solver.catalog.data import Catalog
from solver.common.progress import report
from solver.optimize.backends import DEFAULT_SOLVER, MIN_RUN_SECONDS
from solver.optimize.candidate_workers import map_workloads
from solver.optimize.candidates import build_candidates, node_types
from solver.optimize.costs import CostParams
from solver.optimize.linear import FOUND, Solution, TimeLimitReached
from solver.optimize.mip import Limits
from solver.optimize.plan import assemble, weighted_served_share
from solver.optimize.plan_model import Plan
from solver.optimize.records import CandidateTable
from solver.optimize.solve import run_mip, solve_table
from solver.rfq.schema import AnyWorkload, Rfq

RELAXATION_LIMIT_S = 15.0
"""Most seconds one relaxation's re-solve (candidates and MIP) may take (module docstring).
Every shipped scenario's relaxations take milliseconds; a large portfolio's can take
minutes."""
MIN_SAVING_USD = 1.0
"""A relaxation saving less than this is rounding, not a binding constraint."""
RELAX_FACTOR = 2.0
"""The next relaxation of an SLO or a deadline: twice the target."""

_LIMITS = {  # Limits field -> (RFQ path, kind, cluster figure, unit)
    "max_nodes": ("constraints.max_nodes", "node_limit", "total_nodes", "nodes"),
    "max_gpus": ("constraints.max_gpus", "gpu_limit", "total_gpus", "GPUs"),
    "max_power_kw": ("constraints.max_power_kw", "power", "power_kw", "kW"),
    "max_rack_units": ("constraints.max_rack_units", "rack_units", "rack_units", "U"),
}


def _objective(plan: Plan) -> float | None:
    if plan.cost is None or not plan.feasible:
        return None
    return plan.cost.capex_usd if plan.objective == "capex" else plan.cost.tco_usd


def _cluster_words(plan: Plan) -> str:
    return ", ".join(f"{n.count} x {n.server} with {n.gpus_per_node} x {n.gpu}"
                     for n in plan.cluster.nodes) or "nothing owned"


MIN_SHARE_GAIN = 0.005
"""Objective max_served: a relaxation serving less than half a per cent more is no gain."""


@dataclass(frozen=True)
class Base:
    """The plan a relaxation is judged against: its cost in the RFQ's objective and, under
    ``objective: max_served`` with demand left unserved, its priority-weighted served share
    and the RFQ whose priorities weigh it (then a relaxation binds when it serves more,
    whatever it costs)."""

    cost: float
    share: float | None = None
    rfq: Rfq | None = None


def _entry(constraint: str, kind: str, value: str, relaxed_to: str, base: Base,
           relaxed: Plan) -> dict[str, Any] | None:
    """The entry of a relaxation whose re-solve ended (None when it does not bind). A
    re-solve stopped at :data:`RELAXATION_LIMIT_S` with a plan in hand gives a bound: an
    entry with ``proven: false`` where that plan already gains, else an unpriced one."""
    cost = _objective(relaxed)
    if cost is None:
        return _unpriced(constraint, kind, value, relaxed_to) if relaxed.status == "timeout" \
            else None
    entry = _judged(constraint, kind, value, relaxed_to, base, relaxed, cost)
    if relaxed.status == "optimal":
        return entry
    return ({**entry, "proven": False} if entry is not None
            else _unpriced(constraint, kind, value, relaxed_to))


def _unpriced(constraint: str, kind: str, value: str, relaxed_to: str) -> dict[str, Any]:
    """A relaxation whose re-solve found no better plan within :data:`RELAXATION_LIMIT_S`:
    whether it binds is not known."""
    return {"constraint": constraint, "kind": kind, "value": value, "relaxed_to": relaxed_to,
            UNPRICED: True}


UNPRICED = "unpriced"
"""Key marking an entry of :func:`run_steps`'s list that :func:`binding_report` moves to
:attr:`BindingReport.unpriced`."""


def _judged(constraint: str, kind: str, value: str, relaxed_to: str, base: Base,
            relaxed: Plan, cost: float) -> dict[str, Any] | None:
    if base.share is not None:  # max_served: the relaxation binds when it serves more
        share = weighted_served_share(relaxed, base.rfq) if base.rfq else None
        if share is None or share < base.share + MIN_SHARE_GAIN:
            return None
        return {"constraint": constraint, "kind": kind, "value": value,
                "relaxed_to": relaxed_to, "relaxed_cost_usd": round(cost, 2),
                "saving_usd": round(base.cost - cost, 2),
                "relaxed_cluster": _cluster_words(relaxed),
                "served_share": round(share, 4)}
    if base.cost - cost < MIN_SAVING_USD:
        return None
    return {"constraint": constraint, "kind": kind, "value": value, "relaxed_to": relaxed_to,
            "relaxed_cost_usd": round(cost, 2), "saving_usd": round(base.cost - cost, 2),
            "relaxed_cluster": _cluster_words(relaxed)}


BINDING_AUTO_MAX_WORKLOADS = 8
"""``scope="auto"`` prices each workload's own relaxations (SLOs, deadline, precision:
about two full re-solves per workload) only for RFQs of at most this many workloads; a
50-workload portfolio would otherwise re-solve ~90 times (docs/performance.md)."""


def prices_workloads(rfq: Rfq, scope: str) -> bool:
    """Whether the binding list re-solves each workload's own relaxations: ``all`` yes,
    ``rfq`` no, ``auto`` up to :data:`BINDING_AUTO_MAX_WORKLOADS` workloads."""
    return scope == "all" or (scope == "auto"
                              and len(rfq.workloads) <= BINDING_AUTO_MAX_WORKLOADS)


@dataclass(frozen=True)
class BindingReport:
    """The binding constraints (plan JSON ``binding``) and the relaxations whose re-solve
    found no plan within the time each may take (their constraint paths)."""

    entries: list[dict[str, Any]]
    unpriced: list[str]


def binding_constraints(rfq: Rfq, catalog: Catalog, plan: Plan, table: CandidateTable,
                        solver: str = DEFAULT_SOLVER, workers: int = 1,
                        scope: str = "auto") -> list[dict[str, Any]]:
    """The entries of :func:`binding_report`."""
    return binding_report(rfq, catalog, plan, table, solver, workers, scope).entries


def binding_report(rfq: Rfq, catalog: Catalog, plan: Plan, table: CandidateTable,
                   solver: str = DEFAULT_SOLVER, workers: int = 1, scope: str = "auto",
                   limit: float | None = RELAXATION_LIMIT_S) -> BindingReport:
    """The plan's binding constraints, each with its next relaxation and what it saves
    (module docstring); none when nothing binds or the plan is not feasible. ``workers`` > 1:
    the re-solves of a large table (:data:`PARALLEL_MIN_CANDIDATES`) run in that many
    forked processes (:func:`run_steps`; the same list). ``scope``: whether each workload's
    own relaxations are priced too (:func:`prices_workloads`); the RFQ's limits, facility,
    vendor and budget always are. ``limit``: seconds each re-solve may take (None: no
    limit)."""
    cost = _objective(plan)
    if cost is None:
        return BindingReport([], [])
    catalog = rfq.catalog(catalog)
    share = weighted_served_share(plan, rfq)
    base = (Base(cost, share, rfq) if share is not None and share < 1.0 - 1e-9
            else Base(cost))
    steps = _limit_entries(rfq, catalog, table, solver, base, limit)
    steps.append(partial(_racks_entry, rfq, catalog, table, solver, base, limit))
    if base.share is not None:
        steps.append(partial(_budget_entry, rfq, catalog, table, solver, base, limit))
    for spec in rfq.workloads if prices_workloads(rfq, scope) else []:
        steps += _workload_entries(rfq, catalog, table, solver, base, spec, limit)
    steps += _rfq_entries(rfq, catalog, solver, base, limit)
    size = sum(map(len, table.candidates.values()))
    found = [e for e in run_steps(steps, workers if size >= PARALLEL_MIN_CANDIDATES else 1)
             if e is not None]
    unpriced = [e["constraint"] for e in found if e.get(UNPRICED)]
    entries = [e for e in found if not e.get(UNPRICED)]
    if base.share is not None:  # max_served: the largest gain in service first
        entries.sort(key=lambda e: (-e["served_share"], -e["saving_usd"]))
    else:
        entries.sort(key=lambda e: -e["saving_usd"])
    return BindingReport(entries, unpriced)


def _not_found(solution: Solution, constraint: str, kind: str, value: str,
               relaxed_to: str) -> dict[str, Any] | None:
    """The entry of a relaxation whose MIP found no plan: None where none exists (it does
    not bind that way), unpriced where the time ran out first."""
    return _unpriced(constraint, kind, value, relaxed_to) if solution.status == "timeout" \
        else None


Step = Callable[[], "dict[str, Any] | None"]
"""One relaxation re-solved: its entry, or None when it does not bind."""
PARALLEL_MIN_CANDIDATES = 500
"""A table with fewer candidates re-solves in this process: its MIPs take milliseconds
(every scenario), less than forking costs. A portfolio's take seconds each, one per SLO,
deadline and pinned precision of every workload (issue 31)."""


def run_steps(steps: list[Step], workers: int = 1) -> list[dict[str, Any] | None]:
    """``[step() for step in steps]``; with ``workers`` > 1 in that many forked processes
    (:func:`solver.optimize.candidate_workers.map_workloads`, one step at a time to the
    next free process), in this process where that is not possible."""
    what = f"binding constraints: re-solving {len(steps)} relaxations"
    if workers > 1 and len(steps) > 1:
        report(f"{what} in {min(workers, len(steps))} processes")
        done = map_workloads(lambda i: steps[i](), list(range(len(steps))), workers,
                             min_count=2)
        if done is not None:
            return done
    out = []
    for index, step in enumerate(steps):
        report(what, index, len(steps))
        out.append(step())
    return out


def _budget_entry(rfq: Rfq, catalog: Catalog, table: CandidateTable, solver: str,
                  base: Base, limit: float | None) -> dict[str, Any] | None:
    """Objective max_served with demand left unserved: the budget binds; its next
    relaxation is twice the budget (what that serves, and what it costs)."""
    budget = rfq.budget_usd or 0.0
    more = rfq.model_copy(update={"budget_usd": budget * RELAX_FACTOR})
    words = ("budget_usd", "budget", f"${budget:,.0f}", f"${budget * RELAX_FACTOR:,.0f}")
    solution = run_mip(table, more, solver=solver, time_limit=limit)
    if solution.status not in FOUND:
        return _not_found(solution, *words)
    return _entry(*words, base, assemble(catalog, more, table, solution))


def _limit_entries(rfq: Rfq, catalog: Catalog, table: CandidateTable, solver: str,
                   base: Base, limit: float | None) -> list[Step]:
    limits = Limits.from_rfq(rfq)
    return [partial(_limit_entry, rfq, catalog, table, solver, base, limit, name)
            for name in _LIMITS if getattr(limits, name) is not None
            and getattr(rfq.constraints, name) is not None]  # a power cap of racks alone:
    # its entry is facility.racks'


def _limit_entry(rfq: Rfq, catalog: Catalog, table: CandidateTable, solver: str, base: Base,
                 limit: float | None, name: str) -> dict[str, Any] | None:
    """The RFQ's limit ``name`` lifted: the same table re-solved."""
    path, kind, figure, unit = _LIMITS[name]
    limits = Limits.from_rfq(rfq)
    stated = getattr(rfq.constraints, name)
    # lifting max_power_kw keeps the cap of the facility's racks (None without racks)
    keep = rfq.facility.power_limit_kw(None) if name == "max_power_kw" else None
    lifted = Limits(**{f.name: (keep if f.name == name else getattr(limits, f.name))
                       for f in fields(Limits)})
    solution = run_mip(table, rfq, solver=solver, limits=lifted, time_limit=limit)
    if solution.status not in FOUND:
        return _not_found(solution, path, kind, f"{stated:g} {unit}", "lifted")
    relaxed = assemble(catalog, rfq, table, solution)
    needed = float(getattr(relaxed.cluster, figure))
    if name == "max_power_kw":  # the RFQ states the circuit; the plan draws its share
        needed /= rfq.facility.continuous_load_factor
    return _entry(path, kind, f"{stated:g} {unit}", f"{needed:,.1f} {unit} "
                  "(lifted: what the cheapest plan then needs)", base, relaxed)


def racks_filled(plan: Plan, table: CandidateTable, rack_kw: float) -> int:
    """Racks the plan's nodes fill at ``rack_kw`` continuous load per rack: the MIP's rack
    row (Σ_t nodes / nodes per rack) and the power, whichever needs more, rounded up."""
    by_type = {(n.server, n.gpu, n.gpus): n for n in table.node_types.values()}
    share = 0.0
    for group in plan.cluster.nodes:
        node = by_type.get((group.server, group.gpu, group.gpus_per_node))
        if node is not None and node.cost.power_kw > 0:
            share += group.count / max(1, math.floor(rack_kw / node.cost.power_kw + 1e-9))
    return math.ceil(max(share, plan.cluster.power_kw / rack_kw) - 1e-9)


def _racks_entry(rfq: Rfq, catalog: Catalog, table: CandidateTable, solver: str,
                 base: Base, limit: float | None) -> dict[str, Any] | None:
    """``facility.racks`` (with ``max_kw_per_rack``) lifted: the same table re-solved
    without the rack row and the power the racks cap."""
    facility = rfq.facility
    rack_kw = facility.rack_limit_kw()
    if facility.racks is None or rack_kw is None:
        return None
    lifted = rfq.model_copy(update={"facility": facility.model_copy(update={"racks": None})})
    solution = run_mip(table, lifted, solver=solver, time_limit=limit)
    if solution.status not in FOUND:
        return _not_found(solution, "facility.racks", "racks", _racks(facility.racks), "lifted")
    relaxed = assemble(catalog, lifted, table, solution)
    needed = racks_filled(relaxed, table, rack_kw)
    return _entry("facility.racks", "racks", _racks(facility.racks),
                  f"{_racks(needed)} (lifted: what the cheapest plan then fills)", base, relaxed)


def _racks(count: int) -> str:
    return f"{count} rack" + ("" if count == 1 else "s")


def _rebuilt(rfq: Rfq, catalog: Catalog, table: CandidateTable, spec: AnyWorkload,
             solver: str, limit: float | None = None) -> Plan | Solution | None:
    """The optimum with one workload changed (its candidates rebuilt, the others kept);
    None where there is none, the MIP's solution where ``limit`` ran out first."""
    started = time.perf_counter()
    deadline = None if limit is None else started + limit
    new_rfq = rfq.model_copy(update={"workloads": [spec if w.name == spec.name else w
                                                   for w in rfq.workloads]})
    alone = rfq.model_copy(update={"workloads": [spec]})
    try:
        fresh = build_candidates(catalog, alone, params=table.params, deadline=deadline)
    except TimeLimitReached:
        return Solution("timeout", {}, None, 0.0, time.perf_counter() - started, solver)
    storage = {k: v for k, v in table.storage.items() if k != spec.name}
    storage.update(fresh.storage)
    new_table = replace(table, candidates={**table.candidates,
                                           spec.name: fresh.candidates[spec.name]},
                        rejected={**table.rejected,
                                  spec.name: fresh.rejected.get(spec.name, [])},
                        storage=storage)
    left = None if deadline is None else max(MIN_RUN_SECONDS, deadline - time.perf_counter())
    solution = run_mip(new_table, new_rfq, solver=solver, time_limit=left)
    if solution.status == "timeout":
        return solution
    if solution.status not in ("optimal", "feasible"):
        return None
    return assemble(catalog, new_rfq, new_table, solution)


def _keep_headroom(spec: AnyWorkload, changed: AnyWorkload) -> AnyWorkload:
    """A job copied with model_copy keeps its RFQ's deadline headroom (a private value)."""
    headroom = getattr(spec, "_rfq_headroom", None)
    if headroom is not None:
        changed._rfq_headroom = headroom  # type: ignore[union-attr]
    return changed


def _workload_entries(rfq: Rfq, catalog: Catalog, table: CandidateTable, solver: str,
                      base: Base, spec: AnyWorkload, limit: float | None) -> list[Step]:
    steps: list[tuple[str, str, str, str, dict[str, Any]]] = []
    if spec.kind == "inference":
        for slo in ("ttft_ms", "tpot_ms"):
            target = getattr(spec, slo)
            if target is not None:
                steps.append((f"workloads.{spec.name}.{slo}", "slo", f"{target:g} ms",
                              f"{target * RELAX_FACTOR:g} ms", {slo: target * RELAX_FACTOR}))
    if spec.kind != "inference":
        hours = spec.deadline_hours
        steps.append((f"workloads.{spec.name}.deadline_hours", "deadline", f"{hours:g} h",
                      f"{hours * RELAX_FACTOR:g} h", {"deadline_hours": hours * RELAX_FACTOR}))
    if (spec.kind == "inference" and not spec.disaggregated
            and catalog.model(spec.model).is_moe):
        steps.append((f"workloads.{spec.name}.disaggregated", "serving_mode",
                      "false (one pool serves prompts and answers)",
                      "true (separate prefill and decode pools)", {"disaggregated": True}))
    if spec.precision is not None or spec.precisions is not None:
        pinned = spec.precision or ", ".join(spec.precisions or [])
        steps.append((f"workloads.{spec.name}.precision", "precision", pinned,
                      "the default policy (a quantised checkpoint's own format, else bf16 "
                      "or fp8)", {"precision": None, "precisions": None}))
    return [partial(_workload_entry, rfq, catalog, table, solver, base, limit, spec, *step)
            for step in steps]


def _workload_entry(rfq: Rfq, catalog: Catalog, table: CandidateTable, solver: str,
                    base: Base, limit: float | None, spec: AnyWorkload, path: str, kind: str,
                    value: str, relaxed_to: str, update: dict[str, Any]
                    ) -> dict[str, Any] | None:
    """One workload's target relaxed (``update``): its candidates rebuilt, re-solved."""
    changed = _keep_headroom(spec, spec.model_copy(update=update))
    relaxed = _rebuilt(rfq, catalog, table, changed, solver, limit)
    if relaxed is None or isinstance(relaxed, Solution):
        return None if relaxed is None else _unpriced(path, kind, value, relaxed_to)
    return _entry(path, kind, value, relaxed_to, base, relaxed)


def _rfq_entries(rfq: Rfq, catalog: Catalog, solver: str, base: Base,
                 limit: float | None) -> list[Step]:
    """Vendor profile, GPU list, datacenter-grade rule and cooling: the whole RFQ rebuilt."""
    c, facility = rfq.constraints, rfq.facility
    steps: list[tuple[str, str, str, str, Rfq]] = []
    if c.vendor not in (None, "open"):
        steps.append(("constraints.vendor", "vendor", str(c.vendor), "open (any integrator)",
                      rfq.model_copy(update={"constraints": c.model_copy(
                          update={"vendor": None})})))
    if c.gpus is not None:
        steps.append(("constraints.gpus", "vendor", ", ".join(c.gpus), "every GPU the vendor "
                      "builds", rfq.model_copy(update={"constraints": c.model_copy(
                          update={"gpus": None})})))
    if c.datacenter_grade_only:
        steps.append(("constraints.datacenter_grade_only", "vendor", "true", "false",
                      rfq.model_copy(update={"constraints": c.model_copy(
                          update={"datacenter_grade_only": False})})))
    if facility.cooling != "any":
        any_cooling = rfq.model_copy(update={"facility": facility.model_copy(
            update={"cooling": "any"})})
        params = CostParams.from_catalog(catalog, rfq.horizon_years)
        if set(node_types(catalog, any_cooling, params)) - set(node_types(catalog, rfq,
                                                                             params)):
            steps.append(("facility.cooling", "cooling", facility.cooling,
                          "any (liquid-cooled systems allowed, the site must take them)",
                          any_cooling))
    if facility.max_kw_per_rack is not None:
        no_rack_limit = rfq.model_copy(update={"facility": facility.model_copy(
            update={"max_kw_per_rack": None, "racks": None})})
        params = CostParams.from_catalog(catalog, rfq.horizon_years)
        if set(node_types(catalog, no_rack_limit, params)) - set(node_types(catalog, rfq,
                                                                              params)):
            steps.append(("facility.max_kw_per_rack", "racks",
                          f"{facility.max_kw_per_rack:g} kW",
                          "lifted (heavier nodes allowed; racks no longer counted)",
                          no_rack_limit))
    return [partial(_rfq_entry, catalog, solver, base, limit, *step) for step in steps]


def _rfq_entry(catalog: Catalog, solver: str, base: Base, limit: float | None, path: str,
               kind: str, value: str, relaxed_to: str, relaxed_rfq: Rfq
               ) -> dict[str, Any] | None:
    relaxed, _ = solve_table(relaxed_rfq, catalog, solver=solver, time_limit=limit)
    return _entry(path, kind, value, relaxed_to, base, relaxed)

