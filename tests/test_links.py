"""Physics on the node type's own server, and physics caches keyed by catalog content."""

from __future__ import annotations

import gc

import pytest

from solver.optimize.candidates import build_candidates, node_types
from solver.optimize.costs import CostParams
from solver.physics.layout import Layout, Workload
from solver.physics.links import group_link
from solver.physics.performance import estimate
from solver.rfq.schema import Rfq


def _with_servers(catalog, **servers):
    return catalog.model_copy(update={"servers": {**catalog.servers, **servers}})


def test_spanning_link_uses_the_node_types_own_server(catalog):
    """A 4-NIC PCIe chassis next to the 1-NIC one: each node type's link uses its own NICs."""
    base = catalog.servers["pcie-8gpu"]
    four = base.model_copy(update={"id": "pcie-8gpu-4nic", "fabric_nics_per_node": 4,
                                   "price_usd": base.price_usd + 1})
    cat = _with_servers(catalog, **{"pcie-8gpu-4nic": four})
    gpu = cat.gpus["rtx-pro-6000"]
    fabric = cat.fabrics["100gbe"]
    one = group_link(cat, gpu, "100gbe", 8, 16, "pcie-8gpu")
    many = group_link(cat, gpu, "100gbe", 8, 16, "pcie-8gpu-4nic")
    assert one.busbw_gbs == pytest.approx(min(gpu.intra_node_gbs, fabric.effective_gbs * 1))
    assert many.busbw_gbs == pytest.approx(min(gpu.intra_node_gbs, fabric.effective_gbs * 4))
    assert many.busbw_gbs > one.busbw_gbs
    work = Workload(kind="pretrain", seq_len=4096)
    lay = Layout(model="llama-3.1-8b", gpu="rtx-pro-6000", precision="bf16", tp=1, pp=1, dp=16,
                 gpus_per_node=8, fabric="100gbe")
    slow = estimate(cat, Layout(**{**lay.__dict__, "server": "pcie-8gpu"}), work)
    fast = estimate(cat, Layout(**{**lay.__dict__, "server": "pcie-8gpu-4nic"}), work)
    assert fast.predicted.tokens_per_s > slow.predicted.tokens_per_s


def test_dominance_keeps_a_server_with_other_nic_count(catalog):
    """A dearer chassis with more fabric NICs is not dominated by a cheaper one with fewer."""
    base = catalog.servers["pcie-8gpu"]
    four = base.model_copy(update={"id": "pcie-8gpu-4nic", "fabric_nics_per_node": 4,
                                   "price_usd": base.price_usd + 1000})
    same = base.model_copy(update={"id": "pcie-8gpu-dear", "price_usd": base.price_usd + 1000})
    cat = _with_servers(catalog, **{"pcie-8gpu-4nic": four, "pcie-8gpu-dear": same})
    rfq = Rfq.model_validate({"id": "t", "constraints": {"gpus": ["rtx-pro-6000"]},
                              "workloads": [{"name": "c", "kind": "inference",
                                             "model": "llama-3.1-8b", "concurrency": 8,
                                             "input_tokens": 1000, "output_tokens": 200}]})
    types = node_types(cat, rfq, CostParams.from_catalog(cat))
    servers = {t.server for t in types.values() if t.gpus == 8}
    assert "pcie-8gpu-4nic" in servers and "pcie-8gpu" in servers
    assert "pcie-8gpu-dear" not in servers  # same NICs, dearer: dominated


def test_candidates_carry_their_node_types_server(catalog):
    rfq = Rfq.model_validate({"id": "t", "constraints": {"gpus": ["h100-sxm"]},
                              "workloads": [{"name": "c", "kind": "inference",
                                             "model": "llama-3.1-8b", "concurrency": 8,
                                             "input_tokens": 1000, "output_tokens": 200}]})
    table = build_candidates(catalog, rfq)
    for cand in table.candidates["c"]:
        assert cand.layout.server == table.node_types[cand.node_type].server


@pytest.mark.slow  # forty catalogs with a garbage collection each (CI runs the slow marker)
def test_many_catalogs_each_use_their_own_link_figures(catalog):
    """Catalogs built and dropped one after another (ids get reused): every estimate must
    use its own catalog's fabric bandwidth, never a cached figure of an earlier catalog.
    40 catalogs: past the 32 the old id-keyed cache held (the issue saw 144 of 199 wrong)."""
    gpu_id, fabric_id = "rtx-pro-6000", "100gbe"
    work = Workload(kind="pretrain", seq_len=4096)
    lay = Layout(model="llama-3.1-8b", gpu=gpu_id, precision="bf16", dp=16, gpus_per_node=8,
                 fabric=fabric_id, server="pcie-8gpu")
    seen: dict[float, float] = {}
    for i in range(40):
        gbs = 1.0 + 0.6 * i
        fabric = catalog.fabrics[fabric_id].model_copy(update={"effective_gbs": gbs})
        cat = catalog.model_copy(update={"fabrics": {**catalog.fabrics, fabric_id: fabric}})
        assert cat.version == catalog.version  # model_copy keeps the version string
        gpu = cat.gpus[gpu_id]
        link = group_link(cat, gpu, fabric_id, 8, 16, "pcie-8gpu")
        assert link.busbw_gbs == pytest.approx(min(gpu.intra_node_gbs, gbs))
        seen[gbs] = estimate(cat, lay, work).predicted.tokens_per_s
        del cat, fabric
        gc.collect()
    speeds = [seen[k] for k in sorted(seen)]
    assert all(b >= a for a, b in zip(speeds, speeds[1:], strict=False))
    assert speeds[-1] > speeds[0]


def test_physics_memo_keys_by_catalog_content(catalog):
    """No catalog registry: the memo of estimates is keyed by content, so an equal copy
    reuses the entry and a copy with another figure gets its own (never the stale one)."""
    from solver.physics.performance import ESTIMATES

    lay = Layout(model="llama-3.1-8b", gpu="h100-sxm", precision="bf16", tp=1, pp=1, dp=8,
                 gpus_per_node=8, fabric="none")
    work = Workload(kind="lora", seq_len=2048)
    first = estimate(catalog, lay, work)
    hits = ESTIMATES.hits
    same = catalog.model_copy(deep=True)
    assert estimate(same, lay, work) is first and ESTIMATES.hits == hits + 1
    gpu = catalog.gpus["h100-sxm"]
    slower = catalog.model_copy(update={"gpus": {**catalog.gpus, "h100-sxm": gpu.model_copy(
        update={"dense_tflops": {k: v / 2 for k, v in gpu.dense_tflops.items()}})}})
    halved = estimate(slower, lay, work)
    assert halved.predicted.tokens_per_s < 0.75 * first.predicted.tokens_per_s
