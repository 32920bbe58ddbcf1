"""The MIP is exact: known answers, a brute-force oracle on random small instances (every
installed backend), and the packing argument of solver/optimize/mip.py checked by explicit packing."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from solver.catalog.data import Fabric
from solver.optimize.backends import installed_backends
from solver.optimize.costs import CostParams, NodeCost
from solver.optimize.mip import Demand, Limits, build_model, replica_bound
from solver.optimize.network import switch_counts
from solver.optimize.plan import chosen, cost_breakdown
from solver.optimize.records import Candidate, CandidateTable, NodeType
from solver.optimize.solve import run_mip
from solver.physics.layout import Estimate, Layout, MemoryBreakdown, Prediction, Workload
from solver.rfq.schema import Facility, Rfq

BACKENDS = installed_backends()
# the long random sweeps run on the default backend in the default run, on CBC (a
# subprocess per solve, ~4x slower) under the `slow` marker that CI also runs
SWEEP_BACKENDS = [pytest.param(b, marks=pytest.mark.slow) if b == "cbc" else b
                  for b in BACKENDS]
PARAMS = CostParams(horizon_years=3, electricity_usd_per_kwh=0.12, pue=1.4, load_factor=0.7,
                    operations_usd_per_node_year=8000, node_engineering_usd_per_year=15000,
                    multinode_overhead_factor=4.5, shared_storage_usd=25000,
                    shared_storage_usd_per_node=3000, rack_unit_usd_per_year=300,
                    frontend_switch_usd=3000, frontend_ports_per_switch=4,
                    frontend_ports_per_node=2, frontend_cable_usd=50)
# small switches so that the oracle instances need two tiers (leaf/spine) now and then
FABRICS = {fid: Fabric(id=fid, name=fid, family=family, effective_gbs=10, latency_us=2,
                       nic_price_usd=1000, cable_price_usd=cable, switch_port_price_usd=port,
                       ports_per_switch=radix, source="test fabric", as_of="2026-12")
           for fid, family, cable, port, radix in (("ib-hdr-200", "infiniband", 600, 500, 4),
                                                   ("100gbe", "ethernet", 200, 250, 6))}


def frontend_usd(nodes: int, lan_ports: int = 0) -> float:
    """Front-end Ethernet of ``nodes`` nodes under PARAMS: 2 ports each on 4-port switches,
    none while they fit the site's ``lan_ports`` free LAN ports (issue 28)."""
    ports = 2 * nodes
    sw = switch_counts(0 if ports <= lan_ports else ports, 4)
    return 3000 * sw.switches + 50 * (sw.uplinks + ports)


def fabric_usd(fabric: str, ports: int) -> float:
    """Switches and leaf-to-spine links of a test fabric with ``ports`` node ports."""
    fab = FABRICS[fabric]
    sw = switch_counts(ports, fab.ports_per_switch)
    return fab.switch_price_usd * sw.switches + fab.cable_price_usd * sw.uplinks
MEM = MemoryBreakdown(1, 0, 0, 0, 1, 96, 0.01, 0.01)


def node(server: str, gpu: str, gpus: int, price: float, nics: int = 1) -> NodeType:
    cost = NodeCost(gpus_usd=gpus * price, server_usd=20000 + 1000 * gpus,
                    power_usd=gpus * 1500.0, operations_usd=70000.0, power_kw=0.6 * gpus + 1,
                    rack_units=4)
    return NodeType(server, gpu, gpus, cost, nics)


def cand(workload: str, kind: str, nt: NodeType, gpus: int, nodes: int = 1,
         fabric: str = "none", conc: float = 0, qps: float = 0, hours: float | None = None,
         net: float = 0.0, tag: str = "") -> Candidate:
    layout = Layout(model="m", gpu=nt.gpu, precision="fp8", tp=gpus, gpus_per_node=nt.gpus,
                    fabric=fabric)
    est = Estimate(layout, Workload(kind=kind), True, True, MEM,
                   Prediction(tokens_per_s=100.0, tokens_per_s_per_gpu=100.0 / gpus))
    return Candidate(workload, kind, nt.key, layout, est, gpus, nodes, fabric, net, conc, qps,
                     hours, name=f"{workload}|{nt.key}|{gpus}|{fabric}|{tag}")


