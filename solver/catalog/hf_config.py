"""Parse a Hugging Face ``config.json`` into an :class:`~solver.catalog.architecture.Architecture`.

Supported (``architectures[0]``, or ``model_type`` when that list is absent):

- dense GPT-style with a GELU/ReLU MLP: GPT-2, GPT-NeoX (Pythia), OPT;
- dense with GQA and a gated MLP: Llama, Mistral, Qwen2/Qwen3, Gemma/Gemma 2/Gemma 3;
- MoE: Mixtral, Qwen2-MoE/Qwen3-MoE, DeepSeek-V2/V3/R1 (MLA), Kimi-K2/K2.5, GLM-4.5/GLM-5
  (MLA + sparse-attention indexer), MiniMax-M2, Llama 4, gpt-oss;
- sliding-window / alternating attention (gpt-oss, Gemma 2/3, Mistral's ``sliding_window``,
  Llama 4's chunked attention), hybrid linear attention (Qwen3.5 Gated DeltaNet);
- configs nested under ``text_config`` (multimodal wrappers: Kimi-K2.5, Llama 4, Qwen3.5);
- the checkpoint's quantisation (``quantization_config`` or ``hf_quant_config``) as the
  default precision.

Nothing is guessed silently: a required field that is missing, an unknown architecture or
an unknown quantisation method raises :class:`~solver.common.errors.InputError` naming the field;
a default the format itself defines (e.g. GPT-2's ``n_inner`` = 4 x ``n_embd``) is applied
and listed in :attr:`Architecture.notes`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from solver.catalog.architecture import Architecture
from solver.common.errors import InputError, Problem
from solver.common.inputs import guard, parse_json, read_text

MAX_CONFIG_BYTES = 2_000_000
MAX_DIMENSION = 10**9  # no real width, count or context comes near this
MAX_LAYERS = 10_000

# architectures[0] (or model_type) -> parser family
FAMILIES: dict[str, str] = {
    "GPT2LMHeadModel": "gpt2", "gpt2": "gpt2",
    "GPTNeoXForCausalLM": "neox", "gpt_neox": "neox",
    "OPTForCausalLM": "opt", "opt": "opt",
    "LlamaForCausalLM": "dense", "llama": "dense",
    "MistralForCausalLM": "dense", "mistral": "dense",
    "Qwen2ForCausalLM": "dense", "qwen2": "dense",
    "Qwen3ForCausalLM": "dense", "qwen3": "dense",
    "GemmaForCausalLM": "dense", "gemma": "dense",
    "Gemma2ForCausalLM": "dense", "gemma2": "dense",
    "Gemma3ForCausalLM": "dense", "gemma3_text": "dense",
    "Gemma3ForConditionalGeneration": "dense", "gemma3": "dense",
    "MixtralForCausalLM": "moe", "mixtral": "moe",
    "Qwen2MoeForCausalLM": "moe", "qwen2_moe": "moe",
    "Qwen3MoeForCausalLM": "moe", "qwen3_moe": "moe",
    "MiniMaxM2ForCausalLM": "moe", "minimax_m2": "moe",
    "Glm4MoeForCausalLM": "moe", "glm4_moe": "moe",
    "GptOssForCausalLM": "moe", "gpt_oss": "moe",
    "Llama4ForCausalLM": "moe", "llama4_text": "moe",
    "Llama4ForConditionalGeneration": "moe", "llama4": "moe",
    "DeepseekV2ForCausalLM": "mla", "deepseek_v2": "mla",
    "DeepseekV3ForCausalLM": "mla", "deepseek_v3": "mla", "kimi_k2": "mla",
    "KimiK25ForConditionalGeneration": "mla", "kimi_k25": "mla",
    "GlmMoeDsaForCausalLM": "mla", "glm_moe_dsa": "mla",
    "DeepseekV32ForCausalLM": "mla", "deepseek_v32": "mla",
    "Qwen3NextForCausalLM": "moe", "qwen3_next": "moe",
    "Qwen3_5MoeForConditionalGeneration": "moe", "qwen3_5_moe": "moe",
    "Qwen3_5MoeForCausalLM": "moe", "qwen3_5_moe_text": "moe",
}

PLAIN_ACTIVATIONS = frozenset({"gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "relu",
                               "gelu_python", "quick_gelu"})


class _Config:
    """Field access that names the missing field (with its ``text_config.`` prefix)."""

    def __init__(self, data: dict[str, Any], source: str, prefix: str = "") -> None:
        self.data, self.source, self.prefix = data, source, prefix
        self.notes: list[str] = []

    def problem(self, field: str, value: Any, reason: str) -> InputError:
        return InputError([Problem(self.source, self.prefix + field, value, reason)])

    def has(self, name: str) -> bool:
        return self.data.get(name) is not None

    def get(self, *names: str, default: Any = None) -> Any:
        for name in names:
            if self.data.get(name) is not None:
                return self.data[name]
        return default

    def int(self, *names: str, default: int | None = None, minimum: int = 1,
            note: str = "", maximum: int = MAX_DIMENSION) -> int:
        """The first of ``names`` present, as an int >= ``minimum``; missing -> ``default``
        (stated in the notes when ``note`` is given) or an error naming ``names[0]``."""
        for name in names:
            value = self.data.get(name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not math.isfinite(value) or value != int(value) or value < minimum \
                    or value > maximum:
                raise self.problem(name, value, f"must be an integer from {minimum} to "
                                   f"{maximum:,}")
            return int(value)
        if default is None:
            raise self.problem(names[0], None, "required field missing")
        if note:
            self.notes.append(note)
        return default

    def bool(self, name: str, default: bool) -> bool:
        value = self.data.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.problem(name, value, "must be true or false")
        return value


def _family(data: dict[str, Any], source: str) -> tuple[str, str]:
    archs = data.get("architectures")
    if archs is not None and (not isinstance(archs, list) or not archs
                              or not all(isinstance(a, str) for a in archs)):
        raise InputError([Problem(source, "architectures", archs,
                                  "must be a non-empty list of class names")])
    name = archs[0] if archs else data.get("model_type")
    if name is None:
        raise InputError([Problem(source, "architectures", None,
                                  "required field missing (nor is model_type given)")])
    if name not in FAMILIES:
        known = sorted(k for k in FAMILIES if k[0].isupper())
        field = "architectures" if archs else "model_type"
        raise InputError([Problem(source, field, name,
                                  "unsupported architecture; supported: " + ", ".join(known))])
    return name, FAMILIES[name]


def _text_config(data: dict[str, Any], source: str) -> tuple[dict[str, Any], str]:
    """The text decoder's fields (``text_config`` merged over the outer config)."""
    text = data.get("text_config")
    if text is None:
        return data, ""
    if not isinstance(text, dict):
        raise InputError([Problem(source, "text_config", type(text).__name__,
                                  "must be a mapping of fields")])
    merged = {k: v for k, v in data.items() if k not in ("text_config", "vision_config")}
    merged.update(text)
    if "quantization_config" not in text and "quantization_config" in data:
        merged["quantization_config"] = data["quantization_config"]
    return merged, "text_config."


