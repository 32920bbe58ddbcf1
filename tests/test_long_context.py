"""Issue 28: a training seq_len beyond the model's native context is planned with RoPE
scaling and a warning (MLPerf fine-tunes Llama-2-70B at 8,192 tokens; it was refused as
"exceeds the context window of 4096"), refused only past the stated hard limit: 32x the
native context (YaRN), or the native context itself for learned position embeddings."""

from __future__ import annotations

import pytest

from solver.analysis.explain import solve_rfq
from solver.catalog.context import ROPE_SCALING_MAX_FACTOR, hard_context_limit
from solver.common.errors import InputError
from solver.physics.layout import Workload
from solver.physics.performance import best_layout
from solver.rfq.schema import validate_rfq

GPT2 = {"architectures": ["GPT2LMHeadModel"], "n_embd": 768, "n_head": 12, "n_layer": 12,
        "n_positions": 1024, "vocab_size": 50257}


def _tune(catalog, seq_len: int, model: str = "llama-2-70b", **extra):
    return validate_rfq({"id": "long", "constraints": {"gpus": ["h100-sxm"]}, "workloads": [{
        "name": "tune", "kind": "lora", "model": model, "dataset_tokens": 20_000_000,
        "seq_len": seq_len, "deadline_hours": 200, **extra}]}, catalog, source="rfq.yaml")


def test_mlperf_llama2_70b_lora_at_8192_is_planned_with_a_warning(catalog):
    assert catalog.model("llama-2-70b").max_context == 4096
    plan = solve_rfq(_tune(catalog, 8192), catalog)
    assert plan.status == "optimal"
    notes = [w for w in plan.warnings if w.startswith("tune: seq_len 8,192 is beyond "
                                                      "llama-2-70b's native context")]
    assert len(notes) == 1 and "RoPE scaling" in notes[0] and "131,072" in notes[0]
    # within the native context: no such warning
    short = solve_rfq(_tune(catalog, 4096), catalog)
    assert not [w for w in short.warnings if "native context" in w]


def test_the_longer_sequence_costs_memory_and_time(catalog):
    """The physics follows the planned sequence: at 8,192 tokens a LoRA step holds more
    activation memory per GPU than at 4,096 on the same layout."""
    est = {}
    for seq in (4096, 8192):
        est[seq] = best_layout(catalog, "llama-2-70b", "h100-sxm", 8,
                               Workload(kind="lora", seq_len=seq), precision="bf16",
                               gpus_per_node=8, tp=8, pp=1)
        assert est[seq].fits
    assert est[8192].memory.total_gb > est[4096].memory.total_gb


def test_hard_limit_is_32x_the_native_context(catalog, tmp_path):
    model = catalog.model("llama-2-70b")
    assert hard_context_limit(model) == ROPE_SCALING_MAX_FACTOR * 4096 == 131_072
    _tune(catalog, 131_072)  # at the limit: accepted
    with pytest.raises(InputError) as info:
        _tune(catalog, 131_073)
    (problem,) = info.value.problems
    assert (problem.file, problem.field, problem.value) == ("rfq.yaml", "workloads[0].seq_len",
                                                            131_073)
    assert "32x llama-2-70b's native context of 4,096 tokens (131,072)" in problem.reason


def test_refusal_is_one_clean_line_exit_2(cli, tmp_path):
    rfq = tmp_path / "long.yaml"
    rfq.write_text("id: long\nworkloads:\n  - {name: tune, kind: lora, model: llama-2-70b, "
                   "dataset_tokens: 1000, seq_len: 131073, deadline_hours: 10}\n")
    code, _, err = cli("validate", str(rfq))
    assert code == 2 and "Traceback" not in err
    lines = [line for line in err.splitlines() if "seq_len" in line]
    assert len(lines) == 1 and "workloads[0].seq_len = 131073" in lines[0]
    code, _, err = cli("estimate", "--model", "llama-2-70b", "--gpu", "h100-sxm", "--gpus", "8",
                       "--kind", "lora", "--seq-len", "131073")
    assert code == 2 and "--seq-len = 131073" in err and "native context" in err
    code, out, _ = cli("estimate", "--model", "llama-2-70b", "--gpu", "h100-sxm", "--gpus", "8",
                       "--kind", "lora", "--seq-len", "8192")
    assert code == 0 and "RoPE scaling" in " ".join(out.split())  # wrapped at the width


def test_learned_positions_cannot_be_scaled(catalog):
    """A GPT-2-style model has a learned position table: its native context is the limit."""
    _tune(catalog, 1024, model="gpt2-inline", architecture=GPT2)
    with pytest.raises(InputError) as info:
        _tune(catalog, 1025, model="gpt2-inline", architecture=GPT2)
    (problem,) = info.value.problems
    assert problem.field == "workloads[0].seq_len" and "learned position" in problem.reason