def spec(name: str, kind: str, concurrency: float = 0, qps: float = 0, **kw) -> dict:
    """One workload of a real RFQ (:func:`rfq_of`); serving at ``target_utilization`` 1 (the
    capacity bought is the demand stated) unless ``kw`` says otherwise."""
    data: dict = {"name": name, "kind": kind, "model": "m", **kw}
    if kind == "inference":
        data.update(input_tokens=1000, output_tokens=100, concurrency=int(concurrency) or None,
                    qps=qps or None)
        data.setdefault("target_utilization", 1.0)
    elif kind == "batch_inference":  # demand = requests over the deadline
        data.update(input_tokens=1000, output_tokens=100, requests=int(qps * 3600.0),
                    deadline_hours=1.0)
    else:
        data.update(dataset_tokens=10**9, deadline_hours=100.0)
    return data


def rfq_of(specs, objective="tco", lan_ports=0, **limits) -> Rfq:
    """A real RFQ (validated without a catalog: the candidates are built by hand).
    ``lan_ports``: the site's free LAN ports (0 here: every node's front-end is switched,
    as the known answers below count it; the site LAN has its own tests)."""
    constraints = {k: limits[k] for k in ("max_nodes", "max_gpus", "max_power_kw",
                                          "max_rack_units") if limits.get(k) is not None}
    # batch demand at the deadline itself (headroom 0): round requests/s keep CP-SAT's
    # integer scaling exact; the headroom has its own tests (tests/test_facility.py)
    return Rfq.model_validate({"id": "t", "workloads": specs, "objective": objective,
                               "constraints": constraints, "deadline_headroom": 0.0,
                               "facility": {"lan_ports": lan_ports},
                               "budget_usd": limits.get("budget_usd")})


def stated(s) -> Demand:
    """The demand a workload states, read off the RFQ independently of the MIP."""
    if s.kind == "inference":
        return Demand(s.concurrency or 0.0, s.qps or 0.0)
    if s.kind == "batch_inference":  # done within 90 % of the deadline (headroom 0.1, issue 28)
        return Demand(0.0, s.requests / (s.deadline_hours * 3600.0))
    return Demand()


def table_of(types, cands, fabrics=("ib-hdr-200",)) -> CandidateTable:
    by_workload: dict[str, list[Candidate]] = {}
    for c in cands:
        by_workload.setdefault(c.workload, []).append(c)
    return CandidateTable({t.key: t for t in types}, {f: FABRICS[f] for f in fabrics},
                          by_workload, PARAMS, {})


# --- brute force: an independent statement of the cost model ------------------------------

def brute_force(table: CandidateTable, rfq, objective: str = "tco") -> float | None:
    specs = {s.name: s for s in rfq.workloads}
    names = list(table.candidates)
    ranges = []
    for name in names:
        spec_ = specs[name]
        for c in table.candidates[name]:
            if c.is_job:
                ranges.append(range(2))
            else:
                ranges.append(range(replica_bound(c, stated(spec_)) + 1))
    flat = [c for name in names for c in table.candidates[name]]
    best = None
    for counts in itertools.product(*ranges):
        ok = True
        for name in names:
            sel = [(c, n) for c, n in zip(flat, counts, strict=True) if c.workload == name]
            s = specs[name]
            if s.kind in ("lora", "full_finetune", "pretrain", "qlora"):
                ok &= sum(n for _, n in sel) == 1
            else:
                need = stated(s)
                ok &= sum(c.concurrency_capacity * n for c, n in sel) >= need.concurrency - 1e-9
                ok &= sum(c.qps_capacity * n for c, n in sel) >= need.qps - 1e-9
        if not ok:
            continue
        cost = plan_cost(table, rfq, flat, counts, objective)
        if cost is None:
            continue
        if best is None or cost < best:
            best = cost
    return best


