"""Disaggregated serving candidates (issue 27): one *unit* = a prefill pool of ``P`` GPUs
(replicas of TP ``T``) + a decode pool of ``D`` GPUs (``k`` replicas of an in-node decode
layout: TP, EP, attention DP), both of one node type, priced and bought like an aggregated
replica. The unit's capacity is :func:`solver.physics.disagg.capacity` (its SLOs at the
workload's percentile, the calibration margin, the decode replicas' slots, both pools'
memory), so the MIP needs nothing new: a unit is a candidate with GPUs, nodes, a fabric and
a capacity like any other, and it chooses aggregated or disaggregated and the pool sizes by
choosing candidates.

The grid is kept small (docs/expert-parallel.md):

* unit sizes: the in-node sizes of :func:`~solver.optimize.records.in_node_sizes` (so units
  pack exactly, as replicas do) and 2 or 4 whole nodes on each fabric the RFQ allows (the
  prompt's KV then crosses the fabric);
* decode replicas: the :data:`DECODE_LAYOUTS` best-ranked layouts of each in-node size that
  fit comfortably (the aggregated ranking, memoised: the same layouts the aggregated
  candidates were built from);
* prefill replicas: the smallest TP whose replica holds the model and one prompt, and twice
  it (a faster prompt: lower TTFT) inside a node;
* the split: decode replicas ``k`` whose prefill pool ``S - k r`` is nearest to each share of
  :data:`PREFILL_SHARES` of the unit (a multiple of ``T``);

and of one unit size only the capacity front is kept (as for aggregated replicas: a unit of
a given size costs the same whatever its split). Different GPU types per pool are not
offered: both pools run on the node type's GPU.
"""

from __future__ import annotations

from dataclasses import replace

from solver.catalog.data import Catalog, Fabric
from solver.optimize.costs import coupled_node_network_usd
from solver.optimize.records import (
    POWERS_OF_TWO,
    Candidate,
    NodeType,
    in_node_sizes,
    physics_workload,
    usable_serving,
)
from solver.physics.disagg import unit_estimate
from solver.physics.layout import Estimate, Layout, Workload, expert_tag
from solver.physics.memory import memory_plan
from solver.physics.performance import ranked_layouts
from solver.rfq.schema import ServingWorkload

DECODE_LAYOUTS = 3
"""Best-ranked decode layouts tried per in-node replica size (2 for units spanning nodes)."""
PREFILL_SHARES = (0.125, 0.25, 0.375, 0.5)
"""Shares of a unit's GPUs the prefill pool is tried at."""
SPAN_NODES = (2, 4)
"""Whole nodes a unit spanning a fabric is tried at."""
MAX_PREFILL_TP = 8


def disaggregated_candidates(catalog: Catalog, spec: ServingWorkload, node: NodeType,
                             fabrics: list[Fabric], precision: str,
                             rejected: list[str]) -> list[Candidate]:
    """The disaggregated units of one online serving workload on one node type and
    precision (module doc); none for batch inference or ``disaggregated: false``."""
    if spec.kind != "inference" or not getattr(spec, "disaggregated", True):
        return []
    workload = physics_workload(spec)
    model = catalog.model(spec.model).id
    decoders: list[Estimate] = []
    for size in in_node_sizes(node.gpus):
        if size >= node.gpus:
            continue  # a decode pool leaves room for a prefill pool in the node
        ranked = ranked_layouts(catalog, model, node.gpu, size, workload,
                                precision=precision, gpus_per_node=node.gpus,
                                fabric="none", dp=1, server=node.server)
        decoders += [e for e in ranked if e.fits and e.comfortable][:DECODE_LAYOUTS]
    if not decoders:
        return []
    tps = _prefill_tps(catalog, model, node, precision, workload)
    if not tps:
        rejected.append(f"{node.key} {precision} disaggregated: no prefill replica of up to "
                        f"{min(node.gpus, MAX_PREFILL_TP)} GPUs holds the model and a prompt")
        return []
    spans = [(s, 1, "none", 0.0) for s in in_node_sizes(node.gpus) if s >= 2]
    spans += [(n * node.gpus, n, f.id, n * coupled_node_network_usd(
        catalog.servers[node.server], f)) for f in fabrics for n in SPAN_NODES]
    out: list[Candidate] = []
    for size, nodes, fabric, network in spans:
        found: list[tuple[Estimate, Layout]] = []
        spanning = nodes > 1
        for tp in (tps[:1] if spanning else tps):
            for dec in _best_per_size(decoders, 2) if spanning else decoders:
                for k in _splits(size, dec.layout.replica_gpus, tp):
                    prefill = Layout(model=model, gpu=node.gpu, precision=precision, tp=tp,
                                     dp=(size - k * dec.layout.replica_gpus) // tp,
                                     gpus_per_node=node.gpus, fabric=fabric,
                                     server=node.server)
                    est, _ = unit_estimate(catalog, prefill, replace(dec.layout, dp=k),
                                           workload)
                    if usable_serving(est):
                        found.append((est, prefill))
        for est, prefill in _front(found):
            out.append(_candidate(spec, node, est, prefill, size, nodes, fabric, network))
    return out


