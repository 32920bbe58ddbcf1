"""Explain a plan along the buying guide's decision path, with the numbers behind it.

The guide asks, for each workload, five questions in order - does it fit one node, only at
INT4, is it throughput-bound, is it training across coupled nodes, is it pretraining 70B+ -
and its reference box is one node of 8 x 96 GB GPUs (RTX PRO 6000) at FP8.

:func:`decision_path` walks steps 1–5 of the guide for one workload ("first yes ends it");
:func:`annotate` adds the path and the warnings to a plan; :func:`counterfactuals` re-solves
the RFQ under the alternatives a buyer asks about (one node only, no fabric, 4-GPU boxes
instead of 8-GPU boxes, and without n+1 redundancy where asked: what the insurance costs)
and says what each would cost and why it lost.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from solver.analysis.binding import RELAXATION_LIMIT_S, binding_report, prices_workloads
from solver.analysis.licence import licensed_alternative
from solver.analysis.realism import realism_warnings
from solver.catalog.data import Catalog
from solver.catalog.perf_factors import factors
from solver.common.wording import (
    COST_LABELS,
    COST_TERMS,
    UNPRICED_WARNING,
    layout_words,
    money_delta,
    plural,
    unit_gpus,
    unit_words,
)
from solver.optimize.backends import DEFAULT_SOLVER
from solver.optimize.candidates import build_candidates, physics_workload
from solver.optimize.linear import Constraint
from solver.optimize.mip import Limits, fabric_var, needs_n_plus_1, node_var
from solver.optimize.plan import assemble
from solver.optimize.plan_model import Binding, DecisionStep, LayoutUse, Plan, WorkloadPlan
from solver.optimize.records import CandidateTable
from solver.optimize.rental import buy_vs_rent, rental_mode
from solver.optimize.solve import run_mip, solve_table
from solver.physics.layout import TRAINING_KINDS, Layout
from solver.physics.memory import weight_bytes_per_param
from solver.physics.performance import estimate
from solver.rfq.schema import AnyWorkload, Rfq

__all__ = ["GLOSSARY", "annotate", "counterfactuals", "decision_path", "money_delta",
           "plural", "warnings_for", "workload_facts"]

REFERENCE_GPU = "rtx-pro-6000"  # the guide's 8 × 96 GB box
REFERENCE_GPUS = 8

GLOSSARY: dict[str, str] = {
    "TP": "tensor parallel: each layer is split across this many GPUs (inside one node)",
    "PP": "pipeline parallel: the layers are split into this many stages, one after another",
    "DP": "data parallel: this many copies (replicas) of the model share the work",
    "TTFT": "time to first token: how long a user waits for the answer to start (ms), at "
            "the serving engine; the client's and network's own time comes on top",
    "TPOT": "time per output token: the gap between streamed tokens (ms)",
    "TCO": "total cost of ownership over the horizon: hardware + power + operations + "
           "the engineering overhead of coupled nodes",
}


def _reference_fit(catalog: Catalog, spec: AnyWorkload, precision: str) -> tuple[bool, str]:
    """Does the workload fit the guide's 8 × 96 GB node at this precision, with its reserve?"""
    model = catalog.model(spec.model)
    gpu = catalog.gpus.get(REFERENCE_GPU)
    if gpu is None:
        return False, f"reference GPU {REFERENCE_GPU} not in catalog"
    workload = physics_workload(spec)
    if spec.kind == "inference" and spec.concurrency:
        workload = replace(workload, concurrency=spec.concurrency)
    layout = Layout(model=model.id, gpu=gpu.id, precision=precision, tp=REFERENCE_GPUS,
                    gpus_per_node=REFERENCE_GPUS)
    training = spec.kind in TRAINING_KINDS
    if training:
        layout = Layout(model=model.id, gpu=gpu.id, precision=precision, tp=1,
                        dp=REFERENCE_GPUS, gpus_per_node=REFERENCE_GPUS)
    est = estimate(catalog, layout, workload)
    node_gb = gpu.memory_gb * REFERENCE_GPUS
    weights_gb = _weights_gb(catalog, model.params_b, precision)
    total_gb = est.memory.total_gb * REFERENCE_GPUS
    ok = est.fits and (est.comfortable or training)
    if training:
        rest = f"with training state {total_gb:,.0f} GB"
    else:
        kv_gb = est.memory.kv_cache_gb * REFERENCE_GPUS
        load = (f"{spec.concurrency} concurrent requests" if spec.kind == "inference"
                and spec.concurrency else "a full batch")
        rest = (f"KV cache for {load} {kv_gb:,.0f} GB, total with reserve {total_gb:,.0f} GB")
    note = (f"weights {weights_gb:,.1f} GB = {100 * weights_gb / node_gb:.0f} % of "
            f"{node_gb:,.0f} GB at {precision.upper()}; {rest} "
            f"({'fits comfortably' if ok else 'does not fit with reserve'})")
    return ok, note


