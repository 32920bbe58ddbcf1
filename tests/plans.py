"""Small real (typed) plans for tests that need a plan without solving one."""

from __future__ import annotations

from typing import Any

from solver.optimize.plan_model import (
    Cluster,
    Cost,
    Memory,
    NodeGroup,
    Plan,
    Predicted,
    WorkloadPlan,
)


def serving_entry(name: str, model: str, gpu: str, gpus: int, **fields: Any) -> WorkloadPlan:
    """One inference workload on ``gpus`` GPUs of ``gpu`` (20 GB of 48 in use)."""
    memory = Memory(weights_gb=10.0, kv_cache_gb=8.0, activations_gb=0.5, optimizer_gb=0.0,
                    total_gb=20.0, capacity_gb=48.0, weights_fraction=10 / 48,
                    utilization=20 / 48, gradients_gb=0.0, reserve_gb=1.5,
                    activation_recompute=0.0)
    predicted = Predicted(ttft_ms=100.0, tpot_ms=20.0, qps_capacity=5.0, tokens_per_s=900.0,
                          hours_to_complete=None, scaling_efficiency=None, mfu=None,
                          max_concurrency=16)
    return WorkloadPlan(**{"name": name, "kind": "inference", "model": model,
                           "precision": "bf16", "gpu": gpu, "tp": 1, "pp": 1, "dp": gpus,
                           "gpus": gpus, "nodes_spanned": 1, "gpus_per_node": 8,
                           "fabric": "none", "memory": memory, "predicted": predicted,
                           "sourcing": "owned", **fields})


def tiny_plan(gpu: str = "l4", server: str = "s", gpus: int = 1, **fields: Any) -> Plan:
    """A plan of one node of ``gpus`` × ``gpu`` and no workload, with ``fields`` set."""
    cluster = Cluster(nodes=[NodeGroup(gpu=gpu, server=server, gpus_per_node=max(gpus, 1),
                                       count=1)],
                      total_nodes=1, total_gpus=gpus, fabric="none", coupled=False,
                      coupled_nodes=0, power_kw=3.0, rack_units=4)
    return Plan(**{"rfq": "r", "status": "optimal", "solver": "highs", "gap": 0.0,
                   "solve_seconds": 0.0, "objective": "tco", "cluster": cluster,
                   "workloads": [], "cost": None, "placement": [],
                   "bill_of_materials": None, **fields})


def cost(gpus_usd: float, servers_usd: float = 0.0, power_usd: float = 0.0,
         operations_usd: float = 0.0, rental_usd: float = 0.0) -> Cost:
    """A cost whose capex and TCO are the sums of its terms."""
    capex = gpus_usd + servers_usd
    return Cost(gpus_usd=gpus_usd, servers_usd=servers_usd, network_usd=0.0, storage_usd=0.0,
                capex_usd=capex, power_usd=power_usd, operations_usd=operations_usd,
                multinode_overhead_usd=0.0, rental_usd=rental_usd,
                tco_usd=capex + power_usd + operations_usd + rental_usd)