def _best_per_size(decoders: list[Estimate], most: int) -> list[Estimate]:
    """The first ``most`` decode layouts of each replica size (their ranked order)."""
    seen: dict[int, int] = {}
    kept = []
    for est in decoders:
        size = est.layout.replica_gpus
        if seen.get(size, 0) < most:
            kept.append(est)
            seen[size] = seen.get(size, 0) + 1
    return kept


def _prefill_tps(catalog: Catalog, model: str, node: NodeType, precision: str,
                 workload: Workload) -> list[int]:
    """The smallest prefill TP whose replica holds the model and one prompt, and twice it
    (within a node and :data:`MAX_PREFILL_TP`)."""
    for tp in (t for t in POWERS_OF_TWO if t <= min(node.gpus, MAX_PREFILL_TP)):
        layout = Layout(model=model, gpu=node.gpu, precision=precision, tp=tp,
                        gpus_per_node=node.gpus)
        plan = memory_plan(catalog, layout, replace(workload, concurrency=1))
        if plan.fits and plan.comfortable:
            return [t for t in (tp, 2 * tp) if t <= min(node.gpus, MAX_PREFILL_TP)]
    return []


def _splits(size: int, replica: int, tp: int) -> list[int]:
    """Decode replicas ``k`` of ``replica`` GPUs in a unit of ``size`` GPUs whose prefill
    pool (the rest, a multiple of ``tp``) is nearest to each of :data:`PREFILL_SHARES`."""
    valid = [k for k in range(1, (size - tp) // replica + 1)
             if (size - k * replica) >= tp and (size - k * replica) % tp == 0]
    chosen: list[int] = []
    for share in PREFILL_SHARES:
        target = share * size
        if valid:
            best = min(valid, key=lambda k: (abs(size - k * replica - target), k))
            if best not in chosen:
                chosen.append(best)
    return chosen


def _front(found: list[tuple[Estimate, Layout]]) -> list[tuple[Estimate, Layout]]:
    """The units of one size whose (concurrency, requests/s) no other one matches or beats
    in both (ties: the first)."""
    def cap(item: tuple[Estimate, Layout]) -> tuple[float, float]:
        p = item[0].predicted
        return float(p.max_concurrency or 0), float(p.qps_capacity or 0.0)

    keep = []
    for i, item in enumerate(found):
        conc, qps = cap(item)
        if not any(c >= conc and q >= qps and ((c, q) != (conc, qps) or j < i)
                   for j, (c, q) in enumerate(map(cap, found)) if j != i):
            keep.append(item)
    return keep


def _candidate(spec: ServingWorkload, node: NodeType, est: Estimate, prefill: Layout,
               size: int, nodes: int, fabric: str, network: float) -> Candidate:
    decode = est.layout
    return Candidate(
        workload=spec.name, kind=spec.kind, node_type=node.key, layout=decode,
        estimate=est, gpus=size, nodes_spanned=nodes, fabric=fabric, network_usd=network,
        concurrency_capacity=float(est.predicted.max_concurrency or 0),
        qps_capacity=float(est.predicted.qps_capacity or 0.0), prefill=prefill,
        name=f"{spec.name}|{node.key}|{decode.precision}|disagg-p{prefill.gpus}tp{prefill.tp}"
             f"-d{decode.gpus}tp{decode.tp}pp{decode.pp}{expert_tag(decode)}|{nodes}n|{fabric}")
