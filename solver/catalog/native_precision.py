"""The precision a quantised checkpoint is served at on a GPU (issue 28).

A model whose checkpoint ships quantised (config.json ``quantization_config``: MXFP4,
compressed-tensors int4, block-scaled FP8; the catalog model's ``default_precision``) is
served in that format by default: natively where the GPU has tensor cores for it, as
weight-only where it does not (4-bit weights stay 4-bit and the matrix multiplies run in
bf16), and never up-cast silently. The one case the performance model has no weight-only
path for, an 8-bit checkpoint on a GPU without FP8 (or INT8) tensor cores, is up-cast to
bf16 and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from solver.catalog.data import Gpu, Model

BITS = {"bf16": 16, "fp8": 8, "int8": 8, "int4": 4, "fp4": 4}


@dataclass(frozen=True)
class NativePrecision:
    """How a checkpoint's own format runs on one GPU."""

    checkpoint: str  # the checkpoint's precision (fp8, int8, int4, fp4)
    served: str  # the precision the layout runs at
    how: str  # in words: native, weight-only or up-cast, and why


def native_precision(model: Model, gpu: Gpu) -> NativePrecision | None:
    """The serving precision of ``model``'s quantised checkpoint on ``gpu`` (None: the
    checkpoint is 16-bit, the ordinary serving policy applies)."""
    native = model.default_precision
    if native is None or native == "bf16":
        return None
    described = (model.architecture.quantization.split(";")[0].strip()  # its config's words,
                 if model.architecture is not None  # unless an alias names another format
                 and model.architecture.default_precision == native else "")
    label = f"the checkpoint's own {described or native.upper() + ' weights'}"
    if native == "int4":
        return NativePrecision(native, "int4", f"{label}, weight-only (4-bit weights, "
                               "bf16 matrix multiplies)")
    if native in gpu.dense_tflops:
        return NativePrecision(native, native, f"{label}, run natively on {gpu.id}'s "
                               f"{native.upper()} tensor cores")
    if native == "fp4":
        return NativePrecision(native, "int4", f"{label}, weight-only on {gpu.id} (no FP4 "
                               "tensor cores: weights stay 4-bit, matrix multiplies in bf16)")
    return NativePrecision(native, "bf16", f"{label} up-cast to bf16 on {gpu.id} (no "
                           f"{native.upper()} tensor cores; twice the weight memory)")
