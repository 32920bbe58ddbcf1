"""Hugging Face config.json parsing: parameter counts against published totals, KV bytes per
token checked by hand, and bad configs named field by field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from solver.catalog.hf_config import load_hf_config, parse_hf_config
from solver.catalog.load import load_catalog
from solver.common.errors import InputError
from solver.physics.geometry import geometry

MODELS = Path(__file__).resolve().parent.parent / "catalog" / "models"


def _arch(name: str):
    return load_hf_config(MODELS / f"{name}.config.json")


def _close(value: float, published: float, tolerance: float = 0.01) -> bool:
    return abs(value - published) <= tolerance * published


# (config, published total B, published active B, which active figure the publisher uses,
#  source). "active" = every parameter a token uses incl. input embedding and LM head;
# "no-input-embedding" leaves out the input embedding lookup (OpenAI's convention);
# "non-embedding" leaves out both embedding matrices (Z.ai's, MiniMax's).
PUBLISHED = [
    ("openai--gpt-oss-120b", 116.83, 5.13, "no-input-embedding",
     "gpt-oss model card, arXiv:2508.10925 Table 1"),
    ("openai--gpt-oss-20b", 20.91, 3.61, "no-input-embedding",
     "gpt-oss model card, arXiv:2508.10925 Table 1"),
    # DeepSeek's 37B: 36.6B without the input embedding (37.55B with it would round to 38B)
    ("deepseek-ai--DeepSeek-V3", 671.0, 37.0, "no-input-embedding",
     "DeepSeek-V3 technical report, arXiv:2412.19437 (671B total, 37B activated, MTP excluded)"),
    ("deepseek-ai--DeepSeek-R1", 671.0, 37.0, "no-input-embedding", "DeepSeek-R1 model card"),
    ("Qwen--Qwen3-235B-A22B-FP8", 235.0, 22.0, "active",
     "Qwen3-235B-A22B model card: 235B total, 22B activated"),
    ("Qwen--Qwen3-30B-A3B", 30.5, 3.3, "active",
     "Qwen3-30B-A3B model card: 30.5B total, 3.3B activated"),
    ("Qwen--Qwen3-32B", 32.8, 32.8, "active", "Qwen3-32B model card: 32.8B"),
    ("Qwen--Qwen3-8B", 8.2, 8.2, "active", "Qwen3-8B model card: 8.2B"),
    ("meta-llama--Meta-Llama-3.1-405B", 405.85, 405.85, "active",
     "Llama-3.1-405B safetensors index / Llama 3 paper arXiv:2407.21783"),
    ("meta-llama--Meta-Llama-3.1-70B", 70.55, 70.55, "active", "Llama-3.1-70B safetensors"),
    ("meta-llama--Meta-Llama-3.1-8B", 8.03, 8.03, "active", "Llama-3.1-8B model card"),
    ("mistralai--Mixtral-8x7B-v0.1", 46.7, 12.9, "active",
     "Mixtral of Experts, arXiv:2401.04088: 46.7B total, 12.9B active"),
    ("zai-org--GLM-5", 744.0, 40.0, "non-embedding", "Z.ai GLM-5: 744B total, 40B active"),
    ("Qwen--Qwen3.5-397B-A17B", 397.0, 17.0, "active",
     "Qwen3.5-397B-A17B model card: 397B total (with vision), 17B activated"),
]


def _active(arch, convention: str) -> float:
    if convention == "no-input-embedding":
        return arch.active_params() - arch.one_embedding_params()
    if convention == "non-embedding":
        return arch.active_params() - arch.embedding_params()
    return arch.active_params()


@pytest.mark.parametrize(("name", "total", "active", "convention", "source"), PUBLISHED)
def test_parameter_counts_match_published_totals(name, total, active, convention, source):
    arch = _arch(name)
    resident = (arch.total_params() + arch.vision_params) / 1e9
    assert _close(resident, total), (resident, total, source)
    # active figures published with two significant digits (37B, 22B, 3.3B) are rounded:
    # within half a unit of the last digit plus 1 %
    half_unit = 0.5 if active >= 10 and active == int(active) else 0.05
    computed = _active(arch, convention) / 1e9
    assert abs(computed - active) <= 0.01 * active + half_unit, (computed, active, source)


def test_non_embedding_counts_match_qwen_cards():
    # Qwen3 model cards give non-embedding counts to three figures
    for name, non_embedding in (("Qwen--Qwen3-8B", 6.95), ("Qwen--Qwen3-32B", 31.2),
                                ("Qwen--Qwen3-30B-A3B", 29.9), ("Qwen--Qwen3-235B-A22B-FP8", 234)):
        arch = _arch(name)
        assert _close((arch.total_params() - arch.embedding_params()) / 1e9, non_embedding)


def test_figures_published_with_one_significant_digit():
    # Kimi K2 report (arXiv:2507.20534): 1.04T total, 32.6B activated. The same formula gives
    # DeepSeek-V3's 671B exactly; Moonshot's 1.04T is 1.3 % above the count of the published
    # config (Kimi-K2.5 adds the ~0.4B MoonViT tower), so the total is held to 1.5 %.
    kimi = _arch("moonshotai--Kimi-K2.5")
    assert _close((kimi.total_params() + kimi.vision_params) / 1e9, 1040, 0.015)
    assert _close(kimi.active_params() / 1e9, 32.6)
    # MiniMax-M2 card: 230B total, 10B active (one significant digit: within 5 %)
    minimax = _arch("MiniMaxAI--MiniMax-M2.5")
    assert _close(minimax.total_params() / 1e9, 230)
    assert _close((minimax.active_params() - minimax.embedding_params()) / 1e9, 10, 0.05)
    # Llama 4 Scout card: 109B total with the vision encoder (absent from this config), 17B
    # active
    scout = _arch("meta-llama--Llama-4-Scout-17B-16E-Instruct")
    assert 105 < scout.total_params() / 1e9 < 109
    assert _close(scout.active_params() / 1e9, 17.0, 0.02)


def test_every_reference_config_loads():
    files = sorted(MODELS.glob("*.json"))
    assert len(list(MODELS.glob("*.json"))) == 17
    for path in files:
        arch = load_hf_config(path)
        assert arch.total_params() >= arch.active_params() > 0


# ------------------------------------------------------------------ KV per token, by hand
def test_kv_elements_per_token_by_hand():
    # GQA (Llama 3.1 70B): 2 (K and V) x 8 KV heads x 128 x 80 layers = 163,840 elements
    assert geometry(load_catalog().model("llama-3.1-70b")).kv_elements_per_token_gpu(1, 1) \
        == 2 * 8 * 128 * 80
    # MLA (DeepSeek-V3): kv_lora_rank 512 + rope key 64 = 576 per layer x 61 layers, not split
    # by TP
    ds = geometry(load_catalog().model("deepseek-v3"))
    assert ds.kv_elements_per_token_gpu(1, 1) == 576 * 61
    assert ds.kv_elements_per_token_gpu(8, 1) == 576 * 61
    # GLM-5: MLA 576 + the sparse-attention indexer's 128-wide key per layer, 78 layers
    assert geometry(load_catalog().model("glm-5")).kv_elements_per_token_gpu(1, 1) \
        == (512 + 64 + 128) * 78


def test_sliding_window_caches_only_the_window():
    geo = geometry(load_catalog().model("gpt-oss-120b"))
    per_layer = 2 * 8 * 64  # K and V, 8 KV heads of 64
    # 8,192 tokens: 18 full layers hold all of them, 18 sliding layers 128 each
    assert geo.kv_elements_per_sequence_gpu(1, 1, 8192) == per_layer * (18 * 8192 + 18 * 128)
    # 100 tokens (inside the window): every layer holds all 100
    assert geo.kv_elements_per_sequence_gpu(1, 1, 100) == per_layer * 36 * 100
    # TP 8: one KV head per GPU
    assert geo.kv_elements_per_sequence_gpu(8, 1, 8192) == \
        geo.kv_elements_per_sequence_gpu(1, 1, 8192) / 8


def test_kv_bytes_per_token_in_memory_plan():
    from solver.catalog.perf_factors import factors
    from solver.physics.layout import Layout, Workload
    from solver.physics.memory import memory_plan

    catalog = load_catalog()
    eff = factors(catalog)
    paging = 1.0 + eff.serving.kv_paging_overhead.value
    work = Workload(kind="inference", input_tokens=7192, output_tokens=1000, concurrency=1)
    plan = memory_plan(catalog, Layout("gpt-oss-120b", "h200-sxm", "fp8", tp=1), work)
    kv_b = eff.precisions.kv_bytes["fp8"].value
    expected = 2 * 8 * 64 * (18 * 8192 + 18 * 128) * kv_b * paging / 8192
    assert plan.kv_bytes_per_token_gpu == pytest.approx(expected)
    # Qwen3.5: 15 full-attention layers x 2 x 2 KV heads x 256, plus a fixed fp32 state of
    # 45 linear layers x (64 heads x 128 x 128 + conv (2x16x128 + 64x128) x 3)
    plan = memory_plan(catalog, Layout("qwen3.5-397b-a17b", "h200-sxm", "fp8", tp=8), work)
    state = 45 * (64 * 128 * 128 + (2 * 16 * 128 + 64 * 128) * 3) * 4.0 / 8
    kv = 15 * 2 * 2 * 256 / 2 * 8192 * kv_b * paging  # 2 KV heads over TP 8: one per GPU
    assert plan.kv_bytes_per_token_gpu * 8192 == pytest.approx(kv + state)


# ------------------------------------------------------------------ bad configs
def _error(data: dict) -> InputError:
    with pytest.raises(InputError) as info:
        parse_hf_config(data, "my.config.json")
    return info.value


def test_unknown_architecture_is_named():
    err = _error({"architectures": ["MambaForCausalLM"], "hidden_size": 4})
    assert err.problems[0].field == "architectures"
    assert "MambaForCausalLM" in str(err)


def test_missing_field_is_named():
    data = json.loads((MODELS / "Qwen--Qwen3-8B.config.json").read_text())
    del data["num_hidden_layers"]
    assert _error(data).problems[0].field == "num_hidden_layers"
    kimi = json.loads((MODELS / "moonshotai--Kimi-K2.5.config.json").read_text())
    del kimi["text_config"]["kv_lora_rank"]
    assert _error(kimi).problems[0].field == "text_config.kv_lora_rank"


def test_bad_values_are_named():
    data = json.loads((MODELS / "Qwen--Qwen3-8B.config.json").read_text())
    assert _error({**data, "num_key_value_heads": 5}).problems[0].field == "num_key_value_heads"
    assert _error({**data, "hidden_size": "4096"}).problems[0].field == "hidden_size"
    q = {**data, "quantization_config": {"quant_method": "magic"}}
    assert _error(q).problems[0].field == "quantization_config.quant_method"


def test_defaults_assumed_are_stated():
    arch = _arch("meta-llama--Meta-Llama-3.1-8B")
    assert any("head_dim absent" in note for note in arch.notes)
    assert any("default precision fp4" in n for n in _arch("openai--gpt-oss-120b").notes)


def test_gpt_style_dense_configs():
    # GPT-2 small (huggingface.co/openai-community/gpt2): 124.4M parameters (tied)
    gpt2 = parse_hf_config({"architectures": ["GPT2LMHeadModel"], "n_embd": 768, "n_head": 12,
                            "n_layer": 12, "n_positions": 1024, "vocab_size": 50257})
    assert _close(gpt2.total_params() / 1e6, 124.44, 0.001)
    # Pythia-1B (GPT-NeoX, untied): 1,011,781,632 parameters (EleutherAI model card)
    neox = parse_hf_config({"architectures": ["GPTNeoXForCausalLM"], "hidden_size": 2048,
                            "num_attention_heads": 8, "num_hidden_layers": 16,
                            "intermediate_size": 8192, "vocab_size": 50304,
                            "max_position_embeddings": 2048})
    assert _close(neox.total_params(), 1_011_781_632, 0.001)
    # OPT-1.3B: 1.3B (Zhang et al. arXiv:2205.01068 Table 1)
    opt = parse_hf_config({"architectures": ["OPTForCausalLM"], "hidden_size": 2048,
                           "num_attention_heads": 32, "num_hidden_layers": 24, "ffn_dim": 8192,
                           "vocab_size": 50272, "max_position_embeddings": 2048})
    assert _close(opt.total_params() / 1e9, 1.316, 0.005)
    assert gpt2.mlp == neox.mlp == opt.mlp == "plain"


def test_alternating_and_all_sliding_windows():
    # Gemma 2 27B: 23 global + 23 local (4,096) layers of 2 x 16 KV heads x 128
    geo = geometry(load_catalog().model("gemma-2-27b"))
    assert geo.kv_elements_per_sequence_gpu(1, 1, 8192) == 2 * 16 * 128 * (23 * 8192 + 23 * 4096)
    assert _close(load_catalog().model("gemma-2-27b").params_b, 27.2, 0.005)  # Gemma 2 report
    # Mistral 7B v0.1: sliding_window 4096 on every layer (no layer_types)
    mistral = parse_hf_config({
        "architectures": ["MistralForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
        "vocab_size": 32000, "max_position_embeddings": 32768, "sliding_window": 4096})
    assert (mistral.sliding_layers, mistral.sliding_window) == (32, 4096)
    assert mistral.kv_elements_per_sequence(10_000) == 2 * 8 * 128 * 32 * 4096
    assert _close(mistral.total_params() / 1e9, 7.24, 0.002)  # Mistral 7B: 7,241,732,096
    # Llama 4 Scout: chunked attention (8,192) on 3 of 4 layers
    scout = _arch("meta-llama--Llama-4-Scout-17B-16E-Instruct")
    assert (scout.sliding_layers, scout.sliding_window, scout.full_layers) == (36, 8192, 12)


def test_attention_flops_follow_the_window():
    geo = geometry(load_catalog().model("gpt-oss-120b"))
    per_ctx = 2 * 64 * (64 + 64)  # 64 heads, score (64) + value (64) dims
    assert geo.attention_flops_per_token(100) == per_ctx * 36 * 100
    assert geo.attention_flops_per_token(10_000) == per_ctx * (18 * 10_000 + 18 * 128)
    # MLA: per head score dims 128 + 64 (rope), value 128
    ds = geometry(load_catalog().model("deepseek-v3"))
    assert ds.attention_flops_per_token(1000) == 2 * 128 * (192 + 128) * 61 * 1000
    # DSA (GLM-5): attention over the top 2,048 tokens + the indexer over the whole context
    glm = geometry(load_catalog().model("glm-5"))
    assert glm.attention_flops_per_token(100_000) == (2 * 64 * (256 + 256) * 78 * 2048
                                                      + 2 * 32 * 128 * 78 * 100_000)


def test_checkpoint_weights_as_shipped():
    from solver.catalog.perf_factors import factors
    from solver.physics.memory import serving_weights_gb

    catalog = load_catalog()
    eff = factors(catalog)
    gib = 2**30 / 1e9
    # gpt-oss model card (arXiv:2508.10925 Table 1): checkpoints of 60.8 GiB and 12.8 GiB —
    # MXFP4 experts (4.25 bits with one scale byte per 32) plus bf16 attention and embeddings
    for model_id, size_gib in (("gpt-oss-120b", 60.8), ("gpt-oss-20b", 12.8)):
        geo = geometry(catalog.model(model_id))
        assert _close(serving_weights_gb(eff, geo, "fp4", 1, 1), size_gib * gib)
        # run weight-only at int4 on a GPU without FP4: the same checkpoint
        assert serving_weights_gb(eff, geo, "int4", 1, 1) == \
            serving_weights_gb(eff, geo, "fp4", 1, 1)
    # by hand: routed experts x (0.5 + 1/32) + the rest of the layers and embeddings x 2
    arch = catalog.model("gpt-oss-120b").architecture
    experts = arch.routed_expert_params()
    rest = arch.total_params() - experts
    assert serving_weights_gb(eff, geometry(catalog.model("gpt-oss-120b")), "fp4", 2, 1) == \
        pytest.approx((experts * (0.5 + 1 / 32) + rest * 2) / 2 / 1e9)
    # re-quantised to fp8, every body weight is 8-bit
    assert serving_weights_gb(eff, geometry(catalog.model("gpt-oss-120b")), "fp8", 1, 1) > 100


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1, 2.5, 10**12, True, "32"])
def test_hostile_numbers_are_named(value):
    data = json.loads((MODELS / "Qwen--Qwen3-8B.config.json").read_text())
    assert _error({**data, "num_attention_heads": value}).problems[0].field == \
        "num_attention_heads"


def test_hostile_shapes_are_named():
    data = json.loads((MODELS / "openai--gpt-oss-20b.config.json").read_text())
    assert _error({**data, "layer_types": ["full_attention"]}).problems[0].field == "layer_types"
    assert _error({**data, "layer_types": ["mamba"] * 24}).problems[0].field == "layer_types"
    assert _error({**data, "num_experts_per_tok": 64}).problems[0].field == \
        "num_experts_per_tok"
    assert _error({**data, "architectures": "GptOssForCausalLM"}).problems[0].field == \
        "architectures"
    assert _error({**data, "text_config": [1]}).problems[0].field == "text_config"
    with pytest.raises(InputError):
        parse_hf_config([1, 2])


def test_absurd_layer_count_is_refused_quickly():
    data = json.loads((MODELS / "deepseek-ai--DeepSeek-V3.config.json").read_text())
    assert _error({**data, "num_hidden_layers": 10**9}).problems[0].field == "num_hidden_layers"


def test_linear_attention_layers_do_not_attend_the_context():
    geo = geometry(load_catalog().model("qwen3.5-397b-a17b"))
    # 15 full-attention layers of 32 heads x (256 + 256) dims; 45 linear layers: nothing
    assert geo.attention_flops_per_token(1000) == 2 * 32 * 512 * 15 * 1000
    assert geo.attention_flops_per_token(1.0) * 1000 == geo.attention_flops_per_token(1000)
