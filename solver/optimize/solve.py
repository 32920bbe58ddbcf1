"""Solve an RFQ: candidates → MIP → plan; infeasible is an answer, not an error.

:func:`solve_table` returns the :class:`~solver.optimize.plan_model.Plan` (docs/plan.md). When no plan meets the RFQ, the plan
has status ``infeasible`` and ``infeasibility`` names the binding constraints and the
nearest feasible relaxation, found by re-solving with each limit lifted in turn (the budget
that would suffice, the nodes/GPUs/power/rack units needed) or, when a workload has no
layout at all, by relaxing that workload (best TPOT/TTFT achievable, the deadline that
could be met, the GPUs the model would fit).

``time_limit`` bounds the whole run (candidates + MIP + the relaxation re-solves): the best
plan found in time comes back ``feasible`` with its gap; when none was found the status is
``timeout`` ("no plan found within the time limit", exit 4), never ``infeasible``.
"""

from __future__ import annotations

import math
import time
from dataclasses import fields, replace
from typing import Any

from solver.catalog.data import Catalog
from solver.common.progress import report
from solver.common.watchdog import claim
from solver.common.wording import gap_words
from solver.optimize.backends import DEFAULT_SOLVER, MIN_RUN_SECONDS, get_backend
from solver.optimize.candidates import build_candidates, node_types, request_seconds
from solver.optimize.costs import CostParams
from solver.optimize.linear import (
    LinearModel,
    Solution,
    Status,
    TimeLimitReached,
    deadline_passed,
    objective_value,
)
from solver.optimize.mip import (
    Limits,
    build_model,
    cand_var,
    node_var,
    planned_demand,
    quiet_hours,
    quiet_jobs,
)
from solver.optimize.plan import assemble, chosen, cost_breakdown
from solver.optimize.plan_model import Headroom, Plan
from solver.optimize.records import CandidateTable
from solver.physics.performance import estimate as estimate_layout
from solver.rfq.schema import (
    AnyWorkload,
    BatchInferenceWorkload,
    Facility,
    Rfq,
    TrainingWorkload,
)

LIMIT_LABELS = {
    "budget_usd": ("budget", "budget_usd", "tco_usd"),
    "max_nodes": ("max_nodes", "constraints.max_nodes", "total_nodes"),
    "max_gpus": ("max_gpus", "constraints.max_gpus", "total_gpus"),
    "max_power_kw": ("max_power_kw", "constraints.max_power_kw", "power_kw"),
    "max_rack_units": ("max_rack_units", "constraints.max_rack_units", "rack_units"),
}


def run_mip(table: CandidateTable, rfq: Rfq, *, solver: str = DEFAULT_SOLVER,
            time_limit: float | None = None, limits: Limits | None = None,
            objective: str | None = None, extra: list | None = None,
            initial: dict[str, float] | None = None) -> Solution:
    """Build and solve the MIP for a candidate table (``initial``: a point to start from,
    :meth:`Backend.solve <solver.optimize.backends.Backend.solve>`).

    ``objective: max_served`` is solved in two steps (solver/optimize/mip.py): the largest
    priority-weighted share served within the budget, then the lowest TCO that serves it;
    the returned objective is that TCO."""
    if any(not cands for cands in table.candidates.values()):
        return Solution("infeasible", {}, None, 0.0, 0.0, solver)
    started = time.perf_counter()  # building a model counts: each solve gets what is left
    deadline = None if time_limit is None else started + time_limit
    backend = get_backend(solver)
    try:
        if (objective or rfq.objective) != "max_served":
            model = build_model(table, rfq, limits, objective, extra, deadline=deadline)
            return backend.solve(model, _left(deadline), initial=initial)
        first = backend.solve(build_model(table, rfq, limits, "max_served", extra,
                                          deadline=deadline),
                              _left(deadline), initial=initial)
        if first.status not in ("optimal", "feasible") or first.objective is None:
            return first
    except TimeLimitReached as stop:  # no plan from this call: the model was not finished
        return Solution("timeout", {}, None, 0.0, time.perf_counter() - started,
                        backend.name, str(stop))
    floor = -first.objective - SERVED_TOLERANCE
    try:
        costed = build_model(table, rfq, limits, "max_served", extra, served_floor=floor,
                             deadline=deadline)
    except TimeLimitReached:  # the share found stands, its cost not lowered
        return replace(first, status=FEASIBLE,
                       objective=cost_breakdown(table, first.values)["tco_usd"],
                       seconds=time.perf_counter() - started)
    second = backend.solve(costed, _left(deadline), initial=first.values)
    if second.status not in ("optimal", "feasible"):
        # no cheaper point in time: the first answer, its TCO recomputed as the objective
        return replace(first, status=FEASIBLE, objective=objective_value(costed, first.values),
                       seconds=time.perf_counter() - started)
    status: Status = "optimal" if first.status == second.status == "optimal" else FEASIBLE
    return replace(second, status=status, gap=max(first.gap, second.gap),
                   seconds=time.perf_counter() - started)


