"""The bill of materials: what to order, recomputed from the plan (not from the MIP).

:func:`bill_of_materials` reads only the plan (nodes bought, placement, workloads), the
catalog's prices and the cost parameters in force, and lists every line a buyer orders:
GPUs, servers, fabric NICs, cables/optics, switches (counted from ports, one switch or
leaf/spine, :func:`solver.optimize.network.switch_counts`), front-end Ethernet for every node
(its cables; its ToR switches only when the nodes' ports exceed the site's free LAN ports,
``facility.lan_ports``),
shared storage of a coupled cluster and checkpoint/dataset storage of every training job.
``capex_usd`` is the sum of the lines; ``opex_per_year`` lists power, operations (support,
rack space, each node's engineering) and the multi-node engineering overhead per coupled
group. Tests assert that it equals the MIP objective's cost breakdown to the cent on every
shipped scenario (SkyPilot's ``_compute_total_cost`` pattern: the bill is an independent
statement of the cost model).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from solver.catalog.data import Catalog, Fabric, Gpu, Server
from solver.optimize.costs import (
    HOURS_PER_YEAR,
    CostParams,
    coupled_hosts,
    disaggregated_hosts,
    liquid_cooling_usd,
    liquid_cooling_usd_per_kw,
    node_cost,
)
from solver.optimize.network import switches_needed
from solver.optimize.rental import bom_rental
from solver.optimize.storage import training_storage
from solver.rfq.schema import Rfq, TrainingWorkload

DEFAULT_PRICE_TYPE = "list"


def _line(sku: str, description: str, quantity: float, unit_price: float, price_type: str,
          as_of: str, source: str, category: str) -> dict[str, Any]:
    return {"sku": sku, "description": description, "quantity": quantity,
            "unit_price_usd": round(unit_price, 2), "price_type": price_type, "as_of": as_of,
            "source": source, "line_total_usd": round(quantity * unit_price, 2),
            "category": category}


def _opex(item: str, description: str, quantity: float, unit: str, unit_usd: float,
          source: str, category: str) -> dict[str, Any]:
    return {"item": item, "description": description, "quantity": quantity, "unit": unit,
            "unit_usd_per_year": round(unit_usd, 4), "usd_per_year": quantity * unit_usd,
            "source": source, "category": category}


def _price_type(entry: Gpu | Server | Fabric) -> str:
    """A GPU's or server's price type; a fabric carries none (the default)."""
    return DEFAULT_PRICE_TYPE if isinstance(entry, Fabric) else entry.price_type


def _switch_lines(tag: str, name: str, ports: int, radix: int, switch_usd: float,
                  link_usd: float, as_of: str, source: str,
                  free_ports: int = 0) -> list[dict[str, Any]]:
    sw = switches_needed(ports, radix, free_ports)
    lines = []
    if sw.switches:
        tiers = "one switch" if not sw.spines else f"{sw.leaves} leaf + {sw.spines} spine"
        lines.append(_line(f"{tag}-switch-{radix}p", f"{name} switch, {radix} ports ({tiers}, "
                           f"{ports} node ports)", sw.switches, switch_usd, "assumption"
                           if "ASSUMPTION" in source.upper() else DEFAULT_PRICE_TYPE, as_of,
                           source, "network_usd"))
    links = ports + sw.uplinks
    if links and link_usd:
        lines.append(_line(f"{tag}-cable", f"{name} cable/optics per link ({ports} node links"
                           + (f" + {sw.uplinks} leaf-spine links)" if sw.uplinks else ")"),
                           links, link_usd, "assumption" if "ASSUMPTION" in source.upper()
                           else DEFAULT_PRICE_TYPE, as_of, source, "network_usd"))
    return lines


def _groups(placement: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Spanning groups of the placement: group id -> fabric, nodes and their servers."""
    groups: dict[str, dict[str, Any]] = {}
    for node in placement:
        for run in node["runs"]:
            if run["nodes_spanned"] > 1:
                group = groups.setdefault(run["group"], {"fabric": run["fabric"], "servers": [],
                                                         "nodes_spanned": run["nodes_spanned"]})
                group["servers"].append(node["server"])
    return groups


