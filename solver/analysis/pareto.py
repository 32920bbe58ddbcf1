r"""The Pareto frontier of cost against one service metric, computed with the MIP itself.

Axes: the RFQ objective (``tco_usd``, or ``capex_usd`` for ``objective: capex``) against a
metric of one workload (the first, or ``--metric workload:metric``):

``tpot_ms`` / ``ttft_ms`` (inference; TTFT when the workload has only a TTFT SLO), lower is
better
    **ε-constraint walk over the SLO.** Start at the RFQ's SLO (or none). Build the candidate
    table *at that SLO level* L (every layout at the largest concurrency that meets L — what
    ``procure solve`` would consider if the RFQ asked for L), solve the MIP, and measure the
    plan's metric m: the worst TPOT (TTFT) *at the workload's SLO percentile* of its
    replicas at the load they are planned for (demand ÷ ``target_utilization`` spread in
    proportion to capacity, utilisation u = that planned demand ÷ capacity, each replica at
    ⌈u·capacity⌉ concurrent requests, or at u·capacity requests/s for a request-rate
    demand). Then tighten to L' = m·(1 − ε) and repeat until no
    plan meets L'. Faster operating points (smaller batch, wider TP, other precisions) appear
    as L falls, because the physics re-sizes every layout for the tighter SLO.
    *Why this is exact (up to ε in the metric):* the plan found at L still meets every level
    L'' ∈ [m, L] — each of its replicas runs at ⌈u·cap⌉ ≤ the largest concurrency meeting L''
    (latency grows with batch), so its capacity at L'' still covers demand — while no level
    tighter than L is cheaper. Hence the cheapest cost is constant on [m, L], and the next
    change lies below m: every step of the cost-versus-SLO staircase is visited, each point is
    the optimum of its own ε-constraint problem, and points that tie on cost with a worse
    metric are removed at the end.
``hours_to_complete`` (training), lower is better
    Candidates are built with ``all_sizes=True`` (every GPU count that meets the deadline).
    Each candidate's hours are fixed, so the ε-constraint is x[c] = 0 for every candidate no
    faster than the last point (those candidates are removed from the table); the walk
    enumerates every distinct achievable time on the frontier and is exact for the table.
``hours_to_complete`` (batch inference), ``headroom`` (serving: capacity ÷ demand, higher is
better) and ``failure_domains`` (nodes bought, higher is better)
    These frontiers are unbounded staircases (one more replica or node always buys a little
    more), so they are sampled at N targets spread geometrically (batch: down to 1/8 of the
    cheapest plan's hours; headroom: up to 4×; nodes: +1 each). Each target is an exact
    ε-constraint solve (demand scaled, or Σ N ≥ n), followed by a second, lexicographic solve
    that keeps the optimal cost and maximises the metric, so every point is non-dominated.

``--points N`` keeps the cheapest point and N - 1 others spread evenly along the frontier.

``--scheduler tcp://HOST:PORT`` (issue 31, :mod:`solver.analysis.cluster`): the sampled
frontiers' targets after the first are independent solves (each target is set by the
cheapest plan's metric and its index alone), so each is a task on the Dask cluster and the
points come back in target order — the same points as here. The two ε-walks are
*sequential*: each level is set by the metric of the plan found at the level before, so
they are solved in this process, as without ``--scheduler`` (:func:`sequential_walk`).
Assembling the kept plans is cheap (milliseconds each) and stays here too.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from solver.analysis import cluster
from solver.analysis.explain import annotate
from solver.analysis.whatif import rebuild_workload, with_candidates
from solver.catalog.data import Catalog
from solver.common.errors import InputError, Problem, SolverError
from solver.common.progress import report
from solver.optimize.backends import DEFAULT_SOLVER, get_backend
from solver.optimize.candidates import build_candidates
from solver.optimize.linear import Constraint, Solution
from solver.optimize.mip import Limits, build_model, cand_var, demand_of, node_var, planned_demand
from solver.optimize.plan import assemble, chosen, cost_breakdown, estimate_at
from solver.optimize.records import Candidate, CandidateTable
from solver.optimize.solve import run_mip, widen_replica_bounds, with_headroom
from solver.physics.layout import TRAINING_KINDS
from solver.rfq.schema import AnyWorkload, Rfq, TrainingWorkload

METRICS = {"tpot_ms": True, "ttft_ms": True, "hours_to_complete": True, "headroom": False,
           "failure_domains": False}  # metric -> lower is better
ALIASES = {"tpot": "tpot_ms", "ttft": "ttft_ms", "hours": "hours_to_complete",
           "nodes": "failure_domains", "time": "hours_to_complete"}
REL_EPS = 1e-3          # latency walk: next SLO = metric × (1 - REL_EPS)
MAX_WALK_STEPS = 120    # safety cap on ε-constraint steps
DEFAULT_TARGETS = 12    # sampled frontiers without --points
BATCH_SPEEDUP = 8.0     # batch hours targets down to cheapest / 8
HEADROOM_MAX = 4.0


@dataclass(frozen=True)
class MetricChoice:
    """The workload and metric the frontier trades cost against."""

    workload: str
    metric: str

    @property
    def lower_is_better(self) -> bool:
        return METRICS[self.metric]


@dataclass(frozen=True)
class Point:
    """One solved plan on (or about to be filtered from) the frontier."""

    cost_usd: float
    metric: float
    table: CandidateTable
    solution: Solution
    level: float | None = None


def default_metric(spec: AnyWorkload) -> str:
    if spec.kind == "inference":
        return "ttft_ms" if spec.ttft_ms is not None and spec.tpot_ms is None else "tpot_ms"
    return "hours_to_complete"


def parse_metric(rfq: Rfq, text: str | None) -> MetricChoice:
    """``None`` | ``metric`` | ``workload`` | ``workload:metric`` → a :class:`MetricChoice`."""
    specs = {spec.name: spec for spec in rfq.workloads}
    first = rfq.workloads[0]
    if not text:
        return MetricChoice(first.name, default_metric(first))
    name, _, metric = text.rpartition(":")
    if not name and metric in specs:
        name, metric = metric, ""
    name = name or first.name
    if name not in specs:
        raise InputError([Problem("--metric", "", text, "no workload named "
                                  f"{name!r}; workloads: {', '.join(specs)}")])
    spec = specs[name]
    metric = ALIASES.get(metric, metric) or default_metric(spec)
    valid = (["tpot_ms", "ttft_ms", "headroom", "failure_domains"] if spec.kind == "inference"
             else ["hours_to_complete", "failure_domains"]
             + (["headroom"] if spec.kind == "batch_inference" else []))
    if metric not in valid:
        raise InputError([Problem("--metric", "", text, f"a {spec.kind} workload's frontier "
                                  f"metric is one of {', '.join(valid)}")])
    return MetricChoice(name, metric)


def _objective_cost(table: CandidateTable, solution: Solution, objective: str) -> float:
    cost = cost_breakdown(table, solution.values)
    return cost["capex_usd" if objective == "capex" else "tco_usd"]


def _feasible(solution: Solution) -> bool:
    return solution.status in ("optimal", "feasible")


def _found(solution: Solution, points: list[Point]) -> bool:
    """Whether a walk goes on from ``solution``; a solver failure on its first solve (the
    cheapest plan) is raised: an empty frontier would read as infeasible."""
    if solution.status == "error" and not points:
        raise SolverError(solution.message or f"{solution.backend} failed")
    return _feasible(solution)


# --- latency: ε-walk over the SLO, re-building the workload's candidates per level ------
def at_load_latency(catalog: Catalog, spec: AnyWorkload, picks: list[tuple[Candidate, int]],
                    metric: str) -> float:
    """Worst TPOT/TTFT (ms) over a plan's replicas at the load they are planned for: the
    demand / ``target_utilization`` the MIP buys capacity for (mip.planned_demand). That
    load, not the stated one, keeps the ε-walk exact: at a level L'' >= the metric, each
    replica's capacity still covers its share of the *planned* demand."""
    demand = planned_demand(spec)
    conc = sum(c.concurrency_capacity * n for c, n in picks)
    qps = sum(c.qps_capacity * n for c, n in picks)
    util = max(demand.concurrency / conc if demand.concurrency and conc else 0.0,
               demand.qps / qps if demand.qps and qps else 0.0)
    util = min(1.0, util)
    worst = 0.0
    for cand, _ in picks:
        if demand.concurrency:  # closed loop: each replica at its share of the users
            load = max(1, math.ceil(util * cand.concurrency_capacity - 1e-9))
            work = replace(cand.estimate.workload, concurrency=load)
        else:  # open loop: each replica at its share of the request rate
            work = replace(cand.estimate.workload, concurrency=None,
                           qps=max(util * cand.qps_capacity, 1e-9))
        est = estimate_at(catalog, cand, work)  # a disaggregated unit: both pools
        # the SLO is checked at the workload's percentile: so is the frontier's metric
        value = getattr(est.predicted, f"{metric}_slo", None)
        if value is None:
            value = getattr(est.predicted, metric)
        if value is None:
            value = getattr(cand.estimate.predicted, metric) or math.inf
        worst = max(worst, float(value))
    return worst