def _layer_types(cfg: _Config) -> list[str] | None:
    types = cfg.get("layer_types")
    if types is None:
        return None
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise cfg.problem("layer_types", types, "must be a list of layer type names")
    return types


def _attention_pattern(cfg: _Config, layers: int) -> dict[str, int]:
    """How many layers slide, attend linearly, and the window size."""
    types = _layer_types(cfg)
    out = {"sliding_layers": 0, "sliding_window": 0, "linear_layers": 0}
    if types is not None:
        if len(types) != layers:
            raise cfg.problem("layer_types", len(types),
                              f"has {len(types)} entries for {layers} layers")
        known = {"full_attention", "sliding_attention", "linear_attention",
                 "chunked_attention"}
        unknown = sorted(set(types) - known)
        if unknown:
            raise cfg.problem("layer_types", unknown[0],
                              f"unknown layer type; known: {', '.join(sorted(known))}")
        out["sliding_layers"] = sum(t in ("sliding_attention", "chunked_attention")
                                    for t in types)
        out["linear_layers"] = types.count("linear_attention")
    elif cfg.has("full_attention_interval") and cfg.has("linear_num_value_heads"):
        every = cfg.int("full_attention_interval")
        out["linear_layers"] = layers - layers // every
    elif cfg.has("attention_chunk_size"):  # Llama 4: chunked local attention, every 4th global
        step = cfg.int("no_rope_layer_interval", default=4,
                       note="no_rope_layer_interval absent: Llama 4's default of every 4th "
                            "layer global (NoPE) assumed")
        out["sliding_layers"] = layers - layers // step
        out["sliding_window"] = cfg.int("attention_chunk_size")
        return out
    elif cfg.has("sliding_window_pattern"):  # Gemma 3: every n-th layer global
        every = cfg.int("sliding_window_pattern")
        out["sliding_layers"] = layers - layers // every
    elif cfg.has("sliding_window") and cfg.bool("use_sliding_window", True):
        if cfg.get("model_type") in ("gemma2",) or cfg.get("architectures") == [
                "Gemma2ForCausalLM"]:
            out["sliding_layers"] = (layers + 1) // 2  # even layers local
        elif cfg.get("model_type") in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe"):
            start = cfg.int("max_window_layers", default=layers, minimum=0)
            out["sliding_layers"] = max(layers - start, 0)
        else:
            out["sliding_layers"] = layers
    if out["sliding_layers"]:
        out["sliding_window"] = cfg.int("sliding_window")
    return out


