"""Explain a plan along the guide's decision path (domain.md), with the numbers behind it.

:func:`decision_path` walks steps 1–5 of the guide for one workload ("first yes ends it");
:func:`annotate` adds the path and the warnings to a plan; :func:`counterfactuals` re-solves
the RFQ under the alternatives a buyer asks about (one node only, no fabric, 4-GPU boxes
instead of 8-GPU boxes) and says what each would cost and why it lost.
"""

from __future__ import annotations

from typing import Any

from solver.candidates import CandidateTable
from solver.catalog import Catalog
from solver.layout import TRAINING_KINDS, Layout, Workload

REFERENCE_GPU = "rtx-pro-6000"  # the guide's 8 × 96 GB box
REFERENCE_GPUS = 8


def _reference_fit(catalog: Catalog, spec: Any, precision: str) -> tuple[bool, str]:
    """Does the workload fit one 8 × 96 GB node at this precision, with the guide's reserve?"""
    from solver.candidates import physics_workload
    from solver.performance import estimate

    model = catalog.model(spec.model)
    gpu = catalog.gpus.get(REFERENCE_GPU)
    if gpu is None:
        return False, f"reference GPU {REFERENCE_GPU} not in catalog"
    workload = physics_workload(spec)
    if spec.kind == "inference" and spec.concurrency:
        workload = Workload(kind="inference", input_tokens=spec.input_tokens,
                            output_tokens=spec.output_tokens, concurrency=spec.concurrency,
                            ttft_ms=spec.ttft_ms, tpot_ms=spec.tpot_ms)
    layout = Layout(model=model.id, gpu=gpu.id, precision=precision, tp=REFERENCE_GPUS,
                    gpus_per_node=REFERENCE_GPUS)
    if spec.kind in TRAINING_KINDS:
        layout = Layout(model=model.id, gpu=gpu.id, precision=precision, tp=1,
                        dp=REFERENCE_GPUS, gpus_per_node=REFERENCE_GPUS)
    est = estimate(catalog, layout, workload)
    node_gb = gpu.memory_gb * REFERENCE_GPUS
    weights_gb = est.memory.weights_gb * REFERENCE_GPUS if spec.kind not in TRAINING_KINDS \
        else _weights_gb(catalog, model.params_b, precision)
    total_gb = est.memory.total_gb * REFERENCE_GPUS
    ok = est.fits and (est.comfortable or spec.kind in TRAINING_KINDS)
    note = (f"weights {weights_gb:,.1f} GB = {100 * weights_gb / node_gb:.0f} % of "
            f"{node_gb:,.0f} GB at {precision.upper()}; total with "
            f"{'KV cache and reserve' if spec.kind not in TRAINING_KINDS else 'training state'}"
            f" {total_gb:,.0f} GB ({'fits comfortably' if ok else 'does not fit with reserve'})")
    return ok, note


def _weights_gb(catalog: Catalog, params_b: float, precision: str) -> float:
    from solver.memory import weight_bytes_per_param
    from solver.perf_factors import factors

    return params_b * weight_bytes_per_param(factors(catalog), precision)


