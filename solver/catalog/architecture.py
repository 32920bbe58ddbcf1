"""The exact layer structure of a transformer, as a Hugging Face ``config.json`` describes it.

An :class:`Architecture` is what :mod:`solver.catalog.hf_config` parses a config into (and what a
catalog model built from a config carries). Parameter counts follow from it term by term:

- embeddings: ``vocab x hidden`` input embedding, plus an LM head of the same size unless
  tied, plus learned position embeddings (GPT-2/OPT);
- attention per layer: ``q/k/v/o`` projections (GQA/MHA, optional biases, output gate,
  q/k norms, per-head attention sinks) or MLA (``q_a``/``q_b`` low-rank queries, the joint
  ``kv_a`` latent + decoupled RoPE key, ``kv_b`` up-projection, ``o``), plus a DeepSeek
  sparse-attention indexer when present; linear-attention layers (Gated DeltaNet) have
  their own projection count;
- MLP per layer: gated (SwiGLU: gate, up, down = 3 matrices) or plain (GELU/ReLU: 2);
  dense layers (``first_k_dense_replace``) use the dense width, MoE layers hold ``experts``
  routed experts (``experts_per_token`` active), the shared experts' total width and a
  router;
- norms: two hidden-size norms per layer and a final one (LayerNorm: weight + bias).

Multi-token-prediction modules (DeepSeek/GLM ``num_nextn_predict_layers``, MiniMax MTP) are
not counted: serving without speculative decoding does not load them, and published totals
(DeepSeek-V3's 671B) exclude them. A vision tower is counted separately
(:attr:`Architecture.vision_params`, an estimate from ``vision_config``): it is resident
when the model is served, but never active per text token.

Counts are in parameters; KV figures in elements (bytes follow from the KV precision).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

AttentionKind = Literal["mha", "gqa", "mla"]
MlpKind = Literal["gated", "plain"]
PrecisionName = Literal["bf16", "fp8", "int8", "int4", "fp4"]


class Architecture(BaseModel):
    """Layer structure of one decoder-only transformer (from a Hugging Face config)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    family: str = Field(description="Hugging Face architectures[0], e.g. GptOssForCausalLM")
    hidden: int = Field(ge=1)
    layers: int = Field(ge=1)
    vocab: int = Field(ge=1)
    tied_embeddings: bool = False
    position_embeddings: int = Field(default=0, ge=0, description="learned positions (GPT-2)")
    norm_bias: bool = Field(default=False, description="LayerNorm with bias (vs RMSNorm)")
    max_context: int = Field(ge=1)

    # attention
    attention: AttentionKind
    heads: int = Field(ge=1)
    kv_heads: int = Field(ge=1)
    head_dim: int = Field(ge=1, description="query/key head size (MLA: nope + rope)")
    v_head_dim: int = Field(ge=1)
    attention_bias: bool = False
    attention_output_bias: bool = False
    attention_output_gate: bool = Field(default=False, description="gated attention (Qwen3.5)")
    attention_sinks: bool = Field(default=False, description="one learned sink per head")
    qk_norm_params: int = Field(default=0, ge=0, description="q/k norm weights per layer")
    q_lora_rank: int = Field(default=0, ge=0, description="MLA: 0 = full-rank queries")
    kv_lora_rank: int = Field(default=0, ge=0, description="MLA compressed KV latent")
    qk_rope_head_dim: int = Field(default=0, ge=0, description="MLA decoupled RoPE key")
    index_heads: int = Field(default=0, ge=0, description="DeepSeek sparse-attention indexer")
    index_head_dim: int = Field(default=0, ge=0, description="indexer key size (cached)")
    index_topk: int = Field(default=0, ge=0, description="tokens each query attends (DSA)")

    # which layers attend how (the rest attend over the whole context)
    sliding_layers: int = Field(default=0, ge=0, description="layers with a local window")
    sliding_window: int = Field(default=0, ge=0, description="tokens a local layer caches")
    linear_layers: int = Field(default=0, ge=0, description="linear-attention layers")
    linear_key_heads: int = Field(default=0, ge=0)
    linear_value_heads: int = Field(default=0, ge=0)
    linear_key_dim: int = Field(default=0, ge=0)
    linear_value_dim: int = Field(default=0, ge=0)
    linear_conv_kernel: int = Field(default=0, ge=0)
    linear_state_bytes: float = Field(default=4.0, gt=0, description="recurrent state dtype")

    # MLP
    mlp: MlpKind = "gated"
    mlp_bias: bool = False
    dense_layers: int = Field(ge=0)
    dense_ffn: int = Field(ge=0)
    moe_layers: int = Field(default=0, ge=0)
    experts: int = Field(default=0, ge=0)
    experts_per_token: int = Field(default=0, ge=0)
    expert_ffn: int = Field(default=0, ge=0)
    shared_ffn: int = Field(default=0, ge=0, description="total width of the shared experts")
    router_bias: bool = False

    # the checkpoint
    default_precision: PrecisionName | None = None
    quantization: str = Field(default="", description="what the checkpoint quantises, in words")
    checkpoint_bits: int = Field(default=0, ge=0, description="weight bits (0: 16-bit)")
    checkpoint_scale_bytes: float = Field(default=0.0, ge=0,
                                          description="scale bytes per quantised weight")
    checkpoint_experts_only: bool = Field(
        default=False, description="only routed experts quantised (attention etc. 16-bit)")
    vision_params: float = Field(default=0.0, ge=0, description="vision tower, estimated")
    notes: tuple[str, ...] = ()

    # ------------------------------------------------------------------ parameter counts
    @property
    def full_layers(self) -> int:
        """Layers whose softmax attention spans the whole context."""
        return self.layers - self.sliding_layers - self.linear_layers

    @property
    def softmax_layers(self) -> int:
        """Layers with softmax attention (full or sliding) and so a per-token KV cache."""
        return self.layers - self.linear_layers

    def one_embedding_params(self) -> float:
        """One ``vocab x hidden`` matrix."""
        return float(self.vocab * self.hidden)

    def embedding_params(self) -> float:
        """Input embedding + LM head (once when tied) + learned position embeddings."""
        return (self.one_embedding_params() * (1 if self.tied_embeddings else 2)
                + float(self.position_embeddings * self.hidden))

    def attention_params(self) -> float:
        """Parameters of one softmax-attention block (incl. sinks, q/k norms, indexer)."""
        h = self.hidden
        if self.attention == "mla":
            q_dim = self.heads * self.head_dim
            q = (h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * q_dim
                 if self.q_lora_rank else h * q_dim)
            kv_a = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
            nope = self.head_dim - self.qk_rope_head_dim
            kv_b = self.kv_lora_rank * self.heads * (nope + self.v_head_dim)
            out = self.heads * self.v_head_dim * h
            params = float(q + kv_a + kv_b + out)
            if self.index_heads:
                q_in = self.q_lora_rank or h
                params += (q_in * self.index_heads * self.index_head_dim
                           + h * self.index_head_dim + 2 * self.index_head_dim
                           + h * self.index_heads)
        else:
            q_dim = self.heads * self.head_dim * (2 if self.attention_output_gate else 1)
            kv_dim = self.kv_heads * (self.head_dim + self.v_head_dim)
            out_in = self.heads * self.v_head_dim
            params = float(h * q_dim + h * kv_dim + out_in * h)
            if self.attention_bias:
                params += q_dim + kv_dim
            if self.attention_output_bias:
                params += h
        if self.attention_sinks:
            params += self.heads
        return params + self.qk_norm_params

    def linear_attention_params(self) -> float:
        """Parameters of one Gated DeltaNet linear-attention block (Qwen3-Next/3.5)."""
        h = self.hidden
        key = self.linear_key_heads * self.linear_key_dim
        value = self.linear_value_heads * self.linear_value_dim
        in_proj = h * (2 * key + 2 * value) + h * 2 * self.linear_value_heads
        conv = (2 * key + value) * self.linear_conv_kernel
        out = value * h
        return float(in_proj + conv + out + 2 * self.linear_value_heads + self.linear_value_dim)

    def _mlp(self, width: int, bias: bool) -> float:
        matrices = 3 if self.mlp == "gated" else 2
        params = float(matrices * self.hidden * width)
        if bias:
            params += (matrices - 1) * width + self.hidden
        return params

    def dense_mlp_params(self) -> float:
        """One dense MLP."""
        return self._mlp(self.dense_ffn, self.mlp_bias)

    def expert_params_each(self) -> float:
        """One routed expert."""
        return self._mlp(self.expert_ffn, self.mlp_bias)

    def moe_fixed_params(self) -> float:
        """Shared experts + router of one MoE layer (always active)."""
        shared = self._mlp(self.shared_ffn, False) if self.shared_ffn else 0.0
        router = self.hidden * self.experts + (self.experts if self.router_bias else 0)
        return shared + router

    def norm_params(self) -> float:
        """All norms: two per layer and a final one."""
        per = self.hidden * (2 if self.norm_bias else 1)
        return float(per * (2 * self.layers + 1))

    def routed_expert_params(self) -> float:
        """All routed experts of all MoE layers (resident, ``k`` of ``E`` computed)."""
        return self.moe_layers * self.experts * self.expert_params_each()

    def total_params(self) -> float:
        """Resident parameters of the text model (without the vision tower or MTP)."""
        return (self.embedding_params()
                + self.softmax_layers * self.attention_params()
                + self.linear_layers * self.linear_attention_params()
                + self.dense_layers * self.dense_mlp_params()
                + self.moe_layers * self.moe_fixed_params()
                + self.routed_expert_params()
                + self.norm_params())

    def active_params(self) -> float:
        """Parameters used per token (both embedding matrices counted, as Qwen/DeepSeek do;
        OpenAI's gpt-oss figures leave the input embedding out)."""
        idle = self.moe_layers * (self.experts - self.experts_per_token)
        return self.total_params() - idle * self.expert_params_each()

    # ------------------------------------------------------------------ KV cache
    def kv_elements_per_token_layer(self) -> float:
        """KV-cache elements one token leaves on one softmax-attention layer."""
        if self.attention == "mla":
            return float(self.kv_lora_rank + self.qk_rope_head_dim + self.index_head_dim)
        return float(self.kv_heads * (self.head_dim + self.v_head_dim))

    def kv_elements_per_sequence(self, tokens: float) -> float:
        """KV elements of one sequence of ``tokens`` over all layers (sliding layers keep
        at most their window)."""
        per = self.kv_elements_per_token_layer()
        window = min(tokens, self.sliding_window) if self.sliding_layers else 0.0
        return per * (self.full_layers * tokens + self.sliding_layers * window)

    def linear_state_bytes_per_sequence(self) -> float:
        """Recurrent + convolution state of one sequence over all linear layers, bytes."""
        if not self.linear_layers:
            return 0.0
        state = self.linear_value_heads * self.linear_key_dim * self.linear_value_dim
        conv = ((2 * self.linear_key_heads * self.linear_key_dim
                 + self.linear_value_heads * self.linear_value_dim)
                * max(self.linear_conv_kernel - 1, 0))
        return self.linear_layers * (state + conv) * self.linear_state_bytes
