"""Network and storage bill: switches from ports (leaf/spine), front-end for every node,
training storage from the model state and the data."""

from __future__ import annotations

import pytest

from solver.analysis.explain import solve_rfq
from solver.optimize.costs import CostParams
from solver.optimize.network import switch_counts
from solver.optimize.storage import training_storage
from solver.rfq.schema import Rfq


@pytest.mark.parametrize(("ports", "radix", "expected"), [
    (0, 48, (0, 0, 0)),
    (1, 48, (1, 0, 0)),
    (48, 48, (1, 0, 0)),          # exactly one switch
    (49, 48, (3, 2, 72)),         # 24 down per leaf: ceil(49/24) = 3 leaves, 72 uplinks,
    (64, 64, (1, 0, 0)),          # ceil(72/48) = 2 spines
    (512, 64, (16, 8, 512)),      # 64 HGX nodes x 8 NDR NICs: 16 leaves, 8 spines
    (5, 4, (3, 2, 6)),
])
def test_switch_counts_known_answers(ports, radix, expected):
    got = switch_counts(ports, radix)
    assert (got.leaves, got.spines, got.uplinks) == expected


def test_storage_of_a_full_finetune_by_hand(catalog):
    params = CostParams.from_catalog(catalog)
    spec = Rfq.model_validate({"id": "t", "workloads": [{
        "name": "ft", "kind": "full_finetune", "model": "llama-3.1-70b",
        "dataset_tokens": 1_000_000_000, "epochs": 1, "seq_len": 4096,
        "deadline_hours": 100}]}).workloads[0]
    st = training_storage(catalog, params, spec)
    n = catalog.model("llama-3.1-70b").params_b * 1e9
    ckpt = n * 14.0  # bf16 weights 2 + fp32 master 4 + Adam 8
    assert st.capacity_tb == pytest.approx((3 * ckpt + 1e9 * 4) / 1e12)
    assert st.write_gbps == pytest.approx(ckpt / 300 / 1e9)
    assert st.usd == pytest.approx(st.capacity_tb * 300 + st.write_gbps * 3000)


def test_lora_stores_adapters_and_the_frozen_base_once(catalog):
    params = CostParams.from_catalog(catalog)
    spec = Rfq.model_validate({"id": "t", "workloads": [{
        "name": "ft", "kind": "lora", "model": "llama-3.1-70b", "dataset_tokens": 1,
        "epochs": 1, "seq_len": 4096, "deadline_hours": 100}]}).workloads[0]
    st = training_storage(catalog, params, spec)
    n = catalog.model("llama-3.1-70b").params_b * 1e9
    assert 2 * n / 1e12 < st.capacity_tb < 2 * n / 1e12 * 1.2  # base + small adapters
    assert st.write_gbps < 0.05 * n * 14 / 300 / 1e9


@pytest.mark.parametrize("lan_ports", [0, 1])
def test_independent_nodes_get_a_front_end(catalog, lan_ports):
    """Replicas behind a load balancer still need a ToR switch and cables (was $0) - on a
    site whose LAN has no free ports, or once they outgrow its free ports (issue 28)."""
    rfq = Rfq.model_validate({"id": "t", "constraints": {"gpus": ["l40s"]},
                              "facility": {"lan_ports": lan_ports}, "workloads": [{
        "name": "c", "kind": "inference", "model": "llama-3.1-8b", "concurrency": 400,
        "input_tokens": 1000, "output_tokens": 200}]})
    plan = solve_rfq(rfq, catalog, explain=False).to_json()
    assert plan["status"] == "optimal" and not plan["cluster"]["coupled"]
    nodes = plan["cluster"]["total_nodes"]
    c = catalog.costs
    ports = int(c.frontend_ports_per_node.value) * nodes
    assert ports > lan_ports  # the test's point: more ports than the site's LAN takes
    sw = switch_counts(ports, int(c.frontend_ports_per_switch.value))
    expected = (sw.switches * c.frontend_switch_usd.value
                + (sw.uplinks + ports) * c.frontend_cable_usd.value)
    assert expected > 0
    assert plan["cost"]["network_usd"] == pytest.approx(expected)
    assert plan["cluster"]["frontend"]["switches"] == sw.switches
    assert f"facility.lan_ports: {ports}" in plan["cluster"]["frontend"]["note"]


ONE_BOX = {"id": "one-box", "constraints": {"gpus": ["l40s"]}, "workloads": [{
    "name": "c", "kind": "inference", "model": "llama-3.1-8b", "concurrency": 16,
    "input_tokens": 1000, "output_tokens": 200}]}


@pytest.mark.parametrize(("facility", "switches"), [({}, 0), ({"lan_ports": 2}, 0),
                                                    ({"lan_ports": 1}, 1),
                                                    ({"lan_ports": 0}, 1)])
def test_a_one_box_plan_joins_the_site_lan_issue_28(catalog, facility, switches):
    """Issue 28: a single-node plan quotes no 48-port ToR switch ($10,000, 29 % of a small
    plan's hardware) unless the site's LAN has fewer free ports than the node takes; the plan
    says which and how to ask for one, and the bill agrees with the cost."""
    plan = solve_rfq(Rfq.model_validate({**ONE_BOX, "facility": facility}), catalog,
                     explain=False).to_json()
    assert plan["status"] == "optimal" and plan["cluster"]["total_nodes"] == 1
    c = catalog.costs
    ports = int(c.frontend_ports_per_node.value)
    frontend = plan["cluster"]["frontend"]
    assert frontend == {**frontend, "ports": ports, "switches": switches,
                        "lan_ports": facility.get("lan_ports", 4)}
    lines = {line["sku"]: line for line in plan["bill_of_materials"]["lines"]}
    switch_lines = [sku for sku in lines if sku.startswith("frontend-switch")]
    assert len(switch_lines) == switches
    cable = lines["frontend-cable"]["line_total_usd"]
    assert cable == ports * c.frontend_cable_usd.value
    assert plan["cost"]["network_usd"] == pytest.approx(
        cable + switches * c.frontend_switch_usd.value)
    if switches:
        assert "facility.lan_ports" in frontend["note"] and "quoted" in frontend["note"]
    else:
        assert "no front-end switch is quoted" in frontend["note"]
        assert "facility.lan_ports: 0" in frontend["note"]
