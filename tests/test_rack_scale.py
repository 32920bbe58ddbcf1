"""Issue 27: rack-scale NVLink systems (GB200/GB300 NVL72, the GB200 NVL4 board).

* the catalog holds the racks with a dated, sourced price, power per rack, liquid cooling,
  rack units and an NVLink domain of 72; their split price adds back to the rack price;
* a 72-GPU node packs exactly: in-node group sizes each divide every larger one (brute force);
* a plan buys them: an RFQ held to gb300 (or gb200, a model that needs 8 GPUs) buys the NVL72;
* ``--gpus-per-node`` above the GPU's largest system exits 2 naming the flag, the value and
  the largest domain.
"""

from __future__ import annotations

import itertools
import json
import math
import random

import pytest

from solver.analysis.explain import solve_rfq
from solver.catalog.load import load_catalog
from solver.optimize.candidates import node_types
from solver.optimize.costs import CostParams, coupled_hosts, node_cost
from solver.optimize.records import POWERS_OF_TWO, in_node_sizes
from solver.rfq.schema import validate_rfq
from tests.bom_checks import assert_bill_matches_cost, assert_valid_placement

RACKS = {"gb200-nvl72": ("gb200", 3_000_000), "gb300-nvl72": ("gb300", 3_500_000)}
"""Rack id -> (its GPU, the published rack price the catalog splits: the press estimate of
~$3M for GB200 NVL72 and the midpoint of $3-4M for GB300 NVL72, see servers.yaml)."""


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(None)


@pytest.mark.parametrize("rack_id", sorted(RACKS))
def test_nvl72_racks_are_sourced_liquid_cooled_72_gpu_domains(catalog, rack_id):
    gpu_id, rack_price_usd = RACKS[rack_id]
    rack, gpu = catalog.servers[rack_id], catalog.gpus[gpu_id]
    assert rack.gpu_slots == 72 and rack.form_factors == ("superchip",)
    assert rack.liquid_cooled and gpu.liquid_cooled
    assert rack.takes(gpu) and catalog.largest_node(gpu_id) is rack
    assert rack.rack_units >= 42  # a whole rack
    assert "http" in rack.source and rack.price_as_of and rack.price_type == "derived"
    # 72 GPUs at TDP plus the rest of the rack: the published ~120-142 kW class
    full_load_kw = (72 * gpu.tdp_w + rack.base_power_w) / 1000
    assert 115 <= full_load_kw <= 142 and rack.power_fits(gpu, 72)
    # the split prices add back to the rack price the sources give (rounding: $1 per GPU)
    assert abs(rack.price_usd + 72 * gpu.price_usd - rack_price_usd) <= 72


def test_air_cooled_servers_do_not_take_the_superchips(catalog):
    for gpu_id in ("gb200", "gb300"):
        takers = {s.id for s in catalog.servers_for(catalog.gpus[gpu_id])}
        assert takers <= {"gb200-nvl72", "gb300-nvl72", "gb200-nvl4"}
        assert all(catalog.servers[s].liquid_cooled for s in takers)
    assert {s.id for s in catalog.servers_for(catalog.gpus["gb200"])} == {"gb200-nvl72",
                                                                          "gb200-nvl4"}


def test_racks_are_bought_whole(catalog):
    rfq = validate_rfq({"id": "r", "constraints": {"gpus": ["gb200", "gb300"]},
                        "facility": {"cooling": "liquid"},
                        "workloads": [{"name": "chat", "kind": "inference",
                                       "model": "llama-3.1-8b", "concurrency": 4,
                                       "input_tokens": 500, "output_tokens": 100}]}, catalog)
    types = node_types(catalog, rfq, CostParams.from_catalog(catalog))
    sizes = {(t.server, t.gpus) for t in types.values()}
    assert ("gb200-nvl72", 72) in sizes and ("gb300-nvl72", 72) in sizes
    assert ("gb200-nvl4", 4) in sizes
    assert all(n in (4, 72) for _, n in sizes)  # never a partly filled rack or board


# --- a rack is 18 hosts: operations per host, coupled overhead per host -------------------