def _checkpoint(data: dict[str, Any], source: str, prefix: str) -> dict[str, Any]:
    """The checkpoint's quantisation: default precision, description, weight bits, scale
    bytes per weight and whether only the routed experts are quantised."""
    precision, text = _quantization(data, source, prefix)
    if precision is None:
        return {"default_precision": None, "quantization": ""}
    q = data.get("quantization_config") or {}
    skipped = [str(x) for x in (q.get("modules_to_not_convert") or q.get("ignore") or [])]
    bits = 8 if precision in ("fp8", "int8") else 4
    method = str(q.get("quant_method") or "").lower()
    group = None
    if method == "compressed-tensors":
        for g in (q.get("config_groups") or {}).values():
            if isinstance(g, dict) and isinstance(g.get("weights"), dict):
                group = g["weights"].get("group_size")
                break
    elif method in ("awq", "gptq"):
        group = q.get("group_size") or q.get("q_group_size")
    if method == "mxfp4":
        scale = 1.0 / 32  # one E8M0 byte per 32 weights (OCP MX)
    elif precision == "fp4":
        scale = 1.0 / 16  # NVFP4: one FP8 scale per 16 weights
    elif isinstance(group, int) and group > 0:
        scale = 2.0 / group  # a 16-bit scale per group
    elif method == "fp8" and q.get("weight_block_size"):
        block = q["weight_block_size"]
        scale = 4.0 / (block[0] * block[1]) if len(block) == 2 else 0.0  # fp32 per block
    else:
        scale = 0.0
    experts_only = any("attn" in name for name in skipped)
    if experts_only:
        text += " (routed experts only; attention and the rest in 16 bit)"
    return {"default_precision": precision, "quantization": text, "checkpoint_bits": bits,
            "checkpoint_scale_bytes": scale, "checkpoint_experts_only": experts_only}


