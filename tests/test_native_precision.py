"""Issue 28: a model whose checkpoint ships quantised is served in that format by default -
natively where the GPU has the tensor cores, weight-only where it does not - and never
up-cast silently; the RFQ's precision still pins it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from solver.analysis.explain import solve_rfq
from solver.optimize.records import precisions_for
from solver.rfq.schema import validate_rfq

MODELS = Path(__file__).resolve().parent.parent / "catalog" / "models"
BITS = {"bf16": 16, "fp8": 8, "int8": 8, "int4": 4, "fp4": 4}


def _quantised_configs() -> list[str]:
    """Every shipped config.json with a quantization_config (read here, not via the solver)."""
    out = []
    for path in sorted(MODELS.glob("*.config.json")):
        data = json.loads(path.read_text())
        if data.get("quantization_config") or (data.get("text_config") or {}).get(
                "quantization_config"):
            out.append(path.name)
    return out


def _chat(model: str, **extra) -> dict:
    return {"name": "chat", "kind": "inference", "model": model, "concurrency": 16,
            "input_tokens": 2000, "output_tokens": 400, "ttft_ms": 5000, "tpot_ms": 100,
            **extra}


def _rfq(catalog, workload: dict, **top):
    return validate_rfq({"id": "native", **top, "workloads": [workload]}, catalog)


def test_issue_28_some_shipped_configs_are_quantised():
    names = _quantised_configs()
    assert "openai--gpt-oss-120b.config.json" in names
    assert "moonshotai--Kimi-K2.5.config.json" in names


@pytest.mark.parametrize("config_name", _quantised_configs())
def test_issue_28_every_quantised_config_is_served_in_its_own_format(catalog, config_name):
    """Without precision: on every GPU the only precision offered is the checkpoint's own
    (or its weight-only 4-bit form), never more bits - except an 8-bit checkpoint on a GPU
    with no 8-bit tensor cores, the one up-cast, which realism states."""
    rfq = _rfq(catalog, _chat(str(MODELS / config_name)))  # the file, as an RFQ names it
    spec = rfq.workloads[0]
    model = rfq.catalog(catalog).model(spec.model)
    native = model.default_precision
    assert native in ("fp8", "int8", "int4", "fp4"), (config_name, native)
    for gpu in catalog.gpus.values():
        offered = precisions_for(spec, gpu, model)
        assert len(offered) == 1, (gpu.id, offered)
        served = offered[0]
        if native in gpu.dense_tflops or native == "int4":
            assert served == native, (gpu.id, served)
        elif native == "fp4":
            assert served == "int4", gpu.id  # weight-only 4-bit: no FP4 tensor cores
        else:
            assert served == "bf16" and native not in gpu.dense_tflops, gpu.id
        assert BITS[served] <= BITS[native] or served == "bf16"


@pytest.mark.parametrize(("model", "native"), [("gpt-oss-120b", {"fp4", "int4"}),
                                               ("kimi-k2.5", {"int4"})])
def test_issue_28_gpt_oss_and_kimi_plan_at_their_native_format(catalog, model, native):
    rfq = _rfq(catalog, _chat(model))
    plan = solve_rfq(rfq, catalog)
    assert plan.status == "optimal"
    work = plan.workloads[0]
    used = {lay.precision for lay in work.layouts} if work.layouts else {work.precision}
    assert used <= native
    notes = [w for w in plan.warnings if w.startswith("chat: served at")]
    assert notes and all("checkpoint" in n and "quality loss" not in n for n in notes)
    # pinned: the RFQ's precision wins, and the up-cast is named with its memory cost
    pinned = solve_rfq(_rfq(catalog, _chat(model, precision="fp8")), catalog)
    assert pinned.status == "optimal" and pinned.workloads[0].precision == "fp8"
    assert any("up-casts" in w for w in pinned.warnings)
    assert pinned.cost.tco_usd >= plan.cost.tco_usd - 0.01


def test_issue_28_a_16_bit_checkpoint_keeps_the_serving_policy(catalog):
    """llama-3.1-8b ships bf16: the default policy (bf16, fp8) is unchanged."""
    spec = _rfq(catalog, _chat("llama-3.1-8b")).workloads[0]
    gpu = catalog.gpus["h100-sxm"]
    assert precisions_for(spec, gpu, catalog.model("llama-3.1-8b")) == ["bf16", "fp8"]


ALIASES = [("nvidia/DeepSeek-R1-NVFP4", "fp4"), ("nvidia/DeepSeek-V3.1-NVFP4", "fp4"),
           ("nvidia/Qwen3-32B-NVFP4", "fp4"), ("Qwen/Qwen3-32B-FP8", "fp8"),
           ("Qwen/Qwen3-235B-A22B", "bf16")]


def test_issue_28_alias_precisions_are_the_tested_ones(catalog):
    """Every alias the catalog gives a checkpoint precision of its own is checked below."""
    declared = {(alias, p) for m in catalog.models.values()
                for alias, p in m.alias_precisions.items()}
    assert declared == set(ALIASES)


@pytest.mark.parametrize(("alias", "checkpoint"), ALIASES)
def test_issue_28_an_aliased_checkpoint_is_served_in_its_format(catalog, alias, checkpoint):
    """Issue 28: an NVFP4 alias resolved to its FP8 entry and was served at fp8. Named by
    the alias, the checkpoint's format is the default: fp4 on FP4 tensor cores, weight-only
    4-bit without (stated); an FP8 alias at fp8; a 16-bit alias of an FP8 entry keeps the
    ordinary policy. Lookup is case-insensitive; the entry's own id is unchanged."""
    for name in (alias, alias.upper()):
        model = catalog.model(name)
        assert model.default_precision == (None if checkpoint == "bf16" else checkpoint)
        spec = _rfq(catalog, _chat(name)).workloads[0]
        b200, h100 = catalog.gpus["b200-sxm"], catalog.gpus["h100-sxm"]
        if checkpoint == "fp4":
            assert precisions_for(spec, b200, model) == ["fp4"]
            assert precisions_for(spec, h100, model) == ["int4"]  # weight-only, stated
        elif checkpoint == "fp8":
            assert precisions_for(spec, h100, model) == ["fp8"]
        else:
            assert precisions_for(spec, h100, model) == ["bf16", "fp8"]
    base = next(m for m in catalog.models.values() if alias in m.aliases)
    assert catalog.model(base.id) is base and base.default_precision != model.default_precision


def test_issue_28_an_nvfp4_alias_plans_fp4_and_says_so(catalog):
    rfq = _rfq(catalog, _chat("nvidia/Qwen3-32B-NVFP4"), constraints={"gpus": ["b200-sxm"]})
    plan = solve_rfq(rfq, catalog)
    assert plan.status == "optimal" and plan.workloads[0].precision == "fp4"
    assert any(w.startswith("chat: served at fp4 on b200-sxm: the checkpoint's own FP4")
               and "nvidia/Qwen3-32B-NVFP4 checkpoint as published" in w for w in plan.warnings)
    # the same model by its own id: a 16-bit checkpoint, the ordinary policy (no fp4)
    plain = solve_rfq(_rfq(catalog, _chat("qwen3-32b"), constraints={"gpus": ["b200-sxm"]}),
                      catalog)
    assert plain.workloads[0].precision in ("bf16", "fp8")
