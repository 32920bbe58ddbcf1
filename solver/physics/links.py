"""Links and collectives: which link a collective runs on, and how long it takes.

Inside a node a collective runs on the GPU's intra-node link (``Gpu.intra_node_gbs``, the
practical NCCL bus bandwidth, and ``intra_node_latency_us``). A group that spans nodes is
bounded by the fabric: ``Fabric.effective_gbs`` x the node type's own server's
``fabric_nics_per_node``
(never more than the intra-node link) with the fabric's latency added per hop. Over a TCP
fabric NCCL's socket transport reaches only a fraction of that bandwidth and adds the
kernel stack's latency (:func:`fabric_nccl_link`).

A GPU without peer-to-peer on its stock driver (``Gpu.p2p`` false: GeForce) stages every
transfer through pinned host memory: its intra-node link keeps ``host_staged_bw_factor`` of
the P2P bus bandwidth and adds ``host_staged_extra_latency_us`` per hop (efficiency.yaml
``links``, a measured pair of RTX 5090s).
"""

from __future__ import annotations

from dataclasses import dataclass

from solver.catalog.data import Catalog, Fabric, Gpu, Server, content_key
from solver.catalog.perf_factors import factors
from solver.common.errors import InputError, Problem
from solver.common.memo import Memo


@dataclass(frozen=True)
class Link:
    """A collective's bottleneck link: bus bandwidth GB/s and per-hop latency µs."""

    busbw_gbs: float
    latency_us: float
    crosses_nodes: bool


def server_for(catalog: Catalog, gpu: Gpu, gpus_per_node: int) -> Server | None:
    """The smallest server that takes ``gpus_per_node`` of this GPU's form factor."""
    options = [s for s in catalog.servers_for(gpu) if s.gpu_slots >= gpus_per_node]
    return min(options, key=lambda s: (s.gpu_slots, s.price_usd)) if options else None


LINKS: Memo[Link] = Memo(4096)
"""Links kept, keyed by catalog content and the group's shape."""


def _link(catalog: Catalog, gpu: Gpu, fabric_id: str, gpus_per_node: int,
          group: int, server_id: str | None) -> Link:
    in_node_gbs, in_node_us = in_node_link(catalog, gpu)
    if group <= gpus_per_node:
        return Link(in_node_gbs, in_node_us, False)
    fabric = catalog.fabrics[fabric_id]
    if fabric.effective_gbs <= 0:
        return Link(0.0, 0.0, True)
    server = (catalog.servers.get(server_id) if server_id is not None
              else server_for(catalog, gpu, gpus_per_node))
    if server is not None:
        nics = server.fabric_nics_per_node
    else:  # no catalog server (superchip racks such as NVL72): one fabric NIC per GPU
        nics = gpus_per_node if gpu.form_factor == "superchip" else 1
    per_nic_gbs, latency_us = fabric_nccl_link(catalog, fabric)
    busbw = min(in_node_gbs, per_nic_gbs * nics)
    return Link(busbw, latency_us + in_node_us, True)


def fabric_nccl_link(catalog: Catalog, fabric: Fabric) -> tuple[float, float]:
    """What NCCL gets out of one NIC of ``fabric``: (GB/s, latency µs). RDMA fabrics give
    their ``effective_gbs``; over plain TCP sockets NCCL reaches only
    ``fabric_behaviour.tcp_line_rate_fraction`` of it and pays the kernel stack's latency
    (efficiency.yaml; no such section = the fabric's own figures)."""
    behaviour = factors(catalog).fabric_behaviour
    if fabric.rdma or behaviour is None:
        return fabric.effective_gbs, fabric.latency_us
    return (fabric.effective_gbs * behaviour.tcp_line_rate_fraction.value,
            fabric.latency_us + behaviour.tcp_extra_latency_us.value)


def in_node_link(catalog: Catalog, gpu: Gpu) -> tuple[float, float]:
    """Bus bandwidth (GB/s) and per-hop latency (µs) between GPUs of one node: the P2P
    link, or the host-staged copy when the GPU has no peer-to-peer."""
    if gpu.p2p:
        return gpu.intra_node_gbs, gpu.intra_node_latency_us

    links = factors(catalog).links
    if links is None:
        raise InputError([Problem("efficiency.yaml", "links", None,
                                  f"GPU {gpu.id} has p2p: false, which needs the factors "
                                  "links.host_staged_bw_factor and "
                                  "links.host_staged_extra_latency_us")])
    return (gpu.intra_node_gbs * links.host_staged_bw_factor.value,
            gpu.intra_node_latency_us + links.host_staged_extra_latency_us.value)


def group_link(catalog: Catalog, gpu: Gpu, fabric_id: str, gpus_per_node: int,
               group: int, server_id: str | None = None) -> Link:
    """The link a collective over ``group`` consecutive GPUs runs on (cached per catalog
    content). ``server_id`` is the node type's own chassis; None = :func:`server_for`."""
    return LINKS.get((content_key(catalog), gpu.id, fabric_id, gpus_per_node, group, server_id),
                     lambda: _link(catalog, gpu, fabric_id, gpus_per_node, group, server_id))


def all_reduce_s(link: Link, group: int, size_bytes: float) -> float:
    """Ring all-reduce of ``size_bytes`` over ``group`` GPUs, seconds
    (``2(n-1)`` latency hops + size x 2(n-1)/n / bus bandwidth)."""
    if group <= 1 or size_bytes <= 0:
        return 0.0
    if link.busbw_gbs <= 0:
        return float("inf")
    steps = 2.0 * (group - 1)
    return steps * link.latency_us * 1e-6 + size_bytes * steps / group / (link.busbw_gbs * 1e9)


def p2p_s(link: Link, size_bytes: float) -> float:
    """Point-to-point send of ``size_bytes`` (a pipeline hop), seconds."""
    if size_bytes <= 0:
        return 0.0
    if link.busbw_gbs <= 0:
        return float("inf")
    return link.latency_us * 1e-6 + size_bytes / (link.busbw_gbs * 1e9)