def plan_cost(table: CandidateTable, rfq, flat: list[Candidate], counts, objective: str
              ) -> float | None:
    """The cost of buying ``counts`` replicas of the candidates ``flat`` (an independent
    statement of the cost model: whole nodes, front-end, fabric switches, storage, the
    coupled-node overhead), or None when it breaks a fabric rule, a limit or the budget."""
    overhead = PARAMS.overhead_per_extra_coupled_node_usd if objective == "tco" else 0.0
    used_fabrics = {c.fabric for c, n in zip(flat, counts, strict=True) if n and c.spanning}
    if len(used_fabrics) > 1:
        return None
    cost = 0.0
    nodes_total = gpus_total = 0
    power = 0.0
    for key, t in table.node_types.items():
        g = sum(c.gpus * n for c, n in zip(flat, counts, strict=True) if c.node_type == key)
        count = math.ceil(g / t.gpus)
        nodes_total += count
        gpus_total += count * t.gpus
        power += count * t.cost.power_kw
        per = t.cost.capex_usd + (t.cost.power_usd + t.cost.operations_usd
                                  if objective == "tco" else 0.0)
        cost += count * per
    coupled = sum(c.nodes_spanned * n for c, n in zip(flat, counts, strict=True)
                  if c.spanning)
    cost += sum(c.network_usd * n for c, n in zip(flat, counts, strict=True))
    cost += frontend_usd(nodes_total, rfq.facility.lan_ports)
    for fabric in used_fabrics:
        cost += fabric_usd(fabric, sum(
            table.node_types[c.node_type].fabric_nics * c.nodes_spanned * n
            for c, n in zip(flat, counts, strict=True) if c.spanning and c.fabric == fabric))
    if coupled:
        cost += PARAMS.shared_storage_usd + PARAMS.shared_storage_usd_per_node * coupled
    # the guide's overhead is per coupled group: a group spanning n nodes pays n - 1
    cost += overhead * sum((c.nodes_spanned - 1) * n
                           for c, n in zip(flat, counts, strict=True) if c.spanning)
    lim = rfq.constraints
    if lim.max_nodes is not None and nodes_total > lim.max_nodes:
        return None
    if lim.max_gpus is not None and gpus_total > lim.max_gpus:
        return None
    # continuous load: full-load power <= 0.8 x max_power_kw (issue 28)
    if lim.max_power_kw is not None and power > 0.8 * lim.max_power_kw + 1e-9:
        return None
    if rfq.budget_usd is not None and cost > rfq.budget_usd + 1e-6:
        return None
    return cost


def mip_cost(table, rfq, backend, objective="tco") -> float | None:
    solution = run_mip(table, rfq, solver=backend, objective=objective)
    if solution.status == "infeasible":
        return None
    assert solution.status == "optimal", solution
    return solution.objective


