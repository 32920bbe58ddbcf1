r"""The procurement MIP: what to buy and how to lay every workload out on it.

Sets
    T           node types t = (server, GPU SKU, GPUs populated k_t)      (candidates.NodeType)
    F           fabrics f allowed by vendor profile and RFQ (not ``none``)
    W_s, W_j    serving workloads (inference, batch inference) and training jobs
    C_w         candidates of workload w; each c has node type t(c), GPUs g_c, nodes spanned
                n_c (1 = inside one node), fabric f(c) (``none`` when n_c = 1), network cost
                net_c (its nodes' fabric NICs and node-to-switch cables), and capacity:
                concurrency m_c, QPS q_c (serving) or hours h_c (jobs)
    E           switched networks: the front-end Ethernet ``fe`` (every node) and each fabric

Parameters
    cost_t      per-node cost over the horizon (objective-dependent: capex, or TCO = capex +
                power + operations incl. each node's own engineering)
    P_t, U_t    full-load power (kW) and rack units of one node of type t
    S, s        shared-storage cost of a coupled cluster (fixed, and per coupled node)
    st_w        checkpoint + dataset storage of training job w (solver/optimize/storage.py; the same
                for every owned candidate of w, so charged on each owned x[c], c ∈ C_w; a
                rented job buys none: its data stays on the rented instances' disks)
    e_t, fe     fabric NICs per node of type t; front-end ports per node, cable price fe_c
    R_e, H_e    ports of one switch of network e, H_e = floor(R_e / 2);
                sw_e, up_e: switch price, price of one leaf-to-spine link
    O           extra engineering cost of each coupled node beyond the first *of one
                coupled group*: (overhead factor - 1) × engineering per node-year × horizon.
                A group coupling h_c hosts pays (h_c - 1) O; independent replicas and
                in-node groups pay nothing (docs/buying-guide.md: "each additional node of a coupled
                cluster costs 4-5x the first" is per coupled job, not per estate).
                h_c = n_c on single-host nodes; a multi-host node (an NVL72 rack: 18
                hosts of 4 GPUs, ``Server.hosts``) couples n_c x 18 hosts when spanned and
                ceil(g_c / 4) inside one rack (``costs.coupled_hosts``)
    D^conc_w, D^qps_w   serving capacity to buy: the stated demand (concurrency, requests/s;
                batch: requests / deadline) divided by the workload's target utilisation
                u_w (inference: ``target_utilization``, default 0.8; batch: 1), so that the
                replicas run at u_w of what they can sustain within their SLOs
    r_c         replicas of candidate c lost when one node goes down: k_t(c) / g_c for an
                in-node candidate (its most replicas on one node), 1 for a spanning one

Variables
    N[t] ∈ Z≥0            nodes of type t bought
    z[f] ∈ {0,1}          fabric f bought (Σ_f z[f] ≤ 1; "coupled" = Σ_f z[f])
    x[c] ∈ Z≥0            replicas of serving candidate c;  x[c] ∈ {0,1} for a job candidate
    K ∈ Z≥0               coupled nodes (nodes of jobs or replicas that span nodes)
    b_k ∈ {0,1}           (only for ``redundancy: n+1``) loss levels, below
    L[e], S[e], U[e] ∈ Z≥0, y[e] ∈ {0,1}   leaf and spine switches, leaf-to-spine links and
                          "two tiers" of network e (solver/optimize/network.py), driven by its ports
                          P_fe = fe Σ_t N[t],  P_f = Σ_{c spanning on f} e_t(c) n_c x[c]

Objective
    min Σ_t (cost_t + fe fe_c) N[t] + Σ_c (net_c + st_w(c) + O (h_c - 1)) x[c]
        + S Σ_f z[f] + s K + Σ_e (sw_e (L[e] + S[e]) + up_e U[e])
    (capex objective: GPUs + servers + network + storage only, O = 0)
    + Σ_{c ∈ R} rent_c x[c]   for rented candidates R (solver/optimize/rental.py: whole instances of a
    rental offer for the job's hours, the batch deadline or the horizon; any objective).
    A rented c has no node type and spans no bought fabric: it is in no packing, fabric,
    coupled, switch, vendor-stack or owned-limit row - only its demand/one-job row and the
    budget.

Constraints (one block each in :func:`build_model`)
    demand      Σ_{c∈C_w} m_c x[c] ≥ D^conc_w,  Σ_{c∈C_w} q_c x[c] ≥ D^qps_w     (w ∈ W_s)
    n+1         for w with ``redundancy: n+1``, besides the demand rows, the capacity left
                after the largest one-node loss of the candidates used still meets it:
                Σ_{c'∈C_w} m_c' x[c'] - max_{c used} r_c m_c ≥ D^conc_w (and the same for
                QPS). Written with loss levels (issue 18): ℓ_1 < ... < ℓ_K the distinct
                values r_c m_c > 0 of C_w, b_k ∈ {0,1} "the loss is at least ℓ_k",
                    Σ m x - Σ_{k≥2} (ℓ_k - ℓ_{k-1}) b_k ≥ D^conc_w + ℓ_1,
                    b_{k-1} ≥ b_k,   x[c] ≤ x̄_c b_{k(c)}
                (ℓ_1 is always lost: a positive demand uses some candidate). Using c
                switches on every level up to its own, so the row subtracts exactly the
                largest loss used: the same integer points as the former per-candidate
                big-M rows Σ m x - r_c m_c a[c] ≥ D, x[c] ≤ x̄_c a[c] (kept behind
                ``build_model(reference=True)``; tests/test_mip_scale.py compares optima),
                one binary per distinct loss instead of per candidate, and a relaxation
                at least as tight (b_k ≥ x[c]/x̄_c for every c at level ≥ k).
                Why max_{c used} r_c m_c bounds the loss of any node of the
                placement below: a spanning replica has its nodes to itself (it loses
                r_c m_c = m_c); an in-node node of type t holds replicas of w's candidates
                with Σ g_c (replicas) ≤ k_t, so it carries at most
                k_t max_c (m_c / g_c) = max_c r_c m_c over the candidates used on it —
                mixing candidates on one node never loses more than the densest one.
                (Conservative when a workload fills only part of a node: the solver then
                keeps a node's worth of the densest layout spare.) No continuous variable,
                so CP-SAT takes it too.
    rounded     one Chvátal-Gomory cut per demand (and n+1) row, divided by the capacity d
                of the workload's cheapest candidate per unit of capacity:
                Σ ⌈a_c / d⌉ x[c] ≥ ⌈rhs / d⌉ — valid for every integer point, it cuts the
                relaxation's fractional replicas (e.g. 0.3 of a replica for a small demand)
    one job     Σ_{c∈C_w} x[c] = 1                                                (w ∈ W_j)
    packing     Σ_{c: t(c)=t} g_c x[c] ≤ k_t N[t]                                 (t ∈ T)
    fabric      x[c] ≤ M_c z[f(c)] for spanning c;  Σ_f z[f] ≤ 1
    coupled     K = Σ_{c spanning} n_c x[c];  z[f] ≤ Σ_{c spanning on f} n_c x[c]
    site LAN    the front-end's ports join the site's LAN while P_fe ≤ A = facility.lan_ports:
                o ∈ {0,1} "own front-end switches", P_fe ≤ A + Pmax o, and the switch rows
                below read P_fe - Pmax (1 - o) for P_fe (network.py): no switch at o = 0
    switches    R L ≥ P;  P ≤ R + M y;  H L ≥ P - M'(1 - y);  R S ≥ H L - H Lmax (1 - y);
                S ≥ y;  U ≥ H L - H Lmax (1 - y)                          (e ∈ E, network.py)
                so that at the optimum (L, S, U) = one switch when P ≤ R, else a leaf/spine
                with ceil(P/H) leaves, ceil(H L / R) spines and H L links — exactly what
                the bill of materials recounts from the plan (solver/optimize/bom.py). Big-M's come
                from P's upper bound (replica bounds; nodes ≤ what the candidates can fill).
    one stack   N[t] ≤ M_t v[s(t)],  Σ_s v[s] ≤ 1   (v[s] ∈ {0,1}; s = CUDA or ROCm; dropped
                when constraints.mixed_vendors; M_t = nodes that all of t's candidates fill)
    limits      Σ N ≤ max_nodes, Σ k_t N[t] ≤ max_gpus, Σ P_t N[t] ≤ max_power_kw,
                Σ U_t N[t] ≤ max_rack_units, objective ≤ budget
    bounds      every integer variable gets a finite upper bound derived from the rows
                above (solver/optimize/bounds.py): x[c] ≤ replicas that alone meet demand (plus,
                for n+1, the largest one-node loss max_c' r_c' m_c' / m_c),
                N[t] ≤ ⌈Σ_c g_c x̄_c / k_t⌉ and the limits, K ≤ Σ n_c x̄_c

Busy and quiet hours (``daily_profile``, issue 29)
    Two slots of the day: busy (the longest ``peak_hours`` of the services that state a
    profile) and quiet (the rest, Q hours). A profiled service p keeps xq[c] ≤ x[c] of its
    replicas in quiet hours, enough for its off-peak share: Σ m xq ≥ off_p D (and QPS).
    A recurring job whose window fits the quiet hours (window ≤ Q) runs there on an in-node
    candidate: its GPUs count in the quiet packing row only,
        quiet[t]: Σ_{c of profiled} g xq + Σ_{c of other serving, other jobs} g x
                  + Σ_{c quiet job} g x ≤ k_t N[t],
    and the busy packing row above leaves them out. So a nightly job that fits the
    service's idle quiet capacity buys nothing more. (n+1 is held at the busy hours.)

Best within a budget (``objective: max_served``, issue 29)
    s[w] ∈ Z, 0 ≤ s[w] ≤ 100 (a job: o[w] ∈ {0,1}): the share of w's planned demand
    served, in per cent. The demand rows become Σ m x - (D/100) s[w] ≥ 0 (n+1: the
    always-lost first level ℓ_1 is paid only when w is served at all, ℓ_1 o[w] with
    s[w] ≤ 100 o[w]); a job's row Σ x = o[w]; no rounded rows (their right-hand side
    is no longer a constant). The budget row stays on the TCO. Solved lexicographically
    (:func:`solver.optimize.solve.run_mip`): first max Σ_w priority_w share_w (the model's
    objective is its negative), then, with Σ priority_w share_w held at that optimum
    (``served_floor``), the lowest TCO.

Headroom at the optimum's cost (:func:`solver.optimize.solve.with_headroom`)
    The cost objective is indifferent to GPUs of a bought node that no workload needs. When
    the optimum leaves some idle (busy hours), the plan is re-solved with the nodes held at
    the optimum's, the objective held at its value (+ half a cent), every serving replica
    of the optimum kept (x[c] ≥ its value: replicas are only added; a job may move), the
    replica bounds widened to what those nodes hold, and max Σ_c h_c x[c]: h_c = a
    replica's concurrency and requests/s over the workload's planned demand (their mean where both are stated),
    a job's fastest hours over its own. Models of at most 1,000 columns (every scenario).

Solved by cases: with the one-stack rows, :func:`build_model` sets ``model.cases`` to one
fixing per stack (v[s] = 1, the others 0; a plan without owned nodes fits any case).
The backends (solver/optimize/backends.py) solve the cases in turn, each with the best objective
so far as a cutoff, and return the best: the same optimum, but each case's relaxation no
longer spreads nodes over both stacks (with v fractional, the relaxation of a 50-workload
portfolio mixed 11.5 CUDA and 10.5 ROCm nodes; the plan buys only ROCm).

Why the packing constraint is exact (not a relaxation): every in-node group size g_c is
one of ``records.in_node_sizes(k_t)`` - the powers of two that divide k_t, and k_t itself
(a power-of-two node: every power of two up to k_t; a 72-GPU NVL72 rack: 1, 2, 4, 8, 72) -
so each size divides every larger one and k_t, and a spanning group uses g_c = n_c k_t,
i.e. whole nodes. Place spanning groups first on whole nodes; then place the
in-node groups in decreasing size, first-fit. Because each size divides every larger one,
the free space of every node is always a multiple of the current group size, so a group is
only refused when every node is full — first-fit-decreasing therefore packs whenever the
total GPU count fits (Σ g_c x[c] ≤ k_t N[t]). ``tests/test_mip.py`` checks this against an
explicit bin packing. Replicas of different workloads share nodes of the same type.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from solver.optimize.bounds import tighten_bounds
from solver.optimize.costs import coupled_hosts, disaggregated_hosts
from solver.optimize.linear import LinearModel, TimeLimitReached, deadline_passed
from solver.optimize.network import add_switch_network, leaf_var, spine_var, uplink_var
from solver.optimize.records import Candidate, CandidateTable
from solver.rfq.schema import AnyWorkload, Rfq


@dataclass(frozen=True)
class Demand:
    """What one serving workload must sustain: concurrency and requests/s."""

    concurrency: float = 0.0
    qps: float = 0.0


def demand_of(spec: AnyWorkload) -> Demand:
    """Stated serving demand of an RFQ workload (batch: requests spread over the deadline)."""
    if spec.kind == "inference":  # the tagged union narrows on ``kind``
        return Demand(float(spec.concurrency or 0), float(spec.qps or 0.0))
    if spec.kind == "batch_inference":
        return Demand(0.0, spec.requests / (spec.planned_hours * 3600.0))
    return Demand()


def target_utilization(spec: AnyWorkload) -> float:
    """The share of bought capacity an online workload is planned to use (RFQ
    ``target_utilization``); 1 for batch inference and training."""
    return spec.target_utilization if spec.kind == "inference" else 1.0


def planned_demand(spec: AnyWorkload) -> Demand:
    """The capacity to buy for a serving workload: stated demand / target utilisation
    (headroom so replicas are not run at the edge of their SLOs)."""
    demand = demand_of(spec)
    util = target_utilization(spec)
    if util == 1.0:
        return demand
    # 12 significant digits: 48 / 0.8 is 60, not 60.00000000000001 (which would cost CP-SAT,
    # whose rows are scaled to integers conservatively, a replica more than HiGHS)
    return Demand(float(f"{demand.concurrency / util:.12g}"),
                  float(f"{demand.qps / util:.12g}"))


def needs_n_plus_1(spec: AnyWorkload) -> bool:
    """Whether an online workload asks for ``redundancy: n+1`` (any one node down)."""
    return spec.kind == "inference" and spec.redundancy == "n+1"


def replicas_per_node(cand: Candidate, node_gpus: int) -> int:
    """Most replicas of a candidate one node can hold, i.e. lose when it goes down:
    ``node GPUs / replica GPUs`` in-node (both powers of two), 1 for a spanning replica."""
    return 1 if cand.spanning else max(1, node_gpus // cand.gpus)


def units_lost(table: CandidateTable, cand: Candidate) -> int:
    """Replicas (rented: units) of ``cand`` that one failure takes: a whole node's worth
    of an owned candidate; one unit of a rented one (its capacity is per unit)."""
    if cand.rental is not None:
        return 1
    return replicas_per_node(cand, table.node_types[cand.node_type].gpus)


def node_loss(table: CandidateTable, cands: list[Candidate]) -> Demand:
    """The largest capacity one node can carry of any of these candidates (the n+1 spare
    that covers every choice among them): max_c r_c m_c and max_c r_c q_c. A rented
    candidate's capacity is per unit (instance, or instances of a spanning replica): one
    unit is what one failure takes."""
    conc = qps = 0.0
    for cand in cands:
        per_node = units_lost(table, cand)
        conc = max(conc, per_node * cand.concurrency_capacity)
        qps = max(qps, per_node * cand.qps_capacity)
    return Demand(conc, qps)


def node_var(key: str) -> str:
    return f"N[{key}]"


def cand_var(cand: Candidate) -> str:
    return f"x[{cand.name}]"


def fabric_var(fabric: str) -> str:
    return f"z[{fabric}]"


COUPLED_NODES = "K"
FRONTEND = "fe"


def fabric_net(fabric: str) -> str:
    """Network tag of a fabric (the front-end is ``fe``)."""
    return f"fab:{fabric}"


@dataclass
class Limits:
    """RFQ limits, as numbers (None = no limit)."""

    max_nodes: float | None = None
    max_gpus: float | None = None
    max_power_kw: float | None = None
    max_rack_units: float | None = None
    budget_usd: float | None = None

    @classmethod
    def from_rfq(cls, rfq: Rfq) -> Limits:
        c = rfq.constraints
        return cls(c.max_nodes, c.max_gpus, rfq.facility.power_limit_kw(c.max_power_kw),
                   c.max_rack_units, rfq.budget_usd)


def replica_bound(cand: Candidate, demand: Demand, spare: Demand | None = None) -> int:
    """An upper bound on useful replicas of one serving candidate: enough to meet the
    demand alone, plus (n+1) the largest one-node loss ``spare`` on top."""
    spare = spare or Demand()
    needed = 1
    if demand.concurrency and cand.concurrency_capacity:
        needed = max(needed, math.ceil((demand.concurrency + spare.concurrency)
                                       / cand.concurrency_capacity))
    if demand.qps and cand.qps_capacity:
        needed = max(needed, math.ceil((demand.qps + spare.qps) / cand.qps_capacity - 1e-9))
    return needed


def objective_terms(table: CandidateTable, objective: str) -> dict[str, dict[str, float]]:
    """Cost coefficient of each variable per cost term (the report splits the bill)."""
    p = table.params
    terms: dict[str, dict[str, float]] = {
        "gpus_usd": {}, "servers_usd": {}, "network_usd": {}, "storage_usd": {},
        "power_usd": {}, "operations_usd": {}, "multinode_overhead_usd": {}}
    for key, node in table.node_types.items():
        terms["gpus_usd"][node_var(key)] = node.cost.gpus_usd
        terms["servers_usd"][node_var(key)] = node.cost.server_usd
        if objective == "tco":
            terms["power_usd"][node_var(key)] = node.cost.power_usd
            terms["operations_usd"][node_var(key)] = node.cost.operations_usd
        if p.frontend_ports_per_node:
            terms["network_usd"][node_var(key)] = p.frontend_ports_per_node * p.frontend_cable_usd
    for name, cands in table.candidates.items():
        job_storage = table.storage.get(name)
        for cand in cands:
            if cand.network_usd:
                terms["network_usd"][cand_var(cand)] = cand.network_usd
            # a rented job keeps its data on the instances' own disks (rental.py): no storage
            if job_storage is not None and cand.is_job and not cand.rented and job_storage.usd:
                terms["storage_usd"][cand_var(cand)] = job_storage.usd
    networks = [(FRONTEND, p.frontend_switch_usd, p.frontend_cable_usd)]
    networks += [(fabric_net(f), fab.switch_price_usd, fab.cable_price_usd)
                 for f, fab in table.fabrics.items() if fab is not None]
    for tag, switch_usd, link_usd in networks:  # variables that build_model did not create
        terms["network_usd"][leaf_var(tag)] = switch_usd  # are dropped there (never bought)
        terms["network_usd"][spine_var(tag)] = switch_usd
        terms["network_usd"][uplink_var(tag)] = link_usd
    for fabric in table.fabrics:
        terms["storage_usd"][fabric_var(fabric)] = p.shared_storage_usd
    terms["storage_usd"][COUPLED_NODES] = p.shared_storage_usd_per_node
    if objective == "tco":
        # per coupled group: a replica or job coupling h_c hosts pays (h_c - 1) O
        overhead = p.overhead_per_extra_coupled_node_usd
        for cands in table.candidates.values():
            for cand in cands:
                hosts = candidate_hosts(table, cand)
                if hosts > 1:
                    terms["multinode_overhead_usd"][cand_var(cand)] = overhead * (hosts - 1)
    # rented capacity (solver/optimize/rental.py): what each rented unit costs, whatever the
    # objective
    terms["rental_usd"] = rental_terms(table)
    return terms


def candidate_hosts(table: CandidateTable, cand: Candidate) -> int:
    """Hosts candidate ``cand`` couples (``costs.coupled_hosts``): n_c for a group over n_c
    single-host nodes, 1 in one such node; a rented unit counts as one."""
    if cand.rented:
        return 1
    node = table.node_types[cand.node_type]
    if cand.prefill is not None and cand.nodes_spanned == 1:  # a disaggregated unit
        return disaggregated_hosts(node.hosts, node.gpus, [
            (cand.prefill.replica_gpus, cand.prefill.dp),
            (cand.layout.replica_gpus, cand.layout.dp)])
    return coupled_hosts(node.hosts, node.gpus, cand.gpus, cand.nodes_spanned)


def _switched_networks(model: LinearModel, table: CandidateTable, lan_ports: int = 0) -> None:
    """Switch variables of the front-end and of every fabric, driven by their ports
    (solver/optimize/network.py). Needs the candidate variables (their bounds size the big-M's).
    ``lan_ports``: front-end ports the site's LAN takes (``facility.lan_ports``): a plan
    within them buys no front-end switch."""
    high = {c.name: model.variables[cand_var(c)].high or 1
            for cands in table.candidates.values() for c in cands}
    p = table.params
    if p.frontend_ports_per_node:
        max_nodes = 0
        for key, node in table.node_types.items():
            gpus = sum(c.gpus * high[c.name] for cands in table.candidates.values()
                       for c in cands if c.node_type == key)
            max_nodes += math.ceil(gpus / node.gpus)
        add_switch_network(model, FRONTEND,
                           {node_var(k): float(p.frontend_ports_per_node)
                            for k in table.node_types},
                           p.frontend_ports_per_node * max_nodes, p.frontend_ports_per_switch,
                           lan_ports)
    for fabric, fab in table.fabrics.items():
        if fab is None:
            continue
        ports = {cand_var(c): float(table.node_types[c.node_type].fabric_nics * c.nodes_spanned)
                 for cands in table.candidates.values() for c in cands
                 if c.spanning and c.fabric == fabric}
        max_ports = sum(coeff * high[var[2:-1]] for var, coeff in ports.items())
        add_switch_network(model, fabric_net(fabric), ports, max_ports, fab.ports_per_switch)


def build_model(table: CandidateTable, rfq: Rfq, limits: Limits | None = None,
                objective: str | None = None, extra: list | None = None, *,
                reference: bool = False, served_floor: float | None = None,
                deadline: float | None = None) -> LinearModel:
    """Build the MIP of this module's docstring from a candidate table. ``reference``:
    the former model of issue 18 (per-candidate big-M n+1 rows, no rounded rows, no stack
    cases); the same optimum, tests/test_mip_scale.py compares them.

    ``objective`` ``max_served``: the served-share model (module docstring); without
    ``served_floor`` it maximises the priority-weighted share served, with it it holds
    that share ≥ ``served_floor`` and minimises the TCO.

    ``deadline`` (a ``time.perf_counter()`` instant): checked between the stages of the
    build, :class:`TimeLimitReached` once passed (a 100-workload model takes 1.3 s to build
    on a quiet 2-core machine, 1.5 s on a loaded one: more than a short limit leaves)."""
    limits = limits or Limits.from_rfq(rfq)
    objective = objective or rfq.objective
    served = objective == "max_served"
    model = LinearModel(name=f"procure-{rfq.id}")
    specs = {spec.name: spec for spec in rfq.workloads}
    _variables(model, table, specs, rfq.facility.lan_ports)
    _check(deadline)
    if served:
        _served_vars(model, table, specs)
    _objective(model, table, "tco" if served else objective)
    _workload_rows(model, table, specs, reference, served)
    _check(deadline)
    quiet = quiet_hours(rfq)
    _packing(model, table, quiet_jobs(table, specs, quiet))
    if quiet is not None:
        _quiet_hours(model, table, specs, quiet, served)
    _check(deadline)
    _one_vendor_stack(model, table, rfq)
    _fabric_and_coupled(model, table)
    _limit_rows(model, table, limits)
    _check(deadline)
    if served:
        weights = served_weights(table, specs)
        if served_floor is None:
            model.objective = {var: -w for var, w in weights.items()}
        else:
            model.add("served_floor", dict(weights), ">=", served_floor)
    _rack_row(model, table, rfq)
    for constraint in extra or []:
        model.constraints.append(constraint)
    # --- bounds: every integer variable gets a finite upper bound (solver/optimize/bounds.py) ----
    tighten_bounds(model)
    _check(deadline)
    if not reference:
        model.cases = _stack_cases(model, table, extra or [])
    return model


def _check(deadline: float | None) -> None:
    """Raise :class:`TimeLimitReached` once ``deadline`` has passed."""
    if deadline_passed(deadline):
        raise TimeLimitReached("the time limit ran out while the MIP was being built")


def _variables(model: LinearModel, table: CandidateTable,
               specs: dict[str, AnyWorkload], lan_ports: int = 0) -> None:
    """N[t], z[f], K, x[c] (bounded by the replicas that alone meet demand) and the
    switch variables of every network."""
    for key in table.node_types:
        model.var(node_var(key), 0, None)
    for fabric in table.fabrics:
        model.var(fabric_var(fabric), 0, 1)
    model.var(COUPLED_NODES, 0, None)
    for name, cands in table.candidates.items():
        demand = planned_demand(specs[name])
        spare = node_loss(table, cands) if needs_n_plus_1(specs[name]) else None
        for cand in cands:
            high = 1 if cand.is_job else replica_bound(cand, demand, spare)
            model.var(cand_var(cand), 0, high)
    _switched_networks(model, table, lan_ports)


SERVED_STEPS = 100
"""A serving workload's served share is chosen in steps of 1 % (integers: CP-SAT takes it)."""


def served_var(workload: str) -> str:
    return f"s[{workload}]"


def _served_vars(model: LinearModel, table: CandidateTable,
                 specs: dict[str, AnyWorkload]) -> None:
    """s[w]: per cent of a serving workload's planned demand served (0..100); o[w] ∈ {0,1}
    for a job (run or not)."""
    for name in table.candidates:
        serving = specs[name].kind in ("inference", "batch_inference")
        model.var(served_var(name), 0, SERVED_STEPS if serving else 1)


def served_weights(table: CandidateTable, specs: dict[str, AnyWorkload]) -> dict[str, float]:
    """Objective weight of each s[w]: priority × share per unit (a serving workload's unit
    is 1 %, a job's is the whole job)."""
    return {served_var(name): specs[name].priority
            * (1.0 / SERVED_STEPS if specs[name].kind in ("inference", "batch_inference")
               else 1.0)
            for name in table.candidates}


def served_share(values: dict[str, float], workload: str, kind: str) -> float:
    """The share (0..1) of a workload's planned demand a max_served solution serves."""
    units = round(values.get(served_var(workload), 0.0))
    return units / SERVED_STEPS if kind in ("inference", "batch_inference") else float(units)


def _objective(model: LinearModel, table: CandidateTable, objective: str) -> None:
    """The cost of every term, summed per variable (terms on variables not in the model,
    e.g. switches of a network that needs none, are dropped)."""
    terms = objective_terms(table, objective)
    for coeffs in terms.values():
        for var, coeff in coeffs.items():
            if var in model.variables:
                model.objective[var] = model.objective.get(var, 0.0) + coeff


def _workload_rows(model: LinearModel, table: CandidateTable, specs: dict[str, AnyWorkload],
                   reference: bool, served: bool = False) -> None:
    """Demand rows of every serving workload, one job row of every training job
    (``served``: the share served is a variable, module docstring)."""
    for name, cands in table.candidates.items():
        spec = specs[name]
        if spec.kind in ("inference", "batch_inference"):
            _serving_demand(model, table, name, cands, spec, reference, served)
        elif served:
            model.add(f"one_job[{name}]", {**{cand_var(c): 1.0 for c in cands},
                                           served_var(name): -1.0}, "==", 0.0)
        else:
            model.add(f"one_job[{name}]", {cand_var(c): 1.0 for c in cands}, "==", 1.0)


def quiet_hours(rfq: Rfq) -> float | None:
    """Hours a day when every service that states a ``daily_profile`` is quiet (24 - the
    longest peak); None when none states one."""
    peaks = [w.daily_profile.peak_hours for w in rfq.workloads
             if w.kind == "inference" and w.daily_profile is not None]
    return 24.0 - max(peaks) if peaks else None


def quiet_jobs(table: CandidateTable, specs: dict[str, AnyWorkload],
               quiet: float | None) -> set[str]:
    """Names of the candidates that run in the quiet hours: owned in-node candidates of a
    recurring job (batch or training) whose window fits the quiet hours."""
    if quiet is None or quiet <= 0:
        return set()
    out = set()
    for name, cands in table.candidates.items():
        spec = specs[name]
        if spec.kind == "inference" or spec.recurrence is None \
                or spec.deadline_hours > quiet + 1e-9:
            continue
        out |= {c.name for c in cands if not c.rented and not c.spanning}
    return out


def quiet_var(cand: Candidate) -> str:
    return f"xq[{cand.name}]"


def _quiet_hours(model: LinearModel, table: CandidateTable, specs: dict[str, AnyWorkload],
                 quiet: float, served: bool) -> None:
    """The quiet slot (module docstring): replicas each profiled service keeps, its
    off-peak demand, and the quiet packing row of every node type."""
    keep: dict[str, str] = {}  # candidate name -> the variable counting it in quiet hours
    for name, cands in table.candidates.items():
        spec = specs[name]
        profile = spec.daily_profile if spec.kind == "inference" else None
        for c in cands:
            keep[c.name] = cand_var(c)
        if profile is None:
            continue
        for c in cands:
            high = model.variables[cand_var(c)].high
            keep[c.name] = model.var(quiet_var(c), 0, high)
            model.add(f"quiet_subset[{c.name}]", {quiet_var(c): 1.0, cand_var(c): -1.0},
                      "<=", 0.0)
        demand = planned_demand(spec)
        for label, need, capacity in (("concurrency", demand.concurrency,
                                       "concurrency_capacity"),
                                      ("qps", demand.qps, "qps_capacity")):
            off = need * profile.off_peak_load
            if not off:
                continue
            coeffs = {quiet_var(c): getattr(c, capacity) for c in cands}
            if served:
                model.add(f"quiet_demand_{label}[{name}]",
                          {**coeffs, served_var(name): -off / SERVED_STEPS}, ">=", 0.0)
            else:
                model.add(f"quiet_demand_{label}[{name}]", coeffs, ">=", off)
    for key, node in table.node_types.items():
        coeffs = {keep[c.name]: float(c.gpus) for cands in table.candidates.values()
                  for c in cands if c.node_type == key}
        coeffs[node_var(key)] = -float(node.gpus)
        model.add(f"quiet_packing[{key}]", coeffs, "<=", 0.0)


def _packing(model: LinearModel, table: CandidateTable, night: set[str] | None = None) -> None:
    """GPUs of every group placed on nodes of its type (busy hours: the candidates in
    ``night`` run in the quiet hours only)."""
    night = night or set()
    for key, node in table.node_types.items():
        coeffs = {cand_var(c): float(c.gpus) for cands in table.candidates.values()
                  for c in cands if c.node_type == key and c.name not in night}
        coeffs[node_var(key)] = -float(node.gpus)
        model.add(f"packing[{key}]", coeffs, "<=", 0.0)


def _fabric_and_coupled(model: LinearModel, table: CandidateTable) -> None:
    """A spanning layout needs its fabric, one fabric at most; K counts the nodes of
    spanning groups, and a fabric is bought only for some of them."""
    spanning = [c for cands in table.candidates.values() for c in cands if c.spanning]
    for cand in spanning:
        bound = model.variables[cand_var(cand)].high or 1
        model.add(f"fabric_needed[{cand.name}]",
                  {cand_var(cand): 1.0, fabric_var(cand.fabric): -float(bound)}, "<=", 0.0)
    if table.fabrics:
        model.add("one_fabric", {fabric_var(f): 1.0 for f in table.fabrics}, "<=", 1.0)
    coeffs = {cand_var(c): float(c.nodes_spanned) for c in spanning}
    coeffs[COUPLED_NODES] = -1.0
    model.add("coupled_nodes", coeffs, "==", 0.0)
    for fabric in table.fabrics:
        coeffs = {cand_var(c): -float(c.nodes_spanned) for c in spanning if c.fabric == fabric}
        coeffs[fabric_var(fabric)] = 1.0
        model.add(f"fabric_used[{fabric}]", coeffs, "<=", 0.0)


def _limit_rows(model: LinearModel, table: CandidateTable, limits: Limits) -> None:
    """The RFQ limits: nodes, GPUs, power, rack units, and the budget on the objective
    (so it comes after the objective is complete)."""
    nodes = table.node_types
    if limits.max_nodes is not None:
        model.add("max_nodes", {node_var(k): 1.0 for k in nodes}, "<=", limits.max_nodes)
    if limits.max_gpus is not None:
        model.add("max_gpus", {node_var(k): float(n.gpus) for k, n in nodes.items()}, "<=",
                  limits.max_gpus)
    if limits.max_power_kw is not None:
        model.add("max_power_kw", {node_var(k): n.cost.power_kw for k, n in nodes.items()},
                  "<=", limits.max_power_kw)
    if limits.max_rack_units is not None:
        model.add("max_rack_units", {node_var(k): float(n.cost.rack_units)
                                     for k, n in nodes.items()}, "<=", limits.max_rack_units)
    if limits.budget_usd is not None:
        model.add("budget", dict(model.objective), "<=", limits.budget_usd)


def _rack_row(model: LinearModel, table: CandidateTable, rfq: Rfq) -> None:
    """Facility racks (RFQ ``facility.racks`` with ``max_kw_per_rack``): a rack carries
    ⌊continuous load per rack / P_t⌋ nodes of type t, so Σ_t N[t] / ⌊…⌋ ≤ racks (nodes of
    one type fill racks of their own; node types heavier than a rack are not offered,
    candidates.node_types)."""
    rack_kw, racks = rfq.facility.rack_limit_kw(), rfq.facility.racks
    if rack_kw is None or racks is None:
        return
    coeffs = {node_var(k): 1.0 / max(1, math.floor(rack_kw / n.cost.power_kw + 1e-9))
              for k, n in table.node_types.items() if n.cost.power_kw > 0}
    if coeffs:
        model.add("racks", coeffs, "<=", float(racks))


def _stack_cases(model: LinearModel, table: CandidateTable, extra: list) -> list[dict]:
    """One case per accelerator stack when the model has the one-stack rows: v[s] = 1 and
    the other stacks 0 (backends.Backend.solve takes the best case). Exact: v has no cost
    and appears only in the one-stack rows, so a point with every v = 0 (no owned node) is
    also a point of any case. Smaller stacks (fewer candidates) first: their cases solve
    fast and give the later ones a cutoff. None when ``extra`` rows mention v, or when the
    bounds leave fewer than two stacks (v[s] ≤ 0: no node of s is of use)."""
    stacks = [n[2:-1] for n in model.variables if n.startswith("v[")
              and (model.variables[n].high or 0.0) >= 1.0]  # bounds may leave a stack out
    if len(stacks) < 2 or any(stack_var(s) in c.coeffs for c in extra for s in stacks):
        return []
    size = {s: sum(1 for cands in table.candidates.values() for c in cands
                   if c.rental is None and table.node_types[c.node_type].stack == s)
            for s in stacks}
    return [{stack_var(o): float(o == s) for o in stacks}
            for s in sorted(stacks, key=lambda s: (size[s], s))]


def used_var(cand: Candidate) -> str:
    return f"a[{cand.name}]"


def loss_var(label: str, workload: str, level: int) -> str:
    """Binary "the largest one-node loss of ``workload`` is at least its level-th value"."""
    return f"b_{label}[{workload}#{level}]"


def _serving_demand(model: LinearModel, table: CandidateTable, name: str,
                    cands: list[Candidate], spec: AnyWorkload, reference: bool = False,
                    served: bool = False) -> None:
    """Demand rows of one serving workload (capacity bought >= demand / utilisation); with
    ``redundancy: n+1`` the capacity left after losing the most one node can carry of the
    candidates used must still meet it (module docstring: the loss levels).
    ``reference`` builds the former per-candidate big-M rows instead (same optimum; kept
    for tests/test_mip_scale.py, which compares the two)."""
    demand = planned_demand(spec)
    spare = needs_n_plus_1(spec)
    if spare and reference:
        for cand in cands:
            model.var(used_var(cand), 0, 1)
            bound = model.variables[cand_var(cand)].high or 1
            model.add(f"used[{cand.name}]", {cand_var(cand): 1.0,
                                             used_var(cand): -float(bound)}, "<=", 0.0)
    for label, need, capacity in (("concurrency", demand.concurrency, "concurrency_capacity"),
                                  ("qps", demand.qps, "qps_capacity")):
        if not need:
            continue
        coeffs = {cand_var(c): getattr(c, capacity) for c in cands}
        if served:  # Σ m x ≥ (D / 100) s[w]
            model.add(f"demand_{label}[{name}]",
                      {**coeffs, served_var(name): -need / SERVED_STEPS}, ">=", 0.0)
            if spare:
                _loss_levels(model, table, name, label, cands, capacity, coeffs, need,
                             served=True)
            continue
        model.add(f"demand_{label}[{name}]", coeffs, ">=", need)
        if not reference:
            divisor = _cheapest_capacity(model, table, cands, capacity)
            _rounded_row(model, f"demand_{label}_rounded[{name}]", coeffs, need, divisor)
        if not spare:
            continue
        if reference:
            for cand in cands:
                per_node = units_lost(table, cand)
                model.add(f"n_plus_1_{label}[{cand.name}]",
                          {**coeffs, used_var(cand): -per_node * getattr(cand, capacity)},
                          ">=", need)
            continue
        _loss_levels(model, table, name, label, cands, capacity, coeffs, need)


def _loss_levels(model: LinearModel, table: CandidateTable, name: str, label: str,
                 cands: list[Candidate], capacity: str, coeffs: dict[str, float],
                 need: float, served: bool = False) -> None:
    """The n+1 row of one metric: Σ m x - Σ_k (ℓ_k - ℓ_{k-1}) b_k ≥ D, with the distinct
    one-node losses ℓ_1 < ... < ℓ_K of the candidates, b_1 ≥ ... ≥ b_K binary and
    x[c] ≤ x̄_c b_{k(c)}: using c switches on every level up to its loss, so the row
    subtracts exactly max_{c used} ℓ_c (module docstring)."""
    losses = {c.name: units_lost(table, c) * getattr(c, capacity) for c in cands}
    levels = sorted({loss for loss in losses.values() if loss > 0})
    if not levels:
        return
    # a positive demand needs some candidate of positive capacity, whose loss is ≥ ℓ_1:
    # the first level is always on (fixed, so no binary)
    level_of = {loss: k for k, loss in enumerate(levels)}
    row = dict(coeffs)
    for k in range(1, len(levels)):
        model.var(loss_var(label, name, k), 0, 1)
        row[loss_var(label, name, k)] = -(levels[k] - levels[k - 1])
        if k > 1:
            model.add(f"loss_order_{label}[{name}#{k}]",
                      {loss_var(label, name, k - 1): 1.0, loss_var(label, name, k): -1.0},
                      ">=", 0.0)
    if served:  # ... ≥ (D / 100) s[w] + ℓ_1 o[w], s[w] ≤ 100 o[w]: no spare when not served
        on = f"o[{name}]"
        if on not in model.variables:
            model.var(on, 0, 1)
            model.add(f"served_on[{name}]", {served_var(name): 1.0, on: -float(SERVED_STEPS)},
                      "<=", 0.0)
        model.add(f"n_plus_1_{label}[{name}]",
                  {**row, served_var(name): -need / SERVED_STEPS, on: -levels[0]}, ">=", 0.0)
    else:
        model.add(f"n_plus_1_{label}[{name}]", row, ">=", need + levels[0])
        _rounded_row(model, f"n_plus_1_{label}_rounded[{name}]", row, need + levels[0],
                     _cheapest_capacity(model, table, cands, capacity))
    for cand in cands:
        level = level_of.get(losses[cand.name])
        if not level:  # no capacity of this metric, or the first (always on) level
            continue
        bound = model.variables[cand_var(cand)].high or 1
        model.add(f"loss_level_{label}[{cand.name}]",
                  {cand_var(cand): 1.0, loss_var(label, name, level): -float(bound)}, "<=", 0.0)


def _cheapest_capacity(model: LinearModel, table: CandidateTable, cands: list[Candidate],
                       capacity: str) -> float:
    """Capacity of one replica of the candidate with the lowest cost per unit of capacity
    (its node share, g_c / k_t of a node, plus its own cost coefficient): the divisor of
    the rounded demand row, where the relaxation's replicas are most likely fractional."""
    def unit_cost(cand: Candidate) -> float:
        cost = model.objective.get(cand_var(cand), 0.0)
        if cand.rental is None:
            node = table.node_types[cand.node_type]
            cost += model.objective.get(node_var(cand.node_type), 0.0) * cand.gpus / node.gpus
        return cost / getattr(cand, capacity)

    useful = [c for c in cands if getattr(c, capacity) > 0]
    return getattr(min(useful, key=unit_cost), capacity) if useful else 0.0


def _rounded_row(model: LinearModel, name: str, row: dict[str, float], rhs: float,
                 divisor: float) -> None:
    """A Chvátal-Gomory cut of the row Σ a_i y_i ≥ rhs over integers y ≥ 0: divided by
    ``divisor``, coefficients rounded up, the right-hand side rounded up:
    Σ ⌈a_i / d⌉ y_i ≥ ⌈rhs / d⌉ (every integer point of the row satisfies it; the
    relaxation's fractional replicas do not). Coefficients round up exactly (larger is
    always valid), the right-hand side with a 1e-6 tolerance (smaller is always valid)."""
    if divisor <= 0:
        return
    bound = math.ceil(rhs / divisor - 1e-6)
    if bound < 1:
        return
    model.add(name, {v: float(math.ceil(a / divisor)) for v, a in row.items()}, ">=",
              float(bound))


def stack_var(stack: str) -> str:
    return f"v[{stack}]"


def stack_choice(model: LinearModel, table: CandidateTable, rfq: Rfq) -> list[str]:
    """The one-stack choice of the owned node types, unless ``constraints.mixed_vendors``
    or they share one stack: a binary ``v[s]`` per stack and ``Σ_s v[s] ≤ 1`` (the stacks;
    [] when no choice is needed). Shared with the phased model (solver/optimize/schedule.py)."""
    stacks = sorted({node.stack for node in table.node_types.values()})
    if len(stacks) < 2 or rfq.constraints.mixed_vendors:
        return []
    for stack in stacks:
        model.var(stack_var(stack), 0, 1)
    model.add("one_vendor_stack", {stack_var(s): 1.0 for s in stacks}, "<=", 1.0)
    return stacks


def _one_vendor_stack(model: LinearModel, table: CandidateTable, rfq: Rfq) -> None:
    """One accelerator software stack per cluster (CUDA or ROCm), unless the RFQ sets
    ``constraints.mixed_vendors``: a binary ``v[s]`` per stack, ``Σ_s v[s] ≤ 1``, and every
    node type's count bounded by ``M_t v[s(t)]``. ``M_t`` = the nodes that every candidate on
    type t at its replica bound would fill, so the bound never cuts a useful plan."""
    if not stack_choice(model, table, rfq):
        return
    for key, node in table.node_types.items():
        gpus = sum(float(c.gpus) * (model.variables[cand_var(c)].high or 1)
                   for cands in table.candidates.values() for c in cands if c.node_type == key)
        bound = float(max(1, math.ceil(gpus / node.gpus)))
        model.add(f"vendor_stack[{key}]", {node_var(key): 1.0,
                                           stack_var(node.stack): -bound}, "<=", 0.0)


def rental_terms(table: CandidateTable) -> dict[str, float]:
    """Objective coefficient (USD) of every rented candidate's variable: the cost term
    ``rental_usd`` of :func:`solver.optimize.mip.objective_terms`."""
    return {cand_var(c): c.rental_usd for cands in table.candidates.values() for c in cands
            if c.rented}