def bill_of_materials(catalog: Catalog, rfq: Rfq, params: CostParams,
                      plan: dict[str, Any]) -> dict[str, Any]:
    """The bill of materials of a feasible plan (module docstring)."""
    nodes = plan["cluster"]["nodes"]
    groups = _groups(plan["placement"])
    lines = (_hardware_lines(catalog, nodes) + _cooling_lines(catalog, params, nodes)
             + _fabric_lines(catalog, groups)
             + _frontend_lines(catalog, params, nodes, rfq.facility.lan_ports)
             + _storage_lines(catalog, rfq, params, plan, groups))
    opex = _opex_lines(catalog, params, nodes, groups, plan["placement"])
    years = params.horizon_years
    capex = round(sum(line["line_total_usd"] for line in lines), 2)
    per_year = sum(item["usd_per_year"] for item in opex)
    for item in opex:  # 4 decimals: the horizon total below stays exact to the cent
        item["usd_over_horizon"] = round(item["usd_per_year"] * years, 2)
        item["usd_per_year"] = round(item["usd_per_year"], 4)
    rental = bom_rental(plan)  # rented GPU-hours: not capex, part of the TCO (rental.py)
    return {"lines": lines, "capex_usd": capex,
            "opex_per_year": {"lines": opex, "total_usd": round(per_year, 2)},
            "rental": rental, "horizon_years": years,
            "tco_usd": round(capex + per_year * years + rental["total_usd"], 2)}




