"""Issue 30: known answers worked out by hand, and every limit row of the MIP made to bind.

Three mutants survived the default test run before these tests (only the oracle, under
``slow``, caught them): the KV cache doubled for models without a config file, the server's
base power dropped from the node cost, and the ``max_power_kw`` row flipped to ``>=``. Each
test here fails for one of them (bench/mutants.py runs a wider sample)."""

from __future__ import annotations

import copy

import pytest

from solver.analysis.explain import solve_rfq
from solver.optimize.costs import CostParams, node_cost
from solver.physics.layout import Layout, Workload
from solver.physics.memory import memory_plan
from solver.rfq.schema import validate_rfq

GB = 1e9


# --- one node's cost over the horizon, by hand ----------------------------------------------

def test_node_cost_by_hand(catalog):
    """One PCIe server (base 1,400 W, $30,000, 4 U) with 8 RTX PRO 6000 (600 W, $8,565) over
    3 years at $0.12/kWh, load factor 0.7, PUE 1.4, operations $8,000 + engineering $15,000
    per node-year and $300 per rack unit-year (catalog/costs.yaml)."""
    server, gpu = catalog.servers["pcie-8gpu"], catalog.gpus["rtx-pro-6000"]
    assert (server.base_power_w, server.price_usd, server.rack_units) == (1400, 30000, 4)
    assert (gpu.tdp_w, gpu.price_usd) == (600, 8565)
    params = CostParams.from_catalog(catalog, 3)
    assert (params.electricity_usd_per_kwh, params.load_factor, params.pue) == (0.12, 0.7, 1.4)
    cost = node_cost(params, server, gpu, 8)
    assert cost.power_kw == pytest.approx(6.2)                 # 8 x 600 W + 1,400 W
    kwh = 6.2 * 0.7 * 1.4 * 8760 * 3                            # 159,677.28 kWh
    assert cost.power_usd == pytest.approx(kwh * 0.12)          # $19,161.27
    assert cost.power_usd == pytest.approx(19_161.2736)
    assert cost.operations_usd == pytest.approx(3 * (8000 + 15000 + 4 * 300))  # $72,600
    assert cost.capex_usd == pytest.approx(8 * 8565 + 30000)    # $98,520
    assert cost.tco_usd == pytest.approx(98_520 + 19_161.2736 + 72_600)
    half = node_cost(params, server, gpu, 4)                    # the base power stays
    assert half.power_kw == pytest.approx(3.8)


# --- KV bytes of a model without a config file, by hand -------------------------------------

@pytest.mark.parametrize("tp", [1, 2])
def test_kv_cache_of_a_config_less_model_by_hand(catalog, tp):
    """qwen2.5-7b has no config.json in the catalog: its KV cache comes from the summary
    figures. Per token: K and V x 28 layers x 4 KV heads x 128 = 28,672 elements, bf16
    2 bytes each, +5 % paging (efficiency.yaml); TP splits the KV heads."""
    model = catalog.models["qwen2.5-7b"]
    assert model.architecture is None and model.config is None
    assert (model.layers, model.kv_heads, model.head_dim) == (28, 4, 128)
    per_token = 2 * 28 * 4 * 128 * 2 * 1.05 / tp               # bytes per GPU
    layout = Layout(model="qwen2.5-7b", gpu="l40s", precision="bf16", tp=tp,
                    gpus_per_node=max(tp, 1))
    work = Workload("inference", input_tokens=1000, output_tokens=200, concurrency=10)
    plan = memory_plan(catalog, layout, work)
    assert plan.kv_bytes_per_token_gpu == pytest.approx(per_token)
    assert plan.breakdown.kv_cache_gb == pytest.approx(10 * 1200 * per_token / GB)


# --- every limit row binds: the plan respects it and changes --------------------------------

def _chat(concurrency: int, **constraints) -> dict:
    # the limit rows at face value: the 0.8 continuous-load rule has its own tests
    # (tests/test_facility.py)
    return {"id": "limits", "constraints": {"vendor": "kentino", **constraints},
            "facility": {"continuous_load_factor": 1.0},
            "workloads": [{"name": "chat", "kind": "inference", "model": "llama-3.1-8b",
                           "precision": "fp8", "concurrency": concurrency,
                           "input_tokens": 2000, "output_tokens": 400, "ttft_ms": 3000,
                           "tpot_ms": 60}]}


def _solve(catalog, data):
    return solve_rfq(validate_rfq(data, catalog), catalog, explain=False)


