"""Turn a MIP solution into the plan a user reads: the typed :class:`Plan`
(:mod:`solver.optimize.plan_model`, docs/plan.md)."""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from typing import Any

from solver.catalog.data import Catalog
from solver.optimize.bom import bill_of_materials, frontend_entry
from solver.optimize.linear import Solution
from solver.optimize.mip import (
    cand_var,
    demand_of,
    fabric_var,
    needs_n_plus_1,
    node_var,
    objective_terms,
    quiet_hours,
    quiet_jobs,
    quiet_var,
    served_share,
    target_utilization,
)
from solver.optimize.placement import expert_parallel, mode, place, pools
from solver.optimize.plan_model import Plan
from solver.optimize.records import Candidate, CandidateTable
from solver.optimize.rental import add_sourcing
from solver.optimize.schedule import schedule_for
from solver.optimize.unit_cost import add_unit_costs
from solver.physics.coverage import serving_calibration
from solver.physics.disagg import unit_estimate
from solver.physics.goodput import goodput
from solver.physics.layout import TRAINING_KINDS, Estimate, Workload
from solver.physics.performance import estimate as estimate_layout
from solver.rfq.schema import (
    AnyWorkload,
    BatchInferenceWorkload,
    InferenceWorkload,
    Rfq,
    TrainingWorkload,
)

COST_KEYS = ("gpus_usd", "servers_usd", "network_usd", "storage_usd", "capex_usd", "power_usd",
             "operations_usd", "multinode_overhead_usd", "rental_usd", "tco_usd")


def _round(value: float | None, digits: int = 3) -> float | None:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    return round(float(value), digits)


def chosen(table: CandidateTable, solution: Solution) -> dict[str, list[tuple[Candidate, int]]]:
    """Each workload's candidates used in the solution, with their replica counts."""
    picks: dict[str, list[tuple[Candidate, int]]] = {}
    for name, cands in table.candidates.items():
        used = [(c, round(solution.values.get(cand_var(c), 0.0))) for c in cands]
        picks[name] = sorted([(c, n) for c, n in used if n > 0], key=lambda cn: -cn[0].gpus * cn[1])
    return picks


def cost_breakdown(table: CandidateTable, values: dict[str, float]) -> dict[str, float]:
    """Every cost term of a solution (TCO terms are reported even for a capex objective)."""
    terms = objective_terms(table, "tco")
    cost = {key: sum(coeff * round(values.get(var, 0.0)) for var, coeff in coeffs.items())
            for key, coeffs in terms.items()}
    cost["capex_usd"] = (cost["gpus_usd"] + cost["servers_usd"] + cost["network_usd"]
                         + cost["storage_usd"])
    cost["tco_usd"] = (cost["capex_usd"] + cost["power_usd"] + cost["operations_usd"]
                       + cost["multinode_overhead_usd"] + cost.get("rental_usd", 0.0))
    return {key: round(cost[key], 2) for key in COST_KEYS}


def at_load(catalog: Catalog, spec: AnyWorkload, cand: Candidate, replicas: int,
            total_replicas_capacity: float) -> Estimate:
    """The candidate evaluated at its share of the workload's concurrency (when given)."""
    est = cand.estimate
    if spec.kind == "inference" and spec.concurrency:
        # replicas take load in proportion to their capacity: each replica of this
        # candidate carries concurrency × its capacity / the total capacity of all replicas
        # (a rented unit runs ``replicas_per_unit`` copies of the estimate's layout)
        per_layout = max(1, cand.replicas_per_unit)
        share = max(1, math.ceil(spec.concurrency * cand.concurrency_capacity
                                 / max(total_replicas_capacity, 1e-9) / per_layout - 1e-9))
        share = min(share, int(cand.concurrency_capacity / per_layout) or share)
        return estimate_at(catalog, cand, replace(est.workload, concurrency=share))
    return est


def estimate_at(catalog: Catalog, cand: Candidate, work: Workload) -> Estimate:
    """A serving candidate's estimate at the load ``work`` states: a disaggregated unit's
    with both pools (:func:`~solver.physics.disagg.unit_estimate`), else its layout's."""
    if cand.prefill is not None:
        return unit_estimate(catalog, cand.prefill, cand.layout, work)[0]
    return estimate_layout(catalog, cand.layout, work)


