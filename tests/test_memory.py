"""Memory model: the guide's capacity rules (issue 3) and monotonicity properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solver.physics.layout import Layout, Workload
from solver.physics.memory import memory_breakdown, memory_plan
from solver.physics.performance import best_layout


def test_node_capacity(catalog):
    assert 8 * catalog.gpus["rtx-pro-6000"].memory_gb == pytest.approx(768)
    assert 8 * catalog.gpus["rtx-5090"].memory_gb == pytest.approx(256)


def test_405b_fp8_weights_fit_but_128_x_9k_does_not_serve_comfortably(catalog):
    layout = Layout("llama-3.1-405b", "rtx-pro-6000", "fp8", tp=8)
    light = memory_plan(catalog, layout, Workload("inference", 2000, 0, concurrency=1))
    assert light.fits  # the weights fit the node
    assert 8 * light.breakdown.weights_gb < 768 * 0.7
    heavy = Workload("inference", input_tokens=9000, output_tokens=0, concurrency=128)
    for tp, pp in ((8, 1), (4, 2), (2, 4), (1, 8)):
        plan = memory_plan(catalog, Layout("llama-3.1-405b", "rtx-pro-6000", "fp8", tp=tp,
                                           pp=pp), heavy)
        assert not plan.comfortable
        assert plan.breakdown.kv_cache_gb > 30  # the KV is what breaks it


def test_405b_int4_serves_on_one_node_with_reserve(catalog):
    est = best_layout(catalog, "llama-3.1-405b", "rtx-pro-6000", 8,
                      Workload("inference", 2000, 400, concurrency=32), precision="int4")
    assert est.fits and est.comfortable
    assert est.memory.weights_fraction <= catalog.costs.weights_vram_fraction_max.value
    assert 1 - est.memory.weights_fraction >= catalog.costs.vram_reserve_fraction.value


def test_70b_full_finetune_state_is_1_2_to_1_5_tb(catalog):
    layout = Layout("llama-3.1-70b", "rtx-pro-6000", "bf16", dp=8)
    plan = memory_plan(catalog, layout, Workload("full_finetune", seq_len=4096))
    total_tb = plan.breakdown.total_gb * 8 / 1000
    assert 1.2 <= total_tb <= 1.5
    assert total_tb > 0.768
    est = best_layout(catalog, "llama-3.1-70b", "rtx-pro-6000", 8, Workload("full_finetune"),
                      precision="bf16")
    assert not est.fits  # no split of one 8 x 96 GB node holds it


@pytest.mark.parametrize("gpus", [4, 8])
def test_70b_lora_fits_4_to_8_pro6000(catalog, gpus):
    est = best_layout(catalog, "llama-3.1-70b", "rtx-pro-6000", gpus, Workload("lora"),
                      precision="bf16")
    assert est.fits


def test_405b_qlora_fits_8_pro6000(catalog):
    est = best_layout(catalog, "llama-3.1-405b", "rtx-pro-6000", 8, Workload("qlora"),
                      precision="bf16")
    assert est.fits
    lora = best_layout(catalog, "llama-3.1-405b", "rtx-pro-6000", 8, Workload("lora"),
                       precision="bf16")
    assert not lora.fits  # a 16-bit base does not


def test_14b_full_finetune_fits_one_node(catalog):
    est = best_layout(catalog, "qwen2.5-14b", "rtx-pro-6000", 8, Workload("full_finetune"),
                      precision="bf16")
    assert est.fits


def test_kv_cache_formulas(catalog):
    # Llama 3.1 8B: 32 layers x 8 KV heads x 128 x 2 (K,V) x 2 B = 128 KiB per token (bf16)
    plan = memory_plan(catalog, Layout("llama-3.1-8b", "h100-sxm", "bf16"),
                       Workload("inference", 1000, 0, concurrency=1))
    assert plan.kv_bytes_per_token_gpu / 1.05 == pytest.approx(131072)
    fp8 = memory_plan(catalog, Layout("llama-3.1-8b", "h100-sxm", "fp8"),
                      Workload("inference", 1000, 0, concurrency=1))
    assert fp8.kv_bytes_per_token_gpu == pytest.approx(plan.kv_bytes_per_token_gpu / 2)
    # DeepSeek-V3 MLA latent: 61 layers x (512 + 64) x 1 B (fp8)
    mla = memory_plan(catalog, Layout("deepseek-v3", "h200-sxm", "fp8", tp=8),
                      Workload("inference", 1000, 0, concurrency=1))
    assert mla.kv_bytes_per_token_gpu / 1.05 == pytest.approx(61 * 576)


def test_moe_all_experts_resident(catalog):
    mem = memory_breakdown(catalog, Layout("mixtral-8x7b", "h100-sxm", "bf16"),
                           Workload("inference", 1000, 100, concurrency=1))
    assert mem.weights_gb == pytest.approx(46.7 * 2, rel=0.02)


SERVE_MODELS = ["llama-3.1-8b", "llama-3.1-70b", "qwen2.5-32b", "mixtral-8x7b"]


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(SERVE_MODELS), tp=st.sampled_from([1, 2, 4]),
       conc=st.integers(1, 64), kind=st.sampled_from(["inference", "full_finetune", "lora"]))
def test_more_gpus_never_more_memory_per_gpu(catalog, model, tp, conc, kind):
    # training picks activation recompute only when needed to fit, so a wider layout may
    # spend its headroom on speed: it must still fit whenever the narrower one does, and
    # its state (weights, grads, optimizer) and, at equal recompute, its total never grow
    work = Workload(kind, 2000, 400, concurrency=conc)
    fewer = memory_plan(catalog, Layout(model, "h100-sxm", "bf16", tp=tp), work)
    for wider in (Layout(model, "h100-sxm", "bf16", tp=2 * tp),
                  Layout(model, "h100-sxm", "bf16", tp=tp, dp=2)):
        if kind == "inference" and wider.dp > 1:
            continue
        more = memory_plan(catalog, wider, work)
        assert more.fits or not fewer.fits
        a, b = more.breakdown, fewer.breakdown
        assert (a.weights_gb + a.gradients_gb + a.optimizer_gb
                <= b.weights_gb + b.gradients_gb + b.optimizer_gb + 1e-9)
        if a.activation_recompute == b.activation_recompute:
            assert a.total_gb <= b.total_gb + 1e-9


# weight precision chains with the KV precision each implies (fp8 KV for fp8/fp4 weights,
# 16-bit KV for weight-only int4 and W8A8 int8)
CHAINS = [["fp4", "fp8", "bf16"], ["int4", "int8", "bf16"]]


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(SERVE_MODELS), tp=st.sampled_from([1, 2, 4, 8]),
       conc=st.integers(1, 256), low=st.integers(0, 1), chain=st.sampled_from(CHAINS))
def test_higher_precision_never_less_memory(catalog, model, tp, conc, low, chain):
    work = Workload("inference", 2000, 400, concurrency=conc)
    lo = memory_breakdown(catalog, Layout(model, "rtx-pro-6000", chain[low], tp=tp), work)
    hi = memory_breakdown(catalog, Layout(model, "rtx-pro-6000", chain[low + 1], tp=tp), work)
    assert hi.weights_gb >= lo.weights_gb
    assert hi.total_gb >= lo.total_gb - 1e-9
