"""An independent oracle for `solve` (issue 17, item 5).

The oracle shares only the physics with the code under test: for every layout it asks
``solver.physics.performance.estimate`` whether the layout fits and what it sustains (and, for
training, ``solver.physics.goodput.hours_at_goodput`` how long the job takes). Everything else is
written here from docs/cost-model.md and the formulation in solver/optimize/mip.py's docstring:

- its own node types: every (server, GPU, GPUs populated) the vendor profile, the RFQ and
  the catalog's fit rules (``Server.takes``, ``Server.power_fits``) allow, populated with
  every power of two up to the slots (SXM/OAM baseboards: full), no dominance filter;
- its own layouts: every TP x PP split (x DP and every ZeRO stage for training) of every
  in-node power-of-two GPU count and of every span of 2..16 whole nodes on every allowed
  fabric (not only the power-of-two spans, not only the first two spanning sizes);
- its own search: a branch and bound over replica multisets / job choices;
- its own packing (first-fit decreasing onto nodes, spanning groups on whole nodes) and
  its own cost arithmetic (node cost from catalog prices, NICs, switches by the leaf/spine
  rule, shared and training storage, the per-group multi-node overhead).

It never reads ``solver.optimize.candidates`` (no candidate table) nor ``solver.optimize.mip`` (no
replica bound). Where an instance is too big to search exhaustively the instance is
restricted (GPU SKUs, fabrics, demand), never the enumeration.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from solver.analysis.explain import solve_rfq
from solver.catalog.load import load_catalog
from solver.catalog.perf_factors import factors
from solver.physics.geometry import geometry
from solver.physics.goodput import hours_at_goodput
from solver.physics.layout import Layout, Workload
from solver.physics.performance import estimate
from solver.rfq.schema import load_rfq

# The whole oracle runs under ``-m slow`` (minutes); a fast slice of it (a few seconds: the
# cheapest scenarios and three random RFQs whose GPU, power and rack limits bind) runs in the
# default test run, so that a mutant of the cost model or of a limit row fails there too.

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
HOURS_PER_YEAR = 8760.0
TRAINING = ("lora", "qlora", "full_finetune", "pretrain")
MAX_SPAN = 16
REL_TOL = 1e-6


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


# --- node types --------------------------------------------------------------------------

@dataclass(frozen=True)
class NodeKind:
    server: str
    gpu: str
    gpus: int
    capex: float          # GPUs + server
    opex: float           # power + operations (incl. the node's own engineering) over horizon
    power_kw: float
    rack_units: int
    nics: int
    stack: str

    @property
    def key(self) -> str:
        return f"{self.server}/{self.gpu}x{self.gpus}"


def _value(costs: Any, name: str, default: float = 0.0) -> float:
    entry = getattr(costs, name, None)
    return default if entry is None else float(entry.value)


def node_kinds(cat, rfq) -> list[NodeKind]:
    c = rfq.constraints
    vendor = cat.vendors[c.vendor or "open"]
    costs = cat.costs
    years = rfq.horizon_years if rfq.horizon_years is not None else _value(costs,
                                                                           "horizon_years")
    kinds = []
    for gpu in cat.gpus.values():
        if not vendor.allows("gpus", gpu.id) or (c.gpus is not None and gpu.id not in c.gpus):
            continue
        if c.datacenter_grade_only and not gpu.datacenter_use:
            continue
        for server in cat.servers.values():
            if not vendor.allows("servers", server.id) or not server.takes(gpu):
                continue
            # the site's cooling (issue 28): air takes no liquid-cooled chassis, liquid only
            # those, any both
            cooling = rfq.facility.cooling
            if cooling != "any" and (cooling == "liquid") != server.liquid_cooled:
                continue
            counts = [2 ** i for i in range(10) if 2 ** i <= server.gpu_slots]
            if gpu.form_factor in ("sxm", "oam"):
                counts = [server.gpu_slots]
            for n in counts:
                if not server.power_fits(gpu, n):
                    continue
                power_kw = (n * gpu.tdp_w + server.base_power_w) / 1000.0
                energy = (power_kw * _value(costs, "load_factor") * _value(costs, "pue")
                          * HOURS_PER_YEAR * years * _value(costs, "electricity_usd_per_kwh"))
                capex = n * gpu.price_usd + server.price_usd
                if server.liquid_cooled:  # its cooling: full-load kW x the catalog's $/kW,
                    per_kw = _value(costs, "liquid_cooling_usd_per_kw")  # less the in-rack
                    if server.rack_cooling_included:  # manifolds a whole rack comes with
                        per_kw -= _value(costs, "liquid_cooling_in_rack_usd_per_kw")
                    capex += power_kw * per_kw
                licence = (n * _value(costs, "software_licence_usd_per_gpu_year") * years
                           if gpu.vendor == "nvidia" and gpu.datacenter_use else 0.0)
                support = capex * _value(costs, "support_contract_fraction_per_year") * years
                operations = years * (server.hosts  # each host runs its own OS (issue 27)
                                      * (_value(costs, "operations_usd_per_node_year")
                                         + _value(costs, "node_engineering_usd_per_year"))
                                      + server.rack_units * _value(costs,
                                                                   "rack_unit_usd_per_year"))
                kinds.append(NodeKind(server.id, gpu.id, n, capex,
                                      energy + operations + licence + support, power_kw,
                                      server.rack_units, server.fabric_nics_per_node,
                                      gpu.stack))
    return kinds


def fabrics_of(cat, rfq) -> list:
    c = rfq.constraints
    vendor = cat.vendors[c.vendor or "open"]
    return [f for f in cat.fabrics.values() if f.id != "none" and vendor.allows("fabrics", f.id)
            and (c.fabrics is None or f.id in c.fabrics)]


# --- layouts (units: one serving replica, or one whole training job) -----------------------

@dataclass(frozen=True)
class Unit:
    workload: str
    node: NodeKind
    gpus: int
    nodes: int            # 1 = inside one node
    fabric: str           # "none" inside one node
    conc: float = 0.0
    qps: float = 0.0
    what: str = ""

    @property
    def spanning(self) -> bool:
        return self.nodes > 1


SPANS = tuple(range(2, MAX_SPAN + 1))


def shapes(node: NodeKind, fabrics, spans=SPANS) -> list[tuple[int, int, str]]:
    """(GPUs, nodes, fabric): every in-node power of two, every span (2..16) on every fabric."""
    out = [(2 ** i, 1, "none") for i in range(10) if 2 ** i <= node.gpus]
    out += [(n * node.gpus, n, f.id) for f in fabrics for n in spans]
    return out


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def serving_units(cat, spec, kinds, fabrics, front: bool = True, spans=SPANS) -> list[Unit]:
    """Usable replicas; ``front``: of units that cost the same keep only the capacity
    Pareto front (not with n+1, where a larger capacity also raises the loss level)."""
    kind = spec.kind
    if kind == "inference":
        work = Workload(kind=kind, input_tokens=spec.input_tokens,
                        output_tokens=spec.output_tokens, concurrency=None,
                        ttft_ms=spec.ttft_ms, tpot_ms=spec.tpot_ms,
                        engine=spec.engine or "vllm",
                        percentile=int(spec.slo_percentile or 90))
    else:
        work = Workload(kind=kind, input_tokens=spec.input_tokens,
                        output_tokens=spec.output_tokens, concurrency=None,
                        engine=spec.engine or "vllm", percentile=50)
    best: dict[tuple, list[Unit]] = {}
    for node in kinds:
        for precision in spec.allowed_precisions():
            for gpus, nodes, fabric in shapes(node, fabrics, spans):
                for tp in divisors(gpus):
                    layout = Layout(model=spec.model, gpu=node.gpu, precision=precision, tp=tp,
                                    pp=gpus // tp, dp=1, gpus_per_node=node.gpus,
                                    fabric=fabric, server=node.server)
                    est = estimate(cat, layout, work)
                    p = est.predicted
                    if not (est.fits and est.comfortable and (p.max_concurrency or 0) > 0
                            and (p.qps_capacity or 0) > 0):
                        continue
                    if kind == "batch_inference":
                        # each request decodes its own tokens: one request within the deadline
                        seconds = ((p.ttft_ms or 0) + spec.output_tokens * (p.tpot_ms or 0)) / 1e3
                        if seconds > spec.planned_hours * 3600.0:  # headroom kept (issue 28)
                            continue
                    unit = Unit(spec.name, node, gpus, nodes, fabric,
                                float(p.max_concurrency), float(p.qps_capacity),
                                f"{precision} tp{tp}pp{gpus // tp}")
                    best.setdefault((node.key, gpus, nodes, fabric), []).append(unit)
    out = []
    for group in best.values():  # same cost: keep the capacity Pareto front (exact)
        for u in group:
            better = (lambda v, u=u: v.conc >= u.conc and v.qps >= u.qps) if front else (
                lambda v, u=u: v.conc == u.conc and v.qps == u.qps)
            if not any(better(v)
                       and ((v.conc, v.qps) != (u.conc, u.qps) or group.index(v) < group.index(u))
                       for v in group if v is not u):
                out.append(u)
    return out


def training_units(cat, rfq, spec, kinds, fabrics, spans=SPANS) -> list[Unit]:
    """A job per (node type, GPUs, nodes, fabric) where *some* TP x PP x DP split at some
    ZeRO stage and precision fits and meets the deadline at expected goodput."""
    vendor = cat.vendors[rfq.constraints.vendor or "open"]
    policy = rfq.constraints.coupled_training_fabric or vendor.coupled_training_fabric
    tokens = spec.dataset_tokens * spec.epochs
    out = []
    for node in kinds:
        for gpus, nodes, fabric in shapes(node, fabrics, spans):
            if nodes > 1 and policy == "rdma" and not cat.fabrics[fabric].rdma:
                continue
            found = None
            for precision in spec.allowed_precisions():
                for tp in divisors(gpus):
                    for pp in divisors(gpus // tp):
                        dp = gpus // (tp * pp)
                        for zero in ((None, 0, 1, 2, 3) if dp > 1 else (None,)):
                            layout = Layout(model=spec.model, gpu=node.gpu, precision=precision,
                                            tp=tp, pp=pp, dp=dp, gpus_per_node=node.gpus,
                                            fabric=fabric, server=node.server)
                            est = estimate(cat, layout, Workload(kind=spec.kind,
                                                                 seq_len=spec.seq_len,
                                                                 zero=zero))
                            if not est.fits or est.predicted.tokens_per_s <= 0:
                                continue
                            # within (1 - headroom) x the deadline (issue 28)
                            if hours_at_goodput(cat, est, tokens) <= spec.planned_hours:
                                found = f"{precision} tp{tp}pp{pp}dp{dp} zero={zero}"
                                break
                        if found:
                            break
                    if found:
                        break
                if found:
                    break
            if found:
                out.append(Unit(spec.name, node, gpus, nodes, fabric, what=found))
    return out


def training_storage_usd(cat, rfq, spec) -> float:
    """Checkpoint + dataset storage of a job (docs/cost-model.md 'Storage')."""
    costs = cat.costs
    model = cat.model(spec.model)
    total = model.params_b * 1e9
    if spec.kind in ("lora", "qlora"):
        geo = geometry(model)
        trained = factors(cat).training.lora_rank.value * geo.lora_params_per_layer * geo.layers
        frozen = total * 2.0
    else:
        trained, frozen = total, 0.0
    checkpoint = trained * _value(costs, "checkpoint_bytes_per_param")
    dataset = float(spec.dataset_tokens) * _value(costs, "dataset_bytes_per_token")
    capacity_tb = (checkpoint * _value(costs, "checkpoints_kept") + frozen + dataset) / 1e12
    write_gbps = checkpoint / _value(costs, "checkpoint_write_seconds", 300.0) / 1e9
    return (capacity_tb * _value(costs, "storage_usd_per_tb")
            + write_gbps * _value(costs, "storage_usd_per_gbps"))


# --- packing and pricing -----------------------------------------------------------------

def switches(ports: int, radix: int) -> tuple[int, int]:
    """(switches, leaf-to-spine links) for ``ports`` node ports (docs/cost-model.md)."""
    if ports <= 0:
        return 0, 0
    if ports <= radix:
        return 1, 0
    half = radix // 2
    leaves = -(-ports // half)
    spines = -(-(half * leaves) // radix)
    return leaves + spines, half * leaves


def pack(groups: list[int], size: int) -> int:
    """Nodes first-fit decreasing needs for in-node groups of these GPU counts."""
    free: list[int] = []
    for g in sorted(groups, reverse=True):
        for i, space in enumerate(free):
            if space >= g:
                free[i] -= g
                break
        else:
            free.append(size - g)
    return len(free)


@dataclass
class Priced:
    cost: float
    nodes: int
    gpus: int
    power_kw: float
    rack_units: int
    ok: bool            # one fabric, one software stack


class Pricer:
    def __init__(self, cat, rfq, objective: str):
        costs = cat.costs
        self.tco = objective == "tco"
        years = rfq.horizon_years if rfq.horizon_years is not None else _value(costs,
                                                                               "horizon_years")
        self.overhead = ((_value(costs, "multinode_overhead_factor") - 1.0)
                         * _value(costs, "node_engineering_usd_per_year") * years)
        self.fe_ports = int(_value(costs, "frontend_ports_per_node"))
        self.fe_radix = int(_value(costs, "frontend_ports_per_switch", 48))
        self.fe_switch = _value(costs, "frontend_switch_usd")
        self.fe_cable = _value(costs, "frontend_cable_usd")
        self.lan_ports = rfq.facility.lan_ports  # issue 28: the site's LAN takes that many
        self.shared = _value(costs, "shared_storage_usd")
        self.shared_per_node = _value(costs, "shared_storage_usd_per_node")
        self.fabrics = cat.fabrics
        self.mixed = bool(getattr(rfq.constraints, "mixed_vendors", False))
        self.job_storage = {s.name: training_storage_usd(cat, rfq, s) for s in rfq.workloads
                            if s.kind in TRAINING}

    def unit_cost(self, u: Unit) -> float:
        """Cost a unit adds on its own: its GPUs' share of its nodes, its NICs and cables,
        its overhead and its job storage (a lower bound on what it adds to any plan)."""
        node = u.node
        per_node = node.capex + (node.opex if self.tco else 0.0) + self.fe_ports * self.fe_cable
        cost = per_node * u.gpus / node.gpus
        if u.spanning:
            fab = self.fabrics[u.fabric]
            cost += u.nodes * node.nics * (fab.nic_price_usd + fab.cable_price_usd)
            cost += self.shared_per_node * u.nodes
            if self.tco:
                cost += self.overhead * (u.nodes - 1)
        return cost + self.job_storage.get(u.workload, 0.0)

    def price(self, chosen: list[tuple[Unit, int]]) -> Priced:
        by_node: dict[str, tuple[NodeKind, int, list[int]]] = {}
        cost = 0.0
        fabric_ports: dict[str, int] = {}
        coupled = 0
        for u, n in chosen:
            if not n:
                continue
            kind, whole, groups = by_node.get(u.node.key, (u.node, 0, []))
            if u.spanning:
                whole += u.nodes * n
                fab = self.fabrics[u.fabric]
                fabric_ports[u.fabric] = fabric_ports.get(u.fabric, 0) + u.node.nics * u.nodes * n
                cost += n * u.nodes * u.node.nics * (fab.nic_price_usd + fab.cable_price_usd)
                coupled += u.nodes * n
                if self.tco:
                    cost += n * self.overhead * (u.nodes - 1)
            else:
                groups = groups + [u.gpus] * n
            by_node[u.node.key] = (kind, whole, groups)
            cost += n * self.job_storage.get(u.workload, 0.0)
        nodes = gpus = rack = 0
        power = 0.0
        stacks = set()
        for kind, whole, groups in by_node.values():
            count = whole + pack(groups, kind.gpus)
            nodes += count
            gpus += count * kind.gpus
            power += count * kind.power_kw
            rack += count * kind.rack_units
            cost += count * (kind.capex + (kind.opex if self.tco else 0.0))
            if count:
                stacks.add(kind.stack)
        ports = self.fe_ports * nodes
        sw, links = switches(ports, self.fe_radix) if ports > self.lan_ports else (0, 0)
        cost += self.fe_switch * sw + self.fe_cable * (links + ports)
        for fid, fports in fabric_ports.items():
            fab = self.fabrics[fid]
            sw, links = switches(fports, fab.ports_per_switch)
            cost += fab.switch_port_price_usd * fab.ports_per_switch * sw
            cost += fab.cable_price_usd * links
        if coupled:
            cost += self.shared + self.shared_per_node * coupled
        ok = len(fabric_ports) <= 1 and (self.mixed or len(stacks) <= 1)
        return Priced(cost, nodes, gpus, power, rack, ok)


# --- the search -----------------------------------------------------------------------------

def planned(spec) -> tuple[float, float]:
    """Capacity to buy: stated demand / target utilisation (batch: requests / deadline)."""
    if spec.kind == "batch_inference":  # over the deadline less its headroom (issue 28)
        return 0.0, spec.requests / (spec.planned_hours * 3600.0)
    util = float(spec.target_utilization or 1.0)
    return float(spec.concurrency or 0) / util, float(spec.qps or 0.0) / util


def lost(u: Unit) -> int:
    """Replicas of a unit one node failure takes (mip.py docstring, n+1)."""
    return 1 if u.spanning else u.node.gpus // u.gpus


def within(p: Priced, rfq) -> bool:
    c = rfq.constraints
    return (p.ok and (c.max_nodes is None or p.nodes <= c.max_nodes)
            and (c.max_gpus is None or p.gpus <= c.max_gpus)
            and (c.max_power_kw is None  # the circuit's continuous share (issue 28)
                 or p.power_kw <= c.max_power_kw * rfq.facility.continuous_load_factor + 1e-9)
            and (c.max_rack_units is None or p.rack_units <= c.max_rack_units)
            and (rfq.budget_usd is None or p.cost <= rfq.budget_usd * (1 + 1e-9)))


@dataclass
class Oracle:
    cost: float | None
    plan: list[tuple[Unit, int]]
    priced: Priced | None
    units: int
    visited: int


class SearchTooLarge(AssertionError):
    """The branch and bound visited more nodes than its budget: the instance must be
    restricted (a random instance is drawn anew; a scenario's test fails)."""


def oracle(cat, rfq, node_budget: int = 3_000_000, spans=SPANS) -> Oracle:
    """The cheapest plan for ``rfq`` by exhaustive branch and bound over every workload's
    units (minimal replica multisets, one job each). Pruning is exact: cost and every
    limited resource are monotone in the units chosen, and bounded below by each unit's
    own share plus a fractional floor for the demand still open."""
    cat = rfq.catalog(cat)  # with the models the RFQ defines (a config file, inline)
    objective = rfq.objective
    kinds = node_kinds(cat, rfq)
    fabrics = fabrics_of(cat, rfq)
    pricer = Pricer(cat, rfq, objective)
    eps = 1e-9
    work = []
    for spec in rfq.workloads:
        if spec.kind in TRAINING:
            units = training_units(cat, rfq, spec, kinds, fabrics, spans)
            units.sort(key=pricer.unit_cost)
            work.append((spec, units, None, False))
            continue
        n1 = getattr(spec, "redundancy", "none") == "n+1"
        units = serving_units(cat, spec, kinds, fabrics, front=not n1, spans=spans)
        conc, qps = planned(spec)
        # cheapest first (by cost per unit of the binding demand) finds a good bound early
        units.sort(key=lambda u: max(conc and pricer.unit_cost(u) / u.conc,
                                     qps and pricer.unit_cost(u) / u.qps))
        work.append((spec, units, (conc, qps), n1))
    total_units = sum(len(w[1]) for w in work)
    if any(not w[1] for w in work):
        return Oracle(None, [], None, total_units, 0)

    c = rfq.constraints
    caps = [rfq.budget_usd if rfq.budget_usd is not None else math.inf,
            c.max_gpus if c.max_gpus is not None else math.inf,
            (c.max_power_kw * rfq.facility.continuous_load_factor if c.max_power_kw is not None
             else math.inf),
            c.max_rack_units if c.max_rack_units is not None else math.inf,
            c.max_nodes if c.max_nodes is not None else math.inf]

    def shares(u: Unit) -> tuple[float, ...]:
        """What a unit adds at least to cost, GPUs, power, rack units and nodes bought (its
        share of its nodes: packing never buys less than the GPUs used)."""
        frac = u.gpus / u.node.gpus
        return (pricer.unit_cost(u), u.gpus, frac * u.node.power_kw, frac * u.node.rack_units,
                frac)

    def suffix_rates(units) -> list[list[tuple[float, float]]]:
        """For every j and quantity: least quantity per concurrency / per QPS in units[j:]."""
        rows = [[(math.inf, math.inf)] * 5]
        for u in reversed(units):
            q = shares(u)
            rows.append([(min(r[0], q[k] / u.conc), min(r[1], q[k] / u.qps))
                         for k, r in enumerate(rows[-1])])
        return rows[::-1]

    def lp_floor(rates, need) -> list[float]:
        """Least of each quantity that meeting ``need`` at these rates takes (fractional)."""
        return [max(need[0] * r[0] if need[0] > eps else 0.0,
                    need[1] * r[1] if need[1] > eps else 0.0) for r in rates]

    def plus(a, b):
        return [x + y for x, y in zip(a, b, strict=True)]

    # each serving workload is searched as one or more variants (units, demand to meet):
    # without n+1 one variant; with n+1 one per level L of the largest one-node loss
    # max_{c used} r_c m_c: only units with r_c m_c <= L, demand + L (exact, see _n1_levels)
    variants: dict[int, list[tuple[list[Unit], list, tuple[float, float]]]] = {}
    later = [[0.0] * 5 for _ in range(len(work) + 1)]  # floors of the workloads after i
    for i in range(len(work) - 1, -1, -1):
        spec, units, need, n1 = work[i]
        if need is None:
            own = [min(shares(u)[k] for u in units) for k in range(5)]
        else:
            options = _n1_levels(units, need) if n1 else [(units, need)]
            variants[i] = [(us, suffix_rates(us), nd) for us, nd in options if us]
            own = lp_floor(suffix_rates(units)[0], need)
        later[i] = plus(later[i + 1], own)
    state: dict[str, Any] = {"best": math.inf, "plan": [], "priced": None, "visited": 0}
    chosen: list[tuple[Unit, int]] = []
    additive = [[0.0] * 5]

    def bound_ok(floor) -> bool:
        state["visited"] += 1
        if state["visited"] >= node_budget:
            raise SearchTooLarge("oracle search too large: restrict the instance")
        total = plus(additive[-1], floor)
        if total[0] >= state["best"] * (1 - 1e-12):
            return False
        if any(t > cap * (1 + 1e-9) + 1e-9 for t, cap in zip(total, caps, strict=True)):
            return False
        p = pricer.price(chosen)
        return within(p, rfq) and p.cost < state["best"] * (1 - 1e-12)

    def finish():
        p = pricer.price(chosen)
        if within(p, rfq) and p.cost < state["best"] * (1 - 1e-12):
            state.update(best=p.cost, plan=list(chosen), priced=p)

    def take(u: Unit, n: int):
        chosen.append((u, n))
        additive.append([a + n * q for a, q in zip(additive[-1], shares(u), strict=True)])

    def drop(u: Unit, n: int):
        chosen.pop()
        additive.pop()

    def workload(i: int):
        if i == len(work):
            finish()
            return
        spec, units, need, n1 = work[i]
        if need is None:  # a training job: exactly one
            for u in units:
                take(u, 1)
                if bound_ok(later[i + 1]):
                    workload(i + 1)
                drop(u, 1)
            return
        for us, rates, nd in variants[i]:
            replicas(i, us, rates, 0, nd)

    def replicas(i: int, units, rates, j: int, need):
        """Every multiset of units[j:] that meets ``need`` and is minimal in unit order."""
        if j == len(units):
            return
        u = units[j]
        top = max(math.ceil(need[0] / u.conc - 1e-9) if need[0] > eps else 0,
                  math.ceil(need[1] / u.qps - 1e-9) if need[1] > eps else 0)
        for n in range(top, -1, -1):
            rest = (max(0.0, need[0] - n * u.conc), max(0.0, need[1] - n * u.qps))
            if n:
                take(u, n)
            done = rest[0] <= eps and rest[1] <= eps
            floor = later[i + 1] if done else plus(later[i + 1], lp_floor(rates[j + 1], rest))
            if bound_ok(floor):
                if done:
                    workload(i + 1)
                else:
                    replicas(i, units, rates, j + 1, rest)
            if n:
                drop(u, n)

    workload(0)
    cost = None if state["best"] == math.inf else state["best"]
    return Oracle(cost, state["plan"], state["priced"], total_units, state["visited"])


def _n1_levels(units: list[Unit], need: tuple[float, float]):
    """n+1 as plain demand rows: Σ m x - max_{c used} r_c m_c >= D (mip.py docstring) holds
    iff for the loss level L = that max, only units with r_c m_c <= L are used and
    Σ m x >= D + L. Every level (pair of levels with two demands) is one variant; a plan
    found under a level is n+1-feasible (its real max is at most the level), and the best
    plan is found under its own levels."""
    dims = [d for d in (0, 1) if need[d] > 0]
    levels = [sorted({lost(u) * (u.conc, u.qps)[d] for u in units}) for d in dims]
    out = []
    for combo in _product(levels):
        level = dict(zip(dims, combo, strict=True))
        keep = [u for u in units
                if all(lost(u) * (u.conc, u.qps)[d] <= level[d] * (1 + 1e-12) for d in dims)]
        out.append((keep, (need[0] + level.get(0, 0.0), need[1] + level.get(1, 0.0))))
    return out


def _product(lists):
    if not lists:
        return [()]
    return [(x, *rest) for x in lists[0] for rest in _product(lists[1:])]


# --- the tests ------------------------------------------------------------------------------

def plan_objective(plan: dict, rfq) -> float | None:
    if plan["status"] not in ("optimal", "feasible"):
        return None
    return plan["cost"][f"{rfq.objective}_usd"]


def describe(found: Oracle) -> str:
    return "; ".join(f"{n} x {u.workload} {u.node.key} {u.gpus} GPUs {u.nodes} nodes "
                     f"{u.fabric} {u.what}" for u, n in found.plan)


def check_against_solve(cat, rfq, found: Oracle | None = None) -> tuple[Oracle, dict]:
    found = oracle(cat, rfq) if found is None else found
    plan = solve_rfq(rfq, cat, explain=False).to_json()
    got = plan_objective(plan, rfq)
    if found.cost is None:
        assert plan["status"] == "infeasible", (rfq.id, plan["status"], got)
    else:
        assert plan["status"] == "optimal", (rfq.id, plan["status"], describe(found))
        assert got == pytest.approx(found.cost, rel=REL_TOL, abs=0.01), (
            rfq.id, got, found.cost, describe(found))
    return found, plan


# scenarios with rented capacity (the oracle prices owned nodes only) are left out
ORACLE_SCENARIOS = [
    "api-throughput-replicas", "batch-corpus-one-box", "capex-open-datacenter",
    "chat-70b-one-node", "chat-n-plus-1", "finetune-70b-full-cluster",
    "growing-chat-service", "infeasible-budget", "moe-deepseek-serving", "one-box-not-two",
    "own-model-from-config", "portfolio-lab",
    "qlora-405b-one-node", "serve-405b-replicas"]


FAST_SCENARIOS = ["one-box-not-two", "serve-405b-replicas", "capex-open-datacenter",
                  "infeasible-budget"]
"""The scenarios the oracle searches in well under a second each (the default run)."""


@pytest.mark.parametrize("name", FAST_SCENARIOS)
def test_fast_slice_scenario_optimum_matches_the_oracle(cat, name):
    """Issue 30: the oracle ran only under ``slow``, so mutants it catches survived the
    default run."""
    rfq = load_rfq(SCENARIOS / f"{name}.yaml", cat)
    check_against_solve(cat, rfq)


def test_fast_slice_random_rfqs_with_binding_limits_match_the_oracle(cat):
    """Three seeded random RFQs whose GPU, power or rack-unit limit is set below what the
    unlimited optimum uses: solve equals the oracle on each, and every limit kind binds."""
    bound = set()
    # a seed where all three bind (4 since the refit of 2026-12-07: the draws depend on the
    # oracle's unlimited optimum, so on the physics; with seed 1 the power limit was no
    # longer among the first three)
    for rfq, binding, found in itertools.islice(random_instances(cat, seed=4), 3):
        check_against_solve(cat, rfq, found)
        bound.update(binding)
    assert bound == set(LIMITS), bound


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in ORACLE_SCENARIOS if n not in FAST_SCENARIOS])
def test_scenario_optimum_matches_the_oracle(cat, name):
    rfq = load_rfq(SCENARIOS / f"{name}.yaml", cat)
    assert rfq.rental == "forbid"
    check_against_solve(cat, rfq)