def _quantization(data: dict[str, Any], source: str, prefix: str) -> tuple[str | None, str]:
    """(default precision, description) of the checkpoint's quantisation."""
    q = data.get("quantization_config")
    if q is None and isinstance(data.get("hf_quant_config"), dict):
        return _hf_quant_config(data["hf_quant_config"], source, prefix + "hf_quant_config")
    if q is None:
        return None, ""
    field = prefix + "quantization_config"
    if not isinstance(q, dict):
        raise InputError([Problem(source, field, type(q).__name__, "must be a mapping")])
    return _quant_method(q, source, field)


def _hf_quant_config(config: dict[str, Any], source: str, field: str) -> tuple[str, str]:
    """(precision, description) from TensorRT-LLM / ModelOpt's ``hf_quant_config``."""
    q = config.get("quantization", config)
    algo = str(q.get("quant_algo") or "").upper()
    table = {"FP8": "fp8", "FP8_BLOCK_SCALES": "fp8", "NVFP4": "fp4", "MXFP4": "fp4",
             "W4A16_AWQ": "int4", "W4A8_AWQ": "int4", "INT8": "int8", "W8A16": "int8"}
    if algo not in table:
        raise InputError([Problem(source, field + ".quant_algo", algo or None,
                                  "unknown quantisation; known: " + ", ".join(table))])
    return table[algo], f"{algo} (hf_quant_config)"


def _kept_in_16_bit(q: dict[str, Any]) -> str:
    """'; kept in 16 bit: a, b ...' for the modules a checkpoint leaves unquantised (''
    when none, or when the list is too long to be worth saying)."""
    skipped = q.get("modules_to_not_convert") or q.get("ignore") or []
    return (f"; kept in 16 bit: {', '.join(map(str, skipped[:4]))}"
            + (" ..." if len(skipped) > 4 else "")) if skipped and len(skipped) < 50 else ""


def _quant_method(q: dict[str, Any], source: str, field: str) -> tuple[str, str]:
    """(precision, description) of a ``quantization_config`` by its ``quant_method``."""
    method = str(q.get("quant_method") or "").lower()
    skip = _kept_in_16_bit(q)
    if method == "fp8":
        block = q.get("weight_block_size")
        return "fp8", f"FP8 weights{f' (blocks {block})' if block else ''}{skip}"
    if method == "mxfp4":
        return "fp4", f"MXFP4 weights{skip}"
    if method in ("awq", "gptq", "bitnet"):
        bits = q.get("bits") or q.get("w_bit")
        if bits not in (4, 8):
            raise InputError([Problem(source, field + ".bits", bits, "expected 4 or 8")])
        return ("int4" if bits == 4 else "int8"), f"{method.upper()} {bits}-bit weights"
    if method == "bitsandbytes":
        if q.get("load_in_4bit"):
            return "int4", "bitsandbytes 4-bit weights"
        if q.get("load_in_8bit"):
            return "int8", "bitsandbytes 8-bit weights"
        raise InputError([Problem(source, field + ".load_in_4bit", None,
                                  "bitsandbytes config without load_in_4bit/load_in_8bit")])
    if method == "modelopt":
        algo = str(q.get("quant_algo") or "").upper()
        precision = {"FP8": "fp8", "NVFP4": "fp4", "MXFP4": "fp4"}.get(algo)
        if precision is None:
            raise InputError([Problem(source, field + ".quant_algo", algo or None,
                                      "unknown ModelOpt algorithm; known: FP8, NVFP4, MXFP4")])
        return precision, f"ModelOpt {algo}{skip}"
    if method == "compressed-tensors":
        return _compressed_tensors(q, source, field, skip)
    raise InputError([Problem(source, field + ".quant_method", method or None,
                              "unknown quantisation method; known: fp8, mxfp4, awq, gptq, "
                              "bitsandbytes, modelopt, compressed-tensors")])