HEADROOM_MAX_COLUMNS = 1000
"""Largest model (columns) whose cost optimum is re-solved for headroom (:func:`with_headroom`):
every shipped scenario (at most 709 columns, a service with busy and quiet hours) takes
milliseconds; a portfolio of ten workloads or more (1,400 columns and up) takes seconds to
prove its optimum once, and a second proof would double that."""
HEADROOM_COST_SLACK_USD = 0.005
"""How far above the optimum's cost the headroom step may go: half a cent, below any price."""


def idle_gpus(table: CandidateTable, rfq: Rfq, values: dict[str, float]) -> int:
    """GPUs of the bought nodes that no workload's replica uses in the busy hours (a job
    that runs in the services' quiet hours uses theirs then, not these)."""
    specs = {spec.name: spec for spec in rfq.workloads}
    quiet = quiet_jobs(table, specs, quiet_hours(rfq))
    bought = sum(node.gpus * round(values.get(node_var(key), 0.0))
                 for key, node in table.node_types.items())
    used = sum(c.gpus * round(values.get(cand_var(c), 0.0))
               for cands in table.candidates.values() for c in cands
               if not c.rented and c.name not in quiet)
    return max(0, bought - used)


def headroom_weights(table: CandidateTable, rfq: Rfq) -> dict[str, float]:
    """Per replica of each candidate, the share of its workload's planned capacity it adds:
    concurrency and requests/s over the planned demand (the mean where both are stated); a
    job's candidate, the job's fastest hours over its own (1 = the fastest layout)."""
    specs = {spec.name: spec for spec in rfq.workloads}
    weights: dict[str, float] = {}
    for name, cands in table.candidates.items():
        spec = specs[name]
        if spec.kind in ("inference", "batch_inference"):
            demand = planned_demand(spec)
            parts = [(need, capacity) for need, capacity in
                     ((demand.concurrency, "concurrency_capacity"), (demand.qps, "qps_capacity"))
                     if need]
            for c in cands:
                weights[cand_var(c)] = sum(getattr(c, capacity) / need
                                           for need, capacity in parts) / max(1, len(parts))
        else:
            hours = [c.hours_to_complete for c in cands if c.hours_to_complete]
            fastest = min(hours) if hours else 0.0
            for c in cands:
                weights[cand_var(c)] = fastest / c.hours_to_complete if c.hours_to_complete \
                    else 0.0
    return weights


def headroom_records(table: CandidateTable, rfq: Rfq, cheapest: Solution,
                     planned: Solution) -> dict[str, Headroom]:
    """Per workload that :func:`with_headroom` gave more (its ``planned`` point against the
    ``cheapest``): what the plan's layouts carry, what the cheapest ones would, what the
    workload is sized for and the idle GPUs it now runs on (docs/plan.md, ``Headroom``)."""
    if planned is cheapest:
        return {}
    specs = {spec.name: spec for spec in rfq.workloads}
    before, after = chosen(table, cheapest), chosen(table, planned)
    found: dict[str, Headroom] = {}
    for name in table.candidates:
        spec = specs[name]
        added = max(0, sum(c.gpus * n for c, n in after[name])
                    - sum(c.gpus * n for c, n in before[name]))
        if spec.kind in ("inference", "batch_inference"):
            demand = planned_demand(spec)
            attr, need, unit = (("concurrency_capacity", demand.concurrency,
                                 "concurrent requests") if demand.concurrency
                                else ("qps_capacity", demand.qps, "requests/s"))
            was, now = (sum(getattr(c, attr) * n for c, n in picks)
                        for picks in (before[name], after[name]))
            if now > was * (1 + 1e-9):
                found[name] = Headroom(unit=unit, capacity=now, cheapest_capacity=was,
                                       sized_for=need, gpus_added=added)
            continue
        if not isinstance(spec, TrainingWorkload) or not before[name] or not after[name]:
            continue
        was_h, now_h = before[name][0][0].hours_to_complete, after[name][0][0].hours_to_complete
        if was_h and now_h and now_h < was_h:
            found[name] = Headroom(unit="hours", capacity=now_h, cheapest_capacity=was_h,
                                   sized_for=spec.planned_hours, gpus_added=added)
    return found