@pytest.mark.slow
def test_pretrain_scenario_optimum_matches_the_oracle(cat):
    """~100 s: 16 spans x every TP x PP x DP x ZeRO split of a 70B pretrain on 34 node types.
    This oracle found the 7-node plan (tp4 pp7 dp2, ZeRO 0, 100GbE, $4.87M) when candidates
    only spanned 2, 4, 8, 16 nodes and searched knobs on the default-best split only."""
    rfq = load_rfq(SCENARIOS / "pretrain-70b-open.yaml", cat)
    check_against_solve(cat, rfq)


# --- seeded random small RFQs with binding GPU, power and rack limits ------------------------

SERVE_MODELS = ("llama-3.1-8b", "qwen2.5-7b", "qwen2.5-14b")
TUNE_MODELS = ("llama-3.1-8b", "qwen2.5-14b")
KENTINO_GPUS = ("rtx-5090", "rtx-pro-6000", "l40", "l4")


def random_rfq_data(rng: random.Random, index: int) -> dict:
    workloads = []
    for w in range(rng.randint(1, 3)):
        kind = rng.choice(("inference", "inference", "batch_inference", "lora"))
        name = f"w{w}"
        if kind == "inference":
            work = {"name": name, "kind": kind, "model": rng.choice(SERVE_MODELS),
                    "precision": rng.choice(("fp8", "bf16")), "input_tokens": 1000,
                    "output_tokens": 200, "ttft_ms": 2000, "tpot_ms": 50}
            if rng.random() < 0.6:
                work["concurrency"] = rng.choice((48, 96, 192))
            else:
                work["qps"] = rng.choice((6.0, 15.0, 40.0))
        elif kind == "batch_inference":
            work = {"name": name, "kind": kind, "model": rng.choice(SERVE_MODELS),
                    "precision": "fp8", "requests": rng.choice((200_000, 1_000_000)),
                    "input_tokens": 1000, "output_tokens": 200, "deadline_hours": 24}
        else:
            work = {"name": name, "kind": kind, "model": rng.choice(TUNE_MODELS),
                    "precision": "bf16", "dataset_tokens": rng.choice((50_000_000, 300_000_000)),
                    "epochs": 1, "seq_len": 4096, "deadline_hours": rng.choice((6, 24, 72))}
        workloads.append(work)
    return {"id": f"oracle-{index}", "customer": "oracle", "horizon_years": 3,
            "objective": rng.choice(("tco", "tco", "capex")),
            "constraints": {"vendor": "kentino",
                            "gpus": rng.sample(KENTINO_GPUS, rng.choice((1, 2, 3))),
                            "fabrics": [rng.choice(("100gbe", "ib-hdr-200"))]},
            "workloads": workloads}


