"""Hardware realism as catalog data, and the policies a buyer sets (issues 10, 11, 14).

Known answers: the host-staged GeForce link is the measured ratio of the P2P link; node types
respect card width, node power and liquid cooling; consumer cards are excluded on request and
explained when chosen; serving precisions default to bf16/fp8; a cluster runs one vendor
stack unless mixing is allowed (checked against re-solves restricted to each stack).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml
from bom_checks import assert_bill_matches_cost
from plans import tiny_plan

from solver.analysis.explain import solve_rfq
from solver.analysis.realism import parse_as_of, precision_notes, stale_price_warnings
from solver.catalog.load import builtin_catalog_dir, load_catalog
from solver.common.errors import InputError
from solver.optimize.candidates import build_candidates, node_types
from solver.optimize.costs import CostParams, node_cost
from solver.optimize.plan_model import Plan
from solver.optimize.storage import training_storage
from solver.physics.layout import Layout, Workload
from solver.physics.links import all_reduce_s, group_link
from solver.rfq.overrides import apply_overrides
from solver.rfq.schema import load_rfq, validate_rfq

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
CONSUMER = ("rtx-5090", "rtx-4090")


def _rfq(catalog, workloads, **constraints):
    return validate_rfq({"id": "t", "constraints": constraints, "workloads": workloads}, catalog)


def _links(catalog) -> tuple[float, float]:
    links = catalog.efficiency["links"]
    return links["host_staged_bw_factor"]["value"], links["host_staged_extra_latency_us"]["value"]


# --- catalog data -----------------------------------------------------------------------

def test_every_builtin_gpu_states_its_realism_fields():
    raw = yaml.safe_load((builtin_catalog_dir() / "gpus.yaml").read_text())
    for entry in raw:
        for key in ("price_type", "vendor", "datacenter_use", "ecc", "p2p"):
            assert key in entry, (entry["id"], key)
        if entry["form_factor"] == "pcie":
            assert entry.get("width_slots"), entry["id"]
        if entry["datacenter_use"] is False:
            assert "No Datacenter Deployment" in entry["datacenter_use_source"], entry["id"]


def test_geforce_cards_are_consumer_cards(catalog):
    for gpu_id in CONSUMER:
        gpu = catalog.gpus[gpu_id]
        assert not gpu.datacenter_use and not gpu.p2p and gpu.width_slots >= 3
        assert gpu.price_type == "street"
    assert not catalog.gpus["rtx-5090"].ecc
    for gpu in catalog.gpus.values():
        if gpu.id not in CONSUMER:
            assert gpu.datacenter_use and gpu.p2p and gpu.ecc, gpu.id


def test_new_gpus_are_sourced_and_open_only(catalog):
    for gpu_id, vendor, memory in (("b300-sxm", "nvidia", 288), ("mi325x", "amd", 256),
                                   ("mi355x", "amd", 288)):
        gpu = catalog.gpus[gpu_id]
        assert gpu.vendor == vendor and gpu.memory_gb == memory
        assert gpu.price_usd > 0 and parse_as_of(gpu.price_as_of) is not None
        assert "http" in gpu.source and "http" in gpu.price_source
        assert catalog.vendors["open"].allows("gpus", gpu_id)
        assert not catalog.vendors["kentino"].allows("gpus", gpu_id)
        assert catalog.servers_for(gpu), gpu_id
    assert catalog.gpus["mi355x"].liquid_cooled
    assert {s.id for s in catalog.servers_for(catalog.gpus["mi355x"])} == {"oam-8gpu-lc"}
    assert {s.id for s in catalog.servers_for(catalog.gpus["mi325x"])} == {"oam-8gpu"}


def test_new_gpus_run_a_model(catalog):
    from solver.physics.performance import estimate

    work = Workload(kind="inference", input_tokens=2000, output_tokens=400, concurrency=8)
    for gpu_id in ("b300-sxm", "mi325x", "mi355x"):
        layout = Layout(model="llama-3.1-405b", gpu=gpu_id, precision="fp8", tp=8,
                        gpus_per_node=8)
        est = estimate(catalog, layout, work)
        assert est.fits and est.predicted.tpot_ms > 0, gpu_id


# --- GeForce has no P2P: host-staged link ---------------------------------------------

def test_host_staged_link_is_the_measured_ratio(catalog):
    factor, extra = _links(catalog)
    geforce, pro = catalog.gpus["rtx-5090"], catalog.gpus["rtx-pro-6000"]
    assert geforce.intra_node_gbs == pro.intra_node_gbs  # same PCIe Gen5 P2P figure
    slow = group_link(catalog, geforce, "none", 4, 4)
    fast = group_link(catalog, pro, "none", 4, 4)
    assert slow.busbw_gbs == pytest.approx(fast.busbw_gbs * factor)
    assert slow.latency_us == pytest.approx(fast.latency_us + extra)
    size = 256e6  # a 256 MB all-reduce over 4 GPUs: 6 hops
    expect_slow = 6 * slow.latency_us * 1e-6 + size * 6 / 4 / (fast.busbw_gbs * factor * 1e9)
    assert all_reduce_s(slow, 4, size) == pytest.approx(expect_slow)
    assert all_reduce_s(slow, 4, size) / all_reduce_s(fast, 4, size) == pytest.approx(
        1 / factor, rel=0.01)  # bandwidth-bound: the ratio the measurement implies


def _twin_catalog(tmp_path: Path, p2p: bool):
    """rtx-5090 given the Pro 6000's compute, memory and family: only P2P differs."""
    pro = load_catalog().gpus["rtx-pro-6000"]
    twin = {"id": "rtx-5090", "family": pro.family, "memory_gb": pro.memory_gb,
            "mem_bw_gbs": pro.mem_bw_gbs, "dense_tflops": dict(pro.dense_tflops),
            "tdp_w": pro.tdp_w, "p2p": p2p}
    (tmp_path / "gpus.yaml").write_text(yaml.safe_dump([twin]))
    return load_catalog(str(tmp_path))