def _same_nodes(model: LinearModel, table: CandidateTable, values: dict[str, float]) -> None:
    """Hold the nodes bought at the optimum's and keep every serving replica it runs
    (replicas may only be added; a job, training or batch inference, may move to a faster
    layout), and let each
    owned candidate run as many replicas as those nodes hold (:func:`widen_replica_bounds`)."""
    nodes = {key: round(values.get(node_var(key), 0.0)) for key in table.node_types}
    for key, count in nodes.items():
        var = model.variables[node_var(key)]
        var.low = var.high = float(count)
    widen_replica_bounds(model, table, nodes)
    for cands in table.candidates.values():
        for c in cands:
            if c.kind == "inference":
                model.variables[cand_var(c)].low = float(round(values.get(cand_var(c), 0.0)))


def _movable(table: CandidateTable) -> bool:
    """Whether a job (training, or batch inference: judged by when it finishes, not by its
    latency) has more than one candidate, so that the optimum's nodes may run it faster at
    the same cost on another layout (batch-corpus-one-box: two TP1 x PP2 replicas finish in
    54 h where one TP2 x PP2 replica, as cheap, takes 64 h)."""
    return any(len(cands) > 1 and cands[0].kind != "inference"
               for cands in table.candidates.values())


def widen_replica_bounds(model: LinearModel, table: CandidateTable,
                         nodes: dict[str, int] | None = None) -> None:
    """Let each owned candidate run as many replicas as ``nodes`` (per node type; default
    the model's bound on each type's count) hold. The cost model bounds a candidate's
    replicas by what alone meets its demand: enough for the cheapest plan, not for a plan
    that puts a bought node's idle GPUs to work. Only ever loosens a bound."""
    if nodes is None:
        nodes = {key: int(model.variables[node_var(key)].high or 0)
                 for key in table.node_types}
    for cands in table.candidates.values():
        for c in cands:
            if c.rented or not nodes.get(c.node_type):
                continue
            count = nodes[c.node_type]
            fits = count // c.nodes_spanned if c.spanning \
                else table.node_types[c.node_type].gpus * count // c.gpus
            var = model.variables[cand_var(c)]
            var.high = float(max(var.high or 0.0, fits))


def with_headroom(table: CandidateTable, rfq: Rfq, solution: Solution, *, solver: str,
                  time_limit: float | None = None) -> Solution:
    """The optimum ``solution`` with replicas added on the GPUs of its bought nodes that it
    leaves idle, those that give its workloads the most capacity (:func:`headroom_weights`,
    summed) at the same cost: idle GPUs cost the same in use (a 70B service on 6 of a box's
    8 GPUs gets all 8). Every serving replica of the optimum is kept, so each service's
    capacity only grows and its latencies at the planned load only fall; a job (training,
    or batch inference) may move to a faster layout on the same nodes, never a slower one.
    Only when the optimum leaves GPUs idle or has a job with more than one candidate
    (:func:`_movable`: equal-cost layouts of a job differ in when it finishes), for a cost
    objective (``tco``/``capex``) and a model of fewer than :data:`HEADROOM_MAX_COLUMNS` columns;
    otherwise, or when the re-solve does not prove its optimum in time, ``solution`` as it
    is. The cost, status and gap stay the optimum's.

    Why only added replicas: a plan of the same cost on other layouts may carry more, but
    is not better on every count. On small-moe-no-ep the most capacity would swap eight TP1
    replicas (TTFT p90 951 ms) for four TP2 ones (2,980 users at the SLOs instead of 2,672,
    TTFT p90 1,122 ms); the cost optimum's layouts stand.

    No start point is handed to HiGHS: with the optimum's replicas as lower bounds and the
    optimum as its start, HiGHS 1.16 returned the start as optimal on day-chat-night-batch
    (two idle GPUs left), where the same model without the start adds two replicas."""
    if rfq.objective not in ("tco", "capex") or solution.objective is None or (
            idle_gpus(table, rfq, solution.values) == 0 and not _movable(table)):
        return solution
    started = time.perf_counter()
    try:
        model = build_model(table, rfq)
    except TimeLimitReached:
        return solution
    if len(model.variables) >= HEADROOM_MAX_COLUMNS:
        return solution
    _same_nodes(model, table, solution.values)
    cost, constant = dict(model.objective), model.objective_constant
    model.add("cost_held", cost, "<=", solution.objective - constant + HEADROOM_COST_SLACK_USD)
    weights = headroom_weights(table, rfq)
    for name, cands in table.candidates.items():  # a job that moves only gets faster
        if cands and cands[0].kind != "inference":
            held = {cand_var(c): weights[cand_var(c)] for c in cands if weights[cand_var(c)]}
            if held:
                model.add(f"job_held_{name}", held, ">=", math.fsum(
                    w * solution.values.get(var, 0.0) for var, w in held.items()) * (1 - 1e-9))
    model.objective = {var: -w for var, w in weights.items() if w}
    model.objective_constant = 0.0
    found = get_backend(solver).solve(model, time_limit)
    if found.status != "optimal":
        return solution
    return replace(solution, values=found.values,
                   objective=math.fsum(c * found.values.get(n, 0.0) for n, c in cost.items())
                   + constant, seconds=solution.seconds + time.perf_counter() - started)


