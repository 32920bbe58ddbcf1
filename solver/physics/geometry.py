"""Derived architecture figures of a model that memory and FLOPs follow from.

Parameter counts are split into embeddings (input embedding + LM head), transformer-layer
parameters, and for MoE models the routed-expert parameters (all resident, ``k`` of ``E``
computed per token). Per-GPU shares follow tensor parallelism (every layer and the
vocab-parallel embeddings split ``tp`` ways) and pipeline parallelism (the fullest stage
holds ``ceil(layers / pp)`` layers and one embedding matrix).

A model built from a Hugging Face config (``Model.architecture``) gets its figures from the
exact layer structure (:mod:`solver.catalog.architecture`): MLA latent KV, sliding-window layers that
cache at most their window, linear-attention layers with a fixed state per sequence instead
of a KV cache, MoE routed experts vs shared and dense parts. Catalog entries without a config
keep the summary figures of ``models.yaml``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from solver.catalog.data import Model


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
    # attention structure (defaults: every layer full-context softmax attention)
    kv_layers: int = 0  # layers with a per-token KV cache (0 = all layers)
    sliding_layers: int = 0  # of those, layers caching at most ``sliding_window`` tokens
    sliding_window: int = 0
    linear_state_bytes: float = 0.0  # linear-attention state per sequence, all layers, bytes
    attn_dims_per_head: float = 0.0  # score + value dims per head (0 = 2 x head_dim)
    attn_topk: int = 0  # DSA: tokens each query attends (0 = all)
    index_flops_per_ctx: float = 0.0  # DSA indexer FLOPs per layer per context token
    linear_flops_per_token: float = 0.0  # linear-attention state update FLOPs per token
    vocab_embedding_params: float = 0.0  # one vocab x hidden matrix
    # the checkpoint as shipped: weight bits (0 = 16-bit), scale bytes per quantised weight,
    # and whether only routed experts are quantised (the rest of each layer 16-bit)
    checkpoint_bits: int = 0
    checkpoint_scale_bytes: float = 0.0
    checkpoint_experts_only: bool = False
    moe_layers: int = 0  # layers with routed experts (0 with experts: every layer)

    @property
    def moe_layer_count(self) -> int:
        """Layers with routed experts (every layer of a catalog MoE entry without config)."""
        if not self.experts:
            return 0
        return self.moe_layers or self.layers

    @property
    def full_layers(self) -> int:
        """Layers whose KV spans the whole context."""
        return (self.kv_layers or self.layers) - self.sliding_layers

    def stage_layers(self, pp: int) -> int:
        """Layers on the fullest pipeline stage."""
        return math.ceil(self.layers / max(pp, 1))

    def stage_embedding_params(self, pp: int) -> float:
        """Embedding parameters on the fullest stage (both matrices when pp = 1)."""
        return self.embedding_params if pp <= 1 else float(self.vocab * self.hidden)

    def stage_layer_params(self, pp: int) -> float:
        """Transformer-layer parameters on the fullest stage."""
        return self.layer_params * self.stage_layers(pp) / self.layers

    def stage_expert_params(self, pp: int) -> float:
        """Routed-expert parameters on the fullest stage."""
        return self.expert_params * self.stage_layers(pp) / self.layers

    def _kv_per_layer_gpu(self, tp: int) -> float:
        per_layer = self.kv_elements_per_token_layer
        if self.kv_split_by_tp:
            per_layer *= max(self.kv_heads / tp, 1.0) / self.kv_heads
        return per_layer

    def kv_elements_per_token_gpu(self, tp: int, pp: int) -> float:
        """KV-cache elements per token on one GPU of the fullest stage, every KV layer
        counted (GQA heads split over TP down to one head per GPU; an MLA latent is
        replicated). An upper bound per token when some layers slide: use
        :meth:`kv_elements_per_sequence_gpu` for a sequence's KV."""
        share = (self.kv_layers or self.layers) / self.layers
        return self._kv_per_layer_gpu(tp) * self.stage_layers(pp) * share

    def kv_elements_per_sequence_gpu(self, tp: int, pp: int, tokens: float) -> float:
        """KV-cache elements of one sequence of ``tokens`` tokens on one GPU of the fullest
        stage: full-context layers hold every token, sliding layers at most their window
        (layer kinds spread evenly over the stages)."""
        window = min(tokens, self.sliding_window) if self.sliding_layers else 0.0
        per_stage = self.stage_layers(pp) / self.layers
        return (self._kv_per_layer_gpu(tp) * per_stage
                * (self.full_layers * tokens + self.sliding_layers * window))

    def state_bytes_per_sequence_gpu(self, tp: int, pp: int) -> float:
        """Linear-attention recurrent state of one sequence on one GPU, bytes (heads split
        over TP); 0 for softmax-only models."""
        return self.linear_state_bytes * self.stage_layers(pp) / self.layers / tp

    def attention_flops_per_token(self, context_tokens: float) -> float:
        """Attention FLOPs (scores + values, all layers) for one token attending
        ``context_tokens`` earlier tokens: sliding layers attend at most their window,
        DSA layers their top-k plus the indexer over the whole context; linear-attention
        layers attend nothing (their state update, ``linear_flops_per_token``, does not grow
        with the context and is left out, so that ``f(1.0)`` is the per-context-token slope
        of the full layers). Not linear in the context when layers slide or use DSA."""
        dims = self.attn_dims_per_head or 2.0 * self.head_dim
        attended = min(context_tokens, self.attn_topk) if self.attn_topk else context_tokens
        window = min(context_tokens, self.sliding_window) if self.sliding_layers else 0.0
        per_ctx = 2.0 * self.heads * dims
        return (per_ctx * (self.full_layers * attended + self.sliding_layers * window)
                + self.index_flops_per_ctx * self.full_layers * context_tokens)

    def experts_touched_fraction(self, tokens: float) -> float:
        """Expected fraction of routed experts a step with ``tokens`` tokens reads."""
        if not self.experts:
            return 1.0
        miss = 1.0 - self.experts_per_token / self.experts
        return 1.0 - miss ** max(tokens, 0.0)