def _latency_walk(catalog: Catalog, rfq: Rfq, base: CandidateTable, choice: MetricChoice,
                  solver: str, first: CandidateTable | None = None) -> list[Point]:
    """The walk over ``choice``'s latency SLO; its first level on ``first`` (the table
    `procure solve` builds; default ``base``), the tighter levels from ``base``."""
    spec = next(s for s in rfq.workloads if s.name == choice.workload)
    level: float | None = getattr(spec, choice.metric)
    table = base if first is None else first
    points: list[Point] = []
    for step in range(MAX_WALK_STEPS):
        report(f"Pareto: {choice.metric} walk, level {step + 1} ({len(points)} points)")
        # as `procure solve` plans it: idle GPUs of the bought nodes run replicas too
        solution = with_headroom(table, rfq, run_mip(table, rfq, solver=solver), solver=solver)
        if not _found(solution, points):
            break
        picks = chosen(table, solution)[choice.workload]
        value = at_load_latency(catalog, spec, picks, choice.metric)
        points.append(Point(_objective_cost(table, solution, rfq.objective), value, table,
                            solution, level))
        next_level = value * (1.0 - REL_EPS)
        if level is not None and next_level >= level:
            next_level = level * (1.0 - REL_EPS)
        level = next_level
        # a GPU with no layout meeting the looser level has none at a tighter one: prune it
        alive = sorted({c.layout.gpu for c in (base if step == 0 else table)
                        .candidates[choice.workload]})
        pruned = rfq.model_copy(update={"constraints": rfq.constraints.model_copy(
            update={"gpus": alive})})
        table = rebuild_workload(catalog, pruned, base, spec.model_copy(
            update={choice.metric: level}))
        if not table.candidates[choice.workload]:
            break
    return points