@pytest.mark.parametrize("p2p", [False, True])
def test_tp_across_geforce_is_slower_at_equal_compute(tmp_path, p2p):
    from solver.physics.performance import estimate

    cat = _twin_catalog(tmp_path, p2p)
    work = Workload(kind="inference", input_tokens=2000, output_tokens=400, concurrency=16)
    twin, pro = (estimate(cat, Layout(model="llama-3.1-70b", gpu=g, precision="fp8", tp=4,
                                      gpus_per_node=4), work).predicted
                 for g in ("rtx-5090", "rtx-pro-6000"))
    if p2p:  # the twin is the Pro 6000 in all but name
        assert twin.tpot_ms == pytest.approx(pro.tpot_ms)
        assert twin.ttft_ms == pytest.approx(pro.ttft_ms)
    else:
        assert twin.tpot_ms > pro.tpot_ms and twin.ttft_ms > pro.ttft_ms


# --- chassis: card width, node power, liquid cooling ----------------------------------

def test_node_types_respect_width_power_and_cooling(catalog):
    rfq = validate_rfq({"id": "t", "facility": {"cooling": "any"}, "workloads": [
        {"name": "a", "kind": "inference", "model": "llama-3.1-8b", "concurrency": 1,
         "input_tokens": 100, "output_tokens": 10}]}, catalog)
    params = CostParams.from_catalog(catalog)
    types = node_types(catalog, rfq, params)
    for node in types.values():
        server, gpu = catalog.servers[node.server], catalog.gpus[node.gpu]
        assert server.takes(gpu)
        assert node.gpus * gpu.tdp_w + server.base_power_w <= server.max_power_w
    keys = set(types)
    assert "pcie-4gpu/rtx-5090x4" in keys and "pcie-8gpu/rtx-5090x8" not in keys  # 3 > 2 slots
    assert "pcie-8gpu/rtx-pro-6000x8" in keys
    assert "oam-8gpu-lc/mi355xx8" in keys and "oam-8gpu/mi355xx8" not in keys  # liquid only
    assert "hgx-b300-8gpu/b300-sxmx8" in keys and "hgx-8gpu/b300-sxmx8" not in keys