def _compressed_tensors(q: dict[str, Any], source: str, field: str,
                        skip: str) -> tuple[str, str]:
    """(precision, description) of a compressed-tensors checkpoint: its first weight
    group's width and type."""
    groups = q.get("config_groups") or {}
    weights = [g.get("weights") or {} for g in groups.values() if isinstance(g, dict)]
    if not weights:
        raise InputError([Problem(source, field + ".config_groups", None,
                                  "compressed-tensors config without weight groups")])
    w = weights[0]
    bits, kind = w.get("num_bits"), str(w.get("type") or "int")
    table: dict[tuple[object, str], str] = {(4, "int"): "int4", (8, "int"): "int8",
                                            (8, "float"): "fp8", (4, "float"): "fp4"}
    precision = table.get((bits, kind))
    if precision is None:
        raise InputError([Problem(source, field + ".config_groups.weights.num_bits", bits,
                                  f"unsupported {kind} width; expected 4 or 8")])
    group = w.get("group_size")
    return precision, (f"compressed-tensors {kind}{bits} weights"
                       f"{f' (group {group})' if group else ''}{skip}")


def _vision_params(data: dict[str, Any]) -> float:
    """A ViT-style vision tower's parameters from ``vision_config`` (estimate: per layer
    4 h^2 attention + 2 h x ffn MLP), 0 when absent or incomplete."""
    v = data.get("vision_config")
    if not isinstance(v, dict):
        return 0.0

    def first(*names: str) -> float:
        for name in names:
            value = v.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
                return float(value)
        return 0.0

    layers = first("depth", "num_hidden_layers", "vt_num_hidden_layers")
    hidden = first("hidden_size", "vt_hidden_size", "embed_dim")
    ffn = first("intermediate_size", "vt_intermediate_size") or 4 * hidden
    return layers * (4 * hidden * hidden + 2 * hidden * ffn)


def parse_hf_config(data: Any, source: str = "<config.json>") -> Architecture:
    """An :class:`Architecture` from a parsed Hugging Face config (dict)."""
    if not isinstance(data, dict):
        raise InputError([Problem(source, "", type(data).__name__,
                                  "a config.json must be a mapping of fields")])
    name, family = _family(data, source)
    text, prefix = _text_config(data, source)
    cfg = _Config(text, source, prefix)
    checkpoint = _checkpoint(text, source, prefix)
    precision, quant = checkpoint["default_precision"], checkpoint["quantization"]
    if family == "gpt2":
        arch = _gpt2(cfg, name)
    elif family == "neox":
        arch = _neox(cfg, name)
    elif family == "opt":
        arch = _opt(cfg, name)
    else:
        arch = _modern(cfg, name, family)
    vision = _vision_params(data)
    if vision:
        cfg.notes.append(f"vision tower of ~{vision / 1e9:.2f}B parameters (estimated from "
                         "vision_config) counted as resident weights, never active per token")
    if quant:
        cfg.notes.append(f"checkpoint quantisation: {quant} -> default precision {precision}")
    if checkpoint.get("checkpoint_experts_only") and not arch.experts:
        checkpoint["checkpoint_experts_only"] = False
    return arch.model_copy(update={**checkpoint, "vision_params": vision,
                                   "notes": tuple(cfg.notes)})


def _even_heads(cfg: _Config, hidden: int, heads: int, hidden_key: str, heads_key: str,
                stated: bool = False) -> int:
    """``hidden / heads``, the head width a config without ``head_dim`` implies; a hidden
    size the heads do not divide is refused (a truncated width would be planned silently).
    ``stated``: the config may give ``head_dim`` instead (say so)."""
    if hidden % heads:
        raise cfg.problem(hidden_key, hidden, f"not divisible by {heads_key} ({heads}): the "
                          "head width would be a fraction"
                          + ("; state head_dim" if stated else ""))
    return hidden // heads


