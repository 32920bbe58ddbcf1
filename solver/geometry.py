"""Derived architecture figures of a model that memory and FLOPs follow from.

Parameter counts are split into embeddings (input embedding + LM head), transformer-layer
parameters, and for MoE models the routed-expert parameters (all resident, ``k`` of ``E``
computed per token). Per-GPU shares follow tensor parallelism (every layer and the
vocab-parallel embeddings split ``tp`` ways) and pipeline parallelism (the fullest stage
holds ``ceil(layers / pp)`` layers and one embedding matrix).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from solver.catalog import Model


@dataclass(frozen=True)
class Geometry:
    """Parameter and KV geometry of one model (counts in parameters, bytes per element)."""

    params: float
    active_params: float
    embedding_params: float
    layer_params: float
    expert_params: float
    layers: int
    hidden: int
    heads: int
    head_dim: int
    vocab: int
    experts: int
    experts_per_token: int
    kv_elements_per_token_layer: float
    kv_split_by_tp: bool
    kv_heads: int
    matmul_active_params: float
    lora_params_per_layer: float

    def stage_layers(self, pp: int) -> int:
        """Layers on the fullest pipeline stage."""
        return math.ceil(self.layers / max(pp, 1))

    def stage_embedding_params(self, pp: int) -> float:
        """Embedding parameters on the fullest stage (both matrices when pp = 1)."""
        return self.embedding_params if pp <= 1 else float(self.vocab * self.hidden)

    def stage_layer_params(self, pp: int) -> float:
        """Transformer-layer parameters on the fullest stage."""
        return self.layer_params * self.stage_layers(pp) / self.layers

    def kv_elements_per_token_gpu(self, tp: int, pp: int) -> float:
        """KV-cache elements per token on one GPU of the fullest stage (GQA heads split
        over TP down to one head per GPU; an MLA latent is replicated)."""
        per_layer = self.kv_elements_per_token_layer
        if self.kv_split_by_tp:
            per_layer *= max(self.kv_heads / tp, 1.0) / self.kv_heads
        return per_layer * self.stage_layers(pp)

    def attention_flops_per_token(self, context_tokens: float) -> float:
        """Attention score + value FLOPs for one token attending ``context_tokens``."""
        return 4.0 * self.layers * self.heads * self.head_dim * context_tokens

    def experts_touched_fraction(self, tokens: float) -> float:
        """Expected fraction of routed experts a step with ``tokens`` tokens reads."""
        if not self.experts:
            return 1.0
        miss = 1.0 - self.experts_per_token / self.experts
        return 1.0 - miss ** max(tokens, 0.0)


@functools.lru_cache(maxsize=256)
def geometry(model: Model) -> Geometry:
    """The :class:`Geometry` of a catalog model (cached)."""
    params = model.params_b * 1e9
    active = model.active_params_b * 1e9
    one_embedding = float(model.vocab_size * model.hidden_size)
    embedding = one_embedding * (1 if model.tied_embeddings else 2)
    layer_params = max(params - embedding, params * 0.5)
    expert_params = 0.0
    if model.experts and model.experts_per_token:
        inactive_share = 1.0 - model.experts_per_token / model.experts
        expert_params = (params - active) / inactive_share if inactive_share > 0 else 0.0
    if model.attention == "mla":
        kv_per_layer = float((model.kv_lora_rank or 0) + (model.qk_rope_head_dim or 0))
        split = False
    else:
        kv_per_layer = 2.0 * model.kv_heads * model.head_dim
        split = True
    # input embedding is a lookup, not a matmul; a tied LM head reuses it
    matmul_active = active - (0.0 if model.tied_embeddings else one_embedding)
    h, q = model.hidden_size, model.heads * model.head_dim
    kv = model.kv_heads * model.head_dim
    ffn = model.ffn_size
    lora_dims = (h + q) + 2 * (h + kv) + (q + h) + 2 * (h + ffn) + (ffn + h)
    return Geometry(
        params=params, active_params=active, embedding_params=embedding,
        layer_params=layer_params, expert_params=expert_params, layers=model.layers,
        hidden=h, heads=model.heads, head_dim=model.head_dim, vocab=model.vocab_size,
        experts=model.experts or 0, experts_per_token=model.experts_per_token or 0,
        kv_elements_per_token_layer=kv_per_layer, kv_split_by_tp=split,
        kv_heads=model.kv_heads, matmul_active_params=max(matmul_active, active * 0.5),
        lora_params_per_layer=float(lora_dims),
    )
