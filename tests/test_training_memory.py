"""Long-sequence LoRA/QLoRA memory peaks (issue 15): the LM-head / cross-entropy peak of the
training stack, fp32 upcasts of QLoRA stacks, eager attention scores, QLoRA dequantisation
buffers, and the loss peak on the last pipeline stage.

Mechanism checks (scaling laws, orderings, differences equal to the tensor they model),
never a hard-coded footprint.
"""

from __future__ import annotations

import copy

import pytest

from solver.catalog.perf_factors import factors
from solver.common.errors import InputError
from solver.physics.calibration import training_stack_of, with_training_stack
from solver.physics.geometry import geometry
from solver.physics.layout import Layout, Workload
from solver.physics.memory import largest_matrix_params, memory_plan

GB = 1e9
MODEL = "llama-3.1-8b"


def _layout(gpu: str = "h100-sxm", pp: int = 1, gpus: int = 1) -> Layout:
    return Layout(model=MODEL, gpu=gpu, precision="bf16", tp=1, pp=pp, dp=gpus // pp,
                  gpus_per_node=gpus, fabric="none")


def _act(catalog, kind: str, seq: int, *, mb: int = 1, recompute: str = "full",
         layout: Layout | None = None) -> float:
    plan = memory_plan(catalog, layout or _layout(),
                       Workload(kind, seq_len=seq, micro_batch=mb, recompute=recompute))
    return plan.breakdown.activations_gb


def _peak(catalog, kind: str, seq: int, *, mb: int = 1) -> float:
    plan = memory_plan(catalog, _layout(), Workload(kind, seq_len=seq, micro_batch=mb,
                                                    recompute="full"))
    return plan.breakdown.total_gb - plan.breakdown.reserve_gb


def _with_training(catalog, **changes):
    """The catalog with ``training`` entries replaced (dotted keys reach into stacks)."""
    eff = copy.deepcopy(catalog.efficiency)
    for dotted, value in changes.items():
        node = eff["training"]
        *path, last = dotted.split(".")
        for key in path:
            node = node[key]
        node[last] = value
    return catalog.model_copy(update={"efficiency": eff})


def test_cross_entropy_peak_is_tokens_x_vocab_x_stack_bytes(catalog):
    """Between two stacks, the full-recompute footprint differs by exactly the loss tensor
    (tokens x vocab x the stacks' bytes per logit) once it outweighs a recomputed layer."""
    geo = geometry(catalog.model(MODEL))
    stacks = factors(catalog).training.stacks
    hf, tt = with_training_stack(catalog, "hf_peft"), with_training_stack(catalog, "megatron")
    tokens = 8192
    diff = _act(hf, "lora", tokens) - _act(tt, "lora", tokens)
    expected = tokens * geo.vocab * (stacks["hf_peft"].cross_entropy_bytes.value
                                     - stacks["megatron"].cross_entropy_bytes.value) / GB
    assert diff == pytest.approx(expected, rel=1e-6)


def test_stack_order_and_long_sequence_growth(catalog):
    """Unfused (HF) > Megatron > chunked (torchtune) > fused loss; at full recompute a LoRA
    step's activations grow linearly with the sequence once the loss dominates."""
    acts = {name: _act(with_training_stack(catalog, name), "lora", 8192)
            for name in ("hf_peft", "megatron", "fused")}
    assert acts["hf_peft"] > acts["megatron"] > acts["fused"]
    hf = with_training_stack(catalog, "hf_peft")
    short, long = _act(hf, "lora", 2048), _act(hf, "lora", 8192)
    assert long == pytest.approx(4.0 * short, rel=0.02)
    # at 8k tokens the loss tensor is the largest single term: more than all 32 layers'
    # checkpointed inputs (2 bytes x hidden per token per layer)
    geo = geometry(catalog.model(MODEL))
    checkpoints = 8192 * geo.hidden * 2.0 * geo.layers / GB
    assert long - checkpoints > checkpoints