def _hardware_lines(catalog: Catalog, nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """GPUs and servers (servers priced without their GPUs)."""
    lines: list[dict[str, Any]] = []
    gpu_count: Counter[str] = Counter()
    server_count: Counter[str] = Counter()
    for entry in nodes:
        gpu_count[entry["gpu"]] += entry["count"] * entry["gpus_per_node"]
        server_count[entry["server"]] += entry["count"]
    for gpu_id, qty in gpu_count.items():
        gpu = catalog.gpus[gpu_id]
        lines.append(_line(gpu_id, gpu.name, qty, gpu.price_usd, _price_type(gpu),
                           gpu.price_as_of, gpu.price_source or gpu.source, "gpus_usd"))
    for server_id, qty in server_count.items():
        server = catalog.servers[server_id]
        lines.append(_line(server_id, f"{server.name} (without GPUs)", qty, server.price_usd,
                           _price_type(server), server.price_as_of or server.as_of,
                           server.price_source or server.source, "servers_usd"))
    return lines


def _cooling_lines(catalog: Catalog, params: CostParams,
                   nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Liquid cooling of the liquid-cooled nodes (CDU share and facility water loop, per kW
    of their full-load power; costs.yaml ``liquid_cooling_usd_per_kw``)."""
    lines: list[dict[str, Any]] = []
    param = catalog.costs.liquid_cooling_usd_per_kw
    for entry in nodes:
        server = catalog.servers[entry["server"]]
        if not server.liquid_cooled or param is None:
            continue
        kw = (entry["gpus_per_node"] * catalog.gpus[entry["gpu"]].tdp_w
              + server.base_power_w) / 1000.0
        unit = liquid_cooling_usd(params, server, kw)
        what = ("CDU share and facility water loop (the rack's manifolds come with it)"
                if server.rack_cooling_included else
                "CDU share, facility water loop, rack manifold and quick disconnects")
        lines.append(_line(f"liquid-cooling-{server.id}", f"Liquid cooling for {server.name}: "
                           f"{what}, {kw:g} kW x "
                           f"${liquid_cooling_usd_per_kw(params, server):,.0f}/kW per node",
                           entry["count"], unit, "assumption" if "ASSUMPTION"
                           in param.source.upper() else DEFAULT_PRICE_TYPE, param.as_of,
                           param.source, "servers_usd"))
    return lines


def _fabric_lines(catalog: Catalog, groups: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """NICs, cables and switches of the spanning groups, per fabric."""
    lines: list[dict[str, Any]] = []
    ports: Counter[str] = Counter()
    for group in groups.values():
        ports[group["fabric"]] += sum(catalog.servers[s].fabric_nics_per_node
                                      for s in group["servers"])
    for fabric_id, count in ports.items():
        fab = catalog.fabrics[fabric_id]
        lines.append(_line(f"{fabric_id}-nic", f"{fab.name} NIC", count, fab.nic_price_usd,
                           fab.nic_price_type or _price_type(fab), fab.nic_price_as_of
                           or fab.as_of, fab.nic_price_source or fab.source, "network_usd"))
        lines += _switch_lines(fabric_id, fab.name, count, fab.ports_per_switch,
                               fab.switch_price_usd, fab.cable_price_usd, fab.as_of, fab.source)
    return lines


def _frontend_lines(catalog: Catalog, params: CostParams, nodes: list[dict[str, Any]],
                    lan_ports: int) -> list[dict[str, Any]]:
    """Front-end Ethernet for every node: cables, and ToR switches unless the nodes' ports
    fit the site's free LAN ports (``lan_ports``)."""
    lines: list[dict[str, Any]] = []
    total_nodes = sum(entry["count"] for entry in nodes)
    c = catalog.costs
    ports = params.frontend_ports_per_node * total_nodes
    if ports:
        name = ("Front-end Ethernet (ToR)" if ports > lan_ports
                else "Front-end Ethernet to the site's LAN")
        lines += _switch_lines("frontend", name, ports,
                               params.frontend_ports_per_switch, params.frontend_switch_usd,
                               params.frontend_cable_usd, c.frontend_switch_usd.as_of,
                               c.frontend_switch_usd.source, lan_ports)
    return lines


def frontend_entry(params: CostParams, total_nodes: int, lan_ports: int) -> dict[str, Any] | None:
    """The plan's ``cluster.frontend``: the nodes' front-end ports, the switches quoted for
    them and, in words, the RFQ field that changes it (None: no node bought)."""
    ports = params.frontend_ports_per_node * total_nodes
    if not ports:
        return None
    radix = params.frontend_ports_per_switch
    switches = switches_needed(ports, radix, lan_ports).switches
    nodes = "node's" if total_nodes == 1 else f"{total_nodes} nodes'"
    if not switches:
        note = (f"the {nodes} {ports} front-end ports (data + BMC) join the site's LAN "
                f"(facility.lan_ports: {lan_ports}); no front-end switch is quoted. A site "
                f"without {ports} free LAN ports sets facility.lan_ports: 0 to quote a "
                f"{radix}-port ToR switch (${params.frontend_switch_usd:,.0f})")
    else:
        note = (f"the {nodes} {ports} front-end ports (data + BMC) exceed the site's "
                f"{lan_ports} free LAN ports (facility.lan_ports): {switches} {radix}-port "
                f"ToR switch{'es' if switches != 1 else ''} quoted. A site whose LAN takes "
                f"them all sets facility.lan_ports: {ports}")
    return {"ports": ports, "lan_ports": lan_ports, "switches": switches, "note": note}


def _storage_lines(catalog: Catalog, rfq: Rfq, params: CostParams, plan: dict[str, Any],
                   groups: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Shared storage of the coupled cluster and each training job's checkpoint + dataset
    storage (capacity and write bandwidth)."""
    lines: list[dict[str, Any]] = []
    c = catalog.costs
    coupled_nodes = sum(g["nodes_spanned"] for g in groups.values())
    if groups:
        lines.append(_line("shared-storage", "Shared storage of the coupled cluster (fixed)", 1,
                           params.shared_storage_usd, "assumption", c.shared_storage_usd.as_of,
                           c.shared_storage_usd.source, "storage_usd"))
        lines.append(_line("shared-storage-node", "Shared storage per coupled node",
                           coupled_nodes, params.shared_storage_usd_per_node, "assumption",
                           c.shared_storage_usd_per_node.as_of,
                           c.shared_storage_usd_per_node.source, "storage_usd"))
    specs = {spec.name: spec for spec in rfq.workloads}
    for work in plan["workloads"]:
        spec = specs[work["name"]]
        if not isinstance(spec, TrainingWorkload) or work.get("sourcing") == "rented":
            continue  # a rented job's data stays on the rented instances' disks
        st = training_storage(catalog, params, spec)
        lines.append(_line(f"storage-tb-{spec.name}", f"Checkpoint + dataset storage for "
                           f"{spec.name}, usable TB", round(st.capacity_tb, 6),
                           params.storage_usd_per_tb, "assumption", c.storage_usd_per_tb.as_of,
                           c.storage_usd_per_tb.source, "storage_usd"))
        lines.append(_line(f"storage-gbps-{spec.name}", f"Storage write bandwidth for "
                           f"{spec.name} (a checkpoint in {params.checkpoint_write_seconds:g} s)"
                           ", GB/s", round(st.write_gbps, 6), params.storage_usd_per_gbps,
                           "assumption", c.storage_usd_per_gbps.as_of,
                           c.storage_usd_per_gbps.source, "storage_usd"))
    return lines


def _opex_lines(catalog: Catalog, params: CostParams, nodes: list[dict[str, Any]],
                groups: dict[str, dict[str, Any]],
                placement: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Yearly operating costs: power, operations, engineering, rack space, licences,
    support and the multi-node overhead of coupled groups."""
    opex: list[dict[str, Any]] = []
    c = catalog.costs
    total_hosts = sum(entry["count"] * catalog.servers[entry["server"]].hosts for entry in nodes)
    for entry in nodes:
        server = catalog.servers[entry["server"]]
        gpu = catalog.gpus[entry["gpu"]]
        cost = node_cost(params, server, gpu, entry["gpus_per_node"])
        kwh = cost.power_kw * params.load_factor * params.pue * HOURS_PER_YEAR
        opex.append(_opex(f"power-{entry['server']}-{entry['gpu']}x{entry['gpus_per_node']}",
                          f"Electricity, {cost.power_kw:g} kW full load x load factor "
                          f"{params.load_factor:g} x PUE {params.pue:g}, kWh per node-year",
                          entry["count"] * kwh, "kWh", params.electricity_usd_per_kwh,
                          c.electricity_usd_per_kwh.source, "power_usd"))
    rack_units = sum(entry["count"] * catalog.servers[entry["server"]].rack_units
                     for entry in nodes)
    per_host = ("" if total_hosts == sum(entry["count"] for entry in nodes)
                else " (a multi-host rack: per host)")
    opex.append(_opex("operations", f"Support, spares and monitoring per node-year{per_host}",
                      total_hosts,
                      "node", params.operations_usd_per_node_year,
                      c.operations_usd_per_node_year.source, "operations_usd"))
    opex.append(_opex("engineering", f"Engineering time per node-year (each node's own)"
                      f"{per_host}", total_hosts, "node", params.node_engineering_usd_per_year,
                      c.node_engineering_usd_per_year.source, "operations_usd"))
    opex.append(_opex("rack-space", "Colocation rack space", rack_units, "U",
                      params.rack_unit_usd_per_year, c.rack_unit_usd_per_year.source,
                      "operations_usd"))
    if params.software_licence_usd_per_gpu_year:
        licensed = sum(entry["count"] * entry["gpus_per_node"] for entry in nodes
                       if catalog.gpus[entry["gpu"]].vendor == "nvidia"
                       and catalog.gpus[entry["gpu"]].datacenter_use)
        if licensed:
            opex.append(_opex("software-licence", "Software licence per datacenter NVIDIA "
                              "GPU-year (e.g. NVIDIA AI Enterprise)", licensed, "GPU",
                              params.software_licence_usd_per_gpu_year,
                              c.software_licence_usd_per_gpu_year.source, "operations_usd"))
    if params.support_contract_fraction_per_year:
        hardware = sum(entry["count"] * (entry["gpus_per_node"]
                                         * catalog.gpus[entry["gpu"]].price_usd
                                         + catalog.servers[entry["server"]].price_usd)
                       for entry in nodes)
        opex.append(_opex("support-contract", "Support contract: "
                          f"{params.support_contract_fraction_per_year:.0%} of the GPUs' and "
                          "servers' price per year", hardware, "USD of hardware",
                          params.support_contract_fraction_per_year,
                          c.support_contract_fraction_per_year.source, "operations_usd"))
    coupled = _coupled_groups(catalog, placement, groups)
    extra_nodes = sum(hosts - 1 for hosts in coupled)
    if extra_nodes:
        opex.append(_opex("multinode-overhead", "Multi-node engineering overhead: each coupled "
                          f"node (host) beyond the first of its group ({len(coupled)} "
                          f"{'group' if len(coupled) == 1 else 'groups'}) costs "
                          f"{params.multinode_overhead_factor:g}x a node's engineering",
                          extra_nodes, "node",
                          (params.multinode_overhead_factor - 1.0)
                          * params.node_engineering_usd_per_year,
                          c.multinode_overhead_factor.source, "multinode_overhead_usd"))
    return opex


def _coupled_groups(catalog: Catalog, placement: list[dict[str, Any]],
                    groups: dict[str, dict[str, Any]]) -> list[int]:
    """Hosts of every group that couples more than one (``costs.coupled_hosts``): the
    spanning groups (every host of their nodes) and the groups inside one multi-host node
    (an NVL72 rack) over more than one of its hosts."""
    out = [sum(catalog.servers[s].hosts for s in g["servers"]) for g in groups.values()]
    for node in placement:
        hosts = catalog.servers[node["server"]].hosts
        for run in node["runs"]:
            if run["nodes_spanned"] == 1 and run.get("mode") == "disaggregated":
                count = disaggregated_hosts(hosts, node["gpus"], [
                    (pool["gpus"] // pool["replicas"], pool["replicas"])
                    for pool in (run["prefill"], run["decode"])])
                if count > 1:
                    out.append(count)
            elif run["nodes_spanned"] == 1:
                count = coupled_hosts(hosts, node["gpus"], run["group_gpus"], 1)
                if count > 1:
                    out.append(count)
    return [h for h in out if h > 1]


def totals_by_category(bom: dict[str, Any]) -> dict[str, float]:
    """Capex and opex-over-the-horizon totals of a bill per cost-breakdown key."""
    out: Counter[str] = Counter()
    for line in bom["lines"]:
        out[line["category"]] += line["line_total_usd"]
    for item in bom["opex_per_year"]["lines"]:
        out[item["category"]] += item["usd_per_year"] * bom["horizon_years"]
    return dict(out)