def test_node_power_limit_drops_counts(tmp_path):
    # 4 x 575 W + 1,100 W = 3,400 W > 3,000 W; 2 x 575 + 1,100 = 2,250 W fits
    (tmp_path / "servers.yaml").write_text("- id: pcie-4gpu\n  max_power_w: 3000\n")
    cat = load_catalog(str(tmp_path))
    rfq = _rfq(cat, [{"name": "a", "kind": "inference", "model": "llama-3.1-8b",
                      "concurrency": 1, "input_tokens": 100, "output_tokens": 10}],
               gpus=["rtx-5090"])
    keys = set(node_types(cat, rfq, CostParams.from_catalog(cat)))
    assert keys == {"pcie-4gpu/rtx-5090x1", "pcie-4gpu/rtx-5090x2"}


def test_wider_slots_admit_consumer_cards_in_8gpu_boxes(tmp_path):
    (tmp_path / "servers.yaml").write_text("- id: pcie-8gpu\n  max_width_slots: 3.5\n")
    cat = load_catalog(str(tmp_path))
    rfq = _rfq(cat, [{"name": "a", "kind": "inference", "model": "llama-3.1-8b",
                      "concurrency": 1, "input_tokens": 100, "output_tokens": 10}],
               gpus=["rtx-5090"])
    assert "pcie-8gpu/rtx-5090x8" in node_types(cat, rfq, CostParams.from_catalog(cat))


def test_dgx_b200_class_power(catalog):
    hgx = catalog.servers["hgx-8gpu"]
    assert hgx.max_power_w == 14300  # DGX B200 system maximum
    assert hgx.power_fits(catalog.gpus["b200-sxm"], 8)


# --- consumer cards: excluded on request, explained when chosen ------------------------

def test_datacenter_grade_only_excludes_consumer_cards(catalog):
    # the throughput job of the guide's second case: the consumer card is cheapest per token
    rfq = load_rfq(SCENARIOS / "batch-corpus-one-box.yaml", catalog)
    plan = solve_rfq(rfq, catalog).to_json()
    assert {n["gpu"] for n in plan["cluster"]["nodes"]} == {"rtx-5090"}
    warning = next(w for w in plan["warnings"] if w.startswith("consumer card rtx-5090"))
    for risk in ("licence", "No Datacenter Deployment", "ECC", "P2P", "warranty"):
        assert risk in warning
    strict = rfq.model_copy(update={"constraints": rfq.constraints.model_copy(
        update={"datacenter_grade_only": True})})
    table = build_candidates(catalog, strict)
    assert not {catalog.gpus[n.gpu].id for n in table.node_types.values()} & set(CONSUMER)
    plan2 = solve_rfq(strict, catalog).to_json()
    assert plan2["status"] == "optimal"
    assert all(catalog.gpus[n["gpu"]].datacenter_use for n in plan2["cluster"]["nodes"])
    assert not any(w.startswith("consumer card") for w in plan2["warnings"])
    assert plan2["cost"]["tco_usd"] >= plan["cost"]["tco_usd"]  # a constraint never helps


# --- licence and support in the cost model ---------------------------------------------

def test_software_licence_and_support_contract(catalog):
    base = CostParams.from_catalog(catalog)
    assert base.software_licence_usd_per_gpu_year == 0  # off by default
    params = CostParams(**{**base.__dict__, "software_licence_usd_per_gpu_year": 4500.0,
                           "support_contract_fraction_per_year": 0.1})
    server = catalog.servers["pcie-8gpu"]
    for gpu_id, licensed in (("rtx-pro-6000", True), ("rtx-5090", False), ("mi300x", False)):
        gpu = catalog.gpus[gpu_id]
        srv = server if gpu.form_factor == "pcie" else catalog.servers["oam-8gpu"]
        plain, priced = node_cost(base, srv, gpu, 8), node_cost(params, srv, gpu, 8)
        licence = 8 * 4500 * 3 if licensed else 0
        support = 0.1 * 3 * (8 * gpu.price_usd + srv.price_usd)
        assert priced.licence_usd == pytest.approx(licence)
        assert priced.support_usd == pytest.approx(support)
        assert priced.tco_usd - plain.tco_usd == pytest.approx(licence + support)