PERCENTILE_KEYS = ("ttft_ms_p90", "ttft_ms_p99", "tpot_ms_p90", "tpot_ms_p99")
"""Latency percentiles of an online workload's main layout at its load (None until the
physics gives them; ``ttft_ms`` / ``tpot_ms`` stay the median)."""


def _layout_tokens_per_s(spec: AnyWorkload, replicas: int, loaded: Estimate) -> float:
    """Output tokens/s of ``replicas`` replicas at their share of the load (``loaded``: one
    replica's estimate there); a training job's own throughput."""
    return loaded.predicted.tokens_per_s * (replicas if spec.kind not in TRAINING_KINDS
                                            else 1)


def _predicted_at_load(spec: AnyWorkload, cand: Candidate, replicas: int, loaded: Estimate
                       ) -> dict[str, Any]:
    """Per-request latency at this workload's actual load, capacity for all replicas."""
    pred = loaded.predicted
    tokens = _layout_tokens_per_s(spec, replicas, loaded)
    hours = cand.hours_to_complete
    qps_total = (cand.qps_capacity * replicas) if spec.kind not in TRAINING_KINDS else None
    if spec.kind == "batch_inference" and qps_total:
        hours = spec.requests / qps_total / 3600.0
    return {
        "ttft_ms": _round(pred.ttft_ms, 1), "tpot_ms": _round(pred.tpot_ms, 2),
        "qps_capacity": _round(qps_total, 3), "tokens_per_s": _round(tokens, 1),
        "hours_to_complete": _round(hours, 2),
        "scaling_efficiency": _round(pred.scaling_efficiency, 3),
        "mfu": _round(pred.mfu, 3),
        "max_concurrency": (int(cand.concurrency_capacity * replicas)
                            if spec.kind not in TRAINING_KINDS else None),
        **({key: _round(getattr(pred, key), 2) for key in PERCENTILE_KEYS}
           if spec.kind == "inference" else {}),
    }


def utilization(spec: AnyWorkload, picks: list[tuple[Candidate, int]]) -> float | None:
    """Stated demand / capacity bought for a serving workload: concurrency against the
    replicas' concurrency, requests/s against their request rate; the larger when both are
    stated (the binding one). None when nothing was bought."""
    demand = demand_of(spec)
    shares = []
    conc = sum(c.concurrency_capacity * n for c, n in picks)
    qps = sum(c.qps_capacity * n for c, n in picks)
    if demand.concurrency and conc > 0:
        shares.append(demand.concurrency / conc)
    if demand.qps and qps > 0:
        shares.append(demand.qps / qps)
    return max(shares) if shares else None


SLO_METRICS = (("ttft_ms", "ttft"), ("tpot_ms", "tpot"))


def slo_margins(catalog: Catalog, spec: InferenceWorkload, picks: list[tuple[Candidate, int]]
                ) -> dict[str, dict[str, Any]]:
    """Each latency SLO of an online workload against the prediction at its percentile.

    For every SLO the RFQ states: ``target_ms``, ``predicted_ms`` (the worst layout used,
    each at the load the plan puts on it, at ``percentile``; the physics' ``*_slo`` value,
    or its median when it gives no percentile - ``basis`` says which), ``margin`` = 1 -
    predicted / target and ``met``.
    """
    percentile = spec.slo_percentile
    capacity = sum(c.concurrency_capacity * n for c, n in picks)
    loaded = [at_load(catalog, spec, cand, n, capacity).predicted for cand, n in picks]
    out: dict[str, dict[str, Any]] = {}
    for metric, slo in SLO_METRICS:
        target = getattr(spec, metric)
        if not target:
            continue
        values = [(getattr(p, f"{metric}_slo", None), getattr(p, metric)) for p in loaded]
        at_percentile = all(v is not None for v, _ in values)
        worst = max((v if at_percentile else m) or 0.0 for v, m in values)
        out[metric] = {"slo": slo, "percentile": percentile, "target_ms": float(target),
                       "predicted_ms": _round(worst, 2),
                       "margin": _round(1.0 - worst / target, 4),
                       "met": worst <= target * (1 + 1e-9),
                       "basis": f"p{percentile}" if at_percentile else "median"}
    return out