# --- training: ε-walk over the candidates' hours ----------------------------------------
def _hours_walk(rfq: Rfq, base: CandidateTable, choice: MetricChoice, solver: str,
                first: CandidateTable | None = None) -> list[Point]:
    """The walk over a job's hours; its first step on ``first`` (the table `procure solve`
    builds; default ``base``), the faster steps from ``base``."""
    table = base
    points: list[Point] = []
    for step in range(10 * MAX_WALK_STEPS):
        report(f"Pareto: hours walk, step {step + 1} ({len(points)} points)")
        on = first if step == 0 and first is not None else table
        solution = with_headroom(on, rfq, run_mip(on, rfq, solver=solver), solver=solver)
        if not _found(solution, points):
            break
        job = chosen(on, solution)[choice.workload][0][0]
        hours = float(job.hours_to_complete or math.inf)
        points.append(Point(_objective_cost(on, solution, rfq.objective), hours, on,
                            solution))
        faster = [c for c in table.candidates[choice.workload]
                  if (c.hours_to_complete or math.inf) < hours * (1.0 - 1e-9)]
        if not faster:
            break
        table = with_candidates(table, choice.workload, faster)
    return points


# --- sampled staircases: batch hours, headroom, failure domains ---------------------------
def _lexicographic(table: CandidateTable, rfq: Rfq, cost: float, solver: str,
                   extra: list[Constraint], gain: dict[str, float]) -> Solution | None:
    """Keep the optimal cost and maximise ``gain`` (a second, exact solve)."""
    limits = Limits.from_rfq(rfq)
    # ``cost`` is the plan's, rounded to the cent (cost_breakdown): the optimum's objective
    # may lie up to half a cent above it, and a cap below it made the model infeasible
    cap = cost * (1 + 1e-9) + 0.005 + 1e-6
    limits.budget_usd = cap if limits.budget_usd is None else min(limits.budget_usd, cap)
    model = build_model(table, rfq, limits, None, extra)
    widen_replica_bounds(model, table)  # idle GPUs of the bought nodes may run replicas
    model.objective = {var: -coeff for var, coeff in gain.items()}
    solution = get_backend(solver).solve(model)
    return solution if _feasible(solution) else None