FEASIBLE: Status = "feasible"
SERVED_TOLERANCE = 1e-6
"""Slack on the served share held in the cost step (the share is a sum of 1 % steps)."""


def solve_table(rfq: Rfq, catalog: Catalog, *, solver: str = DEFAULT_SOLVER,
                time_limit: float | None = None, table: CandidateTable | None = None,
                workers: int = 1, stated_limit: float | None = None
                ) -> tuple[Plan, CandidateTable | None]:
    """The cheapest plan for an RFQ (:class:`Plan`, docs/plan.md) and the candidate
    table it was chosen from (None when the time limit ran out while building it). The
    decision path and warnings are added by :func:`solver.analysis.explain.solve_rfq`.

    ``time_limit`` (seconds) bounds the whole run, candidates included (module docstring).
    ``workers``: processes for building the table (a first build only; see
    :mod:`solver.optimize.candidate_workers`). ``stated_limit``: the limit as the user gave
    it, for the words of a time-out or a gap (the CLI hands on what is left of it after the
    process's start-up as ``time_limit``); ``time_limit`` by default."""
    started = time.perf_counter()
    said = time_limit if stated_limit is None else stated_limit
    catalog = rfq.catalog(catalog)
    deadline = None if time_limit is None else started + time_limit
    if table is None:
        try:
            table = build_candidates(catalog, rfq, deadline=deadline, workers=workers)
        except TimeLimitReached:
            return timeout_plan(rfq, solver, said, time.perf_counter() - started), None
    if deadline_passed(deadline):  # nothing left for the MIP: building a large one takes seconds
        return timeout_plan(rfq, solver, said, time.perf_counter() - started), None
    report(f"choosing what to buy ({solver}, {sum(map(len, table.candidates.values())):,} "
           "candidate layouts)")
    mip_deadline = None if deadline is None else deadline - presenting_s(time_limit)
    solution = run_mip(table, rfq, solver=solver, time_limit=_left(mip_deadline))
    gained: dict[str, Headroom] = {}
    if solution.status == "optimal":
        cheapest = solution
        solution = with_headroom(table, rfq, solution, solver=solver,
                                 time_limit=_left(mip_deadline))
        gained = headroom_records(table, rfq, cheapest, solution)
    if solution.status in ("feasible", "optimal"):
        claim()  # a plan in hand is written, however long its assembly takes
    if solution.status == "feasible":  # the time limit ran out with a plan in hand
        plan = assemble(catalog, rfq, table, solution, time_limit=_left(deadline))
        capex = rfq.objective == "capex"
        spent = (plan.cost.capex_usd if capex else plan.cost.tco_usd) if plan.cost else None
        words = gap_words(plan.gap or 0.0, spent, said, "capex" if capex else "TCO")
        return plan.model_copy(update={"warnings": [*plan.warnings, words]}), table
    if solution.status == "optimal":
        plan = assemble(catalog, rfq, table, solution, time_limit=_left(deadline))
        if gained:
            plan = plan.model_copy(update={"workloads": [
                w.model_copy(update={"headroom": gained[w.name]}) if w.name in gained else w
                for w in plan.workloads]})
        return plan, table
    if solution.status == "timeout":
        return timeout_plan(rfq, solver, said, time.perf_counter() - started), None
    report("no plan meets the RFQ: re-solving to find what binds")
    return infeasible_plan(catalog, rfq, table, solution, solver, deadline), table


PRESENT_SHARE = 0.05
"""Share of ``--time-limit`` kept back from the MIP for what follows a plan found at the
limit (issue 31): its assembly, the decision path, the JSON. A poor incumbent of a
50-workload portfolio (5.5 MB of JSON) took 0.6 s of that on a quiet 2-core machine and
twice as long under load, past the bound of limit x 1.1 + 0.3 s (docs/performance.md)."""
PRESENT_CAP_S = 2.0
"""... at most this many seconds of a long limit."""


def presenting_s(time_limit: float | None) -> float:
    """Seconds of ``time_limit`` the MIP leaves for presenting its plan (0 without one)."""
    return 0.0 if time_limit is None else min(PRESENT_SHARE * time_limit, PRESENT_CAP_S)