# --- known answers ----------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_one_eight_gpu_box_beats_two_four_gpu_boxes(backend):
    """A job of 8 GPUs: one 8-GPU node vs two coupled 4-GPU nodes (the guide's trap)."""
    n8 = node("pcie-8gpu", "g", 8, 8000)
    n4 = node("pcie-4gpu", "g", 4, 8000)
    cands = [cand("tune", "lora", n8, 8, hours=10),
             cand("tune", "lora", n4, 8, nodes=2, fabric="ib-hdr-200", hours=12, net=4600)]
    rfq = rfq_of([spec("tune", "lora")])
    table = table_of([n8, n4], cands)
    solution = run_mip(table, rfq, solver=backend)
    picks = chosen(table, solution)
    assert picks["tune"][0][0].node_type == n8.key
    assert solution.objective == pytest.approx(n8.cost.tco_usd + frontend_usd(1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_replicas_share_nodes_and_pay_no_overhead(backend):
    """Throughput-bound serving: independent replicas, packed, no fabric, no overhead."""
    n8 = node("pcie-8gpu", "g", 8, 8000)
    cands = [cand("chat", "inference", n8, 4, conc=40, qps=3)]
    rfq = rfq_of([spec("chat", "inference", concurrency=150, qps=0)])
    table = table_of([n8], cands)
    solution = run_mip(table, rfq, solver=backend)
    # 150 / 40 -> 4 replicas of 4 GPUs = 16 GPUs = 2 nodes, independent
    assert solution.values["x[" + cands[0].name + "]"] == 4
    assert solution.values[f"N[{n8.key}]"] == 2
    assert solution.values["K"] == 0
    # independent nodes still take front-end ports: 4 ports = one 4-port switch + 4 cables
    assert frontend_usd(2) == 3000 + 4 * 50
    assert solution.objective == pytest.approx(2 * n8.cost.tco_usd + frontend_usd(2))
    cost = cost_breakdown(table, solution.values)
    assert cost["multinode_overhead_usd"] == 0 and cost["network_usd"] == frontend_usd(2)
    assert cost["tco_usd"] == pytest.approx(solution.objective)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("concurrency", "lan_ports", "nodes", "switches"), [
    (30, 2, 1, 0),    # one node, 2 ports: the site's LAN takes them, cables only
    (30, 0, 1, 1),    # a site with no free LAN port: one switch for the one node
    (70, 2, 2, 1),    # 4 ports > 2: the plan brings one 4-port switch for all of them
    (70, 4, 2, 0),    # 4 ports fit 4 free LAN ports
    (100, 4, 3, 5),   # 6 ports > 4: a leaf/spine of 4-port switches (3 leaves + 2 spines)
])
def test_site_lan_takes_small_plans_issue_28(backend, concurrency, lan_ports, nodes, switches):
    """Issue 28: a plan whose front-end ports fit the site's free LAN ports
    (facility.lan_ports) buys no front-end switch; above them it switches all its ports."""
    n8 = node("pcie-8gpu", "g", 8, 8000)
    cands = [cand("chat", "inference", n8, 8, conc=40, qps=3)]
    rfq = rfq_of([spec("chat", "inference", concurrency=concurrency, qps=0)],
                 lan_ports=lan_ports)
    table = table_of([n8], cands)
    solution = run_mip(table, rfq, solver=backend)
    assert solution.values[f"N[{n8.key}]"] == nodes
    sw = switch_counts(2 * nodes, 4)
    frontend = 50 * 2 * nodes + (3000 * sw.switches + 50 * sw.uplinks if switches else 0)
    assert (sw.switches if switches else 0) == switches
    assert frontend == frontend_usd(nodes, lan_ports)
    assert solution.objective == pytest.approx(nodes * n8.cost.tco_usd + frontend)
    assert cost_breakdown(table, solution.values)["network_usd"] == pytest.approx(frontend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_coupled_cluster_pays_overhead_per_extra_node(backend):
    n8 = node("pcie-8gpu", "g", 8, 8000)
    job = cand("pre", "pretrain", n8, 32, nodes=4, fabric="ib-hdr-200", hours=5, net=4 * 2300)
    rfq = rfq_of([spec("pre", "pretrain")])
    table = table_of([n8], [job])
    solution = run_mip(table, rfq, solver=backend)
    # 4 fabric ports on one 4-port switch ($2,000); front-end 8 ports > 4: two tiers,
    # ceil(8/2) = 4 leaves + ceil(2*4/4) = 2 spines = 6 switches, 8 uplinks
    assert frontend_usd(4) == 6 * 3000 + 50 * (8 + 8)
    expected = (4 * n8.cost.tco_usd + 4 * 2300 + PARAMS.shared_storage_usd
                + 4 * PARAMS.shared_storage_usd_per_node + frontend_usd(4) + 2000
                + 3 * PARAMS.overhead_per_extra_coupled_node_usd)
    assert solution.objective == pytest.approx(expected)
    cost = cost_breakdown(table, solution.values)
    assert cost["multinode_overhead_usd"] == pytest.approx(
        3 * 3.5 * PARAMS.node_engineering_usd_per_year * 3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_independent_two_node_replicas_pay_overhead_once_each(backend):
    """Three independent 2-node replicas are three coupled groups: 3 O, not (6 - 1) O."""
    n8 = node("pcie-8gpu", "g", 8, 8000)
    rep = cand("big", "inference", n8, 16, nodes=2, fabric="ib-hdr-200", conc=10, qps=1,
               net=2 * 2300)
    rfq = rfq_of([spec("big", "inference", concurrency=30)])
    table = table_of([n8], [rep])
    solution = run_mip(table, rfq, solver=backend)
    assert solution.values[f"x[{rep.name}]"] == 3 and solution.values["K"] == 6
    overhead = PARAMS.overhead_per_extra_coupled_node_usd
    assert overhead == pytest.approx(3.5 * 15000 * 3)
    cost = cost_breakdown(table, solution.values)
    assert cost["multinode_overhead_usd"] == pytest.approx(3 * overhead)
    expected = (6 * n8.cost.tco_usd + 3 * 2 * 2300 + PARAMS.shared_storage_usd
                + 6 * PARAMS.shared_storage_usd_per_node + 3 * overhead
                + frontend_usd(6) + fabric_usd("ib-hdr-200", 6))
    assert solution.objective == pytest.approx(expected)
    assert brute_force(table, rfq) == pytest.approx(expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_limits_make_it_infeasible(backend):
    n8 = node("pcie-8gpu", "g", 8, 8000)
    cands = [cand("chat", "inference", n8, 8, conc=10)]
    rfq = rfq_of([spec("chat", "inference", concurrency=35)], max_nodes=3)
    assert run_mip(table_of([n8], cands), rfq, solver=backend).status == "infeasible"
    rfq = rfq_of([spec("chat", "inference", concurrency=35)], max_nodes=4)
    assert run_mip(table_of([n8], cands), rfq, solver=backend).status == "optimal"


def test_buying_an_unused_fabric_earns_nothing():
    """K - z must never go negative: a fabric without spanning jobs is not 'free overhead'."""
    n8 = node("pcie-8gpu", "g", 8, 8000)
    cands = [cand("chat", "inference", n8, 8, conc=10)]
    rfq = rfq_of([spec("chat", "inference", concurrency=10)])
    solution = run_mip(table_of([n8], cands), rfq, solver="cbc")
    assert solution.values["z[ib-hdr-200]"] == 0
    assert solution.objective == pytest.approx(n8.cost.tco_usd + frontend_usd(1))


# --- random instances against the oracle ---------------------------------------------------

def random_instance(rng: random.Random):
    types = []
    for gpu in rng.sample(["a", "b", "c"], rng.randint(1, 2)):
        price = rng.choice([2000, 8000, 15000])
        for size in rng.sample([2, 4, 8], rng.randint(1, 2)):
            types.append(node(f"s{size}", gpu, size, price, nics=rng.choice([1, 1, 2])))
    specs = []
    cands = []
    for w in range(rng.randint(1, 3)):
        kind = rng.choice(["inference", "inference", "batch_inference", "lora"])
        name = f"w{w}"
        if kind == "lora":
            specs.append(spec(name, kind))
        else:
            specs.append(spec(name, kind, concurrency=rng.choice([0, 10, 30]) if
                              kind == "inference" else 0, qps=rng.choice([0.5, 2.0, 5.0])))
        for i in range(rng.randint(1, 3)):
            t = rng.choice(types)
            if rng.random() < 0.25:
                nodes = 2
                size = nodes * t.gpus
                fabric = rng.choice(["ib-hdr-200", "100gbe"])
                net = nodes * rng.choice([1000, 4000])
            else:
                nodes, fabric, net = 1, "none", 0.0
                size = rng.choice([g for g in (1, 2, 4, 8) if g <= t.gpus])
            if kind == "lora":
                cands.append(cand(name, kind, t, size, nodes, fabric, hours=5, net=net,
                                  tag=str(i)))
            else:
                cands.append(cand(name, kind, t, size, nodes, fabric,
                                  conc=rng.choice([8, 16, 40]), qps=rng.choice([0.75, 1.5, 4.0]),
                                  net=net, tag=str(i)))
    limits = {}
    if rng.random() < 0.3:
        limits["max_nodes"] = rng.randint(1, 4)
    if rng.random() < 0.2:
        limits["budget_usd"] = rng.choice([200000, 400000, 800000])
    rfq = rfq_of(specs, objective=rng.choice(["tco", "tco", "capex"]), **limits)
    return table_of(types, cands, fabrics=("ib-hdr-200", "100gbe")), rfq


def search_size(table: CandidateTable, rfq) -> int | None:
    """Points the brute force enumerates (every replica count up to what meets the stated
    demand, a job's candidate on or off); None when a workload has no candidate."""
    if not all(table.candidates.get(s.name) for s in rfq.workloads):
        return None
    size = 1
    for name, cs in table.candidates.items():
        s = next(x for x in rfq.workloads if x.name == name)
        for c in cs:
            size *= 2 if c.is_job else replica_bound(c, stated(s)) + 1
    return size


def _instances(count: int, seed: int):
    """Random instances; every other one on a site whose LAN takes 2, 4 or 8 front-end ports
    (issue 28: switches only above them), drawn from a second generator so that the
    instances themselves are those of the seed."""
    rng = random.Random(seed)
    lan = random.Random(seed + 1)
    out = []
    while len(out) < count:
        table, rfq = random_instance(rng)
        size = search_size(table, rfq)
        if size is not None and size <= 4000:
            if len(out) % 2:
                rfq = rfq.model_copy(update={"facility": Facility(
                    lan_ports=lan.choice([2, 4, 8]))})
            out.append((table, rfq))
    return out


INSTANCES = _instances(200, seed=20261202)


@pytest.mark.parametrize("backend", SWEEP_BACKENDS)
def test_mip_matches_brute_force_on_200_random_instances(backend):
    mismatches = []
    for index, (table, rfq) in enumerate(INSTANCES):
        expected = brute_force(table, rfq, rfq.objective)
        got = mip_cost(table, rfq, backend, rfq.objective)
        if expected is None or got is None:
            if expected is not got:
                mismatches.append((index, expected, got))
        elif abs(got - expected) > 1e-6 * max(1.0, abs(expected)):
            mismatches.append((index, expected, got))
    assert not mismatches, mismatches[:5]


# --- the packing argument ------------------------------------------------------------------

def first_fit_decreasing(groups: list[int], node_size: int, nodes: int) -> bool:
    free = [node_size] * nodes
    for g in sorted(groups, reverse=True):
        for i, space in enumerate(free):
            if space >= g:
                free[i] -= g
                break
        else:
            return False
    return True


def test_power_of_two_groups_pack_whenever_gpu_count_fits():
    rng = random.Random(7)
    for _ in range(3000):
        node_size = rng.choice([1, 2, 4, 8])
        groups = [rng.choice([g for g in (1, 2, 4, 8) if g <= node_size])
                  for _ in range(rng.randint(1, 12))]
        nodes = math.ceil(sum(groups) / node_size)
        assert first_fit_decreasing(groups, node_size, nodes), (groups, node_size)


def test_packing_can_fail_without_powers_of_two():
    """Why the sizes are restricted: 3-GPU groups do not pack into 4-GPU nodes by count."""
    assert not first_fit_decreasing([3, 3, 2], 4, 2)


def test_model_names_variables_readably():
    n8 = node("pcie-8gpu", "rtx-pro-6000", 8, 8000)
    c = cand("chat", "inference", n8, 4, conc=10)
    model = build_model(table_of([n8], [c]), rfq_of([spec("chat", "inference", concurrency=5)]),
                        Limits())
    assert "N[pcie-8gpu/rtx-pro-6000x8]" in model.variables
    assert any(v.startswith("x[chat|") for v in model.variables)
    assert {con.name.split("[")[0] for con in model.constraints} >= {
        "demand_concurrency", "packing", "coupled_nodes"}


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b == "cbc"])
def test_relaxation_bound_is_a_valid_lower_bound(backend):
    """The gap reported for a time-limited CBC run uses the LP bound: it must not exceed the
    integer optimum (else the gap would be understated)."""
    from solver.optimize.backends import get_backend

    for table, rfq in INSTANCES[:20]:
        model = build_model(table, rfq, Limits.from_rfq(rfq), rfq.objective)
        solver = get_backend(backend)
        exact = solver.solve(model)
        if exact.status != "optimal":
            continue
        bound = solver._relaxation_bound(model)
        assert bound is not None and bound <= exact.objective + 1e-6


# --- placement: first-fit decreasing on the bought nodes ------------------------------------

@pytest.mark.parametrize("backend", [b for b in ("highs", "cbc") if b in BACKENDS][:1])
def test_placement_is_valid_on_random_instances(backend):
    """Every chosen replica/job placed once, no node over capacity, spanning groups on whole
    nodes of their type, and exactly the bought nodes listed (200 seeded instances)."""
    from collections import Counter

    from solver.optimize.placement import place

    placed_any_spanning = False
    for table, rfq in INSTANCES:
        solution = run_mip(table, rfq, solver=backend, objective=rfq.objective)
        if solution.status != "optimal":
            continue
        nodes = {key: round(solution.values.get(f"N[{key}]", 0.0)) for key in table.node_types}
        picks = chosen(table, solution)
        placement = place(table, nodes, picks)
        assert Counter(n["type"] for n in placement) == +Counter(nodes)
        groups: dict[str, list] = {}
        for entry in placement:
            assert sum(r["gpus"] for r in entry["runs"]) <= entry["gpus"]
            for run in entry["runs"]:
                groups.setdefault(run["group"], []).append((entry, run))
        expected = Counter()
        for cands in picks.values():
            for c, n in cands:
                expected[c.name] += n
        got = Counter(group.rsplit("#", 1)[0] for group in groups)
        assert got == expected
        for parts in groups.values():
            run = parts[0][1]
            assert len(parts) == run["nodes_spanned"]
            if run["nodes_spanned"] > 1:
                placed_any_spanning = True
                assert all(r["gpus"] == e["gpus"] and e["type"] == parts[0][0]["type"]
                           for e, r in parts)
    assert placed_any_spanning
