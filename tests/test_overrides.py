"""Scenario overrides (issue 5): --set paths, the YAML file form, errors with hints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from solver.common.errors import InputError
from solver.rfq.overrides import apply_overrides
from solver.rfq.schema import validate_rfq


@pytest.fixture
def rfq(catalog: Any, rfq_data: dict[str, Any]) -> Any:
    return validate_rfq(rfq_data, catalog)


def test_catalog_and_cost_paths(catalog: Any, rfq: Any) -> None:
    cat, _ = apply_overrides(catalog, rfq, [
        "gpu.rtx-pro-6000.price_usd=9500", "server.pcie-8gpu.price_usd=20000",
        "fabric.ib-hdr-200.nic_price_usd=900", "costs.electricity_usd_per_kwh=0.2",
        "costs.multinode_overhead_factor=4"])
    assert cat.gpus["rtx-pro-6000"].price_usd == 9500
    assert cat.servers["pcie-8gpu"].price_usd == 20000
    assert cat.fabrics["ib-hdr-200"].nic_price_usd == 900
    assert cat.costs.electricity_usd_per_kwh.value == 0.2
    assert cat.costs.multinode_overhead_factor.value == 4
    assert cat.version != catalog.version
    assert catalog.gpus["rtx-pro-6000"].price_usd != 9500  # the original is untouched


def test_rfq_workload_and_demand_paths(catalog: Any, rfq: Any) -> None:
    _, new = apply_overrides(catalog, rfq, ["rfq.horizon_years=5", "workloads.chat.qps=20",
                                            "workloads.tune.deadline_hours=24",
                                            "rfq.constraints.max_nodes=8"])
    specs = {s.name: s for s in new.workloads}
    assert new.horizon_years == 5 and new.constraints.max_nodes == 8
    assert specs["chat"].qps == 20 and specs["tune"].deadline_hours == 24
    _, doubled = apply_overrides(catalog, rfq, ["demand=2"])
    specs = {s.name: s for s in doubled.workloads}
    assert specs["chat"].concurrency == 96 and specs["chat"].qps == 20
    assert specs["corpus"].requests == 20_000_000
    assert specs["tune"].deadline_hours == 48  # training is not demand


def test_file_form(catalog: Any, rfq: Any, tmp_path: Path) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text("gpu.rtx-pro-6000.price_usd: 9000\ncosts:\n  pue: 1.2\n"
                    "workloads.chat.concurrency: 10\n")
    cat, new = apply_overrides(catalog, rfq, ["costs.pue=1.3"], path)
    assert cat.gpus["rtx-pro-6000"].price_usd == 9000
    assert cat.costs.pue.value == 1.3  # --set applies after the file
    assert new.workloads[0].concurrency == 10


@pytest.mark.parametrize(("text", "match"), [
    ("gpu.rtx-pro-600.price_usd=1", "nearest valid: gpu.rtx-pro-6000.price_usd"),
    ("costs.electricity=0.2", "costs.electricity_usd_per_kwh"),
    ("workloads.chat.deadline_hours=3", "no field"),
    ("gpu.rtx-pro-6000.price_usd=-5", "greater than 0"),
    ("demand=zero", "demand factor"),
    ("rfq.horizon_years=99", "horizon_years"),
    ("nonsense", "PATH=VALUE"),
])
def test_errors_name_path_and_hints(catalog: Any, rfq: Any, text: str, match: str) -> None:
    with pytest.raises(InputError, match=match):
        apply_overrides(catalog, rfq, [text])


def test_solve_uses_overrides(catalog: Any) -> None:
    from solver.analysis.explain import solve_rfq

    rfq = validate_rfq({"id": "ovr", "constraints": {"gpus": ["rtx-pro-6000"]},
                        "workloads": [{"name": "chat", "kind": "inference",
                                       "model": "llama-3.1-8b", "concurrency": 8,
                                       "input_tokens": 500, "output_tokens": 100}]}, catalog)
    base = solve_rfq(rfq, catalog, explain=False).to_json()["cost"]
    cat, new = apply_overrides(catalog, rfq, ["gpu.rtx-pro-6000.price_usd=20000"])
    dear = solve_rfq(new, cat, explain=False).to_json()["cost"]
    assert dear["gpus_usd"] > base["gpus_usd"]
