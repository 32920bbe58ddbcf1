"""Helpers shared by the Pareto frontier and the sensitivity report.

A *scenario* re-solves the MIP of :mod:`solver.optimize.mip` on a modified candidate table: with some
candidates removed (ε-constraints), with one workload's candidates rebuilt at another SLO,
or with its cost coefficients recomputed for new prices (no physics re-run).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from solver.catalog.data import Catalog
from solver.optimize.candidates import Candidate, CandidateTable, NodeType, build_candidates
from solver.optimize.costs import CostParams, coupled_node_network_usd, node_cost
from solver.optimize.linear import Solution
from solver.optimize.mip import fabric_var, node_var
from solver.optimize.plan import cost_breakdown
from solver.optimize.rental import reprice_rented
from solver.optimize.storage import training_storage
from solver.rfq.schema import Rfq

Signature = tuple[tuple[tuple[str, int], ...], str]


@dataclass(frozen=True)
class Outcome:
    """One solved scenario: its status, cost terms and the cluster bought."""

    status: str
    cost: dict[str, float] | None
    signature: Signature | None
    table: CandidateTable
    solution: Solution

    @property
    def feasible(self) -> bool:
        return self.status in ("optimal", "feasible")

    @property
    def tco_usd(self) -> float | None:
        return self.cost["tco_usd"] if self.cost else None

    def objective_usd(self, objective: str) -> float | None:
        if not self.cost:
            return None
        return self.cost["capex_usd" if objective == "capex" else "tco_usd"]


def outcome(table: CandidateTable, solution: Solution) -> Outcome:
    """Cost terms and cluster signature of a solution."""
    if solution.status not in ("optimal", "feasible"):
        return Outcome(solution.status, None, None, table, solution)
    return Outcome(solution.status, cost_breakdown(table, solution.values),
                   signature(table, solution.values), table, solution)


def signature(table: CandidateTable, values: dict[str, float]) -> Signature:
    """What is bought: node types with counts, and the fabric (``none`` if independent)."""
    nodes = tuple(sorted((key, round(values.get(node_var(key), 0.0)))
                         for key in table.node_types
                         if round(values.get(node_var(key), 0.0)) > 0))
    fabric = next((f for f in table.fabrics if round(values.get(fabric_var(f), 0.0)) == 1),
                  "none")
    return nodes, fabric


def describe(sig: Signature | None) -> str:
    """``2 × pcie-8gpu/rtx-pro-6000x8, fabric none`` (or ``infeasible``)."""
    if sig is None:
        return "infeasible"
    nodes, fabric = sig
    return ", ".join(f"{count} × {key}" for key, count in nodes) + f", fabric {fabric}"


def gpu_counts(table: CandidateTable, sig: Signature | None) -> dict[str, int]:
    """GPUs bought per GPU SKU."""
    counts: dict[str, int] = {}
    if sig is None:
        return counts
    for key, count in sig[0]:
        node = table.node_types[key]
        counts[node.gpu] = counts.get(node.gpu, 0) + node.gpus * count
    return counts


def with_candidates(table: CandidateTable, workload: str,
                    candidates: list[Candidate]) -> CandidateTable:
    """The table with one workload's candidate list replaced."""
    return replace(table, candidates={**table.candidates, workload: candidates})


def rebuild_workload(catalog: Catalog, rfq: Rfq, table: CandidateTable, spec: Any,
                     all_sizes: bool = False) -> CandidateTable:
    """Re-run the estimate stage for one (modified) workload only, keeping the others."""
    alone = rfq.model_copy(update={"workloads": [spec]})
    fresh = build_candidates(catalog, alone, all_sizes=all_sizes, params=table.params)
    rejected = {**table.rejected, spec.name: fresh.rejected.get(spec.name, [])}
    storage = {k: v for k, v in table.storage.items() if k != spec.name}
    storage.update(fresh.storage)
    return replace(table, candidates={**table.candidates, spec.name: fresh.candidates[spec.name]},
                   rejected=rejected, storage=storage)


def reprice(table: CandidateTable, catalog: Catalog, rfq: Rfq) -> CandidateTable:
    """The same candidates with every cost coefficient recomputed for new prices/costs.

    Physics does not depend on prices, electricity, PUE, horizon or the overhead factor, so
    only node costs, per-candidate network cost and the cost parameters change.
    """
    params = CostParams.from_catalog(catalog, rfq.horizon_years)
    node_types = {
        key: NodeType(node.server, node.gpu, node.gpus,
                      node_cost(params, catalog.servers[node.server], catalog.gpus[node.gpu],
                               node.gpus), fabric_nics=node.fabric_nics, stack=node.stack)
        for key, node in table.node_types.items()}
    fabrics = {fid: catalog.fabrics[fid] for fid in table.fabrics}
    candidates: dict[str, list[Candidate]] = {}
    for name, cands in table.candidates.items():
        out = []
        for cand in cands:
            if cand.rented:  # rental price and billed hours (horizon) from the new values

                cand = reprice_rented(cand, catalog, rfq, params)
            if cand.spanning:
                server = catalog.servers[table.node_types[cand.node_type].server]
                network = cand.nodes_spanned * coupled_node_network_usd(
                    server, catalog.fabrics[cand.fabric])
                cand = replace(cand, network_usd=network)
            out.append(cand)
        candidates[name] = out
    specs = {spec.name: spec for spec in rfq.workloads}
    storage = {name: training_storage(catalog, params, specs[name]) for name in table.storage
               if name in specs}
    return replace(table, node_types=node_types, fabrics=fabrics, candidates=candidates,
                   params=params, storage=storage)