def _from_architecture(model: Model) -> Geometry:
    arch = model.architecture
    assert arch is not None
    params = arch.total_params() + arch.vision_params
    embedding = arch.embedding_params()
    one = arch.one_embedding_params()
    active = arch.active_params()
    dims = float(arch.head_dim + arch.v_head_dim)  # MLA: (nope + rope) + v per head
    index = 2.0 * arch.index_heads * arch.index_head_dim  # DSA indexer scores per context token
    linear = (4.0 * arch.linear_value_heads * arch.linear_key_dim * arch.linear_value_dim
              * arch.linear_layers)
    h, q = arch.hidden, arch.heads * arch.head_dim
    kv = arch.kv_heads * arch.head_dim if arch.attention != "mla" else arch.kv_lora_rank
    ffn = arch.expert_ffn if arch.experts else arch.dense_ffn
    lora_dims = (h + q) + 2 * (h + kv) + (q + h) + 2 * (h + ffn) + (ffn + h)
    return Geometry(
        params=params, active_params=active, embedding_params=embedding,
        layer_params=params - embedding, expert_params=arch.routed_expert_params(),
        layers=arch.layers, hidden=h, heads=arch.heads, head_dim=arch.head_dim,
        vocab=arch.vocab, experts=arch.experts, experts_per_token=arch.experts_per_token,
        kv_elements_per_token_layer=arch.kv_elements_per_token_layer(),
        kv_split_by_tp=arch.attention != "mla", kv_heads=arch.kv_heads,
        # input embedding is a lookup, not a matmul; a tied LM head reuses it
        matmul_active_params=active - (0.0 if arch.tied_embeddings else one)
        - arch.position_embeddings * h,
        lora_params_per_layer=float(lora_dims), kv_layers=arch.softmax_layers,
        sliding_layers=arch.sliding_layers, sliding_window=arch.sliding_window,
        linear_state_bytes=arch.linear_state_bytes_per_sequence(), attn_dims_per_head=dims,
        attn_topk=arch.index_topk, index_flops_per_ctx=index, linear_flops_per_token=linear,
        vocab_embedding_params=one, checkpoint_bits=arch.checkpoint_bits,
        checkpoint_scale_bytes=arch.checkpoint_scale_bytes,
        checkpoint_experts_only=arch.checkpoint_experts_only, moe_layers=arch.moe_layers)


_GEOMETRIES: dict[int, tuple[Model, Geometry]] = {}


def geometry(model: Model) -> Geometry:
    """The :class:`Geometry` of a catalog model, memoised per model object (hashing a
    pydantic model hashes every field: the physics asks for a geometry on every estimate)."""
    known = _GEOMETRIES.get(id(model))
    if known is not None and known[0] is model:
        return known[1]
    geo = _geometry(model)
    if len(_GEOMETRIES) > 256:
        _GEOMETRIES.clear()
    _GEOMETRIES[id(model)] = (model, geo)  # the entry holds the model: its id stays unique
    return geo


def _geometry(model: Model) -> Geometry:
    if model.architecture is not None:
        return _from_architecture(model)
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
        lora_params_per_layer=float(lora_dims), vocab_embedding_params=one_embedding,
    )