LIMITS = {"max_gpus": "gpus", "max_power_kw": "power_kw", "max_rack_units": "rack_units"}


def random_instances(cat, seed: int):
    """(rfq, limit kinds set to bind, the oracle's answer), drawn without end: each RFQ is
    first solved by the oracle without limits, then one or two limits are set below what that
    optimum uses (and sometimes one above), so that they bind (or make the RFQ infeasible).
    An RFQ too large to search exhaustively is drawn anew (the instance is restricted,
    never the enumeration)."""
    rng = random.Random(seed)
    index = drawn = too_large = 0
    while True:
        index += 1
        data = random_rfq_data(rng, index)
        try:
            instance = _bind_limits(cat, rng, data)
        except SearchTooLarge:
            too_large += 1
            assert too_large <= 8 + drawn, "most random instances are too large for the oracle"
            continue
        if instance is not None:
            drawn += 1
            yield instance


def _bind_limits(cat, rng, data):
    """(rfq, limits set to bind, the oracle's answer) for one drawn RFQ, or None where the
    unlimited optimum leaves no room to trade nodes."""
    from solver.rfq.schema import validate_rfq

    free = oracle(cat, validate_rfq(data, cat))
    if free.cost is None or not 2 <= free.priced.nodes <= 6:  # room to trade nodes
        return None
    binding = []
    load = validate_rfq(data, cat).facility.continuous_load_factor  # power limits are circuits
    for limit in rng.sample(sorted(LIMITS), rng.choice((1, 1, 2))):
        used = getattr(free.priced, LIMITS[limit])
        if limit == "max_power_kw":
            used /= load  # the circuit whose continuous share the optimum draws
        if rng.random() < 0.2:  # a limit that does not bind
            data["constraints"][limit] = (round(used * 1.3, 2) if limit == "max_power_kw"
                                          else int(used * 1.3) + 1)
            continue
        if limit == "max_power_kw":
            values = [round(used * f, 2) for f in (0.99, 0.97, 0.9, 0.75, 0.5)]
        else:
            values = sorted({max(1, v) for v in (used - 1, used - 2, int(used * 0.75),
                                                 int(used * 0.5))}, reverse=True)
        # the loosest value below what the unlimited optimum uses that still has a plan
        # (the limit then shapes the optimum), or now and then the tightest (infeasible)
        value = values[-1]
        if rng.random() < 0.75:
            for v in values:
                data["constraints"][limit] = v
                if oracle(cat, validate_rfq(data, cat)).cost is not None:
                    value = v
                    break
        data["constraints"][limit] = value
        binding.append(limit)
    rfq = validate_rfq(data, cat)
    return rfq, binding, oracle(cat, rfq)


