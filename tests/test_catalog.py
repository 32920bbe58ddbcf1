"""The catalog loads, has every contract id, every number is sourced, references hold."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from solver.catalog.load import builtin_catalog_dir, load_catalog
from solver.common.errors import InputError

CONTRACT_GPUS = ["rtx-5090", "rtx-pro-6000", "l40", "l40s", "l4", "h100-sxm", "h200-sxm",
                 "b200-sxm", "rtx-4090", "h100-pcie", "a100-80g-sxm", "mi300x", "gb200"]
CONTRACT_SERVERS = ["pcie-4gpu", "pcie-8gpu", "hgx-8gpu"]
CONTRACT_FABRICS = ["none", "25gbe", "100gbe", "ib-hdr-200", "ib-ndr-400"]
CONTRACT_MODELS = ["llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "qwen2.5-7b",
                   "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-72b", "mistral-7b", "mixtral-8x7b",
                   "gemma-2-27b", "deepseek-v3", "llama-2-7b", "llama-2-70b", "gpt-3-175b"]


def test_every_contract_id_exists(catalog):
    assert set(CONTRACT_GPUS) <= set(catalog.gpus)
    assert set(CONTRACT_SERVERS) <= set(catalog.servers)
    assert set(CONTRACT_FABRICS) <= set(catalog.fabrics)
    assert set(CONTRACT_MODELS) <= set(catalog.models)
    assert {"kentino", "open"} <= set(catalog.vendors)


def test_aliases_resolve(catalog):
    assert catalog.model("llama-3.3-70b").id == "llama-3.1-70b"
    assert catalog.model("deepseek-r1").id == "deepseek-v3"


def test_every_entry_has_source_and_date():
    directory = builtin_catalog_dir()
    for name in ("gpus", "servers", "fabrics", "models", "vendors"):
        for entry in yaml.safe_load((directory / f"{name}.yaml").read_text()):
            assert len(entry["source"]) > 10, (name, entry["id"])
            assert entry["as_of"], (name, entry["id"])
    costs = yaml.safe_load((directory / "costs.yaml").read_text())
    for key, param in costs.items():
        assert param["source"] and param["as_of"], key


def test_numbers_have_units_in_names(catalog):
    unit_suffixes = ("_gb", "_gbs", "_w", "_usd", "_us", "_tflops", "_b", "_kw", "_slots")
    for gpu in catalog.gpus.values():
        for field, value in gpu.model_dump().items():
            if isinstance(value, float) and field != "pcie_gen":
                assert field.endswith(unit_suffixes), field


def test_unsupported_precisions_are_absent_not_zero(catalog):
    for gpu in catalog.gpus.values():
        assert all(v > 0 and math.isfinite(v) for v in gpu.dense_tflops.values())
    assert "fp8" not in catalog.gpus["a100-80g-sxm"].dense_tflops
    assert "fp4" not in catalog.gpus["h100-sxm"].dense_tflops
    assert "fp4" in catalog.gpus["rtx-pro-6000"].dense_tflops


def test_guide_capacity_of_one_node(catalog):
    assert 8 * catalog.gpus["rtx-pro-6000"].memory_gb == 768
    assert 8 * catalog.gpus["rtx-5090"].memory_gb == 256


def test_sxm_gpus_only_in_hgx(catalog):
    for gpu in catalog.gpus.values():
        servers = {s.id for s in catalog.servers_for(gpu)}
        if gpu.id == "b300-sxm":  # Blackwell Ultra: its own HGX B300 board (PCIe Gen6, CX-8)
            assert servers == {"hgx-b300-8gpu"}
        elif gpu.form_factor == "sxm":
            assert servers == {"hgx-8gpu"}, gpu.id
        elif gpu.form_factor == "pcie":
            assert "hgx-8gpu" not in servers and servers, gpu.id


def test_kentino_builds_no_sxm(catalog):
    kentino = catalog.vendors["kentino"]
    for gpu_id in kentino.gpus:
        assert catalog.gpus[gpu_id].form_factor == "pcie"
    assert "hgx-8gpu" not in kentino.servers
    assert set(kentino.gpus) == {"rtx-5090", "rtx-pro-6000", "l40", "l4"}


def test_overhead_factor_default_and_range(catalog):
    factor = catalog.costs.multinode_overhead_factor
    assert factor.value == 4.5 and factor.low == 4 and factor.high == 5


def test_price_overlay(tmp_path: Path):
    (tmp_path / "prices.csv").write_text("id,price_usd,as_of,source\nrtx-pro-6000,9500,2026-11,"
                                         "quote 123\n")
    cat = load_catalog(str(tmp_path))
    assert cat.gpus["rtx-pro-6000"].price_usd == 9500
    assert cat.gpus["rtx-pro-6000"].price_source == "quote 123"
    assert cat.gpus["rtx-5090"].price_usd == load_catalog().gpus["rtx-5090"].price_usd
    assert cat.version != load_catalog().version


def test_partial_yaml_overlay(tmp_path: Path):
    (tmp_path / "gpus.yaml").write_text("- id: l4\n  price_usd: 1800\n")
    cat = load_catalog(str(tmp_path))
    assert cat.gpus["l4"].price_usd == 1800
    assert cat.gpus["l4"].memory_gb == 24


@pytest.mark.parametrize("content, fragment", [
    ("id,price_usd\nno-such-gpu,100\n", "no GPU, server or fabric"),
    ("id,price_usd\nl4,abc\n", "not a number"),
    ("id,price_usd\nl4,-5\n", "more than 0 USD"),
    ("id,price_usd\nl4,0\n", "more than 0 USD"),  # a free GPU is no price (issue 32)
])
def test_bad_price_overlay(tmp_path: Path, content: str, fragment: str):
    (tmp_path / "prices.csv").write_text(content)
    with pytest.raises(InputError) as info:
        load_catalog(str(tmp_path))
    assert fragment in str(info.value)


def test_bad_yaml_overlay_names_file_and_field(tmp_path: Path):
    (tmp_path / "gpus.yaml").write_text("- id: l4\n  memory_gb: -3\n")
    with pytest.raises(InputError) as info:
        load_catalog(str(tmp_path))
    text = str(info.value)
    assert "l4" in text and "memory_gb" in text


def test_yaml_syntax_error_in_overlay(tmp_path: Path):
    (tmp_path / "gpus.yaml").write_text("- id: l4\n  price_usd: [1,\n")
    with pytest.raises(InputError) as info:
        load_catalog(str(tmp_path))
    assert "line" in str(info.value)


def test_missing_overlay_dir():
    with pytest.raises(InputError):
        load_catalog("/nonexistent/catalog/dir")


@pytest.mark.parametrize("param, value", [("pue", 0.5), ("electricity_usd_per_kwh", -0.1),
                                          ("multinode_overhead_factor", 0.5),
                                          ("usable_memory_fraction", 1.5)])
def test_cost_parameters_out_of_range_are_rejected(tmp_path: Path, param: str, value: float):
    (tmp_path / "costs.yaml").write_text(
        f"{param}:\n  value: {value}\n  source: test\n  as_of: '2026'\n")
    with pytest.raises(InputError) as info:
        load_catalog(str(tmp_path))
    assert param in str(info.value)


def test_cost_overrides_are_range_checked(catalog):
    from solver.rfq.overrides import apply_overrides
    from solver.rfq.schema import validate_rfq

    rfq = validate_rfq({"id": "r", "workloads": [
        {"name": "a", "kind": "inference", "model": "llama-3.1-8b", "concurrency": 4,
         "input_tokens": 100, "output_tokens": 10}]}, catalog)
    with pytest.raises(InputError, match="pue"):
        apply_overrides(catalog, rfq, ["costs.pue=-1"], None)


def test_blackwell_ultra_is_its_own_family_and_not_slower_than_b200(catalog):
    """B300 and GB300 (Blackwell Ultra, one GPU) share a family of their own: their FP4 peak
    is 1.5x B200's at the same bandwidth, and fitted alone they reach a smaller share of it
    (2026-12-07 refit). A fit check, not validation: whatever the fit gives, the share times
    the peak must not make a B300 slower than the B200 it succeeds, at FP4 or FP8, nor
    faster than its own peak."""
    from solver.catalog.perf_factors import factors

    eff = factors(catalog)
    b200, b300, gb300 = (catalog.gpus[g] for g in ("b200-sxm", "b300-sxm", "gb300"))
    assert b300.family == gb300.family == "blackwell-ultra" != b200.family
    ultra, plain = eff.family("blackwell-ultra"), eff.family(b200.family)
    for precision in ("fp4", "fp8"):
        achieved = b300.dense_tflops[precision] * ultra.gemm(precision)
        assert b200.dense_tflops[precision] * plain.gemm(precision) <= achieved
        assert achieved <= b300.dense_tflops[precision]