def _left(deadline: float | None) -> float | None:
    """Seconds left before ``deadline`` (at least a sliver, so the MIP reports a timeout
    rather than never starting); None without a deadline."""
    if deadline is None:
        return None
    return max(MIN_RUN_SECONDS, deadline - time.perf_counter())


TIME_RAN_OUT = ("the time limit ran out before every limit was re-solved: which limits bind "
                "is not known yet (raise --time-limit to find out)")



def timeout_plan(rfq: Rfq, solver: str, time_limit: float | None,
                 seconds: float) -> Plan:
    """No plan within the time limit: status ``timeout`` (exit 4), not an infeasibility."""
    plan = _empty_plan(rfq, Solution("timeout", {}, None, 0.0, seconds, solver))
    plan["infeasibility"] = {
        "reasons": [f"no plan found within the time limit ({time_limit:g} s)"],
        "closest": {},
        "to_fix": "raise --time-limit (or drop it), or try another --solver"}
    return Plan.model_validate(plan)


def _empty_plan(rfq: Rfq, solution: Solution) -> dict[str, Any]:
    return {
        "rfq": rfq.id,
        "status": solution.status if solution.status in ("infeasible", "timeout") else "error",
        "solver": solution.backend, "gap": 0.0, "solve_seconds": round(solution.seconds, 3),
        "objective": rfq.objective,
        "cluster": {"nodes": [], "total_nodes": 0, "total_gpus": 0, "fabric": "none",
                    "coupled": False, "coupled_nodes": 0, "power_kw": 0.0, "rack_units": 0},
        "workloads": [], "cost": None, "placement": [], "bill_of_materials": None,
        "schedule": [],
        "decision_path": [], "warnings": [],
        "infeasibility": None,
    }


def infeasible_plan(catalog: Catalog, rfq: Rfq, table: CandidateTable, solution: Solution,
                    solver: str, deadline: float | None = None) -> Plan:
    """An infeasible answer: what binds and the nearest feasible relaxation (the relaxed
    re-solves share ``deadline``; one that runs out is left out of the answer)."""
    plan = _empty_plan(rfq, solution)
    if solution.status == "error":
        plan["infeasibility"] = {"reasons": [f"solver error: {solution.message}"],
                                 "closest": {}, "to_fix": "try another --solver"}
        return Plan.model_validate(plan)
    reasons: list[str] = []
    closest: dict[str, Any] = {}
    buys: dict[str, Any] = {}  # limit path -> the cluster the relaxed limit buys
    fixes: list[str] = []
    empty = [name for name, cands in table.candidates.items() if not cands]
    specs = {spec.name: spec for spec in rfq.workloads}
    conflict = _vendor_conflict(catalog, rfq) or _facility_conflict(catalog, rfq)
    if empty and conflict:
        reason, fix = conflict
        plan["infeasibility"] = {"reasons": [reason], "closest": {}, "to_fix": fix}
        return Plan.model_validate(plan)
    for name in empty:
        why = table.rejected.get(name, [])
        reasons.append(f"workload {name}: no layout on the allowed hardware meets its targets"
                       + (f" (e.g. {why[0]})" if why else ""))
        try:
            found, fix = _relax_workload(catalog, rfq, specs[name], deadline)
        except TimeLimitReached:  # the time limit holds: no nearest relaxation in words
            fixes.append(f"workloads.{name}: relax its targets or widen the hardware (the "
                         "time limit ran out before the nearest relaxation was found)")
            continue
        closest[name] = found
        fixes.append(fix)
    if not empty:
        _limit_relaxations(catalog, rfq, table, solver, deadline, reasons, closest, buys, fixes)
    plan["infeasibility"] = {"reasons": reasons, "closest": closest,
                             "to_fix": "; ".join(fixes) or "widen the allowed GPUs or fabrics"}
    if buys:
        plan["infeasibility"]["closest_clusters"] = buys
    # the time limit holds: no re-solve once it has run out
    if (not empty and rfq.budget_usd is not None and rfq.objective != "max_served"
            and not deadline_passed(deadline)):
        bought = budget_buys(catalog, rfq, table, solver, deadline)
        if bought:
            plan["infeasibility"]["budget_buys"] = bought
            some = any(b["served_fraction"] > 0 for b in bought)
            plan["infeasibility"]["reasons"].append(
                f"for ${_num(rfq.budget_usd)} the most that can be served (objective "
                "max_served): " + "; ".join(f"{b['workload']} {b['served']}" for b in bought)
                if some else f"${_num(rfq.budget_usd)} serves none of the workloads at "
                "their targets, even in part")
    return Plan.model_validate(plan)


