"""Shared fixtures: the built-in catalog and small RFQ builders."""

from __future__ import annotations

import copy
import os
from typing import Any

import pytest

from solver.catalog.load import load_catalog

# Tests build candidates for real: the disk cache of candidate tables (issue 31) stays off
# unless a test turns it on in a folder of its own (tests/test_candidate_cache.py). The
# CLI tests' child processes inherit this.
os.environ["PROCURE_CANDIDATE_CACHE"] = "off"


@pytest.fixture(scope="session")
def catalog():
    return load_catalog()


BASE_RFQ: dict[str, Any] = {
    "id": "acme-chat-2027",
    "customer": "ACME GmbH",
    "horizon_years": 3,
    "objective": "tco",
    "budget_usd": 600000,
    "constraints": {"vendor": "kentino", "gpus": ["rtx-pro-6000", "rtx-5090"],
                    "fabrics": ["none", "100gbe", "ib-hdr-200"], "max_nodes": 4,
                    "max_gpus": 32, "max_power_kw": 30, "max_rack_units": 20},
    "workloads": [
        {"name": "chat", "kind": "inference", "model": "llama-3.1-70b", "precision": "fp8",
         "concurrency": 48, "qps": 10, "input_tokens": 2000, "output_tokens": 400,
         "ttft_ms": 2000, "tpot_ms": 50},
        {"name": "corpus", "kind": "batch_inference", "model": "qwen2.5-32b",
         "requests": 10000000, "input_tokens": 1000, "output_tokens": 200,
         "deadline_hours": 96},
        {"name": "tune", "kind": "lora", "model": "llama-3.1-70b", "dataset_tokens": 200000000,
         "epochs": 3, "seq_len": 4096, "deadline_hours": 48},
    ],
}


@pytest.fixture
def rfq_data() -> dict[str, Any]:
    return copy.deepcopy(BASE_RFQ)


@pytest.fixture
def cli():
    """Run ``procure ARGS`` in this process: (exit code, stdout, stderr)
    (:func:`in_process.procure`)."""
    from in_process import procure

    def run(*args: str) -> tuple[int, str, str]:
        done = procure(*args)
        return done.returncode, done.stdout, done.stderr

    return run