def _gpt2(cfg: _Config, name: str) -> Architecture:
    hidden = cfg.int("n_embd", "hidden_size")
    heads = cfg.int("n_head", "num_attention_heads")
    width = _even_heads(cfg, hidden, heads, "n_embd" if cfg.has("n_embd") else "hidden_size",
                        "n_head" if cfg.has("n_head") else "num_attention_heads")
    layers = cfg.int("n_layer", "num_hidden_layers", maximum=MAX_LAYERS)
    ffn = cfg.int("n_inner", default=4 * hidden,
                  note=f"n_inner absent: GPT-2's default 4 x n_embd = {4 * hidden} assumed")
    positions = cfg.int("n_positions", "max_position_embeddings")
    return Architecture(
        family=name, hidden=hidden, layers=layers, vocab=cfg.int("vocab_size"),
        tied_embeddings=cfg.bool("tie_word_embeddings", True), position_embeddings=positions,
        norm_bias=True, max_context=positions, attention="mha", heads=heads, kv_heads=heads,
        head_dim=width, v_head_dim=width, attention_bias=True,
        attention_output_bias=True,
        mlp="plain", mlp_bias=True, dense_layers=layers, dense_ffn=ffn)


def _neox(cfg: _Config, name: str) -> Architecture:
    hidden = cfg.int("hidden_size")
    heads = cfg.int("num_attention_heads")
    width = _even_heads(cfg, hidden, heads, "hidden_size", "num_attention_heads")
    layers = cfg.int("num_hidden_layers", maximum=MAX_LAYERS)
    return Architecture(
        family=name, hidden=hidden, layers=layers, vocab=cfg.int("vocab_size"),
        tied_embeddings=cfg.bool("tie_word_embeddings", False), norm_bias=True,
        max_context=cfg.int("max_position_embeddings"), attention="mha", heads=heads,
        kv_heads=heads, head_dim=width, v_head_dim=width,
        attention_bias=cfg.bool("attention_bias", True),
        attention_output_bias=cfg.bool("attention_bias", True), mlp="plain", mlp_bias=True,
        dense_layers=layers, dense_ffn=cfg.int("intermediate_size"))


def _opt(cfg: _Config, name: str) -> Architecture:
    hidden = cfg.int("hidden_size")
    heads = cfg.int("num_attention_heads")
    width = _even_heads(cfg, hidden, heads, "hidden_size", "num_attention_heads")
    layers = cfg.int("num_hidden_layers", maximum=MAX_LAYERS)
    positions = cfg.int("max_position_embeddings")
    if cfg.int("word_embed_proj_dim", default=hidden) != hidden:
        raise cfg.problem("word_embed_proj_dim", cfg.get("word_embed_proj_dim"),
                          "projected OPT embeddings (OPT-350m) are not supported")
    return Architecture(
        family=name, hidden=hidden, layers=layers, vocab=cfg.int("vocab_size"),
        tied_embeddings=cfg.bool("tie_word_embeddings", True),
        position_embeddings=positions + 2, norm_bias=True, max_context=positions,
        attention="mha", heads=heads, kv_heads=heads, head_dim=width,
        v_head_dim=width, attention_bias=cfg.bool("enable_bias", True),
        attention_output_bias=cfg.bool("enable_bias", True),
        mlp="plain", mlp_bias=cfg.bool("enable_bias", True), dense_layers=layers,
        dense_ffn=cfg.int("ffn_dim"))


def _moe_layer_count(cfg: _Config, name: str, family: str, layers: int) -> int:
    """How many layers are MoE (the rest dense)."""
    if family == "mla" or cfg.has("first_k_dense_replace"):
        first = cfg.int("first_k_dense_replace", default=0, minimum=0)
        freq = cfg.int("moe_layer_freq", default=1)
        return sum(1 for i in range(first, layers) if i % freq == 0)
    if cfg.has("interleave_moe_layer_step"):  # Llama 4
        step = cfg.int("interleave_moe_layer_step")
        return layers // step
    if cfg.has("decoder_sparse_step") or cfg.has("mlp_only_layers"):  # Qwen MoE
        step = cfg.int("decoder_sparse_step", default=1)
        dense_only = cfg.get("mlp_only_layers") or []
        if not isinstance(dense_only, list):
            raise cfg.problem("mlp_only_layers", dense_only, "must be a list of layer indices")
        dense = {i for i in dense_only if isinstance(i, int)}
        return sum(1 for i in range(layers) if i not in dense and (i + 1) % step == 0)
    return layers