def redundancy_check(plan: dict[str, Any], picks: dict[str, list[tuple[Candidate, int]]],
                     specs: dict[str, Any]) -> None:
    """For each ``redundancy: n+1`` workload, the capacity left with the worst single node
    of the plan's own placement down (in place on its plan entry, key ``n_plus_1``)."""
    for entry in plan["workloads"]:
        spec = specs[entry["name"]]
        if not needs_n_plus_1(spec):
            continue
        by_name = {c.name: c for c, _ in picks[entry["name"]]}
        total = (sum(c.concurrency_capacity * n for c, n in picks[entry["name"]]),
                 sum(c.qps_capacity * n for c, n in picks[entry["name"]]))
        worst: tuple[float, float, str] | None = None
        for node in plan["placement"]:
            groups = {run["group"] for run in node["runs"] if run["workload"] == entry["name"]}
            lost = [by_name[g.rsplit("#", 1)[0]] for g in groups]
            left = (total[0] - sum(c.concurrency_capacity for c in lost),
                    total[1] - sum(c.qps_capacity for c in lost), node["node"])
            if worst is None or left[:2] < worst[:2]:
                worst = left
        for cand, units in picks[entry["name"]]:  # a rented instance can fail too
            if cand.rental is None or units < 1:
                continue
            left = (total[0] - cand.concurrency_capacity, total[1] - cand.qps_capacity,
                    f"rented {cand.rental.id} instance")
            if worst is None or left[:2] < worst[:2]:
                worst = left
        if worst is None:
            continue
        entry["n_plus_1"] = {"worst_node": worst[2],
                             "concurrency_one_node_down": _round(worst[0], 3),
                             "qps_one_node_down": _round(worst[1], 3)}


def serving_mode(catalog: Catalog, cand: Candidate) -> dict[str, Any]:
    """``mode`` of a serving candidate and, disaggregated, its ``prefill`` and ``decode``
    pools and the KV transfer of one prompt between them (nothing for a training job)."""
    if cand.is_job:
        return {}
    if cand.prefill is None:
        return {"mode": mode(cand)}
    found = unit_estimate(catalog, cand.prefill, cand.layout, cand.estimate.workload)[1]
    return {"mode": mode(cand), **pools(cand),
            "kv_transfer_ms": _round(found.kv_transfer_ms if found else None, 3)}


def workload_entry(catalog: Catalog, spec: AnyWorkload, picks: list[tuple[Candidate, int]]
                   ) -> dict[str, Any]:
    """The plan's entry for one workload: its main layout, memory and predictions."""
    cand, replicas = picks[0]
    layout = cand.layout
    is_job = spec.kind in TRAINING_KINDS
    capacity = sum(c.concurrency_capacity * n for c, n in picks)
    loaded = at_load(catalog, spec, cand, replicas, capacity)
    memory = {k: _round(v, 3) for k, v in asdict(loaded.memory).items()}
    entry: dict[str, Any] = {
        "name": spec.name, "kind": spec.kind, "model": spec.model,
        "precision": layout.precision, "gpu": layout.gpu, "tp": layout.tp, "pp": layout.pp,
        "dp": layout.dp if is_job else replicas,
        "gpus": cand.gpus if is_job else cand.gpus * replicas,
        "nodes_spanned": cand.nodes_spanned,
        "gpus_per_node": layout.gpus_per_node, "fabric": cand.fabric,
        "memory": memory,
        "predicted": _predicted_at_load(spec, cand, replicas, loaded),
    }
    entry.update(expert_parallel(layout))
    entry.update(serving_mode(catalog, cand))
    if isinstance(spec, TrainingWorkload):  # the training knobs, goodput, deadline margin
        entry["training"] = training_entry(catalog, spec, cand)
    demand = demand_of(spec)
    if not is_job:
        entry["demand"] = {"concurrency": spec.concurrency if spec.kind == "inference" else None,
                           "qps": _round(demand.qps, 4)}
        entry["utilization"] = _round(utilization(spec, picks), 3)
    engine = None if isinstance(spec, TrainingWorkload) else spec.engine
    if engine is not None:  # serving: how well measured, and the margin planned with
        entry["calibration"] = serving_calibration(catalog, layout.gpu, engine).to_dict()
    if spec.kind == "inference":
        entry["target_utilization"] = target_utilization(spec)
        entry["slo_percentile"] = spec.slo_percentile
        entry["engine"] = spec.engine
        entry["redundancy"] = spec.redundancy
        entry["margins"] = slo_margins(catalog, spec, picks)
    if len(picks) > 1:
        entry["layouts"] = [{"gpu": c.layout.gpu, "precision": c.layout.precision,
                             "tp": c.layout.tp, "pp": c.layout.pp,
                             **expert_parallel(c.layout), **serving_mode(catalog, c),
                             "replicas": n,
                             "gpus_per_node": c.layout.gpus_per_node, "fabric": c.fabric,
                             **({} if engine is None else {"calibration": serving_calibration(
                                 catalog, c.layout.gpu, engine).to_dict()})}
                            for c, n in picks]
        entry["gpus"] = sum(c.gpus * n for c, n in picks)
        if not is_job:  # capacity, throughput and completion time of all layouts together
            qps_all = sum(c.qps_capacity * n for c, n in picks)
            pred = entry["predicted"]
            pred["qps_capacity"] = _round(qps_all, 3)
            pred["max_concurrency"] = int(capacity)
            # each layout's replicas at their share of the load, as the main layout's are
            loads = [loaded, *(at_load(catalog, spec, c, n, capacity) for c, n in picks[1:])]
            pred["tokens_per_s"] = _round(sum(_layout_tokens_per_s(spec, n, est) for (_, n), est
                                              in zip(picks, loads, strict=True)), 1)
            if spec.kind == "batch_inference" and qps_all > 0:
                pred["hours_to_complete"] = _round(spec.requests / qps_all / 3600.0, 2)
    if spec.kind == "batch_inference":
        qps_all = sum(c.qps_capacity * n for c, n in picks)
        entry["deadline"] = deadline_entry(spec, spec.requests / qps_all / 3600.0
                                           if qps_all > 0 else None)
    elif isinstance(spec, TrainingWorkload):
        entry["deadline"] = deadline_entry(spec, cand.hours_to_complete)
    return entry