@pytest.mark.parametrize("scenario", ["chat-70b-one-node", "pretrain-70b-open"])
def test_bill_carries_licence_and_support_lines(catalog, scenario):
    """With licence and support switched on the bill of materials still equals the cost."""
    rfq = load_rfq(SCENARIOS / f"{scenario}.yaml", catalog)
    priced, rfq = apply_overrides(catalog, rfq, [
        "costs.software_licence_usd_per_gpu_year=4500",
        "costs.support_contract_fraction_per_year=0.1",
        "rfq.constraints.datacenter_grade_only=true"])
    plan = solve_rfq(rfq, priced).to_json()
    assert_bill_matches_cost(plan)
    items = {line["item"]: line for line in plan["bill_of_materials"]["opex_per_year"]["lines"]}
    nvidia = sum(n["count"] * n["gpus_per_node"] for n in plan["cluster"]["nodes"]
                 if priced.gpus[n["gpu"]].vendor == "nvidia")
    assert ("software-licence" in items) == bool(nvidia)
    if nvidia:
        assert items["software-licence"]["usd_per_year"] == pytest.approx(4500 * nvidia)
    hardware = plan["cost"]["gpus_usd"] + plan["cost"]["servers_usd"]
    assert items["support-contract"]["usd_per_year"] == pytest.approx(0.1 * hardware)

# --- prices: type, date, staleness -------------------------------------------------------

def test_parse_as_of():
    assert parse_as_of("2026") == dt.date(2026, 1, 1)
    assert parse_as_of("2026-04") == dt.date(2026, 4, 1)
    assert parse_as_of("2026-04-17") == dt.date(2026, 4, 17)
    assert parse_as_of("user quote") is None and parse_as_of("2026-13") is None


def test_stale_price_warning(catalog):
    plan = tiny_plan("rtx-pro-6000", "pcie-8gpu", 8).to_json()
    as_of = parse_as_of(catalog.gpus["rtx-pro-6000"].price_as_of)
    limit = catalog.costs.price_stale_after_days.value
    fresh = as_of + dt.timedelta(days=int(limit))
    assert not [w for w in stale_price_warnings(catalog, Plan.model_validate(plan), fresh) if "rtx-pro-6000" in w]
    stale = stale_price_warnings(catalog, Plan.model_validate(plan), fresh + dt.timedelta(days=1))
    assert any("GPU rtx-pro-6000" in w and f"{int(limit) + 1} days" in w for w in stale)


def test_price_overlay_is_a_quote(tmp_path):
    (tmp_path / "prices.csv").write_text("id,price_usd,as_of,source\nrtx-5090,2100,2026-11,q\n"
                                         "pcie-4gpu,15000,2026-11,q\n")
    cat = load_catalog(str(tmp_path))
    assert cat.gpus["rtx-5090"].price_type == "quote"
    assert cat.servers["pcie-4gpu"].price_type == "quote"
    assert cat.servers["pcie-4gpu"].price_as_of == "2026-11"


def test_server_price_date_is_its_quote_date(catalog):
    plan = tiny_plan("h100-sxm", "hgx-8gpu", 8).to_json()
    warnings = stale_price_warnings(catalog, Plan.model_validate(plan), dt.date(2026, 12, 2))
    assert any(w.startswith("stale price: server hgx-8gpu") and "dated 2024-08" in w
               for w in warnings)  # derived from an Aug-2024 node quote, not read in 2026


# --- precisions a buyer allows ---------------------------------------------------------

MIXTRAL = {"name": "moe", "kind": "inference", "model": "mixtral-8x7b", "concurrency": 16,
           "input_tokens": 1000, "output_tokens": 200, "tpot_ms": 100}


def test_serving_defaults_to_bf16_or_fp8(catalog):
    rfq = _rfq(catalog, [MIXTRAL], vendor="kentino")
    cands = build_candidates(catalog, rfq).candidates["moe"]
    assert cands and {c.layout.precision for c in cands} <= {"bf16", "fp8"}
    plan = solve_rfq(rfq, catalog).to_json()
    precision = plan["workloads"][0]["precision"]
    assert precision in ("bf16", "fp8")
    stated = [w for w in plan["warnings"] if w.startswith(f"moe: served at {precision}")]
    assert len(stated) == (precision == "fp8")
    assert all("default serving policy" in w for w in stated)


