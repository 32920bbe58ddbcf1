"""The estimate stage: turn catalog + RFQ into a plain table of candidate layouts.

For every workload this enumerates node types (server × GPU SKU × GPUs populated), precisions,
TP × PP splits, GPU counts and fabrics; asks the physics (:mod:`solver.physics.performance`) what each
would do; drops what does not fit or cannot meet its targets; and keeps for each what the
MIP needs: GPUs used, nodes spanned, fabric, capacity and per-unit network cost. The MIP
(:mod:`solver.optimize.mip`) reads only this table.

A *unit* of a serving workload is one replica (the MIP chooses how many); a unit of a
training workload is the whole job (the MIP chooses exactly one).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from functools import partial

from solver.catalog.data import Catalog, Fabric, Gpu, Server, content_key
from solver.catalog.perf_factors import factors
from solver.common.memo import Memo
from solver.common.progress import report
from solver.optimize import candidate_cache
from solver.optimize.candidate_workers import map_workloads
from solver.optimize.costs import CostParams, coupled_node_network_usd, node_cost
from solver.optimize.disaggregated import disaggregated_candidates
from solver.optimize.linear import TimeLimitReached, deadline_passed
from solver.optimize.records import (
    POWERS_OF_TWO,
    Candidate,
    CandidateTable,
    NodeType,
    batch_request_too_slow,
    in_node_sizes,
    physics_workload,
    precisions_for,
    request_seconds,
    usable_serving,
)
from solver.optimize.rental import owned_allowed, rented_candidates
from solver.optimize.storage import training_storage
from solver.physics.goodput import hours_at_goodput, job_goodput
from solver.physics.layout import Estimate, expert_tag
from solver.physics.memory import microbatches, weight_bytes_per_param
from solver.physics.performance import (
    clear_caches as clear_physics_caches,
)
from solver.physics.performance import (
    estimate,
    ranked_layouts,
    training_rate_bound,
    virtual_stages,
)
from solver.rfq.schema import AnyWorkload, Rfq, ServingWorkload, TrainingWorkload

MAX_SPANNED_NODES = 64
KNOB_MARGIN = 0.10
"""A job whose best split misses its deadline by at most this share has the knobs of the
splits within this share of its throughput searched too (knobs reorder splits by a few %)."""
SPAN_WEIGHTS_SHARE = 0.25  # weights above this share of a node's memory: also price spanning


def allowed_entries(catalog: Catalog, rfq: Rfq) -> tuple[list[Gpu], list[Server], list[Fabric]]:
    """GPUs, servers and fabrics that the RFQ's vendor profile and constraints allow."""
    vendor = catalog.vendors[rfq.constraints.vendor or "open"]
    gpus = [g for g in catalog.gpus.values() if vendor.allows("gpus", g.id)
            and (rfq.constraints.gpus is None or g.id in rfq.constraints.gpus)
            and (g.datacenter_use or not rfq.constraints.datacenter_grade_only)]
    servers = [s for s in catalog.servers.values() if vendor.allows("servers", s.id)]
    fabrics = [f for f in catalog.fabrics.values() if f.id != "none"
               and vendor.allows("fabrics", f.id)
               and (rfq.constraints.fabrics is None or f.id in rfq.constraints.fabrics)]
    return gpus, servers, fabrics