def deadline_entry(spec: BatchInferenceWorkload | TrainingWorkload,
                   hours: float | None) -> dict[str, Any]:
    """A job's deadline against its planned hours (issue 28), as serving states its SLO
    margins: the RFQ's deadline, the headroom kept, the hours planned within, and the
    margin = 1 - hours / deadline."""
    return {"deadline_hours": spec.deadline_hours, "headroom": spec.headroom,
            "planned_within_hours": _round(spec.planned_hours, 3),
            "hours_to_complete": _round(hours, 2) if hours is not None else None,
            "margin": _round(1.0 - hours / spec.deadline_hours, 4) if hours is not None
            else None,
            "met": hours is not None and hours <= spec.planned_hours + 1e-9}


def training_entry(catalog: Catalog, spec: TrainingWorkload, cand: Candidate) -> dict[str, Any]:
    """A training job's knobs (recompute, ZeRO stage, batch, SP, interleave, CP), its
    expected goodput (failures, checkpoints) and the margin to its deadline."""
    good = goodput(catalog, cand.estimate)
    hours = cand.hours_to_complete
    deadline = spec.deadline_hours
    entry = dict(cand.estimate.training or {})
    entry.update({
        "goodput": _round(good.fraction, 4),
        "failures_expected": _round(good.failures_per_hour * (hours or 0.0), 2),
        "checkpoint_blocking_s": _round(good.checkpoint_hours * 3600.0, 1),
        "deadline_hours": deadline,
        "hours_to_complete": _round(hours, 2),
        "deadline_margin_hours": _round(deadline - hours, 2) if hours is not None else None,
        "deadline_margin": _round(1.0 - hours / deadline, 4) if hours and deadline else None,
    })
    return entry


def busy_picks(table: CandidateTable, rfq: Rfq, picks: dict[str, list[tuple[Candidate, int]]]
               ) -> dict[str, list[tuple[Candidate, int]]]:
    """What runs in the busy hours (the placement): every pick but the recurring jobs that
    run in the quiet hours (solver/optimize/mip.py, busy and quiet hours)."""
    specs = {s.name: s for s in rfq.workloads}
    night = quiet_jobs(table, specs, quiet_hours(rfq))
    return {name: [(c, n) for c, n in cands if c.name not in night]
            for name, cands in picks.items()}