def _scaled_rfq(rfq: Rfq, name: str, update: dict[str, Any]) -> Rfq:
    workloads = [s.model_copy(update=update) if s.name == name else s for s in rfq.workloads]
    return rfq.model_copy(update={"workloads": workloads})


def _sampled(catalog: Catalog, rfq: Rfq, base: CandidateTable, choice: MetricChoice,
             solver: str, targets: int, client: Any = None) -> list[Point]:
    """Up to ``targets`` points from the cheapest plan outwards: each asks for more of the
    metric (more nodes, a shorter deadline, more headroom) and keeps the cheapest plan that
    gives it, then the best metric at that cost (:func:`_lexicographic`); the points end
    at the first target no plan meets. With a Dask ``client`` the targets after the first
    are solved on its cluster (:func:`_target`), with the same points."""
    spec = next(s for s in rfq.workloads if s.name == choice.workload)
    cands = base.candidates[choice.workload]
    demand = demand_of(spec)
    # the cheapest plan as `procure solve` plans it: idle GPUs of the bought nodes run too
    first = with_headroom(base, rfq, run_mip(base, rfq, solver=solver), solver=solver)
    if not _found(first, []):
        return []
    if choice.metric == "failure_domains":
        gain = {node_var(k): 1.0 for k in base.node_types}
    elif choice.metric == "headroom" and demand.concurrency:
        gain = {cand_var(c): c.concurrency_capacity for c in cands}
    else:
        gain = {cand_var(c): c.qps_capacity for c in cands}
    start = _measure(base, choice, spec, first)
    steps = max(1, targets - 1)
    target = partial(_target, base, rfq, choice, spec, start, steps, solver, gain)
    solutions: list[Solution | None]
    if client is None:
        solutions = []
        for index in range(targets):
            report(f"Pareto: {choice.metric} target {index + 1} of {targets}", index, targets)
            solutions.append(target(index, first if index == 0 else None))
            if solutions[-1] is None:
                break  # a harder target is no more feasible
    else:
        # every target after the first is independent of the others: one task each; the
        # run stops at the first infeasible one, as here
        report(f"Pareto: {choice.metric} target 1 of {targets}", 0, targets)
        solutions = [target(0, first)]
        if solutions[0] is not None and targets > 1:
            solutions += cluster.map_on_cluster(
                client, target, range(1, targets),
                lambda done, total: report(f"Pareto: {choice.metric} targets on the Dask "
                                           "cluster", done + 1, total + 1))
    points: list[Point] = []
    for solution in solutions:
        if solution is None:
            break
        points.append(Point(_objective_cost(base, solution, rfq.objective),
                            _measure(base, choice, spec, solution), base, solution))
    return points


def _target(base: CandidateTable, rfq: Rfq, choice: MetricChoice, spec: AnyWorkload,
            start: float, steps: int, solver: str, gain: dict[str, float], index: int,
            first: Solution | None = None) -> Solution | None:
    """Sample ``index`` (here or on a cluster worker): the cheapest plan that meets its
    target (``first``: already solved), then the best metric at that cost; None when no
    plan meets it."""
    trial_rfq, extra = _trial(rfq, base, choice, spec, start, index, steps)
    solution = first if first is not None else run_mip(base, trial_rfq, solver=solver,
                                                        extra=extra)
    if not _feasible(solution):
        return None
    cost = _objective_cost(base, solution, rfq.objective)
    better = _lexicographic(base, trial_rfq, cost, solver, extra, gain)
    if better is None:
        return solution
    # a plan of the same cost is taken only for a better metric: where the metric ties
    # (nodes at a cost are nodes), the cheapest plan's layouts stand, not any of that cost
    sign = 1.0 if choice.lower_is_better else -1.0
    gained = sign * (_measure(base, choice, spec, better) - _measure(base, choice, spec, solution))
    return better if gained < -1e-9 else solution


