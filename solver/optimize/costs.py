"""Cost of ownership: what one node, one coupled node and the shared infrastructure cost.

All money in USD over the RFQ's horizon. Power is TDP × load factor × PUE × price × hours;
operations are per node-year; the multi-node engineering overhead follows the buying guide (docs/buying-guide.md):
"each additional node of a coupled cluster costs 4–5× the first" in engineering time, so a
coupled group (one job, or one replica, spanning n nodes) pays
``(factor - 1) × engineering × horizon × (n - 1)`` on top of every node's own engineering
cost; three independent 2-node replicas pay it three times, not five. Independent DP nodes
never pay it.
"""

from __future__ import annotations

from dataclasses import dataclass

from solver.catalog.data import Catalog, Fabric, Gpu, Param, Server

HOURS_PER_YEAR = 8760.0


@dataclass(frozen=True)
class CostParams:
    """The cost-model values in force for one solve (catalog values, RFQ horizon)."""

    horizon_years: float
    electricity_usd_per_kwh: float
    pue: float
    load_factor: float
    operations_usd_per_node_year: float
    node_engineering_usd_per_year: float
    multinode_overhead_factor: float
    shared_storage_usd: float
    shared_storage_usd_per_node: float
    rack_unit_usd_per_year: float
    frontend_switch_usd: float = 0.0
    frontend_ports_per_switch: int = 48
    frontend_ports_per_node: int = 0
    frontend_cable_usd: float = 0.0
    storage_usd_per_tb: float = 0.0
    storage_usd_per_gbps: float = 0.0
    checkpoints_kept: float = 0.0
    checkpoint_bytes_per_param: float = 0.0
    checkpoint_write_seconds: float = 300.0
    dataset_bytes_per_token: float = 0.0
    software_licence_usd_per_gpu_year: float = 0.0
    support_contract_fraction_per_year: float = 0.0
    hardware_price_decline_per_year: float = 0.0
    residual_value_fraction: float = 0.0
    liquid_cooling_usd_per_kw: float = 0.0
    liquid_cooling_in_rack_usd_per_kw: float = 0.0

    @classmethod
    def from_catalog(cls, catalog: Catalog, horizon_years: float | None = None) -> CostParams:
        c = catalog.costs
        return cls(
            horizon_years=horizon_years if horizon_years is not None else c.horizon_years.value,
            electricity_usd_per_kwh=c.electricity_usd_per_kwh.value,
            pue=c.pue.value,
            load_factor=c.load_factor.value,
            operations_usd_per_node_year=c.operations_usd_per_node_year.value,
            node_engineering_usd_per_year=c.node_engineering_usd_per_year.value,
            multinode_overhead_factor=c.multinode_overhead_factor.value,
            shared_storage_usd=c.shared_storage_usd.value,
            shared_storage_usd_per_node=c.shared_storage_usd_per_node.value,
            rack_unit_usd_per_year=c.rack_unit_usd_per_year.value,
            frontend_switch_usd=c.frontend_switch_usd.value,
            frontend_ports_per_switch=int(c.frontend_ports_per_switch.value),
            frontend_ports_per_node=int(c.frontend_ports_per_node.value),
            frontend_cable_usd=c.frontend_cable_usd.value,
            storage_usd_per_tb=c.storage_usd_per_tb.value,
            storage_usd_per_gbps=c.storage_usd_per_gbps.value,
            checkpoints_kept=c.checkpoints_kept.value,
            checkpoint_bytes_per_param=c.checkpoint_bytes_per_param.value,
            checkpoint_write_seconds=c.checkpoint_write_seconds.value,
            dataset_bytes_per_token=c.dataset_bytes_per_token.value,
            software_licence_usd_per_gpu_year=c.software_licence_usd_per_gpu_year.value,
            support_contract_fraction_per_year=c.support_contract_fraction_per_year.value,
            hardware_price_decline_per_year=_optional(c.hardware_price_decline_per_year),
            residual_value_fraction=_optional(c.residual_value_fraction),
            liquid_cooling_usd_per_kw=_optional(c.liquid_cooling_usd_per_kw),
            liquid_cooling_in_rack_usd_per_kw=_optional(c.liquid_cooling_in_rack_usd_per_kw),
        )

    @property
    def overhead_per_extra_coupled_node_usd(self) -> float:
        """Extra engineering cost of each coupled node beyond the first, over the horizon."""
        return ((self.multinode_overhead_factor - 1.0) * self.node_engineering_usd_per_year
                * self.horizon_years)


@dataclass(frozen=True)
class NodeCost:
    """Cost terms of one node (server + GPUs) over the horizon, USD."""

    gpus_usd: float
    server_usd: float
    power_usd: float
    operations_usd: float
    power_kw: float
    rack_units: int
    licence_usd: float = 0.0
    support_usd: float = 0.0
    cooling_usd: float = 0.0  # liquid cooling (CDU share, facility loop), part of server_usd

    @property
    def capex_usd(self) -> float:
        return self.gpus_usd + self.server_usd

    @property
    def tco_usd(self) -> float:
        return self.capex_usd + self.power_usd + self.operations_usd