def _weights_gb(catalog: Catalog, params_b: float, precision: str) -> float:
    return params_b * weight_bytes_per_param(factors(catalog), precision)


def workload_facts(entry: WorkloadPlan, total_nodes: int | None = None) -> dict[str, Any]:
    """What the plan bought for one workload: replicas, GPUs per replica, nodes it occupies.

    ``nodes_used`` counts the nodes the workload's GPUs need at the chosen node sizes
    (capped at the cluster's node count, since workloads can share nodes); ``spanned`` is the
    number of coupled nodes one replica (or the training job) spans.
    """
    training = entry.kind in TRAINING_KINDS
    per_node = entry.gpus_per_node or 1
    spanned = entry.nodes_spanned or 1
    layouts = entry.layouts or [LayoutUse(
        gpu=entry.gpu, precision=entry.precision, tp=entry.tp, pp=entry.pp,
        ep=entry.ep, attention_dp=entry.attention_dp, mode=entry.mode,
        prefill=entry.prefill, decode=entry.decode,
        replicas=1 if training else entry.dp, gpus_per_node=per_node, fabric=entry.fabric)]
    if training:
        replicas = 1
        nodes_used = max(spanned, -(-entry.gpus // per_node))
    else:
        replicas = sum(lay.replicas for lay in layouts)
        nodes_used = sum(max(1, -(-(lay.replicas * unit_gpus(lay))
                                  // (lay.gpus_per_node or 1)))
                         for lay in layouts) * spanned
    if total_nodes is not None:
        nodes_used = max(min(nodes_used, total_nodes), spanned)
    return {"training": training, "per_node": per_node, "spanned": spanned,
            "replicas": replicas, "nodes_used": nodes_used, "layouts": layouts,
            "one_node": nodes_used <= 1 and spanned <= 1}


def decision_path(catalog: Catalog, spec: AnyWorkload, entry: WorkloadPlan | None,
                  floor: float, total_nodes: int | None = None,
                  policy: str = "") -> list[DecisionStep]:
    """Steps 1–5 of the guide for one workload, answered for the hardware the plan bought.

    The first "yes" ends it. Each step's ``answer`` and ``note`` describe the chosen plan
    (GPU, node size, precision, replicas, nodes); where the guide's reference box (8 × 96 GB
    at FP8) would be judged differently, ``reference`` says so separately.
    """
    if entry is None:
        return _reference_path(catalog, spec)
    steps: list[DecisionStep] = []
    training = spec.kind in TRAINING_KINDS
    facts = workload_facts(entry, total_nodes)
    gpu = catalog.gpus.get(entry.gpu)
    gpu_gb = gpu.memory_gb if gpu is not None else entry.memory.capacity_gb
    per_node, precision = facts["per_node"], entry.precision
    box = (f"{per_node} × {entry.gpu} ({gpu_gb:g} GB each, {per_node * gpu_gb:,.0f} GB "
           "per node)")
    reference = None
    if not (entry.gpu == REFERENCE_GPU and per_node == REFERENCE_GPUS) \
            or precision != _guide_precision(spec):
        _, note_ref = _reference_fit(catalog, spec, _guide_precision(spec))
        reference = f"the guide's box ({REFERENCE_GPUS} × 96 GB {REFERENCE_GPU}): {note_ref}"
    room = "the training state" if training else "the KV cache"
    if _add(steps, spec, 1, f"Does the model fit one node of {box} at {precision.upper()} "
                            f"with room for {room}, and does one node carry the load?",
            facts["one_node"], _step1_note(catalog, spec, entry, facts, gpu_gb), reference):
        return steps
    if _steps_2_3(steps, catalog, spec, entry, facts):
        return steps
    _steps_4_5(steps, catalog, spec, entry, facts, floor, policy)
    return steps


def _add(steps: list[DecisionStep], spec: AnyWorkload, step: int, question: str,
         answer: bool, note: str, reference: str | None = None) -> bool:
    """Append one step of the decision path; its answer (True ends the path)."""
    steps.append(DecisionStep(workload=spec.name, step=step, question=question, answer=answer,
                              note=note, reference=reference or None))
    return answer


def _step1_note(catalog: Catalog, spec: AnyWorkload, entry: WorkloadPlan,
                facts: dict[str, Any], gpu_gb: float) -> str:
    """Step 1's note: how much of a node the weights take, the unit's layout and memory in
    use, and the verdict (one node; a unit spanning coupled nodes; replicas on nodes)."""
    training = spec.kind in TRAINING_KINDS
    precision = entry.precision
    node_gb = facts["per_node"] * gpu_gb
    weights = _weights_gb(catalog, catalog.model(spec.model).params_b, precision)
    mem = entry.memory
    unit = "job" if training else "replica"
    shape = (f"TP{entry.tp}×PP{entry.pp}×DP{entry.dp}" if training
             else unit_words(entry) if entry.mode == "disaggregated"
             else f"TP{entry.tp}×PP{entry.pp}" if not entry.ep
             else layout_words(entry.tp, entry.pp, entry.ep, entry.attention_dp))
    gpus_each = unit_gpus(entry) * (entry.dp if training else 1)
    if entry.mode == "disaggregated":
        unit = "unit"
    usage = (f"weights {weights:,.1f} GB = {100 * weights / node_gb:.0f} % of one node at "
             f"{precision.upper()}; one {unit} runs {shape} on {plural(gpus_each, 'GPU')}, "
             f"{mem.total_gb:,.1f} of {mem.capacity_gb:,.0f} GB per "
             f"GPU in use")
    spanned = facts["spanned"]
    if facts["one_node"]:
        verdict = "fits one node, and one node carries the load → one node"
    elif spanned > 1:
        verdict = (f"one {unit} spans {plural(spanned, 'coupled node')}"
                   + ("" if training else f"; {plural(facts['replicas'], 'replica')} on "
                      f"{plural(facts['nodes_used'], 'node')}"))
    else:
        verdict = (f"one {unit} fits one node, but the demand needs "
                   f"{plural(facts['replicas'], 'replica')} on "
                   f"{plural(facts['nodes_used'], 'node')}")
    return f"{usage}; {verdict}"


def _steps_2_3(steps: list[DecisionStep], catalog: Catalog, spec: AnyWorkload,
               entry: WorkloadPlan, facts: dict[str, Any]) -> bool:
    """Step 2 (fits only at INT4?) and step 3 (throughput-bound?); True when one ends the
    path (serving only: training answers both no)."""
    spanned = facts["spanned"]
    q2 = "Does it fit one node only at INT4 (inference), with the same reserve?"
    q3 = "Is the workload throughput-bound rather than model-size-bound?"
    if spec.kind in TRAINING_KINDS:
        _add(steps, spec, 2, q2, False,
             "training: INT4 weights are not usable on the gradient path")
        _add(steps, spec, 3, q3, False,
             "one training job" + (f" spanning {plural(spanned, 'coupled node')}"
                                   if spanned > 1 else ""))
        return False
    precision = entry.precision
    weights = _weights_gb(catalog, catalog.model(spec.model).params_b, precision)
    low_bit = precision in ("int4", "fp4")
    fits_node = spanned <= 1
    int4_note = (f"chosen {precision.upper()}: weights {weights:,.1f} GB; "
                 + ("one replica fits one node at 4-bit" if low_bit and fits_node else
                    "4-bit is not what makes it fit" if fits_node else
                    f"one replica still spans {plural(spanned, 'node')}"))
    if _add(steps, spec, 2, q2, low_bit and facts["one_node"], int4_note):
        return True
    throughput_bound = fits_node and facts["nodes_used"] > 1
    return _add(steps, spec, 3, q3, throughput_bound,
                f"{plural(facts['replicas'], 'independent replica')} on "
                f"{plural(facts['nodes_used'], 'node')} behind a load balancer, no fabric"
                if throughput_bound else
                f"one replica of the model spans {plural(spanned, 'coupled node')}")


def _steps_4_5(steps: list[DecisionStep], catalog: Catalog, spec: AnyWorkload,
               entry: WorkloadPlan, facts: dict[str, Any], floor: float,
               policy: str) -> None:
    """Step 4 (training across coupled nodes?) and step 5 (pretraining 70B+?). Step 4 is
    answered truthfully for pretraining too, which then goes on to step 5."""
    model = catalog.model(spec.model)
    training = spec.kind in TRAINING_KINDS
    eff = entry.predicted.scaling_efficiency
    eff_note = f"predicted scaling efficiency {eff:.2f}" if eff is not None else \
        "no scaling efficiency (one node)"
    if eff is not None and eff < floor:
        eff_note += f" (below the {floor:.0%} floor: re-architect, TP inside a node, PP across)"
    layout_note = _fabric_note(catalog, entry, policy)
    if _add(steps, spec, 4, "Is it training that needs more than one coupled node "
                            "(tensor/pipeline parallel across nodes)?",
            training and facts["spanned"] > 1,
            f"{model.params_b:.3g}B parameters; {eff_note}{layout_note}") \
            and spec.kind != "pretrain":
        return
    pretrain_big = spec.kind == "pretrain" and model.params_b >= 70
    _add(steps, spec, 5, "Is it pretraining 70B+ from scratch?", pretrain_big,
         f"{spec.kind}, {model.params_b:.3g}B parameters"
         + (" → multi-node with NDR InfiniBand or SXM" if pretrain_big else "") + layout_note)

def _guide_precision(spec: AnyWorkload) -> str:
    """The precision the guide's step 1 asks about: FP8 (BF16 for full training, INT4 QLoRA)."""
    if spec.kind == "qlora":
        return "int4"
    if spec.kind in ("full_finetune", "pretrain"):
        return "bf16"
    return "fp8"


def _reference_path(catalog: Catalog, spec: AnyWorkload) -> list[DecisionStep]:
    """Without a plan (infeasible RFQ): step 1 for the guide's reference box only."""
    ok, note = _reference_fit(catalog, spec, _guide_precision(spec))
    return [DecisionStep(workload=spec.name, step=1,
                         question=f"Does the model fit the guide's {REFERENCE_GPUS} × 96 GB box "
                                  f"at {_guide_precision(spec).upper()} with room to spare?",
                         answer=ok, note=note + "; no plan was found for this RFQ")]


def _fabric_note(catalog: Catalog, entry: WorkloadPlan | None, policy: str = "") -> str:
    """Where a coupled job's fabric departs from the guide's InfiniBand, say why; name the
    engineering policy (``policy``: who asked for RDMA only) when one narrowed the choice."""
    if not entry or entry.nodes_spanned <= 1:
        return ""
    fabric = catalog.fabrics.get(entry.fabric)
    note = (f"; chosen: TP{entry.tp}×PP{entry.pp}×DP{entry.dp} over "
            f"{entry.nodes_spanned} nodes on {entry.fabric}")
    per_node = entry.gpus_per_node or 8
    if policy and fabric is not None and fabric.rdma:
        kind = "RoCE (RDMA over Ethernet)" if fabric.family == "ethernet" else "InfiniBand"
        return note + (f" — {kind}: coupled training runs on an RDMA fabric by engineering "
                       f"policy (coupled_training_fabric: rdma, {policy}; the guide's advice "
                       "— NCCL over plain TCP reaches a fraction of line rate, jitters, and "
                       "failures multiply with nodes); set constraints."
                       "coupled_training_fabric: any to let TCP Ethernet compete")
    if fabric is not None and fabric.family == "ethernet":
        if entry.tp <= per_node and entry.dp == 1:
            note += (" — the guide suggests InfiniBand, but here only pipeline stages cross "
                     "nodes (activations, not per-layer all-reduces), so the cheaper Ethernet "
                     "fabric meets the deadline at this scaling efficiency")
        else:
            note += (" — the guide suggests InfiniBand; Ethernet is cheaper and still meets "
                     "the deadline at this scaling efficiency")
    return note


def warnings_for(catalog: Catalog, rfq: Rfq, plan: Plan) -> list[str]:
    """The guide's warnings for a plan."""
    catalog = rfq.catalog(catalog)
    costs = catalog.costs
    floor = costs.scaling_efficiency_floor.value
    weights_max = costs.weights_vram_fraction_max.value
    out: list[str] = []
    for entry in plan.workloads:
        eff = entry.predicted.scaling_efficiency
        if entry.nodes_spanned > 1 and eff is not None and eff < floor:
            out.append(f"{entry.name}: predicted scaling efficiency {eff:.2f} is below the "
                       f"{floor:.0%} floor — wrong profile for multi-node on standard fabric "
                       "(re-architect: TP inside a node, PP or DP across; or buy SXM-class)")
        fraction = entry.memory.weights_fraction
        serving = entry.kind in ("inference", "batch_inference")
        if serving and fraction > weights_max:
            out.append(f"{entry.name}: weights take {fraction:.0%} of VRAM (> "
                       f"{weights_max:.0%}): fits, but leaves little room under real load")
    vendor = catalog.vendors[rfq.constraints.vendor or "open"]
    has_sxm = any(vendor.allows("gpus", g.id) and g.form_factor == "sxm"
                  for g in catalog.gpus.values())
    for spec in rfq.workloads:
        model = catalog.model(spec.model)
        if spec.kind == "pretrain" and model.params_b >= 70 and not has_sxm:
            out.append(f"{spec.name}: pretraining {model.params_b:.3g}B is SXM-class work, and "
                       f"vendor profile {vendor.id!r} builds no SXM/HGX systems")

    out.extend(realism_warnings(catalog, rfq, plan))
    return out


def _rdma_policy(catalog: Catalog, rfq: Rfq) -> str:
    """Who asks coupled training to run on RDMA ('' when nobody does): the RFQ's
    constraints.coupled_training_fabric or the vendor profile's engineering policy."""
    wanted = rfq.constraints.coupled_training_fabric
    if wanted is not None:
        return "set by the RFQ" if wanted == "rdma" else ""
    vendor = catalog.vendors[rfq.constraints.vendor or "open"]
    if vendor.coupled_training_fabric == "rdma":
        return f"vendor profile {vendor.id!r}"
    return ""


def solve_rfq(rfq: Rfq, catalog: Catalog, *, solver: str = DEFAULT_SOLVER,
              time_limit: float | None = None, table: CandidateTable | None = None,
              explain: bool = True, workers: int = 1, binding: bool = False,
              binding_scope: str = "auto", alternative: bool = False,
              stated_limit: float | None = None) -> Plan:
    """The cheapest plan for an RFQ (:func:`solver.optimize.solve.solve_table`; ``workers``
    processes build its candidates) with, unless ``explain`` is False, the guide's decision
    path, warnings and the buy-or-rent comparison (:func:`annotate`). A plan whose time ran
    out is returned as it is. ``binding``: add the binding constraints with the price of
    each one's next relaxation (:mod:`solver.analysis.binding`, one re-solve each, in
    ``workers`` processes for a large table; the commands and the dashboard ask for it);
    ``binding_scope`` all|auto|rfq: whether each workload's own relaxations are priced too
    (:func:`solver.analysis.binding.prices_workloads`; a plan that leaves them out says so).
    ``alternative``: a plan on consumer (GeForce) cards gets ``licensed_alternative``, the
    cheapest plan on datacenter-licensed GPUs (:mod:`solver.analysis.licence`; within what
    ``time_limit`` leaves). ``stated_limit``: the limit in the user's words
    (:func:`solver.optimize.solve.solve_table`)."""
    started = time.perf_counter()
    catalog = rfq.catalog(catalog)
    plan, used = solve_table(rfq, catalog, solver=solver, time_limit=time_limit, table=table,
                             workers=workers, stated_limit=stated_limit)
    plan_seconds = time.perf_counter() - started
    if explain and used is not None:
        plan = annotate(plan, rfq, catalog, used)
    if binding and used is not None and plan.feasible:
        found = binding_report(rfq, catalog, plan, used, solver, workers, binding_scope)
        update: dict = {"binding": [Binding.model_validate(b) for b in found.entries]}
        warnings = list(plan.warnings)
        if found.unpriced:
            one = len(found.unpriced) == 1
            warnings.append(
                f"{UNPRICED_WARNING}{', '.join(found.unpriced)}: relaxed, "
                f"{'its' if one else 'each'} re-solve found no cheaper plan within "
                f"{RELAXATION_LIMIT_S:g} s, so whether {'it binds' if one else 'they bind'} "
                "is not known")
        if not prices_workloads(rfq, binding_scope):
            warnings.append(
                f"binding constraints: each workload's own SLOs, deadline and precision were "
                f"not re-solved for an RFQ of {len(rfq.workloads)} workloads (about two full "
                "solves each); `procure solve --binding all` prices them")
        if warnings != plan.warnings:
            update["warnings"] = warnings
        plan = plan.model_copy(update=update)
    if alternative and plan.feasible:
        left = None if time_limit is None else time_limit - (time.perf_counter() - started)
        licensed = licensed_alternative(rfq, catalog, plan, solver=solver, time_left=left,
                                        plan_seconds=plan_seconds, time_limit=time_limit)
        if licensed is not None:
            plan = plan.model_copy(update={"licensed_alternative": licensed})
    return plan


def served_warnings(plan: Plan, rfq: Rfq) -> list[str]:
    """Under ``objective: max_served``, what the budget gives up (first among the
    warnings: the buyer must know that part of the demand is not served)."""
    short = [row for row in plan.served or [] if row.served_fraction < 1.0]
    if not short:
        return []
    return [f"budget ${rfq.budget_usd or 0.0:,.0f} (objective max_served) does not serve "
            "all demand: " + "; ".join(
                f"{row.workload} {row.served_fraction:.0%} ({row.served})" for row in short)
            + " - the rest is given up"]


def annotate(plan: Plan, rfq: Rfq, catalog: Catalog,
             table: CandidateTable | None = None) -> Plan:
    """The plan with the decision path, the warnings and (given the candidate table) the
    buy-or-rent comparison added (a new plan: plans are frozen)."""
    catalog = rfq.catalog(catalog)
    floor = catalog.costs.scaling_efficiency_floor.value
    entries = {e.name: e for e in plan.workloads}
    path: list[DecisionStep] = []
    total_nodes = plan.cluster.total_nodes
    policy = _rdma_policy(catalog, rfq)
    given_up = {row.workload for row in plan.served or [] if row.served_fraction <= 0.0}
    for spec in rfq.workloads:
        if spec.name in given_up:  # max_served left it out: the warnings say so
            continue
        path.extend(decision_path(catalog, spec, entries.get(spec.name), floor, total_nodes,
                                  policy))
    update: dict[str, Any] = {"decision_path": path}
    update["warnings"] = (served_warnings(plan, rfq) + plan.warnings
                          + warnings_for(catalog, rfq, plan) if plan.feasible else [])
    if table is not None and plan.feasible:
        update["buy_vs_rent"] = buy_vs_rent(table, rfq, plan)
    return plan.model_copy(update=update)


def counterfactuals(rfq: Rfq, catalog: Catalog, plan: Plan, table: CandidateTable,
                    solver: str = DEFAULT_SOLVER) -> list[dict[str, Any]]:
    """The alternatives a buyer asks about, each re-solved: cost difference and why it lost
    (``cluster``: the alternative's cluster as in the plan JSON)."""
    catalog = rfq.catalog(catalog)
    base_tco = plan.cost.tco_usd if plan.cost else None
    limits = Limits.from_rfq(rfq)
    options: list[tuple[str, list[Constraint], Limits]] = []
    single = Limits(**{**limits.__dict__, "max_nodes": 1})
    options.append(("cheapest single-node plan", [], single))
    no_fabric = [Constraint("no_fabric", {fabric_var(f): 1.0 for f in table.fabrics}, "<=", 0)]
    options.append(("cheapest plan without a fabric", no_fabric, limits))
    eight = [k for k, n in table.node_types.items() if n.gpus >= 8]
    if eight:
        options.append(("cheapest plan with 4-GPU boxes instead of 8-GPU boxes",
                        [Constraint("no_8gpu_nodes", {node_var(k): 1.0 for k in eight}, "<=", 0)],
                        limits))
    out = []
    guide = _guide_box(rfq, catalog, plan, solver)
    if guide:
        out.append(guide)
    insurance = _without_n_plus_1(rfq, catalog, plan, table, solver)
    if insurance:
        out.append(insurance)
    renting = _with_renting(rfq, catalog, plan, solver)
    if renting:
        out.append(renting)
    for label, extra, lim in options:
        if not extra and lim.max_nodes == limits.max_nodes:
            continue
        solution = run_mip(table, rfq, solver=solver, limits=lim, extra=extra)
        if solution.status not in ("optimal", "feasible"):
            why = _why_infeasible(label)
            if "single-node" in label and insurance:
                why = "redundancy n+1 needs a node to spare, so at least two nodes"
            out.append({"alternative": label, "feasible": False, "tco_usd": None,
                        "delta_usd": None, "why": why})
            continue
        alt = assemble(catalog, rfq, table, solution)
        tco = _tco(alt)
        delta = tco - base_tco if base_tco is not None else None
        same = abs(delta or 0.0) < 0.5
        out.append({"alternative": label, "feasible": True, "tco_usd": tco, "delta_usd": delta,
                    "cluster": _cluster_json(alt), "why": _already(label) if same else
                    _why_lost(plan, alt)})
    return out


def _tco(plan: Plan) -> float:
    """A feasible plan's TCO."""
    return plan.cost.tco_usd if plan.cost else 0.0


def _cluster_json(plan: Plan) -> dict[str, Any]:
    return plan.cluster.model_dump(mode="json")


def _guide_box(rfq: Rfq, catalog: Catalog, plan: Plan, solver: str
               ) -> dict[str, Any] | None:
    """The guide's default — RTX Pro 6000 boxes — when the optimum chose other GPUs."""
    used = {n.gpu for n in plan.cluster.nodes}
    vendor = catalog.vendors[rfq.constraints.vendor or "open"]
    if not used or used == {REFERENCE_GPU} or REFERENCE_GPU not in catalog.gpus \
            or not vendor.allows("gpus", REFERENCE_GPU):
        return None
    label = f"the guide's box: {REFERENCE_GPU} only"
    pinned = rfq.model_copy(update={"constraints": rfq.constraints.model_copy(
        update={"gpus": [REFERENCE_GPU]})})
    table = build_candidates(catalog, pinned)
    solution = run_mip(table, pinned, solver=solver)
    if solution.status not in ("optimal", "feasible"):
        return {"alternative": label, "feasible": False, "tco_usd": None, "delta_usd": None,
                "why": f"no plan on {REFERENCE_GPU} alone meets the RFQ"}
    alt = assemble(catalog, pinned, table, solution)
    delta = _tco(alt) - _tco(plan)
    why = (f"departs from the guide's rule of thumb: the guide's box {money_delta(delta)} than "
           f"{', '.join(sorted(used))}, which meets every target, at the catalog's prices; "
           + _why_lost(plan, alt)).replace("costs the same than", "costs the same as")
    consumer = sorted(g for g in used if g in catalog.gpus and not catalog.gpus[g].datacenter_use)
    if consumer:
        why += (f"; but {', '.join(consumer)} is a consumer card (not licensed for datacenter "
                "use - see the warnings): the guide's box is the datacenter-grade choice")
    return {"alternative": label, "feasible": True, "tco_usd": _tco(alt),
            "delta_usd": delta, "cluster": _cluster_json(alt), "why": why}


def _without_n_plus_1(rfq: Rfq, catalog: Catalog, plan: Plan,
                      table: CandidateTable, solver: str) -> dict[str, Any] | None:
    """What ``redundancy: n+1`` costs: the same RFQ re-solved with no spare node (None when
    no workload asks for n+1). The candidates do not depend on redundancy, so the table is
    reused."""
    names = [w.name for w in rfq.workloads if needs_n_plus_1(w)]
    if not names:
        return None
    label = "the same RFQ without n+1 redundancy"
    plain = rfq.model_copy(update={"workloads": [
        w.model_copy(update={"redundancy": "none"}) if w.name in names else w
        for w in rfq.workloads]})
    solution = run_mip(table, plain, solver=solver)
    if solution.status not in ("optimal", "feasible"):
        return {"alternative": label, "feasible": False, "tco_usd": None, "delta_usd": None,
                "why": "no plan without n+1 either"}
    alt = assemble(catalog, plain, table, solution)
    delta = _tco(alt) - _tco(plan)
    a, b = alt.cluster.total_nodes, plan.cluster.total_nodes
    why = (f"n+1 for {', '.join(names)} costs ${-delta:,.0f} over the horizon"
           + (f" ({plural(b, 'node')} instead of {a})" if a != b else "")
           + ": the insurance that any one node can fail with the demand still met")
    return {"alternative": label, "feasible": True, "tco_usd": _tco(alt),
            "delta_usd": delta, "cluster": _cluster_json(alt), "why": why}


def _with_renting(rfq: Rfq, catalog: Catalog, plan: Plan, solver: str
                  ) -> dict[str, Any] | None:
    """Buy or rent, asked even when the RFQ forbids renting (the default): the same RFQ
    re-solved with ``rental: allow`` against the catalog's rental offers (None when renting
    is already allowed, the catalog has no offers, or no offer can run any workload)."""
    if rental_mode(rfq) != "forbid" or not catalog.rental:
        return None
    if plan.cost is None:
        return None
    allowed = rfq.model_copy(update={"rental": "allow"})
    table = build_candidates(catalog, allowed)
    if not any(c.rental is not None for cands in table.candidates.values() for c in cands):
        return None
    label = "the same RFQ with renting allowed (rental: allow)"
    solution = run_mip(table, allowed, solver=solver)
    if solution.status not in ("optimal", "feasible"):
        return None
    alt = assemble(catalog, allowed, table, solution)
    delta = _tco(alt) - _tco(plan)
    rented = [w.name for w in alt.workloads if w.sourcing in ("rented", "hybrid")]
    if not rented or delta > -0.5:
        why = "owning is cheaper than every rental offer in the catalog for this demand"
    else:
        why = (f"renting {', '.join(rented)} would save ${-delta:,.0f} over the horizon "
               f"(rental ${alt.cost.rental_usd if alt.cost else 0.0:,.0f}); set rental: allow "
               "to plan it (docs/rental.md)")
    return {"alternative": label, "feasible": True, "tco_usd": _tco(alt),
            "delta_usd": delta, "cluster": _cluster_json(alt), "why": why}


def _already(label: str) -> str:
    """Why an alternative that costs the same as the plan is no alternative at all."""
    if "single-node" in label:
        return "the chosen plan is already a single node"
    if "without a fabric" in label:
        return "the chosen plan already needs no fabric"
    if "4-GPU" in label:
        return "the chosen plan already uses no 8-GPU boxes"
    return "same cost as the chosen plan"


def _why_infeasible(label: str) -> str:
    if "single-node" in label:
        return "no single node meets every workload's memory and targets"
    if "without a fabric" in label:
        return "some job needs more than one node, which needs a fabric"
    return "4-GPU boxes cannot hold a layout the workloads need"


def _why_lost(plan: Plan, alt: Plan) -> str:
    base = plan.cost.model_dump() if plan.cost else {}
    other = alt.cost.model_dump() if alt.cost else {}
    diffs = sorted(((other[k] - base[k], k) for k in COST_TERMS), reverse=True)
    top = [f"{COST_LABELS[k].words} ${d:,.0f} more" for d, k in diffs[:2] if d > 0.5]
    a, b = alt.cluster.total_nodes, plan.cluster.total_nodes
    parts = [f"{plural(a, 'node')} instead of {b}"] if a != b else []
    parts.append(", ".join(top) if top else "no cheaper")
    return "; ".join(parts)