def node_types(catalog: Catalog, rfq: Rfq, params: CostParams) -> dict[str, NodeType]:
    """Every (server, GPU, GPUs populated) that can be bought, minus dominated ones.

    Populated counts are powers of two up to the server's slots; SXM/OAM baseboards and
    rack-scale superchip systems (NVL72: 72 GPUs) come fully populated. Replica and job sizes
    inside a node are :func:`in_node_sizes` (each divides every larger one and the node), so
    they pack exactly, see :mod:`solver.optimize.mip`. A server is only offered
    GPUs it physically takes (form factor, its GPU list, card width in slots, liquid cooling:
    :meth:`Server.takes`) at counts whose power at TDP fits its ``max_power_w``. A node type
    is dropped when another server holds the same GPUs for no more money, power and rack
    space, and the same fabric NICs per node (more NICs: more bandwidth across nodes, but
    more NIC cost).
    """
    gpus, servers, _ = allowed_entries(catalog, rfq)
    servers = [s for s in servers if cooling_allows(rfq, s)]
    rack_kw = rfq.facility.rack_limit_kw()
    types: dict[str, NodeType] = {}
    for gpu in gpus:
        options: list[tuple[Server, int]] = []
        for server in servers:
            if not server.takes(gpu):
                continue
            counts = [n for n in POWERS_OF_TWO if n <= server.gpu_slots]
            if gpu.form_factor in ("sxm", "oam", "superchip"):
                counts = [server.gpu_slots]  # baseboards and racks come fully populated
            options.extend((server, n) for n in counts if server.power_fits(gpu, n))
        for server, count in options:
            dominated = any(
                other is not server and n == count
                and other.price_usd <= server.price_usd
                and other.base_power_w <= server.base_power_w
                and other.rack_units <= server.rack_units
                and other.fabric_nics_per_node == server.fabric_nics_per_node
                and (other.price_usd, other.base_power_w, other.rack_units)
                != (server.price_usd, server.base_power_w, server.rack_units)
                for other, n in options)
            if not dominated:
                node = NodeType(server.id, gpu.id, count, node_cost(params, server, gpu, count),
                                fabric_nics=server.fabric_nics_per_node, stack=gpu.stack,
                                hosts=server.hosts)
                if rack_kw is None or node.cost.power_kw <= rack_kw + 1e-9:
                    types[node.key] = node  # a node never spans two racks
    return types


def cooling_allows(rfq: Rfq, server: Server) -> bool:
    """Whether the site's cooling (RFQ ``facility.cooling``) takes this chassis: ``air``
    only air-cooled ones, ``liquid`` only direct-liquid-cooled ones, ``any`` both."""
    cooling = rfq.facility.cooling
    return cooling == "any" or (cooling == "liquid") == server.liquid_cooled


def _network(node: NodeType, catalog: Catalog, fabric: Fabric, nodes: int) -> float:
    return nodes * coupled_node_network_usd(catalog.servers[node.server], fabric)


def _serving_candidates(catalog: Catalog, spec: ServingWorkload, node: NodeType, fabrics: list[Fabric],
                        precision: str, rejected: list[str],
                        deadline: float | None = None) -> list[Candidate]:
    workload = physics_workload(spec)
    model_id = spec.model
    name = spec.name
    out: list[Candidate] = []
    fitted_in_node = False
    for size in in_node_sizes(node.gpus):
        check_deadline(deadline, name)  # each size's splits: the time limit holds
        ranked = ranked_layouts(catalog, model_id, node.gpu, size, workload,
                                precision=precision, gpus_per_node=node.gpus, fabric="none",
                                dp=1, server=node.server)
        usable = [e for e in ranked if usable_serving(e)]
        if not usable:
            rejected.append(f"{node.key} {precision} x{size}: "
                            f"{ranked[0].reason or 'no capacity'}")
            continue
        fitted_in_node = True
        fast = [e for e in usable if not batch_request_too_slow(spec, e)]
        if not fast:
            rejected.append(f"{node.key} {precision} x{size}: "
                            f"{batch_request_too_slow(spec, usable[0])}")
            continue
        out.extend(_serving_candidate(name, spec, node, est, size, 1, "none", 0.0)
                   for est in capacity_front(fast))
    gpu = catalog.gpus[node.gpu]
    weights_share = (catalog.model(model_id).params_b
                     * weight_bytes_per_param(factors(catalog), precision)
                     / (gpu.memory_gb * node.gpus))
    if fitted_in_node and weights_share < SPAN_WEIGHTS_SHARE:
        return out
    # replicas spanning 2, 4, ... whole nodes: needed when the model does not fit one node,
    # and worth pricing when the weights take a large share of it (KV room for concurrency)
    for fabric in fabrics:
        found = 0
        for nodes in (n for n in POWERS_OF_TWO if 2 <= n <= 16):
            check_deadline(deadline, name)
            size = nodes * node.gpus
            ranked = ranked_layouts(catalog, model_id, node.gpu, size, workload,
                                    precision=precision, gpus_per_node=node.gpus,
                                    fabric=fabric.id, dp=1, server=node.server)
            usable = [e for e in ranked if usable_serving(e)]
            if not usable:
                continue
            fast = [e for e in usable if not batch_request_too_slow(spec, e)]
            if not fast:
                rejected.append(f"{node.key} {precision} x{size} over {fabric.id}: "
                                f"{batch_request_too_slow(spec, usable[0])}")
                continue
            network = _network(node, catalog, fabric, nodes)
            out.extend(_serving_candidate(name, spec, node, est, size, nodes, fabric.id, network)
                       for est in capacity_front(fast))
            found += 1
            if found == 2:
                break
    return out