def budget_buys(catalog: Catalog, rfq: Rfq, table: CandidateTable, solver: str,
                deadline: float | None = None) -> list[dict[str, Any]]:
    """What the RFQ's budget buys at most: the same RFQ under ``objective: max_served``
    (per workload, the share served in words); empty when the re-solve finds nothing in
    time."""
    served = rfq.model_copy(update={"objective": "max_served"})
    trial = run_mip(table, served, solver=solver, time_limit=_left(deadline))
    if trial.status not in ("optimal", "feasible"):
        return []
    plan = assemble(catalog, served, table, trial)
    return [s.model_dump(mode="json") for s in plan.served or []]


def _limit_relaxations(catalog: Catalog, rfq: Rfq, table: CandidateTable, solver: str,
                       deadline: float | None, reasons: list[str], closest: dict[str, Any],
                       buys: dict[str, Any], fixes: list[str]) -> None:
    """Every workload has layouts, so the RFQ's limits bind: re-solve with each limit lifted
    in turn (then all at once) and record what binds, the nearest value and the cluster it
    buys."""
    limits = Limits.from_rfq(rfq)
    active = [f.name for f in fields(Limits) if getattr(limits, f.name) is not None]
    for name in active:
        if deadline_passed(deadline):  # the time limit holds: re-solves left are left out
            reasons.append(TIME_RAN_OUT)
            return
        relaxed = Limits(**{f.name: (None if f.name == name else getattr(limits, f.name))
                            for f in fields(Limits)})
        trial = run_mip(table, rfq, solver=solver, limits=relaxed,
                        time_limit=_left(deadline))
        if trial.status in ("optimal", "feasible"):
            label, path, metric = LIMIT_LABELS[name]
            trial_plan = assemble(catalog, rfq, table, trial)
            needed = _needed(trial_plan, metric)
            if metric == "tco_usd" and rfq.objective == "capex" and trial_plan.cost:
                needed = trial_plan.cost.capex_usd
            money = "$" if name == "budget_usd" else ""
            stated = getattr(limits, name)
            if name == "max_power_kw":  # the row holds facility limits x the load factor
                stated, needed = _stated_power(rfq, stated), _stated_power(rfq, needed)
            reasons.append(f"{label} = {money}{_num(stated)} binds")
            closest[path] = needed
            buys[path] = trial_plan.cluster
            fixes.append(f"raise {path} to {money}{_num(needed)}")
    if not closest and active and deadline_passed(deadline):
        reasons.append(TIME_RAN_OUT)
        return
    if not closest and active:
        trial = run_mip(table, rfq, solver=solver, limits=Limits(),
                        time_limit=_left(deadline))
        if trial.status in ("optimal", "feasible"):
            trial_plan = assemble(catalog, rfq, table, trial)
            reasons.append("the limits " + ", ".join(active) + " bind together")
            for name in active:
                _, path, metric = LIMIT_LABELS[name]
                closest[path] = _needed(trial_plan, metric)
                if name == "max_power_kw":
                    closest[path] = _stated_power(rfq, closest[path])
            fixes.append("relax all of: " + ", ".join(
                f"{LIMIT_LABELS[n][1]} to {_num(closest[LIMIT_LABELS[n][1]])}"
                for n in active))
    if not reasons:
        reasons.append("no combination of the allowed hardware serves all workloads at once")


def _stated_power(rfq: Rfq, full_load_kw: float) -> float:
    """The ``max_power_kw`` that allows ``full_load_kw`` of nodes: full load / the facility's
    continuous_load_factor (rounded up to 0.1 kW, so the printed value suffices)."""
    return math.ceil(full_load_kw / rfq.facility.continuous_load_factor * 10 - 1e-9) / 10


def _needed(plan: Plan, metric: str) -> float:
    """The TCO or cluster figure (``total_nodes``, ``power_kw``, ...) a relaxed plan needs."""
    if metric == "tco_usd":
        return plan.cost.tco_usd if plan.cost else 0.0
    value: float = getattr(plan.cluster, metric)
    return value


def _num(value: float) -> str:
    """``1,522,250`` or ``12.4``: never scientific notation, no cents on big numbers."""
    if abs(value) >= 100 or float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.1f}"