def _measure(base: CandidateTable, choice: MetricChoice, spec: AnyWorkload,
             solution: Solution) -> float:
    """The metric of one solution: nodes bought, hours to finish the batch, or headroom
    (capacity over demand, the tighter of concurrency and QPS)."""
    picks = chosen(base, solution)[choice.workload]
    if choice.metric == "failure_domains":
        return float(sum(round(solution.values.get(node_var(k), 0.0))
                         for k in base.node_types))
    qps = sum(c.qps_capacity * n for c, n in picks)
    if choice.metric == "hours_to_complete" and spec.kind == "batch_inference":
        return spec.requests / qps / 3600.0 if qps else math.inf
    demand = demand_of(spec)
    conc = sum(c.concurrency_capacity * n for c, n in picks)
    ratios = [x for x in (conc / demand.concurrency if demand.concurrency else None,
                          qps / demand.qps if demand.qps else None) if x is not None]
    return min(ratios)


def _trial(rfq: Rfq, base: CandidateTable, choice: MetricChoice, spec: AnyWorkload, start: float,
           index: int, steps: int) -> tuple[Rfq, list[Constraint]]:
    """The RFQ (and extra rows) of sample ``index`` of ``steps``, from the cheapest plan's
    metric ``start`` (index 0) to the far end of the sweep (index = steps)."""
    if index == 0:
        return rfq, []
    share = index / steps
    if choice.metric == "failure_domains":
        return rfq, [Constraint("min_nodes", {node_var(k): 1.0 for k in base.node_types},
                                ">=", start + index)]
    if choice.metric == "hours_to_complete":
        hours = start * BATCH_SPEEDUP ** (-share)
        return _scaled_rfq(rfq, choice.workload, {"deadline_hours": hours}), []
    factor = max(start, 1.0) * (HEADROOM_MAX / max(start, 1.0)) ** share
    update: dict[str, Any] = {}
    if spec.kind == "inference":
        if spec.concurrency:
            update["concurrency"] = math.ceil(spec.concurrency * factor - 1e-9)
        if spec.qps:
            update["qps"] = spec.qps * factor
    elif spec.kind == "batch_inference":
        update["requests"] = math.ceil(spec.requests * factor - 1e-9)
    return _scaled_rfq(rfq, choice.workload, update), []


# --- frontier ---------------------------------------------------------------------------
def non_dominated(points: list[Point], lower_is_better: bool) -> list[Point]:
    """Sorted by cost; a point survives only if its metric beats every cheaper point's."""
    sign = 1.0 if lower_is_better else -1.0
    ordered = sorted(points, key=lambda p: (round(p.cost_usd, 2), sign * p.metric))
    keep: list[Point] = []
    best = math.inf
    for point in ordered:
        value = sign * point.metric
        if value < best - 1e-9 * max(1.0, abs(best) if math.isfinite(best) else 1.0):
            if keep and round(keep[-1].cost_usd, 2) == round(point.cost_usd, 2):
                continue  # same cost, worse metric than the one already kept
            keep.append(point)
            best = value
    return keep


def spread(points: list[Point], count: int | None) -> list[Point]:
    """The cheapest point and ``count - 1`` others spread evenly along the frontier."""
    if count is None or len(points) <= count:
        return points
    if count <= 1:
        return points[:1]
    picks = sorted({round(i * (len(points) - 1) / (count - 1)) for i in range(count)})
    return [points[i] for i in picks]


def _walk(choice: MetricChoice, spec: AnyWorkload) -> str | None:
    """Which sequential walk a frontier is (``latency``: an SLO; ``hours``: a training
    job's hours), or None for the sampled frontiers (independent solves)."""
    if choice.metric in ("tpot_ms", "ttft_ms"):
        return "latency"
    if choice.metric == "hours_to_complete" and spec.kind in TRAINING_KINDS:
        return "hours"
    return None


def sequential_walk(rfq: Rfq, metric: str | None = None) -> str | None:
    """Why the frontier of ``metric`` cannot be spread over a cluster (its levels are a
    sequential walk: each is set by the plan found at the one before), or None when its
    levels are independent solves (the sampled frontiers)."""
    choice = parse_metric(rfq, metric)
    walk = _walk(choice, next(s for s in rfq.workloads if s.name == choice.workload))
    if walk == "latency":
        return (f"the {choice.metric} frontier is a sequential walk (each SLO level is set "
                "by the plan found at the level before): solved in this process")
    if walk == "hours":
        return ("the hours_to_complete frontier of a training job is a sequential walk "
                "(each step keeps the candidates faster than the plan before): solved in "
                "this process")
    return None


