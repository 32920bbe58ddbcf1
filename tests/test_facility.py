"""Issue 28: the site's limits and the jobs' headroom - continuous load (0.8 x max_power_kw),
cooling (air by default; liquid-cooled systems carry their cooling cost), racks, and
deadline_headroom (jobs planned within 0.9 x their deadline)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from in_process import procure

from solver.analysis.explain import solve_rfq
from solver.optimize.candidates import node_types
from solver.optimize.costs import CostParams, liquid_cooling_usd, liquid_cooling_usd_per_kw
from solver.rfq.schema import validate_rfq

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def _solve(catalog, data):
    return solve_rfq(validate_rfq(data, catalog), catalog, explain=False)


def _chat(concurrency: int, vendor: str = "open", **extra) -> dict:
    return {"id": "facility", "constraints": {"vendor": vendor, "max_power_kw": 10}, **extra,
            "workloads": [{"name": "chat", "kind": "inference", "model": "llama-3.1-8b",
                           "precision": "fp8", "concurrency": concurrency,
                           "input_tokens": 2000, "output_tokens": 400, "ttft_ms": 3000,
                           "tpot_ms": 60}]}


def _batch(requests: int, **extra) -> dict:
    return {"id": "batch", "constraints": {"vendor": "kentino"}, **extra,
            "workloads": [{"name": "corpus", "kind": "batch_inference",
                           "model": "llama-3.1-8b", "precision": "fp8", "requests": requests,
                           "input_tokens": 1000, "output_tokens": 200, "deadline_hours": 8}]}


# --- continuous load: full-load power <= 0.8 x max_power_kw ----------------------------

def test_issue_28_max_power_10_kw_plans_at_most_8_kw(catalog):
    """At face value (load factor 1) the cheapest plan draws more than 8 kW; by default it
    stays within 0.8 x 10 kW and costs more (the row binds, it does not just hold)."""
    at_limit = _solve(catalog, _chat(1200, facility={"continuous_load_factor": 1.0}))
    assert at_limit.status == "optimal" and 8.0 < at_limit.cluster.power_kw <= 10.0
    default = _solve(catalog, _chat(1200))
    assert default.status == "optimal"
    assert default.cluster.power_kw <= 8.0 + 1e-9
    assert default.cost.tco_usd > at_limit.cost.tco_usd


def test_issue_28_power_relaxation_names_the_stated_limit(catalog):
    """An RFQ infeasible at 0.8 x max_power_kw names the max_power_kw that suffices (full
    load / 0.8), and that value does give a plan."""
    plan = _solve(catalog, _chat(1200, vendor="kentino"))
    assert plan.status == "infeasible"
    needed = plan.infeasibility.closest["constraints.max_power_kw"]
    assert needed > 10.0
    data = _chat(1200, vendor="kentino")
    data["constraints"]["max_power_kw"] = needed
    relaxed = _solve(catalog, data)
    assert relaxed.status == "optimal"
    assert relaxed.cluster.power_kw <= 0.8 * needed + 1e-9


# --- cooling ----------------------------------------------------------------------------

def _types(catalog, **facility):
    rfq = validate_rfq({**_chat(1), "facility": facility}, catalog)
    return node_types(catalog, rfq, CostParams.from_catalog(catalog))


def test_issue_28_cooling_decides_which_chassis_may_be_bought(catalog):
    servers = catalog.servers
    air = _types(catalog)  # the default
    liquid = _types(catalog, cooling="liquid")
    either = _types(catalog, cooling="any")
    assert air and liquid
    assert not any(servers[n.server].liquid_cooled for n in air.values())
    assert all(servers[n.server].liquid_cooled for n in liquid.values())
    assert set(either) == set(air) | set(liquid)


def test_issue_28_air_cooled_site_never_buys_a_liquid_cooled_system(catalog):
    """Only the liquid-cooled MI355X allowed: the default air site has no plan and says
    why; cooling: any buys it with its cooling line in the bill of materials."""
    data = _chat(16)
    data["constraints"] = {"gpus": ["mi355x"]}
    plan = _solve(catalog, data)
    assert plan.status == "infeasible"
    assert "facility.cooling" in plan.infeasibility.reasons[0]
    plan = _solve(catalog, {**data, "facility": {"cooling": "any"}})
    assert plan.status == "optimal"
    node = plan.cluster.nodes[0]
    server, gpu = catalog.servers[node.server], catalog.gpus[node.gpu]
    assert server.liquid_cooled and not server.rack_cooling_included  # a chassis: all of it
    lines = [line for line in plan.bill_of_materials.lines if line.sku.startswith("liquid-")]
    assert len(lines) == 1
    kw = (node.gpus_per_node * gpu.tdp_w + server.base_power_w) / 1000.0
    per_kw = catalog.costs.liquid_cooling_usd_per_kw.value
    assert lines[0].quantity == node.count
    assert lines[0].line_total_usd == pytest.approx(node.count * kw * per_kw, abs=0.01)
    assert "ASSUMPTION" in lines[0].source.upper()
    # the bill is the cost the MIP minimised: the cooling line is in its capex
    assert plan.bill_of_materials.capex_usd == pytest.approx(plan.cost.capex_usd, abs=0.01)


def test_issue_28_air_cooled_nodes_carry_no_cooling_line(catalog):
    plan = _solve(catalog, _chat(64))
    assert not [line for line in plan.bill_of_materials.lines if line.sku.startswith("liquid-")]


# --- racks -------------------------------------------------------------------------------

def test_issue_28_nodes_fit_the_racks_by_power(catalog):
    """No node heavier than a rack's continuous load is offered; the nodes bought fit the
    racks when each rack is filled up to 0.8 x max_kw_per_rack."""
    data = _chat(1200)
    data["constraints"].pop("max_power_kw")
    data["facility"] = {"max_kw_per_rack": 6, "racks": 2}
    plan = _solve(catalog, data)
    assert plan.status == "optimal"
    rack_kw = 0.8 * 6
    racks = 0.0
    for node in plan.cluster.nodes:
        server, gpu = catalog.servers[node.server], catalog.gpus[node.gpu]
        kw = (node.gpus_per_node * gpu.tdp_w + server.base_power_w) / 1000.0
        assert kw <= rack_kw + 1e-9
        racks += node.count / int(rack_kw // kw)
    assert racks <= 2 + 1e-9
    assert plan.cluster.power_kw <= 2 * rack_kw + 1e-9


# --- deadline headroom --------------------------------------------------------------------

def test_issue_28_batch_due_in_8_h_is_planned_within_7_2_h(catalog):
    """360,000 requests (the issue's 400,000, re-sized to the physics fitted since): at the
    deadline itself one RTX 5090 finishes in 7.65 of 8 h; with the default headroom the plan
    finishes within 7.2 h, on a second card."""
    tight = _solve(catalog, _batch(360_000, deadline_headroom=0.0))
    assert 7.2 < tight.workloads[0].deadline.hours_to_complete <= 8.0
    assert tight.cluster.total_gpus == 1
    plan = _solve(catalog, _batch(360_000))
    deadline = plan.workloads[0].deadline
    assert deadline.headroom == 0.1 and deadline.planned_within_hours == pytest.approx(7.2)
    assert deadline.hours_to_complete <= 7.2 and deadline.met
    assert deadline.margin >= 0.1 - 1e-6
    assert plan.cost.tco_usd > tight.cost.tco_usd


def test_issue_28_training_jobs_keep_their_headroom(catalog):
    """Every training job of the shipped training scenarios finishes within 0.9 x its
    deadline at expected goodput; a workload's own deadline_headroom overrides the RFQ's."""
    data = yaml.safe_load((SCENARIOS / "pretrain-70b-open.yaml").read_text())
    plan = _solve(catalog, data)
    for work in plan.workloads:
        assert work.deadline.hours_to_complete <= 0.9 * work.deadline.deadline_hours + 1e-6
        assert work.training.hours_to_complete <= 0.9 * work.training.deadline_hours + 1e-6
    own = {**data, "workloads": [{**data["workloads"][0], "deadline_headroom": 0.3}]}
    rfq = validate_rfq(own, catalog)
    assert rfq.workloads[0].planned_hours == pytest.approx(0.7 * data["workloads"][0]
                                                           ["deadline_hours"])


def test_issue_28_rfq_headroom_survives_a_dump_and_reload(catalog):
    """An RFQ-level deadline_headroom changed after a dump (as --set does) reaches the job."""
    rfq = validate_rfq(_batch(1000), catalog)
    data = rfq.model_dump(mode="json", exclude_none=True)
    changed = validate_rfq({**data, "deadline_headroom": 0.25}, catalog)
    assert changed.workloads[0].planned_hours == pytest.approx(6.0)


# --- bad input: exit 2, one line per problem ----------------------------------------------

@pytest.mark.parametrize(("patch", "field"), [
    ({"facility": {"cooling": "water"}}, "facility.cooling"),
    ({"facility": {"continuous_load_factor": 0}}, "facility.continuous_load_factor"),
    ({"facility": {"racks": 0}}, "facility.racks"),
    ({"deadline_headroom": 0.95}, "deadline_headroom"),
])
def test_issue_28_bad_facility_or_headroom_is_exit_2_naming_the_field(tmp_path, patch, field):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**_batch(1000), **patch}))
    result = procure("validate", str(path))
    assert result.returncode == 2
    assert field in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_issue_28_nvl72_racks_do_not_pay_their_manifolds_twice(catalog):
    """An NVL72 rack's price includes its cold plates, tray manifolds and rack manifold: the
    site's cooling line for it is the CDU share and water loop only (the catalog's figure
    less its in-rack part); a liquid-cooled chassis or board server pays the whole figure."""
    params = CostParams.from_catalog(catalog)
    c = catalog.costs
    whole, in_rack = c.liquid_cooling_usd_per_kw.value, c.liquid_cooling_in_rack_usd_per_kw.value
    assert 0 < in_rack < whole
    for sid in ("gb200-nvl72", "gb300-nvl72"):
        rack = catalog.servers[sid]
        assert rack.liquid_cooled and rack.rack_cooling_included and rack.rack_units == 42
        assert liquid_cooling_usd_per_kw(params, rack) == whole - in_rack
        assert liquid_cooling_usd(params, rack, 120.0) == pytest.approx(120.0 * (whole - in_rack))
    for server in catalog.servers.values():
        if server.liquid_cooled and not server.rack_cooling_included:
            assert liquid_cooling_usd_per_kw(params, server) == whole  # gb200-nvl4, mi355x
        elif not server.liquid_cooled:
            assert liquid_cooling_usd_per_kw(params, server) == 0.0


def test_issue_28_in_rack_cooling_above_the_whole_figure_is_refused(tmp_path):
    from solver.catalog.load import builtin_catalog_dir, load_catalog
    from solver.common.errors import InputError

    costs = yaml.safe_load((builtin_catalog_dir() / "costs.yaml").read_text())
    costs["liquid_cooling_in_rack_usd_per_kw"]["value"] = 500
    (tmp_path / "costs.yaml").write_text(yaml.safe_dump(costs))
    with pytest.raises(InputError) as info:
        load_catalog(str(tmp_path))
    assert "liquid_cooling_in_rack_usd_per_kw" in str(info.value)