@pytest.mark.parametrize(("hosts", "node_gpus", "group_gpus", "nodes", "expected"), [
    (1, 8, 8, 1, 1), (1, 8, 16, 2, 2), (1, 8, 64, 8, 8),        # HGX: hosts = nodes
    (18, 72, 4, 1, 1), (18, 72, 8, 1, 2), (18, 72, 72, 1, 18),  # inside one rack: 4 per host
    (18, 72, 1, 1, 1), (18, 72, 144, 2, 36), (1, 4, 8, 2, 2)])
def test_coupled_hosts_known_answers(hosts, node_gpus, group_gpus, nodes, expected):
    assert coupled_hosts(hosts, node_gpus, group_gpus, nodes) == expected


def test_a_rack_pays_operations_and_engineering_per_host(catalog):
    params = CostParams.from_catalog(catalog)
    rack, gpu = catalog.servers["gb200-nvl72"], catalog.gpus["gb200"]
    one_host = node_cost(params, rack.model_copy(update={"hosts": 1}), gpu, 72)
    rack_cost = node_cost(params, rack, gpu, 72)
    per_host = params.horizon_years * (params.operations_usd_per_node_year
                                       + params.node_engineering_usd_per_year)
    assert rack.hosts == 18
    assert rack_cost.operations_usd - one_host.operations_usd == pytest.approx(17 * per_host)
    assert rack_cost.capex_usd == one_host.capex_usd


# --- packing: the sizes offered inside a node -----------------------------------------------

def test_in_node_sizes_form_a_divisibility_chain():
    for node_gpus in range(1, 129):
        sizes = in_node_sizes(node_gpus)
        assert sizes[-1] == node_gpus and sizes[0] == 1
        for small, large in itertools.combinations(sizes, 2):
            assert large % small == 0, (node_gpus, small, large)
    for power in (n for n in POWERS_OF_TWO if n <= 512):
        assert in_node_sizes(power) == tuple(n for n in POWERS_OF_TWO if n <= power)
    assert in_node_sizes(72) == (1, 2, 4, 8, 72)


def first_fit_decreasing(groups: list[int], node_size: int, nodes: int) -> bool:
    free = [node_size] * nodes
    for group in sorted(groups, reverse=True):
        for i, space in enumerate(free):
            if space >= group:
                free[i] -= group
                break
        else:
            return False
    return True


def test_groups_on_72_gpu_racks_pack_whenever_the_gpu_count_fits():
    """The MIP's packing row counts GPUs only; on NVL72 racks that is exact for the offered
    sizes (and would not be for 16-GPU groups: 5 x 16 = 80 GPUs do not fit 72 + 8 free)."""
    rng = random.Random(27)
    for _ in range(2000):
        groups = [rng.choice(in_node_sizes(72)) for _ in range(rng.randint(1, 40))]
        nodes = math.ceil(sum(groups) / 72)
        assert first_fit_decreasing(groups, 72, nodes), groups
    assert not first_fit_decreasing([16] * 9, 72, 2)  # 144 GPUs by count, yet no fit


# --- a plan buys them ---------------------------------------------------------------------

def _serving_rfq(gpus: list[str], model: str, concurrency: int) -> dict:
    return {"id": "rack-scale", "constraints": {"gpus": gpus},
            "facility": {"cooling": "liquid"},  # NVL72 racks are liquid-cooled (issue 28)
            "workloads": [{"name": "chat", "kind": "inference", "model": model,
                           "precision": "fp8", "concurrency": concurrency,
                           "input_tokens": 2000, "output_tokens": 1000, "tpot_ms": 50}]}