def timetable_entry(table: CandidateTable, rfq: Rfq,
                    picks: dict[str, list[tuple[Candidate, int]]],
                    values: dict[str, float], bought: dict[str, int]
                    ) -> list[dict[str, Any]] | None:
    """Which workload runs where and when over the day: the busy and the quiet slot, each
    with the owned and rented GPUs of every workload running in it; the quiet slot also
    with its own placement on the bought nodes (the busy one is the plan's ``placement``).
    None without a ``daily_profile``."""
    quiet = quiet_hours(rfq)
    if quiet is None:
        return None
    specs = {s.name: s for s in rfq.workloads}
    night = quiet_jobs(table, specs, quiet)
    slots = []
    for slot, hours in (("busy", 24.0 - quiet), ("quiet", quiet)):
        runs: list[dict[str, Any]] = []
        in_slot: dict[str, list[tuple[Candidate, int]]] = {}
        for name, cands in picks.items():
            spec = specs[name]
            profile = spec.daily_profile if spec.kind == "inference" else None
            profiled = profile is not None
            owned = rented = 0
            for c, n in cands:
                if slot == "busy" and c.name in night:
                    continue
                if slot == "quiet" and profiled:
                    n = round(values.get(quiet_var(c), 0.0))
                if n:
                    in_slot.setdefault(name, []).append((c, n))
                if c.rented:
                    rented += n * c.gpus
                else:
                    owned += n * c.gpus
            if owned or rented:
                share = (profile.off_peak_load if slot == "quiet" and profile is not None
                         else 1.0)
                runs.append({"workload": name, "owned_gpus": owned, "rented_gpus": rented,
                             "demand_share": share})
        used = sum(r["owned_gpus"] for r in runs)
        free = sum(round(values.get(node_var(k), 0.0)) * t.gpus
                   for k, t in table.node_types.items()) - used
        slots.append({"slot": slot, "hours": round(hours, 3), "runs": runs,
                      "idle_gpus": max(0, free)})
        if slot == "quiet":
            slots[-1]["placement"] = place(table, bought, in_slot)
    return slots


def recurrence_entry(spec: AnyWorkload, picks: list[tuple[Candidate, int]],
                     horizon_years: float) -> dict[str, Any] | None:
    """A recurring job's runs over the horizon and what renting them costs (per run and
    in all); None for a one-off job or serving."""
    if spec.kind == "inference" or spec.recurrence is None:
        return None
    runs = spec.runs(horizon_years)
    rented = [(c, n) for c, n in picks if c.rented]
    total = sum(c.rental_usd * n for c, n in rented) if rented else None
    return {"every": spec.recurrence, "runs": runs, "window_hours": spec.deadline_hours,
            "rented_per_run_usd": None if total is None else round(total / runs, 2),
            "rented_usd": None if total is None else round(total, 2)}


def served_spec(spec: AnyWorkload, share: float) -> AnyWorkload:
    """The part of a workload a max_served plan serves: its concurrency, request rate or
    requests scaled by ``share`` (a job is run whole or not at all)."""
    if share >= 1.0 or spec.kind in TRAINING_KINDS:
        return spec
    if spec.kind == "inference":
        update: dict[str, Any] = {}
        if spec.concurrency:
            update["concurrency"] = max(1, math.floor(spec.concurrency * share + 1e-9))
        if spec.qps:
            update["qps"] = max(1e-9, spec.qps * share)
        return spec.model_copy(update=update)
    if spec.kind != "batch_inference":
        return spec
    return spec.model_copy(update={"requests": max(1, math.floor(spec.requests * share
                                                                 + 1e-9))})


def served_entries(rfq: Rfq, shares: dict[str, float]) -> list[dict[str, Any]]:
    """Per workload of a max_served plan: the share of its demand served and, in words,
    what that is and what was given up."""
    out = []
    for spec in rfq.workloads:
        share = shares.get(spec.name, 0.0)
        out.append({"workload": spec.name, "priority": spec.priority,
                    "served_fraction": share, "served": served_words(spec, share)})
    return out


def weighted_served_share(plan: Plan, rfq: Rfq) -> float | None:
    """The priority-weighted share of demand a max_served plan serves, 0..1 (None for a
    plan of another objective)."""
    if not plan.served:
        return None
    weight = {s.name: s.priority for s in rfq.workloads}
    total = sum(weight.values())
    return sum(weight.get(s.workload, 0.0) * s.served_fraction for s in plan.served) / total