@pytest.mark.slow
def test_random_rfqs_match_the_oracle_and_limits_bind(cat):
    started = time.perf_counter()
    binds: dict[str, int] = dict.fromkeys(LIMITS, 0)
    changed = dict.fromkeys(LIMITS, 0)
    infeasible = 0
    # at least 24 instances, and on until every limit kind has shaped a feasible optimum and
    # one instance is infeasible (a bound-shaped optimum is rarer than an infeasible one:
    # one node fewer is often no plan at all), at most 72
    for n, (rfq, binding, found) in enumerate(random_instances(cat, seed=20261203), 1):
        check_against_solve(cat, rfq, found)
        for limit in binding:
            binds[limit] += 1
            if found.cost is not None:
                changed[limit] += 1  # a feasible optimum shaped by the limit
        infeasible += found.cost is None
        if n >= 72 or (n >= 24 and all(changed.values()) and infeasible):
            break
    print(f"binding {binds}, with a plan {changed}, infeasible {infeasible}, "
          f"{time.perf_counter() - started:.0f} s")
    assert all(changed.values()), changed
    assert infeasible >= 1


# --- the time-limited path ------------------------------------------------------------------

@pytest.mark.slow
def test_time_limited_solve_is_reported_as_feasible_or_timeout(cat):
    """A 12-workload portfolio (solver.rfq.portfolio, seed 205) that HiGHS does not prove in
    seconds, solved under growing time limits. A limit that passes while candidates are
    built is ``timeout`` with no plan (never ``infeasible``); a short one gives ``feasible``
    with its gap, or still ``timeout``. Which status a limit gives depends on the machine,
    so each outcome is checked for what it reports: a feasible plan is whole, its gap in
    (0, 1], and its bound objective x (1 - gap) no higher than any plan found; a plan
    reported ``optimal`` is no dearer than any other."""
    from solver.rfq.portfolio import portfolio_rfq
    from solver.rfq.schema import validate_rfq

    rfq = validate_rfq(portfolio_rfq(12, 205), cat)
    names = {w.name for w in rfq.workloads}
    seen = []
    for limit in (1e-9, 3.0, 6.0, 10.0, 15.0, 30.0):
        plan = solve_rfq(rfq, cat, time_limit=limit, explain=False).to_json()
        status = plan["status"]
        assert status in ("timeout", "feasible", "optimal"), (limit, status)
        if status == "timeout":
            assert plan["cost"] is None and plan["cluster"]["total_nodes"] == 0
            assert "time limit" in plan["infeasibility"]["reasons"][0]
            seen.append((limit, status, None, None))
            continue
        objective = plan_objective(plan, rfq)
        assert {w["name"] for w in plan["workloads"]} == names
        assert objective > 0 and plan["cluster"]["total_nodes"] > 0
        if status == "optimal":
            assert plan["gap"] == 0
        else:
            assert 0 < plan["gap"] <= 1, plan["gap"]
        seen.append((limit, status, objective, objective * (1 - plan["gap"])))
    print(seen)
    assert seen[0][1] == "timeout"  # a deadline before the MIP is a timeout, not infeasible
    found = [row for row in seen if row[2] is not None]
    for _, status, objective, bound in found:
        for _, _, other, _ in found:
            assert bound <= other * (1 + 1e-6), seen  # the reported gap is a valid bound
            if status == "optimal":
                assert objective <= other * (1 + 1e-6), seen