def test_fp4_only_when_allowed(catalog):
    rfq = _rfq(catalog, [{**MIXTRAL, "precisions": ["fp4"]}], vendor="kentino")
    cands = build_candidates(catalog, rfq).candidates["moe"]
    assert cands and {c.layout.precision for c in cands} == {"fp4"}
    plan = solve_rfq(rfq, catalog).to_json()
    assert plan["workloads"][0]["precision"] == "fp4"
    note = next(w for w in plan["warnings"] if w.startswith("moe: served at fp4"))
    assert "precisions ['fp4']" in note


def test_every_non_bf16_choice_is_stated(catalog):
    rfq = load_rfq(SCENARIOS / "portfolio-lab.yaml", catalog)
    plan = solve_rfq(rfq, catalog).to_json()
    notes = precision_notes(rfq, Plan.model_validate(plan))
    for entry in plan["workloads"]:
        stated = [n for n in notes if n.startswith(entry["name"] + ":")]
        used = {layout["precision"] for layout in entry.get("layouts") or [entry]}
        assert len(stated) == len(used - {"bf16"}), entry["name"]
        for precision in used - {"bf16"}:
            assert any(f"at {precision}" in n or precision.upper() in n for n in stated)


@pytest.mark.parametrize("workload, reason", [
    ({**MIXTRAL, "precision": "fp8", "precisions": ["bf16"]}, "not in precisions"),
    ({**MIXTRAL, "precisions": ["fp8", "fp8"]}, "twice"),
    ({"name": "t", "kind": "lora", "model": "llama-3.1-8b", "dataset_tokens": 1000,
      "deadline_hours": 10, "precisions": ["int4"]}, "not valid for lora"),
])
def test_bad_precisions_are_refused(catalog, workload, reason):
    with pytest.raises(InputError) as err:
        _rfq(catalog, [workload])
    assert reason in str(err.value)


# --- one vendor stack per cluster ------------------------------------------------------

MIX = [{"name": "big", "kind": "inference", "model": "llama-3.1-405b", "precision": "bf16",
        "concurrency": 8, "input_tokens": 1000, "output_tokens": 200},
       {"name": "small", "kind": "inference", "model": "llama-3.1-8b", "concurrency": 4,
        "input_tokens": 500, "output_tokens": 100}]


def _stacks(catalog, plan) -> set[str]:
    return {catalog.gpus[n["gpu"]].stack for n in plan["cluster"]["nodes"]}


def test_one_vendor_stack_unless_mixing_is_allowed(catalog):
    mixed = solve_rfq(_rfq(catalog, MIX, gpus=["mi300x", "l4"], mixed_vendors=True), catalog,
                      explain=False).to_json()
    assert _stacks(catalog, mixed) == {"cuda", "rocm"}  # mixing is the cheapest here
    single = solve_rfq(_rfq(catalog, MIX, gpus=["mi300x", "l4"]), catalog, explain=False).to_json()
    assert len(_stacks(catalog, single)) == 1
    # known answer: the cheaper of the two plans restricted to one stack's GPUs
    best = min(solve_rfq(_rfq(catalog, MIX, gpus=[g]), catalog, explain=False).to_json()["cost"]["tco_usd"]
               for g in ("mi300x", "l4"))
    assert single["cost"]["tco_usd"] == pytest.approx(best, abs=0.5)
    assert mixed["cost"]["tco_usd"] < single["cost"]["tco_usd"]



def test_guide_box_counterfactual_names_the_consumer_risk(catalog):
    from solver.analysis.explain import counterfactuals

    rfq = load_rfq(SCENARIOS / "batch-corpus-one-box.yaml", catalog)
    table = build_candidates(catalog, rfq)
    plan = solve_rfq(rfq, catalog, table=table).to_json()
    guide = next(c for c in counterfactuals(rfq, catalog, Plan.model_validate(plan), table)
                 if c["alternative"].startswith("the guide's box"))
    assert guide["delta_usd"] > 0 and "rtx-5090 is a consumer card" in guide["why"]