def test_a_gb300_only_rfq_buys_gb300_nvl72_racks(catalog):
    rfq = validate_rfq(_serving_rfq(["gb300"], "deepseek-r1", 2000), catalog)
    plan = solve_rfq(rfq, catalog, explain=False).to_json()
    assert plan["status"] == "optimal"
    assert_bill_matches_cost(plan)  # the per-host costs recounted from the plan, to the cent
    assert_valid_placement(plan)
    nodes = plan["cluster"]["nodes"]
    assert [(n["server"], n["gpus_per_node"]) for n in nodes] == [("gb300-nvl72", 72)]
    bought = sum(n["count"] * n["gpus_per_node"] for n in nodes)
    work = plan["workloads"][0]
    assert work["gpus_per_node"] == 72 and work["gpus"] <= bought
    # the bill of materials prices whole racks: 72 GPUs and one rack chassis per node
    rack, gpu = catalog.servers["gb300-nvl72"], catalog.gpus["gb300"]
    count = nodes[0]["count"]
    assert plan["cost"]["gpus_usd"] == pytest.approx(count * 72 * gpu.price_usd, abs=1)
    # plus the site's liquid cooling per kW of the rack (issue 28: costs.yaml
    # liquid_cooling_usd_per_kw, its own bill line) less the in-rack manifolds the rack's
    # price already includes (rack_cooling_included)
    assert rack.rack_cooling_included
    kw = (72 * gpu.tdp_w + rack.base_power_w) / 1000.0
    c = catalog.costs
    cooling = kw * (c.liquid_cooling_usd_per_kw.value - c.liquid_cooling_in_rack_usd_per_kw.value)
    assert plan["cost"]["servers_usd"] == pytest.approx(count * (rack.price_usd + cooling),
                                                        abs=1)


def test_deepseek_fp8_on_gb200_runs_in_the_rack_not_over_the_fabric(catalog):
    """DeepSeek-R1 at FP8 (~700 GB of weights) needs 8 GB200s: inside an NVL72 rack they
    share NVLink, on 4-GPU NVL4 boards a replica crosses the fabric. At thousands of users
    the plan buys racks and runs its replicas inside them."""
    rfq = validate_rfq(_serving_rfq(["gb200"], "deepseek-r1", 2000), catalog)
    plan = solve_rfq(rfq, catalog, explain=False).to_json()
    assert plan["status"] == "optimal"
    assert_bill_matches_cost(plan)
    assert_valid_placement(plan)
    racks = [n for n in plan["cluster"]["nodes"] if n["server"] == "gb200-nvl72"]
    assert racks and racks[0]["count"] >= 1
    work = plan["workloads"][0]
    in_rack = [lay for lay in work.get("layouts", [{**work, "replicas": work["dp"]}])
               if lay["gpus_per_node"] == 72]
    # a replica of >= 8 GPUs (TP, or attention-DP ranks with EP: issue 27) inside the rack
    assert in_rack and all(lay["fabric"] == "none"
                           and lay["tp"] * lay.get("attention_dp", 1) * lay["pp"] >= 8
                           for lay in in_rack)


# --- --gpus-per-node beyond any system ----------------------------------------------------

ESTIMATE = ["estimate", "--model", "deepseek-r1", "--kind", "inference", "--precision", "fp8",
            "--concurrency", "16", "--input-tokens", "1000", "--output-tokens", "100"]


@pytest.mark.parametrize(("gpu", "per_node", "largest", "system"), [
    ("gb200", 144, 72, "gb200-nvl72"), ("gb300", 73, 72, "gb300-nvl72"),
    ("h100-sxm", 16, 8, "hgx-8gpu"), ("gb200", 1000, 72, "gb200-nvl72")])
def test_gpus_per_node_beyond_the_largest_system_exits_2(cli, gpu, per_node, largest, system):
    """Issue 27: `--gpus-per-node 144` on gb200 was accepted without a word."""
    code, out, err = cli(*ESTIMATE, "--gpu", gpu, "--gpus", str(per_node),
                         "--gpus-per-node", str(per_node))
    assert code == 2, out + err
    assert "--gpus-per-node" in err and str(per_node) in err
    assert f"{system}, holds {largest} GPUs" in err and "Traceback" not in err


def test_a_whole_nvl72_rack_is_one_node_at_nvlink_speed(cli):
    code, out, err = cli(*ESTIMATE, "--gpu", "gb200", "--gpus", "72", "--tp", "8", "--json")
    assert code == 0, out + err
    data = json.loads(out)
    assert data["gpus_per_node"] == 72 and data["nodes_spanned"] == 1
    assert data["fits"] is True


def test_the_rack_shows_in_catalog_list_with_its_source(cli):
    code, out, err = cli("catalog", "list")
    assert code == 0, err
    for rack in ("gb200-nvl72", "gb300-nvl72", "gb200-nvl4"):
        assert rack in out
    assert "liquid" in out and "xatakaon" in out.replace("\n", "").replace("│", "").replace(
        " ", "")