BASES = [  # RFQs whose unlimited optimum leaves room to trade (searched in this order)
    _chat(512), _chat(1024), _chat(2048, vendor="open"),
    _chat(2048, vendor="open", gpus=["rtx-pro-6000", "b200-sxm"]),
    _chat(2560, vendor="open", gpus=["rtx-pro-6000", "b200-sxm"]),  # three 4U or one 8U
    _chat(4096, vendor="open", gpus=["rtx-pro-6000", "h200-sxm"]), _chat(4096),
    _chat(6144, vendor="open")]


def _below(limit: str, used: float) -> list[float]:
    """Values of a limit just below what the unlimited optimum uses, loosest first."""
    if limit == "max_power_kw":
        return [round(used * f, 2) for f in (0.99, 0.97, 0.95, 0.9)]
    return [v for v in (used - 1, used - 2) if v >= 1]


@pytest.mark.parametrize(("limit", "figure"), [
    ("max_nodes", "total_nodes"), ("max_gpus", "total_gpus"), ("max_power_kw", "power_kw"),
    ("max_rack_units", "rack_units")])
def test_a_binding_limit_is_respected_and_changes_the_plan(catalog, limit, figure):
    """Set just below what the unlimited optimum uses, each limit row must hold (the plan
    respects it) and bind (the plan changes and costs more); a flipped row (``>=``) keeps
    the unlimited plan. The first base RFQ where a plan exists under the limit is used."""
    for base in BASES:
        plan = _solve(catalog, base)
        used = getattr(plan.cluster, figure)
        for value in _below(limit, used):
            data = copy.deepcopy(base)
            data["constraints"][limit] = value
            limited = _solve(catalog, data)
            if limited.status != "optimal":
                continue
            assert getattr(limited.cluster, figure) <= value + 1e-9       # respected
            assert limited.cluster != plan.cluster                        # the plan changed
            assert limited.cost.tco_usd > plan.cost.tco_usd               # and costs more
            loose = copy.deepcopy(base)
            loose["constraints"][limit] = used                            # at the optimum
            assert _solve(catalog, loose).cost.tco_usd == pytest.approx(plan.cost.tco_usd)
            return
    pytest.fail(f"no base RFQ has a plan with {limit} below its unlimited optimum")


def test_a_budget_below_the_optimum_is_infeasible_and_names_the_budget(catalog):
    """The budget row caps the objective: a dollar below the optimum leaves no plan (and the
    answer names the budget that suffices); a dollar above it the same plan comes back."""
    tco = _solve(catalog, _chat(1024)).cost.tco_usd
    short = _solve(catalog, dict(_chat(1024), budget_usd=tco - 1.0))
    assert short.status == "infeasible"
    assert short.infeasibility.closest["budget_usd"] == pytest.approx(tco)
    enough = _solve(catalog, dict(_chat(1024), budget_usd=tco + 1.0))
    assert enough.cost.tco_usd == pytest.approx(tco) and enough.cost.tco_usd <= tco + 1.0


# --- the n+1 spare and the reported gap, by hand --------------------------------------------

def test_one_node_loss_by_hand():
    """The n+1 spare is what the worst node carries: a 2-GPU replica (10 concurrent, 1.5
    requests/s) fills an 8-GPU node four times, so a node down loses 40 and 6; a replica
    spanning two 4-GPU nodes is lost whole (one replica: 25 and 2)."""
    from test_mip import cand, node, table_of

    from solver.optimize.mip import Demand, node_loss, units_lost

    n8, n4 = node("s8", "g", 8, 1000.0), node("s4", "g", 4, 1000.0)
    small = cand("chat", "inference", n8, 2, conc=10, qps=1.5, tag="small")
    wide = cand("chat", "inference", n4, 8, nodes=2, fabric="ib-hdr-200", conc=25, qps=2.0,
                tag="wide")
    table = table_of([n8, n4], [small, wide])
    assert units_lost(table, small) == 4 and units_lost(table, wide) == 1
    assert node_loss(table, [small]) == Demand(40.0, 6.0)
    assert node_loss(table, [wide]) == Demand(25.0, 2.0)
    assert node_loss(table, [small, wide]) == Demand(40.0, 6.0)  # the worse of the two


def test_reported_gap_by_hand():
    """A time-limited plan's gap is (objective - bound) / objective, never negative; no
    bound (or an infinite one) reports no gap."""
    import math

    from solver.optimize.backends import _gap

    assert _gap(100.0, 90.0) == pytest.approx(0.1)
    assert _gap(100.0, 120.0) == 0.0
    assert _gap(None, 90.0) == 0.0 and _gap(100.0, None) == 0.0
    assert _gap(100.0, -math.inf) == 0.0