def served_words(spec: AnyWorkload, share: float) -> str:
    """'16 of 64 concurrent users at the SLOs', '40 % of 2,000,000 requests by the deadline',
    'run' / 'not run'."""
    if spec.kind in TRAINING_KINDS:
        return "run by its deadline" if share >= 1.0 else "not run (given up)"
    if spec.kind == "inference":
        parts = []
        if spec.concurrency:
            served = math.floor(spec.concurrency * share + 1e-9)
            parts.append(f"{served:,} of {spec.concurrency:,} concurrent users")
        if spec.qps:
            parts.append(f"{spec.qps * share:,.3g} of {spec.qps:,.3g} requests/s")
        slo = " at the SLOs" if (spec.ttft_ms or spec.tpot_ms) else ""
        return " and ".join(parts) + slo
    if spec.kind != "batch_inference":
        return ""
    served = math.floor(spec.requests * share + 1e-9)
    return f"{served:,} of {spec.requests:,} requests by the deadline"


def assemble(catalog: Catalog, rfq: Rfq, table: CandidateTable, solution: Solution, *,
             time_limit: float | None = None) -> Plan:
    """The plan (without decision path and warnings, which explain adds), with its
    placement (one entry per bought node) and bill of materials recomputed from it. The
    parts are put together as plain values, then checked into the frozen :class:`Plan`.
    ``time_limit``: seconds left for the phased purchase model (demand over time)."""
    values = solution.values
    nodes: list[dict[str, Any]] = []
    bought: dict[str, int] = {}
    power_kw = 0.0
    rack_units = 0
    for key, node in table.node_types.items():
        count = round(values.get(node_var(key), 0.0))
        if count > 0:
            bought[key] = count
            nodes.append({"gpu": node.gpu, "server": node.server, "gpus_per_node": node.gpus,
                          "count": count})
            power_kw += count * node.cost.power_kw
            rack_units += count * node.cost.rack_units
    fabric = next((f for f in table.fabrics if round(values.get(fabric_var(f), 0.0)) == 1),
                  "none")
    picks = chosen(table, solution)
    specs = {spec.name: spec for spec in rfq.workloads}
    shares: dict[str, float] = {}
    if rfq.objective == "max_served":  # each workload at the share the plan serves
        shares = {name: served_share(values, name, specs[name].kind) for name in picks}
        specs = {name: served_spec(spec, shares.get(name, 1.0)) for name, spec in specs.items()}
    plan: dict[str, Any] = {
        "rfq": rfq.id,
        "status": solution.status,
        "solver": solution.backend,
        "gap": _round(solution.gap, 6) if solution.status == "feasible" else 0.0,
        "solve_seconds": _round(solution.seconds, 3),
        "objective": rfq.objective,
        "cluster": {
            "nodes": nodes,
            "total_nodes": sum(n["count"] for n in nodes),
            "total_gpus": sum(n["count"] * n["gpus_per_node"] for n in nodes),
            "fabric": fabric,
            "coupled": fabric != "none",
            "coupled_nodes": round(values.get("K", 0.0)),
            "power_kw": round(power_kw, 2),
            "rack_units": rack_units,
        },
        "workloads": [workload_entry(catalog, specs[name], picks[name]) for name in picks
                      if picks[name]],
        "cost": cost_breakdown(table, values),
        "placement": place(table, bought, busy_picks(table, rfq, picks)),
        "bill_of_materials": None,
        "decision_path": [],
        "warnings": [],
        "infeasibility": None,
    }
    if shares:
        plan["served"] = served_entries(rfq, shares)
        for entry in plan["workloads"]:
            entry["served_fraction"] = shares[entry["name"]]
    timetable = timetable_entry(table, rfq, picks, values, bought)
    if timetable is not None:
        plan["timetable"] = timetable
    for entry in plan["workloads"]:
        recurring = recurrence_entry(specs[entry["name"]], picks[entry["name"]],
                                     rfq.horizon_years)
        if recurring is not None:
            entry["recurrence"] = recurring
    redundancy_check(plan, picks, specs)
    add_sourcing(plan, picks)  # owned | rented | hybrid per workload (solver/optimize/rental.py)
    add_unit_costs(plan, rfq)  # cost per million tokens (solver/optimize/unit_cost.py)
    frontend = frontend_entry(table.params, plan["cluster"]["total_nodes"],
                              rfq.facility.lan_ports)
    if frontend is not None:
        plan["cluster"]["frontend"] = frontend
    plan["bill_of_materials"] = bill_of_materials(catalog, rfq, table.params, plan)
    plan["schedule"] = schedule_for(catalog, rfq, table, plan,  # solver/optimize/schedule.py
                                    time_limit)
    return Plan.model_validate(plan)
