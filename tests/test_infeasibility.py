"""Infeasibility that names the real conflict; batch requests that cannot meet their own
deadline (issue 11 items 7 and 9)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from solver.analysis.explain import solve_rfq
from solver.rfq.schema import Rfq


def _batch(deadline_hours: float, requests: int = 1000, output_tokens: int = 200,
           input_tokens: int = 1000) -> Rfq:
    return Rfq.model_validate({"id": "b", "constraints": {"gpus": ["l40s"]}, "workloads": [{
        "name": "corpus", "kind": "batch_inference", "model": "llama-3.1-8b",
        "requests": requests, "input_tokens": input_tokens, "output_tokens": output_tokens,
        "deadline_hours": deadline_hours}]})


@pytest.mark.parametrize("deadline", [1e-9, 1e-320])
def test_tiny_batch_deadline_is_a_clear_infeasibility(catalog, deadline):
    plan = solve_rfq(_batch(deadline), catalog, explain=False).to_json()
    assert plan["status"] == "infeasible" and plan["cluster"]["total_gpus"] == 0
    info = plan["infeasibility"]
    assert any("one request takes" in r for r in info["reasons"])
    assert "deadline_hours" in info["to_fix"] and "one request alone takes" in info["to_fix"]
    need = info["closest"]["corpus"]["deadline_hours"]
    assert need > 0
    # the deadline it names is itself enough (rounded up, never down)
    ok = solve_rfq(_batch(need), catalog, explain=False).to_json()
    assert ok["status"] == "optimal"


def test_long_outputs_cannot_finish_in_a_minute(catalog):
    """10 requests x 100k output tokens in one minute: each request decodes for far longer
    than a minute whatever the number of replicas (was an 'optimal' plan)."""
    plan = solve_rfq(_batch(1 / 60, requests=10, output_tokens=100_000), catalog,
                     explain=False).to_json()
    assert plan["status"] == "infeasible"
    assert plan["infeasibility"]["closest"]["corpus"]["deadline_hours"] > 1 / 60


def test_long_output_relaxation_is_feasible_and_in_words(catalog):
    """Short prompts, 100k-token answers, a one-minute deadline: the deadline the answer
    names is enough on its own, and the advice reads as durations, not 1.51e+03 s."""
    plan = solve_rfq(_batch(1 / 60, requests=10, output_tokens=100_000, input_tokens=100),
                     catalog, explain=False).to_json()
    info = plan["infeasibility"]
    need = info["closest"]["corpus"]["deadline_hours"]
    assert "e+" not in info["to_fix"] and "e-" not in info["to_fix"]
    assert f"at least {need:,} h" in info["to_fix"]
    ok = solve_rfq(_batch(need, requests=10, output_tokens=100_000, input_tokens=100),
                   catalog, explain=False).to_json()
    assert ok["status"] == "optimal"


def test_batch_plan_respects_a_requests_own_time(catalog):
    plan = solve_rfq(_batch(1.0), catalog, explain=False).to_json()
    assert plan["status"] == "optimal"
    pred = plan["workloads"][0]["predicted"]
    assert (pred["ttft_ms"] + 200 * pred["tpot_ms"]) / 1e3 <= 3600.0


def test_cli_exit_3_for_a_tiny_deadline(tmp_path: Path):
    rfq = _batch(1e-320).model_dump(mode="json", exclude_none=True)
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(rfq))
    run = subprocess.run([sys.executable, "-c", "from solver.cli.main import main; main()", "solve",
                          str(path)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 3, run.stderr
    assert "Traceback" not in run.stderr and "one request" in run.stdout


def test_vendor_profile_excluding_the_gpu_is_named(catalog):
    rfq = Rfq.model_validate({"id": "k", "constraints": {"vendor": "kentino",
                                                          "gpus": ["mi300x"]},
                              "workloads": [{"name": "chat", "kind": "inference",
                                             "model": "llama-3.1-8b", "concurrency": 8,
                                             "input_tokens": 1000, "output_tokens": 200}]})
    plan = solve_rfq(rfq, catalog, explain=False).to_json()
    info = plan["infeasibility"]
    assert plan["status"] == "infeasible"
    assert "kentino does not offer mi300x" in info["reasons"][0]
    assert "allow" not in info["to_fix"] and "drop constraints.vendor" in info["to_fix"]


def test_node_limit_against_a_big_full_finetune_names_the_nodes_needed(catalog):
    rfq = Rfq.model_validate({"id": "f", "constraints": {"max_nodes": 1, "gpus": ["h200-sxm"]},
                              "workloads": [{"name": "ft", "kind": "full_finetune",
                                             "model": "llama-3.1-405b",
                                             "dataset_tokens": 100_000_000,
                                             "deadline_hours": 1000}]})
    plan = solve_rfq(rfq, catalog, explain=False).to_json()
    info = plan["infeasibility"]
    needed = info["closest"]["ft"]["max_nodes"]
    # 405B x 16 B/param of model state = 6.5 TB > one 8 x 141 GB node
    assert needed >= 2
    assert f"needs at least {needed} nodes" in info["to_fix"]
    assert "no GPU" not in info["to_fix"]
    wider = rfq.model_copy(update={"constraints": rfq.constraints.model_copy(
        update={"max_nodes": needed})})
    assert solve_rfq(wider, catalog, explain=False).to_json()["status"] == "optimal"
