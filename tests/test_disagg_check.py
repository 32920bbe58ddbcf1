"""The disaggregated-serving check (issue 27, solver/physics/disagg_check.py): measured
prefill and decode pools of disaggregated deployments with wide EP (SGLang team posts),
predicted with the physics disaggregated units are planned with. Nothing is fitted to these
rows: the figures pinned here are held-out errors (docs/expert-parallel.md reports them)."""

from __future__ import annotations

import math

import pytest

from solver.catalog.load import load_catalog
from solver.catalog.perf_factors import factors
from solver.physics import disagg_check, expert_check, serving_data
from solver.physics.geometry import geometry


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(None)


@pytest.fixture(scope="module")
def found(catalog):
    return {r.id: r for r in disagg_check.rows(catalog)}


def test_every_row_predicted_or_refused_with_its_reason(found):
    assert len(found) == 9
    refused = {i for i, r in found.items() if r.predicted is None}
    # the two GB200 prefill instances of 2 and 4 GPUs held DeepSeek's weights only by
    # offloading them to the Grace CPUs' memory: the model says they do not fit
    assert refused == {"SGL-GB200-P2-P-BF16KV", "SGL-GB200-P2-P-FP4"}
    assert all("does not fit" in found[i].why for i in refused)


def test_held_out_errors_as_the_docs_report(found):
    errors = {i: r.error_pct for i, r in found.items() if r.error_pct is not None}
    assert errors == pytest.approx({
        "LMSYS-EP-P1K": -38.4, "LMSYS-EP-P2K": -35.7, "LMSYS-EP-P4K": -32.1,
        "LMSYS-EP-D2K": -17.6, "SGL-GB200-P1-D": 4.2, "SGL-GB200-P2-D-BF16KV": -13.1,
        "SGL-GB200-P2-D-FP4": -15.6}, abs=0.1)
    decode = disagg_check.summary([r for r in found.values() if r.phase == "decode"])
    assert decode["median_abs_error_pct"] == pytest.approx(14.3, abs=0.1)
    # pessimistic on every prefill pool and on the decode pools taken together: a plan
    # built on it buys more, not less
    assert all(e < 0 for i, e in errors.items() if found[i].phase == "prefill")
    assert decode["mean_signed_error_pct"] < 0


def test_stated_batches_and_kv_precision_are_used(catalog, found):
    assert found["LMSYS-EP-D2K"].batch_per_rank == 256
    assert found["SGL-GB200-P2-D-FP4"].batch_per_rank == 1408
    # unstated: what the KV cache holds, fewer with a 16-bit cache than an FP8 one
    held = found["SGL-GB200-P1-D"].batch_per_rank
    assert held is not None and 256 < held < 1408
    wide = disagg_check.with_kv_bytes(catalog, "fp8", 2.0)
    assert factors(wide).precisions.kv_bytes["fp8"].value == 2.0
    assert factors(catalog).precisions.kv_bytes["fp8"].value == 1.0
    assert disagg_check.with_kv_bytes(catalog, "fp8", 1.0) is catalog


def test_predictions_stay_under_the_gpus_peak(catalog, found):
    """Prefill tokens/s per GPU x 2 x active parameters never exceeds the GPU's dense peak
    at the compute precision (a roofline bound, not a fit)."""
    geo = geometry(catalog.model("deepseek-v3"))
    for r in found.values():
        if r.predicted is None or r.phase != "prefill":
            continue
        gpu = catalog.gpus[r.gpu]
        peak = gpu.dense_tflops["fp8"] * 1e12
        assert 2 * geo.matmul_active_params * r.predicted < 0.6 * peak


def test_rows_are_outside_every_fit(catalog, found):
    fit_obs, _ = serving_data.load_all(catalog)
    ids = set(found)
    assert not ids & {o.id for o in fit_obs}
    for source in expert_check.SOURCES:
        rows, _ = expert_check.rows(catalog, source)
        assert not ids & {r.id for r in rows}


def test_markdown_names_every_row(catalog, found):
    text = disagg_check.markdown(catalog)
    assert all(i in text for i in found)
    assert "| decode | 4 | 4 | 14.3% |" in text
    assert not any(math.isnan(r.measured) for r in found.values())