@contextmanager
def _cluster(scheduler: str | None) -> Iterator[Any]:
    """A Dask client of ``scheduler`` for the block (None without one)."""
    if scheduler is None:
        yield None
        return
    report("Pareto: connecting to the Dask scheduler")
    with cluster.dask_client(scheduler) as client:
        yield client


def frontier(catalog: Catalog, rfq: Rfq, *, metric: str | None = None,
             points: int | None = None, solver: str = DEFAULT_SOLVER, explain: bool = True,
             scheduler: str | None = None) -> dict[str, Any]:
    """The Pareto frontier (points sorted by cost), each point's ``plan`` a
    :class:`~solver.optimize.plan_model.Plan`; :func:`frontier_json` is its JSON.
    ``scheduler`` (a Dask address): a sampled frontier's targets are solved on that
    cluster; a walk (:func:`sequential_walk`) is solved here all the same. The address is
    checked (and the scheduler reached) either way, so a bad one is an input error."""
    start = time.perf_counter()
    catalog = rfq.catalog(catalog)
    served = rfq.objective == "max_served"
    if served:  # cost against service for the whole demand; the budget curve is --over budget
        rfq = rfq.model_copy(update={"objective": "tco", "budget_usd": None})
    choice = parse_metric(rfq, metric)
    spec = next(s for s in rfq.workloads if s.name == choice.workload)
    with _cluster(scheduler) as client:
        report("Pareto: candidate layouts")
        base = build_candidates(catalog, rfq, all_sizes=True)
        walk = _walk(choice, spec)  # the walks are sequential: see sequential_walk
        # a walk's first point is planned on the table `procure solve` plans on (for a
        # training job ``base`` also holds the larger spans; for a service the two tables
        # are the same, so an RFQ without training jobs builds one), so that the cheapest
        # point is the solve plan
        trains = any(isinstance(s, TrainingWorkload) for s in rfq.workloads)
        first = build_candidates(catalog, rfq) if walk and trains else None
        if walk == "latency":
            found = _latency_walk(catalog, rfq, base, choice, solver, first)
            method = "epsilon-constraint walk over the SLO (candidates rebuilt per level)"
        elif walk == "hours":
            found = _hours_walk(rfq, base, choice, solver, first)
            method = "epsilon-constraint walk over the candidates' hours"
        else:
            found = _sampled(catalog, rfq, base, choice, solver, points or DEFAULT_TARGETS,
                             client)
            method = "epsilon-constraint at geometric targets, lexicographic (cost, metric)"
    if served:
        method += ("; objective max_served: serving all demand, without the budget (the "
                   "share each budget serves: --over budget)")
    kept = spread(non_dominated(found, choice.lower_is_better), points)
    cost_key = "capex_usd" if rfq.objective == "capex" else "tco_usd"
    out_points = []
    for index, point in enumerate(kept):
        report("Pareto: assembling the plans", index, len(kept))
        plan = assemble(catalog, rfq, point.table, point.solution)
        if explain:
            plan = annotate(plan, rfq, catalog, point.table)
        cost = (0.0 if plan.cost is None else plan.cost.tco_usd if cost_key == "tco_usd"
                else plan.cost.capex_usd)
        entry: dict[str, Any] = {cost_key: cost, choice.metric: round(point.metric, 4),
                                 "plan": plan}
        if point.level is not None:
            entry["slo_level"] = round(point.level, 4)
        out_points.append(entry)
    return {"rfq": rfq.id, "workload": choice.workload, "axes": [cost_key, choice.metric],
            "lower_is_better": {cost_key: True, choice.metric: choice.lower_is_better},
            "method": method, "candidates_solved": len(found),
            "seconds": round(time.perf_counter() - start, 3), "points": out_points}


def frontier_json(result: dict[str, Any]) -> dict[str, Any]:
    """The frontier of :func:`frontier` as JSON (``procure pareto --json``): each point's
    plan as the plan JSON."""
    return {**result, "points": [{**point, "plan": point["plan"].to_json()}
                                 for point in result["points"]]}
