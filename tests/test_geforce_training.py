"""Issue 28: GeForce cards train at their dense FP32-accumulate rate (NVIDIA's RTX Blackwell
whitepaper: half the FP16-accumulate rate), serving keeps the rate its factors were fitted
against."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from solver.catalog.data import Gpu
from solver.physics.layout import Workload
from solver.physics.performance import best_layout


def _without_fp32_rate(catalog, gpu_id: str):
    gpu = catalog.gpus[gpu_id]
    return catalog.model_copy(update={"gpus": {
        **catalog.gpus, gpu_id: gpu.model_copy(update={"fp32_accumulate_tflops": {}})}})


def test_rtx_5090_trains_at_the_whitepaper_fp32_accumulate_rate(catalog):
    gpu = catalog.gpus["rtx-5090"]
    assert gpu.training_tflops("bf16") == 209.5 == gpu.dense_tflops["bf16"] / 2
    assert gpu.training_tflops("fp8") == 419 == gpu.dense_tflops["fp8"] / 2
    assert gpu.training_tflops("fp4") == gpu.dense_tflops["fp4"]  # no FP32-acc row: unchanged
    assert "nvidia-rtx-blackwell-gpu-architecture.pdf" in gpu.source
    # datacenter and professional cards accumulate in FP32 at full rate: no separate figure
    for gid in ("rtx-pro-6000", "h100-sxm", "b200-sxm", "mi300x"):
        g = catalog.gpus[gid]
        assert g.training_tflops("bf16") == g.dense_tflops["bf16"]


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_geforce_training_is_about_half_as_fast_and_serving_unchanged(catalog, precision):
    """The same LoRA layout on 4 x RTX 5090: at the FP32-accumulate peak the compute term
    halves, so the throughput falls to a little over half (communication and overheads do not
    scale); a serving estimate is identical with or without the training rate."""
    full = _without_fp32_rate(catalog, "rtx-5090")
    lora = Workload(kind="lora", seq_len=4096)
    now = best_layout(catalog, "llama-3.1-8b", "rtx-5090", 4, lora, precision=precision,
                      gpus_per_node=4)
    before = best_layout(full, "llama-3.1-8b", "rtx-5090", 4, lora, precision=precision,
                         gpus_per_node=4)
    assert now.fits and before.fits
    ratio = now.predicted.tokens_per_s / before.predicted.tokens_per_s
    assert 0.5 <= ratio < 0.6, ratio
    chat = Workload(kind="inference", concurrency=16, input_tokens=2000, output_tokens=400)
    served = best_layout(catalog, "llama-3.1-8b", "rtx-5090", 1, chat, precision=precision,
                         gpus_per_node=4)
    assert served.predicted == best_layout(full, "llama-3.1-8b", "rtx-5090", 1, chat,
                                           precision=precision, gpus_per_node=4).predicted


def test_fp32_accumulate_rate_above_the_dense_rate_is_refused(catalog):
    data = catalog.gpus["rtx-5090"].model_dump()
    with pytest.raises(ValidationError, match="fp32_accumulate_tflops.bf16"):
        Gpu.model_validate({**data, "fp32_accumulate_tflops": {"bf16": 500}})
    with pytest.raises(ValidationError, match="fp32_accumulate_tflops.int4"):
        Gpu.model_validate({**data, "fp32_accumulate_tflops": {"int4": 10}})