def _vendor_conflict(catalog: Catalog, rfq: Rfq) -> tuple[str, str] | None:
    """The RFQ's own lists against its vendor profile: GPUs (or fabrics) asked for that the
    vendor does not build, when that leaves nothing to buy. (reason, fix) or None."""
    c = rfq.constraints
    vendor_id = c.vendor or "open"
    vendor = catalog.vendors[vendor_id]
    if c.gpus is not None:
        excluded = [g for g in c.gpus if not vendor.allows("gpus", g)]
        if excluded and len(excluded) == len(c.gpus):
            offered = [g for g in catalog.gpus if vendor.allows("gpus", g)]
            return (f"vendor profile {vendor_id} does not offer {', '.join(excluded)} "
                    f"(constraints.gpus), so no GPU is left to buy",
                    f"choose constraints.gpus from what {vendor_id} offers "
                    f"({', '.join(offered)}), or drop constraints.vendor")
    servers_ok = any(vendor.allows("servers", s) for s in catalog.servers)
    if not servers_ok:
        return (f"vendor profile {vendor_id} offers no server", "choose another vendor")
    return None


def _facility_conflict(catalog: Catalog, rfq: Rfq) -> tuple[str, str] | None:
    """The site excludes every node the RFQ's GPUs could be bought in: its cooling, or a
    node heavier than one rack's continuous load. (reason, fix) or None."""
    facility = rfq.facility
    params = CostParams.from_catalog(catalog, rfq.horizon_years)
    if node_types(catalog, rfq, params):
        return None
    open_site = rfq.model_copy(update={"facility": Facility(cooling="any")})
    if not node_types(catalog, open_site, params):
        return None
    if facility.cooling != "any" and node_types(catalog, rfq.model_copy(update={
            "facility": facility.model_copy(update={"cooling": "any"})}), params):
        other = "air" if facility.cooling == "liquid" else "liquid"
        return (f"facility.cooling = {facility.cooling}: every system that holds the allowed "
                f"GPUs is {other}-cooled",
                f"set facility.cooling to {other} or any (the site must take it), or allow "
                f"{facility.cooling}-cooled GPUs in constraints.gpus")
    return (f"facility.max_kw_per_rack = {facility.max_kw_per_rack:g}: every allowed node "
            f"draws more than {facility.rack_limit_kw():g} kW at full load (x "
            f"continuous_load_factor {facility.continuous_load_factor:g})",
            "raise facility.max_kw_per_rack, or allow smaller nodes")


def ceil_significant(value: float, digits: int = 3) -> float:
    """``value`` rounded *up* to ``digits`` significant digits: a relaxation that is
    printed must itself be feasible (0.4194 h -> 0.42 h, never 0.419 or 0.4)."""
    if value <= 0 or not math.isfinite(value):
        return value
    scale = 10.0 ** (digits - 1 - math.floor(math.log10(value)))
    return math.ceil(value * scale - 1e-9) / scale


def duration(seconds: float) -> str:
    """A duration in words a buyer reads at a glance: '59.8 s', '25.2 min', '3.1 h'."""
    if seconds < 100:
        return f"{seconds:.3g} s"
    if seconds < 6000:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:,.1f} h"


def _relax_workload(catalog: Catalog, rfq: Rfq, spec: AnyWorkload,
                    deadline: float | None = None) -> tuple[dict[str, Any], str]:
    """Re-solve one workload alone with its targets relaxed, to say what is achievable:
    (what was found, the fix in words). Its candidate builds share ``deadline``
    (:class:`TimeLimitReached` once passed)."""
    found: dict[str, Any] = {}
    fix = ""
    if isinstance(spec, TrainingWorkload):
        fix = _relax_training(catalog, rfq, spec, found, deadline)
    elif spec.kind == "batch_inference":
        fix = _relax_batch(catalog, rfq, spec, found, deadline)
    elif spec.kind == "inference" and (spec.ttft_ms or spec.tpot_ms):
        fix = _relax_slo(catalog, rfq, spec, found, deadline)
    if not fix:
        fix = _gpus_that_fit(catalog, rfq, spec, found, deadline)
    return found, fix