def capacity_front(estimates: list[Estimate]) -> list[Estimate]:
    """The splits of one replica size whose (concurrent requests, requests/s) capacity no
    other split of that size matches or beats in both (ties: the better-ranked split).
    A replica of a given size costs the same whichever split it runs, so only this front
    can be in an optimum: a TP split may serve more requests per second while a pipeline
    split of the same GPUs holds more concurrent requests (PCIe GPUs without NVLink)."""
    def capacity(est: Estimate) -> tuple[float, float]:
        return (float(est.predicted.max_concurrency or 0), float(est.predicted.qps_capacity or 0.0))

    front: list[Estimate] = []
    for i, est in enumerate(estimates):
        conc, qps = capacity(est)
        if not any((c >= conc and q >= qps) and ((c, q) != (conc, qps) or j < i)
                   for j, (c, q) in enumerate(map(capacity, estimates)) if j != i):
            front.append(est)
    return front


def _serving_candidate(name: str, spec: ServingWorkload, node: NodeType, est: Estimate, size: int,
                       nodes: int, fabric: str, network_usd: float) -> Candidate:
    return Candidate(
        workload=name, kind=spec.kind, node_type=node.key,
        layout=est.layout, estimate=est, gpus=size, nodes_spanned=nodes, fabric=fabric,
        network_usd=network_usd,
        concurrency_capacity=float(est.predicted.max_concurrency or 0),
        qps_capacity=float(est.predicted.qps_capacity or 0.0),
        name=f"{name}|{node.key}|{est.layout.precision}|tp{est.layout.tp}pp{est.layout.pp}"
             f"{expert_tag(est.layout)}|{nodes}n|{fabric}")


ZERO_STAGES = (3, 2, 1, 0)  # the default (FSDP full shard) first: kept on a tie
MICRO_BATCHES = (2, 4)  # sequences per micro-batch tried beyond 1, at the same step tokens
VIRTUAL_STAGES = (1, 2, 8)  # interleaved-pipeline chunks tried beside the catalog default


KNOBS: Memo[Estimate] = Memo(1 << 16)
""":func:`fastest_training_knobs` per (catalog content, layout, workload): portfolio
workloads of one model and sequence length share their physics workload, so their jobs
probe the same layouts; warm solves probe them all again."""


def clear_caches() -> None:
    """Empty every memo a candidate build fills (the physics' and :data:`KNOBS`): the next
    build is cold (benchmarks, tests)."""
    clear_physics_caches()
    KNOBS.clear()


def fastest_training_knobs(catalog: Catalog, est: Estimate) -> Estimate:
    """The fastest training knobs that fit for one training layout (memoised; see
    :func:`_fastest_training_knobs`). ``est`` is what :func:`estimate` gives for its layout
    and workload (the memo key), as every caller passes."""
    return KNOBS.get((content_key(catalog), est.layout, est.workload),
                     lambda: _fastest_training_knobs(catalog, est))


