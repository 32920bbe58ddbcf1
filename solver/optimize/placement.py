"""Explicit placement: which replica or job runs on which bought node.

First-fit decreasing as argued in :mod:`solver.optimize.mip`: per node type, every spanning group
(a replica or job over ``n_c`` nodes) takes ``n_c`` whole empty nodes; then the in-node
groups, largest first, go to the first node with room. In-node group sizes divide
every larger one and the node size (``records.in_node_sizes``: powers of two, and a whole
72-GPU rack), so this packs whenever the MIP's GPU count fits — a failure here is a bug and raises.
"""

from __future__ import annotations

from typing import Any

from solver.optimize.records import Candidate, CandidateTable
from solver.physics.layout import Layout


class PlacementError(RuntimeError):
    """The bought nodes cannot hold the chosen groups (violates the packing argument)."""


def place(table: CandidateTable, nodes: dict[str, int],
          picks: dict[str, list[tuple[Candidate, int]]]) -> list[dict[str, Any]]:
    """One entry per bought node: its type and the groups (replicas, jobs) on it.

    ``nodes`` maps node-type key to nodes bought; ``picks`` is :func:`solver.optimize.plan.chosen`.
    """
    out: list[dict[str, Any]] = []
    for key, count in nodes.items():
        if count <= 0:
            continue
        node = table.node_types[key]
        free = [node.gpus] * count
        runs: list[list[dict[str, Any]]] = [[] for _ in range(count)]
        groups = [(cand, index) for cands in picks.values() for cand, replicas in cands
                  if cand.node_type == key for index in range(1, replicas + 1)]
        spanning = [(c, i) for c, i in groups if c.spanning]
        in_node = sorted((g for g in groups if not g[0].spanning), key=lambda g: -g[0].gpus)
        cursor = 0
        for cand, index in spanning:
            if cursor + cand.nodes_spanned > count:
                raise PlacementError(f"{key}: no {cand.nodes_spanned} whole nodes left for "
                                     f"{cand.workload}")
            for n in range(cursor, cursor + cand.nodes_spanned):
                free[n] = 0
                runs[n].append(_run(cand, index, node.gpus))
            cursor += cand.nodes_spanned
        for cand, index in in_node:
            for n in range(cursor, count):
                if free[n] >= cand.gpus:
                    free[n] -= cand.gpus
                    runs[n].append(_run(cand, index, cand.gpus))
                    break
            else:
                raise PlacementError(f"{key}: no node has {cand.gpus} free GPUs for "
                                     f"{cand.workload}")
        for n in range(count):
            out.append({"node": f"node-{len(out) + 1}", "type": key, "server": node.server,
                        "gpu": node.gpu, "gpus": node.gpus, "free_gpus": free[n],
                        "runs": runs[n]})
    return out


def _run(cand: Candidate, index: int, gpus_here: int) -> dict[str, Any]:
    layout = cand.layout
    label = "job" if cand.is_job else f"replica {index}"
    return {"workload": cand.workload, "unit": label, "group": f"{cand.name}#{index}",
            "gpus": gpus_here, "group_gpus": cand.gpus, "nodes_spanned": cand.nodes_spanned,
            "fabric": cand.fabric, "precision": layout.precision, "tp": layout.tp,
            "pp": layout.pp, "dp": layout.dp, **expert_parallel(layout),
            **({} if cand.is_job else {"mode": mode(cand)}),
            **pools(cand)}


def mode(cand: Candidate) -> str:
    """How a serving candidate runs: ``disaggregated`` (a prefill pool + a decode pool) or
    ``aggregated`` (each replica prefills and decodes)."""
    return "disaggregated" if cand.prefill is not None else "aggregated"


def pool(layout: Layout) -> dict[str, Any]:
    """One pool of a disaggregated unit for the plan: GPUs, replicas and their layout."""
    return {"gpus": layout.gpus, "replicas": layout.dp, "tp": layout.tp, "pp": layout.pp,
            **expert_parallel(layout)}


def expert_parallel(layout: Layout) -> dict[str, int]:
    """``ep`` and ``attention_dp`` of a layout for the plan, where it uses expert
    parallelism (nothing for a plain TP x PP layout)."""
    if layout.ep == 1 and layout.attention_dp == 1:
        return {}
    return {"ep": layout.ep, "attention_dp": layout.attention_dp}


def pools(cand: Candidate) -> dict[str, Any]:
    """``prefill`` and ``decode`` of a disaggregated candidate (nothing otherwise)."""
    if cand.prefill is None:
        return {}
    return {"prefill": pool(cand.prefill), "decode": pool(cand.layout)}