def _relax_training(catalog: Catalog, rfq: Rfq, spec: TrainingWorkload,
                    found: dict[str, Any], deadline: float | None = None) -> str:
    """The deadline the fastest allowed layout needs, or the nodes the model needs when
    nothing fits within ``max_nodes``; fills ``found``, returns the fix ('' if none)."""
    fix = ""
    relaxed = spec.model_copy(update={"deadline_hours": 100_000.0})
    table = build_candidates(catalog, _alone(rfq, relaxed), deadline=deadline)
    hours = [c.hours_to_complete for c in table.candidates[spec.name]
             if c.hours_to_complete]
    if hours:
        best = min(hours)
        needed = ceil_significant(best / (1.0 - spec.headroom))
        found["deadline_hours"] = needed
        fix = (f"workloads.{spec.name}.deadline_hours: the fastest allowed layout needs "
               f"{ceil_significant(best):,} h, a deadline of {needed:,} h with "
               f"deadline_headroom {spec.headroom:g} (asked {spec.deadline_hours:g} h); "
               "extend it, or allow more nodes/faster GPUs")
    elif rfq.constraints.max_nodes is not None:
        # nothing fits within max_nodes: say how many nodes the job needs - to meet its
        # deadline when more nodes can, else only to fit memory
        unlimited = rfq.constraints.model_copy(update={"max_nodes": None})
        for asked in (spec, relaxed):
            wider = build_candidates(catalog, _alone(rfq, asked).model_copy(
                update={"constraints": unlimited}), deadline=deadline)
            cands = wider.candidates[spec.name]
            if cands:
                break
        if cands:
            least = min(cands, key=lambda c: (c.nodes_spanned, c.gpus))
            found["max_nodes"] = least.nodes_spanned
            why = ("smallest layout that meets the deadline" if asked is spec
                   else "smallest layout that fits memory, slower than the deadline")
            fix = (f"constraints.max_nodes = {rfq.constraints.max_nodes:g}: {spec.kind} of "
                   f"{spec.model} needs at least {least.nodes_spanned} nodes ({why}: "
                   f"{least.gpus} x {least.layout.gpu} over {least.fabric}); raise max_nodes "
                   f"to {least.nodes_spanned}, or choose LoRA/QLoRA or a smaller model")
    return fix


def _relax_batch(catalog: Catalog, rfq: Rfq, spec: BatchInferenceWorkload,
                 found: dict[str, Any], deadline: float | None = None) -> str:
    """The deadline one request alone needs on the fastest allowed replica."""
    fix = ""
    relaxed = spec.model_copy(update={"deadline_hours": 100_000.0})
    table = build_candidates(catalog, _alone(rfq, relaxed), deadline=deadline)
    seconds = [request_seconds(c.estimate) for c in table.candidates[spec.name]]
    if seconds:
        best = min(seconds)
        needed = ceil_significant(best / 3600.0 / (1.0 - spec.headroom))
        found["deadline_hours"] = needed
        fix = (f"workloads.{spec.name}.deadline_hours: one request alone takes "
               f"{duration(best)} on the fastest allowed replica (prefill + "
               f"{spec.output_tokens:,} output tokens decoded one after another), but the "
               f"deadline is {duration(spec.deadline_hours * 3600.0)} with "
               f"deadline_headroom {spec.headroom:g}; extend the deadline to at least "
               f"{needed:,} h (more replicas cannot shorten one request)")
    return fix


def _relax_slo(catalog: Catalog, rfq: Rfq, spec: AnyWorkload, found: dict[str, Any],
               deadline: float | None = None) -> str:
    """The best TPOT and TTFT any allowed layout reaches at one request."""
    fix = ""
    relaxed = spec.model_copy(update={"ttft_ms": None, "tpot_ms": None})
    table = build_candidates(catalog, _alone(rfq, relaxed), deadline=deadline)
    best_tpot, best_ttft = math.inf, math.inf
    for cand in table.candidates[spec.name]:
        one = estimate_layout(catalog, cand.layout, replace(cand.estimate.workload,
                                                            concurrency=1))
        best_tpot = min(best_tpot, one.predicted.tpot_ms or math.inf)
        best_ttft = min(best_ttft, one.predicted.ttft_ms or math.inf)
    if math.isfinite(best_tpot):
        found["tpot_ms"] = round(best_tpot, 2)
        found["ttft_ms"] = round(best_ttft, 1)
        fix = (f"workloads.{spec.name}: the best achievable is TPOT {best_tpot:.1f} ms and "
               f"TTFT {best_ttft:.0f} ms at one request; loosen the SLO or allow faster GPUs")
    return fix


def _gpus_that_fit(catalog: Catalog, rfq: Rfq, spec: AnyWorkload, found: dict[str, Any],
                   deadline: float | None = None) -> str:
    """The GPUs of the whole catalog that run the workload within its targets."""
    open_rfq = rfq.model_copy(update={"constraints": rfq.constraints.model_copy(
        update={"vendor": None, "gpus": None, "fabrics": None})})
    table = build_candidates(catalog, _alone(open_rfq, spec), deadline=deadline)
    gpus = sorted({c.layout.gpu for c in table.candidates[spec.name]})
    found["gpus_that_fit"] = gpus
    return (f"workloads.{spec.name}: allow one of these GPUs: {', '.join(gpus)}" if gpus
            else f"workloads.{spec.name}: no GPU in the catalog runs it within its targets; "
                 "relax the targets or choose a smaller model/precision")


def _alone(rfq: Rfq, spec: AnyWorkload) -> Rfq:
    return rfq.model_copy(update={"workloads": [spec]})
