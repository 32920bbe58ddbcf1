"""How far a training sequence may go beyond a model's native context window.

A model with rotary position embeddings (RoPE) can be fine-tuned beyond the context it was
trained at by scaling its positions: MLPerf Training's Llama-2-70B LoRA benchmark fine-tunes
a 4,096-token model at 8,192 tokens; position interpolation extended LLaMA from 2,048 to
32,768 tokens (16x, Chen et al. 2023, arXiv:2306.15595) and YaRN Llama 2 from 4,096 to
128k (32x, Peng et al. 2023, arXiv:2309.00071). Such a ``seq_len`` is planned (memory and
speed follow the longer sequence) with a note that says so; beyond
``ROPE_SCALING_MAX_FACTOR`` x the native context - farther than any published extension -
it is refused. A model with learned absolute position embeddings (GPT-2 style,
``Architecture.position_embeddings``) has no positions past its table: its native context is
its hard limit.
"""

from __future__ import annotations

from solver.catalog.data import Model

ROPE_SCALING_MAX_FACTOR = 32
"""The hard limit on a training seq_len, in multiples of the native context: YaRN's 32x
(Llama 2 4k -> 128k, arXiv:2309.00071), the farthest published RoPE extension."""


def learned_positions(model: Model) -> bool:
    """Whether the model's positions are a learned table (no RoPE to scale)."""
    arch = model.architecture
    return arch is not None and arch.position_embeddings > 0


def hard_context_limit(model: Model) -> int:
    """The longest training sequence planned for ``model`` (module docstring)."""
    if learned_positions(model):
        return model.max_context
    return model.max_context * ROPE_SCALING_MAX_FACTOR


def beyond_context_reason(model_id: str, model: Model, seq_len: int) -> str:
    """Why a ``seq_len`` past the hard limit is refused (the reason of an exit 2)."""
    native = model.max_context
    if learned_positions(model):
        return (f"exceeds {model_id}'s context window of {native:,} tokens (learned position "
                "embeddings: no longer sequence can be scaled to)")
    return (f"exceeds {ROPE_SCALING_MAX_FACTOR}x {model_id}'s native context of {native:,} "
            f"tokens ({hard_context_limit(model):,}): beyond any published RoPE scaling "
            "(YaRN, 32x)")


def rope_scaling_note(model_id: str, model: Model, seq_len: int) -> str | None:
    """The note of a training ``seq_len`` beyond the native context and within the hard
    limit (None when within the native context)."""
    native = model.max_context
    if seq_len <= native:
        return None
    return (f"seq_len {seq_len:,} is beyond {model_id}'s native context of {native:,} tokens "
            f"({seq_len / native:.3g}x): planned with RoPE scaling (position interpolation or "
            "YaRN, as MLPerf fine-tunes Llama-2-70B at 8,192 tokens); set the model's "
            "rope_scaling for the run and check quality at that length; refused beyond "
            f"{ROPE_SCALING_MAX_FACTOR}x ({hard_context_limit(model):,} tokens)")
