"""Calibration against published measurements (issue 3 targets)."""

from __future__ import annotations

import pytest

from solver.physics.calibration import default_csv, match_gpu, match_model, run, summarise


@pytest.fixture(scope="module")
def summary(catalog):
    return summarise(run(catalog, default_csv()))


def test_name_matching(catalog):
    assert match_model(catalog, "Llama-3.3-70B-Instruct") == "llama-3.1-70b"
    assert match_model(catalog, "LLaMA(2) 70B") == "llama-2-70b"
    assert match_model(catalog, "GPT-3 175B") == "gpt-3-175b"
    assert match_model(catalog, "MPT-7b") is None
    assert match_gpu(catalog, "H100-SXM", "") == "h100-sxm"
    assert match_gpu(catalog, "RTX-PRO-6000-Blackwell", "") == "rtx-pro-6000"
    assert match_gpu(catalog, "GB300", "") is None


def test_coverage(summary):
    assert summary.coverage >= 0.80


def test_memory_median(summary):
    assert summary.medians["memory"] <= 0.10


@pytest.mark.parametrize("category", ["inference throughput", "training throughput"])
def test_throughput_medians(summary, category):
    assert summary.medians[category] <= 0.20