def _modern(cfg: _Config, name: str, family: str) -> Architecture:
    hidden = cfg.int("hidden_size")
    layers = cfg.int("num_hidden_layers", maximum=MAX_LAYERS)
    heads = cfg.int("num_attention_heads")
    vocab = cfg.int("vocab_size")
    act = str(cfg.get("hidden_act", "hidden_activation", default="silu"))
    mlp = "plain" if act in PLAIN_ACTIVATIONS and family == "dense" and "gemma" not in \
        str(cfg.get("model_type", default="")) else "gated"
    fields: dict[str, Any] = {
        "family": name, "hidden": hidden, "layers": layers, "vocab": vocab,
        "tied_embeddings": cfg.bool("tie_word_embeddings",
                                    "gemma" in str(cfg.get("model_type", default=""))),
        "max_context": cfg.int("max_position_embeddings"), "heads": heads, "mlp": mlp,
        "attention_bias": cfg.bool("attention_bias", cfg.get("model_type") == "qwen2"),
        "mlp_bias": cfg.bool("mlp_bias", False),
    }
    if cfg.get("model_type") == "qwen2" and not cfg.has("attention_bias"):
        cfg.notes.append("Qwen2: q/k/v projection biases (the architecture's own) counted")
    fields["attention_output_bias"] = fields["attention_bias"] and name == "GptOssForCausalLM"
    fields.update(_attention_fields(cfg, family, hidden, heads))
    if name == "GptOssForCausalLM":
        fields["attention_sinks"] = True
    pattern = _attention_pattern(cfg, layers)
    fields.update(pattern)
    if pattern["linear_layers"]:
        fields.update(linear_key_heads=cfg.int("linear_num_key_heads"),
                      linear_value_heads=cfg.int("linear_num_value_heads"),
                      linear_key_dim=cfg.int("linear_key_head_dim"),
                      linear_value_dim=cfg.int("linear_value_head_dim"),
                      linear_conv_kernel=cfg.int("linear_conv_kernel_dim"),
                      linear_state_bytes=4.0 if str(cfg.get(
                          "mamba_ssm_dtype", default="float32")) == "float32" else 2.0)
    fields.update(_mlp_fields(cfg, name, family, layers))
    return Architecture(**fields)


def _attention_fields(cfg: _Config, family: str, hidden: int, heads: int) -> dict[str, Any]:
    """MLA (latent KV, decoupled RoPE, optional sparse-attention indexer) or GQA/MHA (KV
    heads, head width, output gate, q/k norms)."""
    fields: dict[str, Any] = {}
    if family == "mla":
        rope = cfg.int("qk_rope_head_dim")
        nope = cfg.int("qk_nope_head_dim")
        fields.update(
            attention="mla", kv_heads=heads, head_dim=nope + rope,
            v_head_dim=cfg.int("v_head_dim"), q_lora_rank=cfg.int(
                "q_lora_rank", default=0, minimum=0,
                note="q_lora_rank absent: full-rank query projection (DeepSeek-V2-Lite style)"),
            kv_lora_rank=cfg.int("kv_lora_rank"), qk_rope_head_dim=rope)
        if cfg.has("index_n_heads"):
            fields.update(index_heads=cfg.int("index_n_heads"),
                          index_head_dim=cfg.int("index_head_dim"),
                          index_topk=cfg.int("index_topk"))
    else:
        kv_heads = cfg.int("num_key_value_heads", default=heads,
                           note="num_key_value_heads absent: multi-head attention "
                                "(one KV head per query head) assumed")
        if heads % kv_heads:
            raise cfg.problem("num_key_value_heads", kv_heads,
                              f"must divide num_attention_heads ({heads})")
        if not cfg.has("head_dim"):
            _even_heads(cfg, hidden, heads, "hidden_size", "num_attention_heads", stated=True)
        head_dim = cfg.int("head_dim", default=hidden // heads,
                           note=f"head_dim absent: hidden_size / num_attention_heads = "
                                f"{hidden // heads} assumed")
        fields.update(attention="gqa" if kv_heads < heads else "mha", kv_heads=kv_heads,
                      head_dim=head_dim, v_head_dim=head_dim,
                      attention_output_gate=cfg.bool("attn_output_gate", False))
        if cfg.bool("use_qk_norm", False) or cfg.get("model_type") in (
                "qwen3", "qwen3_moe", "gemma3_text", "qwen3_5_moe_text", "qwen3_next"):
            per_layer = str(cfg.get("qk_norm_type", default="")) == "per_layer"
            fields["qk_norm_params"] = ((heads + kv_heads) * head_dim if per_layer
                                        else 2 * head_dim)
    return fields