def test_qlora_upcast_stack_loses_its_saving_at_long_sequence(catalog):
    """A stack that keeps QLoRA's non-quantised weights in fp32 (PEFT) runs its residual
    stream and logits in fp32: QLoRA beats LoRA at short sequences, not at long ones.
    A bf16 stack (torchtune) keeps QLoRA below LoRA at every length."""
    hf = with_training_stack(catalog, "hf_peft")
    assert _peak(hf, "qlora", 1024) < _peak(hf, "lora", 1024)
    assert _peak(hf, "qlora", 16384, mb=2) > _peak(hf, "lora", 16384, mb=2)
    tt = with_training_stack(catalog, "torchtune")
    for seq in (1024, 8192, 32768):
        assert _peak(tt, "qlora", seq) < _peak(tt, "lora", seq)


def test_eager_attention_scores_grow_quadratically(catalog):
    """An eager-attention stack keeps 5 a s^2 bytes per layer in the live recomputed layer:
    doubling the sequence adds more than twice the extra memory a flash stack adds."""
    eager = _with_training(with_training_stack(catalog, "fused"),
                           **{"stacks.fused.attention_scores_kept.value": 1.0})
    flash = with_training_stack(catalog, "fused")
    extra = [_act(eager, "lora", s) - _act(flash, "lora", s) for s in (2048, 4096)]
    assert extra[0] > 0
    assert extra[1] == pytest.approx(4.0 * extra[0], rel=1e-6)  # s tokens x s scores


def test_qlora_dequant_buffer_is_the_largest_matrix_in_16_bit(catalog):
    geo = geometry(catalog.model(MODEL))
    none = _with_training(catalog, **{"qlora_dequant_matrices.value": 0.0})
    count = factors(catalog).training.qlora_dequant_matrices.value
    diff = _act(catalog, "qlora", 4096) - _act(none, "qlora", 4096)
    assert diff == pytest.approx(count * largest_matrix_params(geo) * 2.0 / GB, rel=1e-6)
    # the Llama 3.1 8B MLP projection (4096 x 14336) is its largest matrix
    assert largest_matrix_params(geo) == pytest.approx(4096 * 14336, rel=0.01)
    assert _act(catalog, "lora", 4096) < _act(catalog, "qlora", 4096)


def test_loss_peak_sits_on_the_last_pipeline_stage(catalog):
    """With pipelining the first stage holds pp micro-batches of activations and the last
    stage the loss: the fullest GPU is the larger of the two, never their sum."""
    hf = with_training_stack(catalog, "hf_peft")
    fused = with_training_stack(catalog, "fused")
    layout = _layout(pp=4, gpus=4)
    big, small = (_act(c, "pretrain", 8192, recompute="selective", layout=layout)
                  for c in (hf, fused))
    geo = geometry(catalog.model(MODEL))
    logits = 8192 * geo.vocab * factors(catalog).training.stacks[
        "hf_peft"].cross_entropy_bytes.value / GB
    assert big < small + logits  # not first stage + loss
    assert big >= logits


def test_activation_offload_keeps_checkpoints_on_the_host(catalog):
    on = _with_training(with_training_stack(catalog, "fused"),
                        **{"stacks.fused.activation_offload.value": 1.0})
    off = with_training_stack(catalog, "fused")
    geo = geometry(catalog.model(MODEL))
    diff = _act(off, "lora", 4096) - _act(on, "lora", 4096)
    assert diff == pytest.approx(4096 * geo.hidden * 2.0 * geo.layers / GB, rel=1e-6)


def test_calibration_rows_state_their_stack(catalog):
    assert training_stack_of(catalog, {"software": "torchtune + torch.compile"}) == "torchtune"
    assert training_stack_of(catalog, {"source": "NVIDIA/NeMo docs"}) == "megatron"
    assert training_stack_of(catalog, {"software": "transformers 4.49 + PEFT"}) == "hf_peft"
    assert training_stack_of(catalog, {"software": "llama.cpp"}) is None


def test_unknown_stack_is_an_input_error(catalog):
    bad = _with_training(catalog, stack_finetune="nope")
    with pytest.raises(InputError, match="stack_finetune"):
        factors(bad)