def node_cost(params: CostParams, server: Server, gpu: Gpu, gpus: int) -> NodeCost:
    """Cost of one node holding ``gpus`` GPUs; ``power_kw`` is full load before PUE.

    ``operations_usd`` includes the optional software licence (per GPU-year, NVIDIA
    datacenter GPUs only: GeForce is not eligible, ROCm needs none) and the optional support
    contract (a fraction of the node's capex per year); both are 0 unless costs.yaml sets
    them, and both are also reported on their own (``licence_usd``, ``support_usd``).
    """
    power_kw = (gpus * gpu.tdp_w + server.base_power_w) / 1000.0
    cooling = liquid_cooling_usd(params, server, power_kw)
    energy_kwh = power_kw * params.load_factor * params.pue * HOURS_PER_YEAR * params.horizon_years
    capex = gpus * gpu.price_usd + server.price_usd + cooling
    licensed = gpu.vendor == "nvidia" and gpu.datacenter_use
    licence = (gpus * params.software_licence_usd_per_gpu_year * params.horizon_years
               if licensed else 0.0)
    support = capex * params.support_contract_fraction_per_year * params.horizon_years
    operations = params.horizon_years * (
        server.hosts * (params.operations_usd_per_node_year + params.node_engineering_usd_per_year)
        + server.rack_units * params.rack_unit_usd_per_year) + licence + support
    return NodeCost(
        gpus_usd=gpus * gpu.price_usd,
        server_usd=server.price_usd + cooling,
        power_usd=energy_kwh * params.electricity_usd_per_kwh,
        operations_usd=operations,
        power_kw=power_kw,
        rack_units=server.rack_units,
        licence_usd=licence,
        support_usd=support,
        cooling_usd=cooling,
    )


def coupled_hosts(hosts_per_node: int, node_gpus: int, group_gpus: int,
                  nodes_spanned: int) -> int:
    """Hosts that one replica or job couples: every host of the nodes it spans, or inside
    one multi-host node (an NVL72 rack: 4 GPUs per host) the hosts its GPUs take. The
    multi-node engineering overhead is paid for each beyond the first."""
    if nodes_spanned > 1:
        return nodes_spanned * hosts_per_node
    per_host = max(1, node_gpus // hosts_per_node)
    return max(1, -(-group_gpus // per_host))


def disaggregated_hosts(hosts_per_node: int, node_gpus: int,
                        engines: list[tuple[int, int]]) -> int:
    """Hosts a disaggregated unit inside one node couples for the multi-node overhead: its
    engines (``(GPUs of one replica, replicas)`` of the prefill and the decode pool) each
    couple the hosts their GPUs take, as the same replicas would aggregated (the unit is
    ``1 + Σ (hosts of an engine - 1)``); the prefill/decode split itself adds none (not
    priced: docs/expert-parallel.md)."""
    extra = sum(count * (coupled_hosts(hosts_per_node, node_gpus, gpus, 1) - 1)
                for gpus, count in engines)
    return 1 + extra


def liquid_cooling_usd(params: CostParams, server: Server, power_kw: float) -> float:
    """Capex of a liquid-cooled node's cooling: its full-load kW x
    :func:`liquid_cooling_usd_per_kw`; 0 for air-cooled."""
    return power_kw * liquid_cooling_usd_per_kw(params, server)


def liquid_cooling_usd_per_kw(params: CostParams, server: Server) -> float:
    """The site's cooling per kW of a liquid-cooled server: the catalog's
    ``liquid_cooling_usd_per_kw`` (CDU share, facility water loop, the rack's manifold and
    quick disconnects), less the in-rack part where the server is a whole rack whose price
    includes it (``rack_cooling_included``: an NVL72 rack ships with its manifolds, so
    they are not bought twice); 0 for air-cooled."""
    if not server.liquid_cooled:
        return 0.0
    in_rack = params.liquid_cooling_in_rack_usd_per_kw if server.rack_cooling_included else 0.0
    return params.liquid_cooling_usd_per_kw - in_rack


def coupled_node_network_usd(server: Server, fabric: Fabric) -> float:
    """NICs and their node-to-switch cables for one node joining a fabric (capex).

    The switches themselves are counted from the ports of the whole fabric
    (:mod:`solver.optimize.network`), not per node."""
    return server.fabric_nics_per_node * (fabric.nic_price_usd + fabric.cable_price_usd)


def _optional(param: Param | None) -> float:
    """An optional cost-model value: 0 when the catalog leaves it out."""
    return float(param.value) if param is not None else 0.0