def _mlp_fields(cfg: _Config, name: str, family: str, layers: int) -> dict[str, Any]:
    """Dense MLP width, or the MoE layers: routed experts, experts per token, expert,
    dense and shared widths."""
    fields: dict[str, Any] = {}
    experts = cfg.int("n_routed_experts", "num_local_experts", "num_experts", default=0,
                      minimum=0)
    if family in ("moe", "mla") and not experts:
        raise cfg.problem("num_experts", None, "required field missing for an MoE architecture "
                          "(n_routed_experts / num_local_experts / num_experts)")
    if experts:
        moe_layers = _moe_layer_count(cfg, name, family, layers)
        k = cfg.int("num_experts_per_tok", "experts_per_token", "moe_topk")
        if k > experts:
            raise cfg.problem("num_experts_per_tok", k, f"exceeds the {experts} experts")
        if cfg.has("moe_intermediate_size"):
            expert_ffn = cfg.int("moe_intermediate_size")
            dense_ffn = cfg.int("intermediate_size", default=0, minimum=0)
        elif name.startswith("Llama4"):
            expert_ffn = cfg.int("intermediate_size")
            dense_ffn = cfg.int("intermediate_size_mlp", default=0, minimum=0)
        else:  # Mixtral, MiniMax, gpt-oss: intermediate_size is the expert width
            expert_ffn = cfg.int("intermediate_size")
            dense_ffn = expert_ffn
        shared_ffn = 0
        if cfg.has("n_shared_experts"):
            shared_ffn = cfg.int("n_shared_experts", minimum=0) * expert_ffn
        elif cfg.has("shared_expert_intermediate_size"):
            shared_ffn = cfg.int("shared_expert_intermediate_size", minimum=0)
        elif cfg.has("shared_intermediate_size"):
            shared_ffn = cfg.int("shared_intermediate_size", minimum=0)
        elif name.startswith("Llama4"):
            shared_ffn = expert_ffn  # Llama 4: one shared expert of the routed width
        if moe_layers < layers and not dense_ffn:
            raise cfg.problem("intermediate_size", None,
                              "required for the dense layers of this MoE model")
        fields.update(dense_layers=layers - moe_layers, dense_ffn=dense_ffn,
                      moe_layers=moe_layers, experts=experts, experts_per_token=k,
                      expert_ffn=expert_ffn, shared_ffn=shared_ffn,
                      router_bias=name == "GptOssForCausalLM")
        if name == "GptOssForCausalLM":
            fields["mlp_bias"] = True
    else:
        fields.update(dense_layers=layers, dense_ffn=cfg.int("intermediate_size"))
    return fields


def load_hf_config(path: str | Path) -> Architecture:
    """Read and parse one ``config.json`` file."""
    path = Path(path)
    source = str(path)
    with guard(source):  # the bounded reader: a regular file, UTF-8, strict JSON
        data = parse_json(read_text(path, source, MAX_CONFIG_BYTES), source)
    return parse_hf_config(data, source)