def _fastest_training_knobs(catalog: Catalog, est: Estimate, *,
                            skip_resolved: bool = True) -> Estimate:
    """The fastest training knobs that fit for one training layout (recompute ``auto``
    already recomputes just enough layers to fit), searched one knob at a time, each
    starting from the best so far:

    1. the ZeRO stage (3, 2, 1, 0): lower stages skip the parameter all-gathers but hold
       more state, so more layers may need recomputing;
    2. the micro-batch (1, 2, 4 sequences) at the same tokens per optimizer step: fewer,
       larger TP collectives (latency amortised) against more activation memory and, with
       pipelining, fewer micro-batches to fill the bubble;
    3. sequence parallelism on or off where TP > 1;
    4. the interleaved pipeline's virtual stages (1, 2, the catalog default, 8) where
       PP > 1: the bubble / v against v x the pipeline hops.

    Knobs the workload sets are kept. Only this layout is re-estimated (at most 9 more
    estimates), which keeps candidate generation fast; a knob is taken only when it fits
    and is faster by more than 0.1 % (ties keep the defaults)."""
    best = est

    def better(other: Estimate) -> bool:
        return (other.fits and other.predicted.tokens_per_s
                > best.predicted.tokens_per_s * 1.001)

    # A knob value that resolves to what ``best`` already runs with is skipped: its estimate
    # would equal ``best`` figure for figure (the physics reads ``zero`` only through
    # ``memory.zero_stage``, ``interleave`` only through ``virtual_stages``), and a value is
    # taken only when faster than ``best`` by 0.1 %, so skipping it changes nothing
    # (``skip_resolved=False``, the reference search, tries it: tests compare the two).
    layout, base = est.layout, est.workload
    if layout.dp > 1 and base.zero is None:
        default_stage = factors(catalog).training.zero_stage
        for stage in ZERO_STAGES:
            if skip_resolved and stage == default_stage:  # = est; best is est or faster
                continue
            other = estimate(catalog, layout, replace(base, zero=stage))
            if better(other):
                best = other
    if base.micro_batch == 1 and base.global_batch_tokens is None:
        m = microbatches(catalog, layout, best.workload)
        replicas = max(1, layout.dp // max(1, best.workload.context_parallel))
        step_tokens = m * best.workload.seq_len * replicas
        for size in MICRO_BATCHES:
            if m % size:
                continue
            other = estimate(catalog, layout, replace(best.workload, micro_batch=size,
                                                      global_batch_tokens=step_tokens))
            if better(other):
                best = other
    if layout.tp > 1 and base.sequence_parallel is None:
        current = (best.training or {}).get("sequence_parallel")
        for flag in (True, False):
            if flag == current:
                continue
            other = estimate(catalog, layout, replace(best.workload, sequence_parallel=flag))
            if better(other):
                best = other
    if layout.pp > 1 and base.interleave is None:
        for v in VIRTUAL_STAGES:
            work = replace(best.workload, interleave=v)
            if skip_resolved and virtual_stages(catalog, layout, work) \
                    == virtual_stages(catalog, layout, best.workload):  # = best (capped)
                continue
            other = estimate(catalog, layout, work)
            if better(other):
                best = other
    return best


def coupled_training_rdma_only(catalog: Catalog, rfq: Rfq) -> bool:
    """Whether training jobs that couple nodes must run on an RDMA fabric: the RFQ's
    ``constraints.coupled_training_fabric``, else the vendor profile's engineering policy
    (the guide: coupled training on InfiniBand/RoCE)."""
    wanted = rfq.constraints.coupled_training_fabric
    if wanted is None:
        wanted = catalog.vendors[rfq.constraints.vendor or "open"].coupled_training_fabric
    return wanted == "rdma"


def _training_candidates(catalog: Catalog, spec: TrainingWorkload, node: NodeType,
                         fabrics: list[Fabric], precision: str, rejected: list[str],
                         all_sizes: bool, max_nodes: int,
                         rdma_only: bool = False, prune: bool = True,
                         deadline: float | None = None) -> list[Candidate]:
    """Jobs on this node type: in one node, else for each fabric the fewest nodes that fit
    and meet the deadline at expected goodput (more nodes cost more for the same node type
    and fabric): spans of 2, 4, 8 ... nodes first, then a bisection of the counts between
    the smallest that meets it and half of it, at the TP degree that span used (a job may
    span 7 nodes; time to finish falls as nodes are added); with ``all_sizes`` also every
    larger power of two that meets it (for the Pareto frontier). Each layout runs the
    fastest training knobs that fit (:func:`fastest_training_knobs`); with ``rdma_only``
    jobs that span nodes use RDMA fabrics only.

    With ``prune`` a size whose hours are provably above the deadline is not estimated
    (:meth:`_JobProbe.misses_for_sure`): its probe would have answered None, so the search
    takes the same path to the same candidates. Only the fastest hours seen, which the
    rejection states when no candidate is left, could differ: then the skipped sizes that
    could be faster are probed (:meth:`_JobProbe.settle_fastest_hours`), or, when no layout
    fitted at all (the rejection names the last probe's reason), the search is run again
    unpruned (``prune=False``, the reference: tests compare the two)."""
    job = _JobProbe(catalog, spec, node, precision, prune=prune, deadline=deadline)
    why: list[str] = []
    out = _span_search(job, fabrics, why, all_sizes, max_nodes, rdma_only)
    if not out and job.pruned and not job.settle_fastest_hours():
        job = _JobProbe(catalog, spec, node, precision, prune=False, deadline=deadline)
        why = []
        out = _span_search(job, fabrics, why, all_sizes, max_nodes, rdma_only)
    rejected += why
    if not out and job.best_hours is None:
        rejected.append(f"{node.key} {precision}: no layout fits memory ({job.last_reason})")
    elif not out:
        rejected.append(f"{node.key} {precision}: fastest layout tried needs "
                        f"{job.best_hours:,.1f} h (planned within {spec.planned_hours:g} h of the "
                        f"{spec.deadline_hours:g} h deadline)")
    return out


def _span_search(job: _JobProbe, fabrics: list[Fabric], rejected: list[str], all_sizes: bool,
                 max_nodes: int, rdma_only: bool) -> list[Candidate]:
    """The probes of :func:`_training_candidates`, in its order: in-node sizes, then per
    fabric the doubling spans and the bisection below the first that meets the deadline."""
    node, precision = job.node, job.precision
    out: list[Candidate] = []
    for size in in_node_sizes(node.gpus):
        found = job.candidate(size, None)
        if found is not None:
            out.append(found)
            if not all_sizes:
                return out  # a spanning job costs more than an in-node one
    cap = min(max_nodes, MAX_SPANNED_NODES)
    for fabric in fabrics:
        if rdma_only and not fabric.rdma:
            rejected.append(f"{node.key} {precision} over {fabric.id}: coupled training "
                            "runs on an RDMA fabric (InfiniBand/RoCE) by engineering policy")
            continue
        doubling = [n for n in POWERS_OF_TWO if 2 <= n <= cap]
        if cap >= 2 and cap not in doubling:
            doubling.append(cap)  # a node limit between two powers of two
        tried = 1
        for index, m in enumerate(doubling):
            found = job.candidate(node.gpus * m, fabric)
            if found is None:
                tried = m
                continue
            if all_sizes:  # the larger spans too: faster and dearer points for the frontier
                out += [c for n in doubling[index + 1:]
                        if (c := job.candidate(node.gpus * n, fabric)) is not None]
            low, high = tried, m  # low misses the deadline (or is 1: in-node), high meets it
            while high - low > 1:  # bisect the counts the doubling skipped
                mid = (low + high) // 2
                keep = found.layout.tp if (node.gpus * mid) % found.layout.tp == 0 else None
                smaller = job.candidate(node.gpus * mid, fabric, tp=keep)
                if smaller is None:
                    low = mid
                else:
                    high, found = mid, smaller
            out.append(found)
            break
    return out


BOUND_MARGIN = 1e-9
"""A size is pruned only when its hours bound exceeds the deadline by this share: the bound
holds in exact arithmetic, and its floating-point rounding differs from the estimate's by a
few units in the last place, far below this."""


class _JobProbe:
    """One training job on one node type and precision: the candidate of a GPU count and
    fabric (None when it does not fit or misses the deadline), remembering the fastest
    hours seen and the last reason a layout did not fit. With ``prune`` a size that cannot
    meet the deadline (:meth:`misses_for_sure`) answers None unestimated (``pruned`` says
    one did; the fastest hours then leave it out)."""

    def __init__(self, catalog: Catalog, spec: TrainingWorkload, node: NodeType,
                 precision: str, *, prune: bool = False, deadline: float | None = None) -> None:
        self.catalog, self.spec, self.node, self.precision = catalog, spec, node, precision
        self.deadline = deadline  # checked before each probe (a span's splits and knobs)
        self.workload = physics_workload(spec)
        self.total_tokens = spec.dataset_tokens * spec.epochs
        self.best_hours: float | None = None
        self.last_reason = "does not fit"
        self.rate_bound = (training_rate_bound(catalog, spec.model, node.gpu, precision,
                                               self.workload) if prune else None)
        self._fewest_hours: dict[int, float] = {}  # hours bound by GPU count
        self._skipped: list[tuple[int, Fabric | None, int | None]] = []  # pruned probes

    @property
    def pruned(self) -> bool:
        """Whether some probe was skipped unestimated."""
        return bool(self._skipped)

    def settle_fastest_hours(self) -> bool:
        """After a search that found nothing: make ``best_hours`` the fastest hours the
        unpruned search would have seen, by probing the skipped sizes whose bound is below
        the fastest so far (the others cannot be faster; their probes miss the deadline, so
        only ``best_hours`` moves). False when no layout fitted: ``last_reason`` is the last
        probe's in the search's order, so the caller reruns it unpruned."""
        if self.best_hours is None:
            return False
        self.rate_bound = None  # probe for real from here on
        for size, over, tp in self._skipped:
            if self._fewest_hours[size] < self.best_hours * (1.0 + BOUND_MARGIN):
                self.candidate(size, over, tp)
        return True

    def misses_for_sure(self, size: int) -> bool:
        """Whether every split of ``size`` GPUs, whatever its knobs, misses the deadline:
        its hours are at least the tokens at the per-GPU rate bound
        (:func:`~solver.physics.performance.training_rate_bound`) over the goodput, which is
        the same for every split of one size (:func:`job_goodput`)."""
        if self.rate_bound is None or self.total_tokens <= 0:
            return False
        fewest_hours = self._fewest_hours.get(size)
        if fewest_hours is None:  # each fabric probes the same sizes: computed once
            nodes = -(-size // self.node.gpus)
            good = job_goodput(self.catalog, self.spec.model, self.workload.kind, size,
                               nodes).fraction
            fewest_hours = (self.total_tokens / (self.rate_bound * size) / 3600.0 / good
                            if good > 0.0 else 0.0)
            self._fewest_hours[size] = fewest_hours
        return fewest_hours > self.spec.planned_hours * (1.0 + BOUND_MARGIN)

    def candidate(self, size: int, over: Fabric | None,
                  tp: int | None = None) -> Candidate | None:
        """``tp``: only splits of that tensor-parallel degree (the bisection keeps the TP of
        the larger span that met the deadline: TP stays inside a node)."""
        if self.misses_for_sure(size):
            self._skipped.append((size, over, tp))
            return None
        check_deadline(self.deadline, self.spec.name)
        catalog, spec, node = self.catalog, self.spec, self.node
        fabric_id = over.id if over else "none"
        ranked = ranked_layouts(catalog, spec.model, node.gpu, size, self.workload,
                                precision=self.precision, gpus_per_node=node.gpus,
                                fabric=fabric_id, server=node.server, tp=tp)
        est = ranked[0]
        if not est.fits or est.predicted.tokens_per_s <= 0:
            self.last_reason = est.reason or "does not fit"
            return None
        est = fastest_training_knobs(catalog, est)
        hours = hours_at_goodput(catalog, est, self.total_tokens)
        if spec.planned_hours < hours <= spec.planned_hours * (1.0 + KNOB_MARGIN):
            est, hours = self._near_misses(ranked, est, hours)
        self.best_hours = hours if self.best_hours is None else min(self.best_hours, hours)
        if hours > spec.planned_hours:
            return None
        nodes = max(1, size // node.gpus) if over else 1
        network = _network(node, catalog, over, nodes) if over else 0.0
        return Candidate(
            workload=spec.name, kind=spec.kind, node_type=node.key,
            layout=est.layout, estimate=est, gpus=size, nodes_spanned=nodes, fabric=fabric_id,
            network_usd=network, hours_to_complete=hours,
            name=f"{spec.name}|{node.key}|{self.precision}|tp{est.layout.tp}pp{est.layout.pp}"
                 f"dp{est.layout.dp}|{nodes}n|{fabric_id}")

    def _near_misses(self, ranked: list[Estimate], est: Estimate,
                     hours: float) -> tuple[Estimate, float]:
        """The best layout (by default knobs) just misses the deadline: the knobs (ZeRO
        stage, micro-batch, SP, interleave) may make another split faster than it, so the
        splits within ``KNOB_MARGIN`` of its throughput get their knobs searched too; the
        fastest after its knobs is kept."""
        floor = ranked[0].predicted.tokens_per_s / (1.0 + KNOB_MARGIN)
        for other in ranked[1:]:
            if not other.fits or other.predicted.tokens_per_s < floor:
                continue
            tuned = fastest_training_knobs(self.catalog, other)
            other_hours = hours_at_goodput(self.catalog, tuned, self.total_tokens)
            if other_hours < hours:
                est, hours = tuned, other_hours
        return est, hours


def build_candidates(catalog: Catalog, rfq: Rfq, *, all_sizes: bool = False,
                     params: CostParams | None = None,
                     deadline: float | None = None, workers: int = 1) -> CandidateTable:
    """The whole candidate table for an RFQ. ``deadline`` (a ``time.perf_counter()``
    instant) raises :class:`~solver.optimize.backends.TimeLimitReached` once passed.
    ``workers`` > 1: a large RFQ's workloads are built in that many forked processes
    (:mod:`solver.optimize.candidate_workers`; the same table, for a first build only).
    A workload built before with the same content (catalog, RFQ, code) is read from the
    disk cache (:mod:`solver.optimize.candidate_cache`); what is built is kept there."""
    catalog = rfq.catalog(catalog)
    params = params or CostParams.from_catalog(catalog, rfq.horizon_years)
    types = node_types(catalog, rfq, params)
    _, _, fabrics = allowed_entries(catalog, rfq)
    specs = list(rfq.workloads)

    report(f"candidate layouts of {len(specs)} workloads", 0, len(specs))
    keys = [candidate_cache.workload_key(catalog, rfq, spec, all_sizes, params)
            for spec in specs]

    def one(index: int) -> tuple[list[Candidate], list[str]]:
        report(f"candidate layouts: {specs[index].name}", index, len(specs))
        entry = _workload_candidates(catalog, rfq, specs[index], types, fabrics, params,
                                     all_sizes, deadline)
        candidate_cache.store(keys[index], entry)  # at once: a run the time limit cuts
        return entry  # short still warms the next one (forked builders store theirs too)
    kept: dict[int, tuple[list[Candidate], list[str]]] = {}
    for index, key in enumerate(keys):
        check_deadline(deadline, "reading the candidate cache")  # slow on a busy machine
        entry = candidate_cache.load(key)
        if entry is not None:
            kept[index] = entry
    missing = [index for index in range(len(specs)) if index not in kept]
    fresh = map_workloads(lambda i: one(missing[i]),
                          [(specs[i].model, specs[i].kind) for i in missing], workers)
    if fresh is None:
        fresh = [one(index) for index in missing]
    for index, entry in zip(missing, fresh, strict=True):
        kept[index] = entry
    built = [kept[index] for index in range(len(specs))]
    candidates = {spec.name: found for spec, (found, _) in zip(specs, built, strict=True)}
    rejected = {spec.name: why for spec, (_, why) in zip(specs, built, strict=True)}
    storage = {spec.name: training_storage(catalog, params, spec) for spec in specs
               if isinstance(spec, TrainingWorkload)}
    return CandidateTable(types, {f.id: f for f in fabrics}, candidates, params, rejected,
                          storage)


def _workload_candidates(catalog: Catalog, rfq: Rfq, spec: AnyWorkload,
                         types: dict[str, NodeType], fabrics: list[Fabric],
                         params: CostParams, all_sizes: bool,
                         deadline: float | None) -> tuple[list[Candidate], list[str]]:
    """One workload's candidates (dominated ones dropped) and why the others were not."""
    max_nodes = rfq.constraints.max_nodes or MAX_SPANNED_NODES
    rdma_only = coupled_training_rdma_only(catalog, rfq)
    found: list[Candidate] = []
    why: list[str] = []
    for node in (types.values() if owned_allowed(rfq) else ()):
        gpu = catalog.gpus[node.gpu]
        for precision in precisions_for(spec, gpu, catalog.model(spec.model)):
            check_deadline(deadline, spec.name)
            if isinstance(spec, TrainingWorkload):
                found += _training_candidates(catalog, spec, node, fabrics, precision, why,
                                              all_sizes, max_nodes, rdma_only,
                                              deadline=deadline)
            else:
                found += _serving_candidates(catalog, spec, node, fabrics, precision, why,
                                             deadline)
                check_deadline(deadline, spec.name)
                found += disaggregated_candidates(catalog, spec, node, fabrics, precision,
                                                  why)
    found += rented_candidates(catalog, rfq, spec, params, why)
    check_deadline(deadline, spec.name)
    loss = None
    if spec.kind == "inference" and spec.redundancy == "n+1":
        loss = partial(one_node_loss, types)
    return _drop_dominated(found, loss), why


def check_deadline(deadline: float | None, what: str) -> None:
    """Raise :class:`TimeLimitReached` once ``deadline`` (a ``time.perf_counter()`` instant)
    has passed: checked before each node type and precision of a workload (a few ms to
    ~0.1 s of physics each, cold), so a time limit holds inside one workload's build
    (issue 31), not only between workloads."""
    if deadline_passed(deadline):
        raise TimeLimitReached(f"candidates not built within the time limit ({what})")


def one_node_loss(types: dict[str, NodeType], cand: Candidate) -> tuple[float, float]:
    """Concurrency and requests/s one failure takes of ``cand`` under ``redundancy: n+1``
    (as ``mip.units_lost``): a node's worth of in-node replicas, one spanning replica, one
    rented unit."""
    per_node = 1 if cand.rented or cand.spanning else max(
        1, types[cand.node_type].gpus // cand.gpus)
    return per_node * cand.concurrency_capacity, per_node * cand.qps_capacity


def _drop_dominated(found: list[Candidate],
                    loss: Callable[[Candidate], tuple[float, float]] | None = None
                    ) -> list[Candidate]:
    """Remove candidates another one on the same node type beats on every count.

    Dominance keeps the optimum: the dominating candidate uses no more GPUs, spans no more
    nodes on the same fabric, costs no more network, and delivers at least the capacity,
    so a plan that uses the dominated one may use it instead, replica for replica. Under
    ``redundancy: n+1`` (``loss``: a candidate's one-node loss) it must also lose no more
    when one node fails: the MIP subtracts the largest loss of the candidates used, and a
    denser replica that loses more can make such a plan infeasible (issue 31 found plans
    up to 9 % dearer on random instances, ``tests/test_dominance.py``).
    A tie goes to the one listed first (``list.index``: the first *equal* candidate, found
    among those of the same name, since equal candidates have equal names).
    """
    same_name: dict[str, list[int]] = {}
    rivals: dict[tuple[str, str], list[Candidate]] = {}  # same node type and fabric, in order
    for position, cand in enumerate(found):
        same_name.setdefault(cand.name, []).append(position)
        rivals.setdefault((cand.node_type, cand.fabric), []).append(cand)

    def index(cand: Candidate) -> int:  # = found.index(cand), without comparing every entry
        return next(p for p in same_name[cand.name] if found[p] == cand)

    keep = []
    for cand in found:
        dominated = False
        for other in rivals[(cand.node_type, cand.fabric)]:
            if other is cand:
                continue
            no_worse = (other.gpus <= cand.gpus and other.nodes_spanned <= cand.nodes_spanned
                        and other.network_usd <= cand.network_usd)
            if cand.is_job:
                better = no_worse and (other.hours_to_complete or math.inf) <= (
                    cand.hours_to_complete or math.inf)
            else:
                better = (no_worse and other.concurrency_capacity >= cand.concurrency_capacity
                          and other.qps_capacity >= cand.qps_capacity)
                if cand.kind == "batch_inference":  # a request's own time meets the deadline
                    better = better and (request_seconds(other.estimate)
                                         <= request_seconds(cand.estimate))
                if better and loss is not None:  # n+1: it loses no more with a node
                    (conc, qps), (own_conc, own_qps) = loss(other), loss(cand)
                    better = conc <= own_conc and qps <= own_qps
            strictly = (other.gpus, other.nodes_spanned, -other.concurrency_capacity,
                        -other.qps_capacity, other.hours_to_complete or 0) != (
                cand.gpus, cand.nodes_spanned, -cand.concurrency_capacity,
                -cand.qps_capacity, cand.hours_to_complete or 0)
            if better and (strictly or index(other) < index(cand)):
                dominated = True
                break
        if not dominated:
            keep.append(cand)
    return keep