def decision_path(catalog: Catalog, spec: Any, entry: dict[str, Any] | None,
                  floor: float) -> list[dict[str, Any]]:
    """Steps 1–5 of the guide for one workload; the first "yes" ends it."""
    steps: list[dict[str, Any]] = []
    training = spec.kind in TRAINING_KINDS
    model = catalog.model(spec.model)

    def add(step: int, question: str, answer: bool, note: str) -> bool:
        steps.append({"workload": spec.name, "step": step, "question": question,
                      "answer": answer, "note": note})
        return answer

    fp8_precision = "fp8" if not training or spec.kind != "qlora" else "int4"
    ok, note = _reference_fit(catalog, spec, fp8_precision)
    if spec.kind == "full_finetune" or spec.kind == "pretrain":
        ok8, note8 = _reference_fit(catalog, spec, "bf16")
        ok, note = ok8, note8
    spanned = (entry or {}).get("nodes_spanned", 1)
    replicas = (entry or {}).get("dp", 1)
    per_node = (entry or {}).get("gpus_per_node") or 8
    nodes_needed = max(spanned, -(-((entry or {}).get("gpus") or 1) // per_node))
    one_node = nodes_needed <= 1
    crowd = (f"; fits, but the demand needs {replicas} replicas on {nodes_needed} nodes, "
             "so one node is not enough" if ok and not training and not one_node else "")
    if add(1, "Does the model fit 8 × 96 GB at FP8 with 30–40 % VRAM reserve for KV?",
           ok and (training or one_node), note + crowd):
        return steps
    if not training:
        ok4, note4 = _reference_fit(catalog, spec, "int4")
        if add(2, "Does it fit at INT4 with the same reserve, and is the work inference?",
               ok4 and one_node and not ok, note4):
            return steps
        throughput_bound = (ok or ok4) and not one_node and spanned <= 1
        if add(3, "Is the workload throughput-bound rather than model-size-bound?",
               throughput_bound,
               f"{replicas} independent replicas on {nodes_needed} nodes behind a load "
               "balancer, no fabric" if throughput_bound
               else "the model itself needs more than one node"):
            return steps
    else:
        add(2, "Does it fit at INT4 with the same reserve, and is the work inference?", False,
            "training: INT4 weights are not usable on the gradient path")
        add(3, "Is the workload throughput-bound rather than model-size-bound?", False,
            "one training job")
    eff = ((entry or {}).get("predicted") or {}).get("scaling_efficiency")
    eff_note = f"predicted scaling efficiency {eff:.2f}" if eff is not None else "n/a"
    if eff is not None and eff < floor:
        eff_note += f" (below the {floor:.0%} floor: re-architect, TP inside a node, PP across)"
    big = model.params_b >= 70
    layout_note = _fabric_note(catalog, entry)
    if add(4, "Is it tensor-parallel training of a model that does not fit one node?",
           training and not ok and spec.kind != "pretrain",
           f"{model.params_b:g}B parameters; {eff_note}{layout_note}"):
        return steps
    add(5, "Is it pretraining 70B+ from scratch?", spec.kind == "pretrain" and big,
        f"{spec.kind}, {model.params_b:g}B parameters" + (
            " → multi-node with NDR InfiniBand or SXM" if spec.kind == "pretrain" and big
            else "") + layout_note)
    return steps


def _fabric_note(catalog: Catalog, entry: dict[str, Any] | None) -> str:
    """Where a coupled job's fabric departs from the guide's InfiniBand, say why."""
    if not entry or entry.get("nodes_spanned", 1) <= 1:
        return ""
    fabric = catalog.fabrics.get(entry.get("fabric", "none"))
    note = (f"; chosen: TP{entry['tp']}×PP{entry['pp']}×DP{entry['dp']} over "
            f"{entry['nodes_spanned']} nodes on {entry['fabric']}")
    per_node = entry.get("gpus_per_node") or 8
    if fabric is not None and fabric.family == "ethernet":
        if entry["tp"] <= per_node and entry["dp"] == 1:
            note += (" — the guide suggests InfiniBand, but here only pipeline stages cross "
                     "nodes (activations, not per-layer all-reduces), so the cheaper Ethernet "
                     "fabric meets the deadline at this scaling efficiency")
        else:
            note += (" — the guide suggests InfiniBand; Ethernet is cheaper and still meets "
                     "the deadline at this scaling efficiency")
    return note


def warnings_for(catalog: Catalog, rfq: Any, plan: dict[str, Any]) -> list[str]:
    """The guide's warnings for a plan."""
    costs = catalog.costs
    floor = costs.scaling_efficiency_floor.value
    weights_max = costs.weights_vram_fraction_max.value
    out: list[str] = []
    for entry in plan.get("workloads", []):
        eff = (entry.get("predicted") or {}).get("scaling_efficiency")
        if entry.get("nodes_spanned", 1) > 1 and eff is not None and eff < floor:
            out.append(f"{entry['name']}: predicted scaling efficiency {eff:.2f} is below the "
                       f"{floor:.0%} floor — wrong profile for multi-node on standard fabric "
                       "(re-architect: TP inside a node, PP or DP across; or buy SXM-class)")
        fraction = (entry.get("memory") or {}).get("weights_fraction")
        serving = entry.get("kind") in ("inference", "batch_inference")
        if serving and fraction is not None and fraction > weights_max:
            out.append(f"{entry['name']}: weights take {fraction:.0%} of VRAM (> "
                       f"{weights_max:.0%}): fits, but leaves little room under real load")
    vendor = catalog.vendors[rfq.constraints.vendor or "open"]
    has_sxm = any(vendor.allows("gpus", g.id) and g.form_factor == "sxm"
                  for g in catalog.gpus.values())
    for spec in rfq.workloads:
        model = catalog.model(spec.model)
        if spec.kind == "pretrain" and model.params_b >= 70 and not has_sxm:
            out.append(f"{spec.name}: pretraining {model.params_b:g}B is SXM-class work, and "
                       f"vendor profile {vendor.id!r} builds no SXM/HGX systems")
    from solver.realism import realism_warnings

    out.extend(realism_warnings(catalog, rfq, plan))
    return out


def annotate(plan: dict[str, Any], rfq: Any, catalog: Catalog,
             table: CandidateTable | None = None) -> dict[str, Any]:
    """Add the decision path and warnings to a plan (in place; also returned)."""
    floor = catalog.costs.scaling_efficiency_floor.value
    entries = {e["name"]: e for e in plan.get("workloads", [])}
    path: list[dict[str, Any]] = []
    for spec in rfq.workloads:
        path.extend(decision_path(catalog, spec, entries.get(spec.name), floor))
    plan["decision_path"] = path
    plan["warnings"] = warnings_for(catalog, rfq, plan) if plan.get("status") in (
        "optimal", "feasible") else []
    return plan


def counterfactuals(rfq: Any, catalog: Catalog, plan: dict[str, Any], table: CandidateTable,
                    solver: str = "cbc") -> list[dict[str, Any]]:
    """The alternatives a buyer asks about, each re-solved: cost difference and why it lost."""
    from solver.backends import Constraint
    from solver.mip import Limits, fabric_var, node_var
    from solver.plan import assemble
    from solver.solve import run_mip

    base_tco = (plan.get("cost") or {}).get("tco_usd")
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
    for label, extra, lim in options:
        if not extra and lim.max_nodes == limits.max_nodes:
            continue
        solution = run_mip(table, rfq, solver=solver, limits=lim, extra=extra)
        if solution.status not in ("optimal", "feasible"):
            out.append({"alternative": label, "feasible": False, "tco_usd": None,
                        "delta_usd": None, "why": _why_infeasible(label)})
            continue
        alt = assemble(catalog, rfq, table, solution)
        tco = alt["cost"]["tco_usd"]
        delta = tco - base_tco if base_tco is not None else None
        same = abs(delta or 0.0) < 0.5
        out.append({"alternative": label, "feasible": True, "tco_usd": tco, "delta_usd": delta,
                    "cluster": alt["cluster"], "why": "this is the chosen plan" if same else
                    _why_lost(plan, alt)})
    return out


def _guide_box(rfq: Any, catalog: Catalog, plan: dict[str, Any], solver: str
               ) -> dict[str, Any] | None:
    """The guide's default — RTX Pro 6000 boxes — when the optimum chose other GPUs."""
    from solver.candidates import build_candidates
    from solver.plan import assemble
    from solver.solve import run_mip

    used = {n["gpu"] for n in plan["cluster"]["nodes"]}
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
    delta = alt["cost"]["tco_usd"] - plan["cost"]["tco_usd"]
    why = (f"departs from the guide's rule of thumb: {', '.join(sorted(used))} meets every "
           f"target for ${delta:,.0f} less at today's catalog prices; " + _why_lost(plan, alt))
    consumer = sorted(g for g in used if g in catalog.gpus and not catalog.gpus[g].datacenter_use)
    if consumer:
        why += (f"; but {', '.join(consumer)} is a consumer card (not licensed for datacenter "
                "use - see the warnings): the guide's box is the datacenter-grade choice")
    return {"alternative": label, "feasible": True, "tco_usd": alt["cost"]["tco_usd"],
            "delta_usd": delta, "cluster": alt["cluster"], "why": why}


def _why_infeasible(label: str) -> str:
    if "single-node" in label:
        return "no single node meets every workload's memory and targets"
    if "without a fabric" in label:
        return "some job needs more than one node, which needs a fabric"
    return "4-GPU boxes cannot hold a layout the workloads need"


def _why_lost(plan: dict[str, Any], alt: dict[str, Any]) -> str:
    base, other = plan["cost"], alt["cost"]
    diffs = sorted(((other[k] - base[k], k) for k in base if k not in ("capex_usd", "tco_usd")),
                   reverse=True)
    top = [f"{k.removesuffix('_usd').replace('_', ' ')} +${d:,.0f}" for d, k in diffs[:2]
           if d > 0.5]
    a, b = alt["cluster"]["total_nodes"], plan["cluster"]["total_nodes"]
    parts = [f"{a} nodes vs {b}"] if a != b else []
    parts.append(", ".join(top) if top else "no cheaper")
    return "; ".join(parts)