def test_policies_in_the_csv_batch_form(catalog, tmp_path):
    from solver.rfq.schema import iter_csv_rfqs

    file = tmp_path / "batch.csv"
    file.write_text("id,constraints.datacenter_grade_only,constraints.mixed_vendors,name,kind,"
                    "model,precisions,concurrency,input_tokens,output_tokens\n"
                    "a,true,false,chat,inference,mixtral-8x7b,fp8;int4,8,500,100\n")
    rfq = dict(iter_csv_rfqs(file, catalog))["a"]
    assert rfq.constraints.datacenter_grade_only and not rfq.constraints.mixed_vendors
    assert rfq.workloads[0].precisions == ["fp8", "int4"]
    assert rfq.workloads[0].allowed_precisions() == ("fp8", "int4")


@pytest.fixture(scope="module")
def rented(catalog):
    """rent-oneoff-jobs solved once: both jobs rented."""
    rfq = load_rfq(Path(__file__).resolve().parent.parent / "scenarios" / "rent-oneoff-jobs.yaml",
                   catalog)
    plan = solve_rfq(rfq, catalog)
    assert plan.status == "optimal"
    assert {w.sourcing for w in plan.workloads} == {"rented"}
    return rfq, plan


def test_stale_rental_offer_is_named_with_its_date_issue_28(catalog, rented):
    """Issue 28: a rented offer's $/GPU-hour is checked for staleness like purchase prices
    (same threshold); the warning names the offer, its rate and date."""
    _, plan = rented
    offers = {r.offer: r for w in plan.workloads for r in w.rental or []}
    assert offers
    limit = int(catalog.costs.price_stale_after_days.value)
    for offer_id, rent in offers.items():
        as_of = parse_as_of(catalog.rental[offer_id].as_of)
        assert as_of is not None and rent.as_of == catalog.rental[offer_id].as_of
        fresh = as_of + dt.timedelta(days=limit)
        assert not [w for w in stale_price_warnings(catalog, plan, fresh) if offer_id in w]
        stale = [w for w in stale_price_warnings(catalog, plan, fresh + dt.timedelta(days=1))
                 if offer_id in w]
        assert len(stale) == 1  # once, though two jobs rent it
        assert (f"rental offer {offer_id} ${catalog.rental[offer_id].usd_per_gpu_hour:,.2f}"
                f"/GPU-hour" in stale[0] and f"dated {rent.as_of}, {limit + 1} days" in stale[0])


def test_rented_jobs_buy_no_storage_issue_28(catalog, rented):
    """Issue 28: a rented fine-tune paid 73 % of its cost for storage capex. A job on rented
    instances buys no storage: the bill has no storage line, the TCO is the rental alone,
    and a warning says where its data stays (its size from the storage model)."""
    rfq, plan = rented
    assert plan.cost is not None and plan.bill_of_materials is not None
    assert plan.cost.storage_usd == 0 and plan.cost.capex_usd == 0
    assert plan.cost.tco_usd == pytest.approx(plan.cost.rental_usd)
    assert not [line for line in plan.bill_of_materials.lines if "storage" in line.sku]
    assert_bill_matches_cost(plan.to_json())
    params = CostParams.from_catalog(catalog, rfq.horizon_years)
    for spec in rfq.workloads:
        tb = training_storage(catalog, params, spec).capacity_tb
        assert tb > 0
        assert any(w.startswith(f"{spec.name}: runs on rented instances, so no storage is "
                                f"bought") and f"({tb:,.2f} TB)" in w for w in plan.warnings)


def test_owned_jobs_still_buy_their_storage_issue_28(catalog, rented):
    """The same jobs on owned nodes (rental: forbid) keep their storage lines, at the
    storage model's price."""
    rfq, _ = rented
    owned = solve_rfq(rfq.model_copy(update={"rental": "forbid"}), catalog)
    assert owned.cost is not None and owned.bill_of_materials is not None
    params = CostParams.from_catalog(catalog, rfq.horizon_years)
    expected = sum(training_storage(catalog, params, s).usd for s in rfq.workloads)
    assert owned.cost.storage_usd == pytest.approx(expected, abs=0.05)
    assert not [w for w in owned.warnings if "runs on rented instances" in w]
