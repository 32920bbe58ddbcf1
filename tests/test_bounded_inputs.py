"""Bounded inputs and honest verdicts (issue 33).

* every numeric flag has a range: a value outside it (or not finite) is refused with exit 2
  naming the flag, before any work (``fit --gpus 1e9`` ran for minutes; ``batch --workers
  1e9`` forked until the system refused);
* prices the solver cannot scale (1e30) are refused where they enter - a catalog overlay,
  ``prices.csv``, ``rental.csv``, ``--set``, the dashboard's price overlay - instead of
  being reported as infeasible; utilisation is a sane fraction;
* a solver failure is never exit 3 (infeasible): it is exit 1 with a clear line;
* a config whose hidden size does not divide into its heads is refused unless head_dim is
  stated; an overrides file that sets one value twice is refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from solver.catalog.load import load_catalog
from solver.common.errors import InputError
from solver.common.limits import MAX_GPUS, max_workers
from solver.rfq.schema import validate_rfq

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
GOOD = ("id: r\nworkloads:\n  - {name: chat, kind: inference, model: llama-3.1-8b,\n"
        "     concurrency: 4, input_tokens: 500, output_tokens: 100}\n")
FIT = ["fit", "--model", "llama-3.1-8b", "--gpu", "l4"]
ESTIMATE = ["estimate", "--model", "llama-3.1-8b", "--gpu", "l4", "--gpus", "2"]


def refused(result: tuple[int, str, str], flag: str) -> str:
    code, out, err = result
    assert code == 2, out + err
    assert flag in err and "Traceback" not in err and "internal error" not in err, err
    return err


@pytest.fixture
def rfq(tmp_path: Path) -> Path:
    path = tmp_path / "r.yaml"
    path.write_text(GOOD)
    return path


# --- every numeric flag has a range -------------------------------------------------------


@pytest.mark.parametrize(("args", "flag"), [
    ([*FIT, "--gpus", "1000000000"], "--gpus"),
    ([*FIT, "--gpus", str(MAX_GPUS + 1)], "--gpus"),
    ([*FIT, "--gpus", "8", "--gpus-per-node", "1000"], "--gpus-per-node"),
    ([*FIT, "--gpus", "1", "--context", "1000000000"], "--context"),
    ([*FIT, "--gpus", "1", "--concurrency", "1000000000000"], "--concurrency"),
    ([*ESTIMATE, "--kind", "inference", "--input-tokens", "1000000000"], "--input-tokens"),
    ([*ESTIMATE, "--kind", "inference", "--output-tokens", "1000000000"], "--output-tokens"),
    ([*ESTIMATE, "--kind", "inference", "--qps", "1e30"], "--qps"),
    ([*ESTIMATE, "--kind", "inference", "--qps", "nan"], "--qps"),
    ([*ESTIMATE, "--kind", "inference", "--ttft-ms", "1e30"], "--ttft-ms"),
    ([*ESTIMATE, "--kind", "inference", "--tpot-ms", "inf"], "--tpot-ms"),
    ([*ESTIMATE, "--kind", "lora", "--seq-len", "1000000000"], "--seq-len"),
    ([*ESTIMATE, "--kind", "lora", "--micro-batch", "1000000000"], "--micro-batch"),
    ([*ESTIMATE, "--kind", "lora", "--global-batch", "1000000000000"], "--global-batch"),
    ([*ESTIMATE, "--kind", "pretrain", "--interleave", "1000000"], "--interleave"),
    ([*ESTIMATE, "--kind", "pretrain", "--context-parallel", "1000000"], "--context-parallel"),
    ([*ESTIMATE, "--kind", "inference", "--tp", "1000000"], "--tp"),
])
def test_physics_flags_have_upper_limits(args: list[str], flag: str, cli: Any) -> None:
    """Issue 33: `procure fit --gpus 1000000000` ran in time linear in --gpus (1e9: past
    60 s)."""
    refused(cli(*args), flag)


def test_the_largest_gpu_count_still_answers(cli: Any) -> None:
    code, out, err = cli(*FIT, "--gpus", str(MAX_GPUS), "--json")
    assert code == 0, out + err
    assert json.loads(out)["gpus"] == MAX_GPUS


@pytest.mark.parametrize("command", ["solve", "batch", "pareto", "sensitivity"])
def test_run_flags_have_upper_limits(command: str, rfq: Path, tmp_path: Path,
                                     cli: Any) -> None:
    db = ["--db", str(tmp_path / "r.sqlite")] if command == "batch" else []
    if command == "solve":
        for value in ("nan", "inf", "1e30"):
            refused(cli("solve", str(rfq), "--time-limit", value), "--time-limit")
    if command == "batch":
        for value in ("nan", "1e30"):
            refused(cli("batch", str(rfq), *db, "--time-limit", value), "--time-limit")
    if command in ("batch", "sensitivity"):
        err = refused(cli(command, str(rfq), *db, "--workers", "1000000000"), "--workers")
        assert f"1 to {max_workers()}" in err
        refused(cli(command, str(rfq), *db, "--workers", str(max_workers() + 1)), "--workers")
    if command == "pareto":
        refused(cli("pareto", str(rfq), "--points", "1000000000"), "--points")
    assert not (tmp_path / "r.sqlite").exists()  # refused before the store was made


def test_batch_library_refuses_a_worker_count_before_forking(rfq: Path,
                                                             tmp_path: Path) -> None:
    """Issue 33: `procure batch --workers 1000000000` forked one process per requested
    worker until the system refused, then hung."""
    from solver.batch.runner import run_batch

    with pytest.raises(InputError, match="--workers"):
        run_batch([rfq], tmp_path / "r.sqlite", workers=10**9)
    assert not (tmp_path / "r.sqlite").exists()


# --- prices the solver cannot scale are refused where they enter ---------------------------


def _overlay(tmp_path: Path, files: dict[str, str]) -> str:
    folder = tmp_path / "cat"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return str(folder)


RENTAL_HEADER = ("offer_id,gpu,gpus_per_instance,fabric,price_type,usd_per_gpu_hour,"
                 "min_term_hours,provider_class,source,as_of,note\n")


@pytest.mark.parametrize(("files", "where"), [
    ({"prices.csv": "id,price_usd\nl4,1e30\n"}, "price_usd"),
    ({"prices.csv": "id,price_usd\npcie-8gpu,1e30\n"}, "price_usd"),
    ({"gpus.yaml": "- {id: l4, price_usd: 1.0e+30}\n"}, "price_usd"),
    ({"fabrics.yaml": "- {id: 100gbe, switch_port_price_usd: 1.0e+30}\n"},
     "switch_port_price_usd"),
    ({"costs.yaml": "electricity_usd_per_kwh: {value: 1.0e+30, source: x, as_of: 2026}\n"},
     "electricity_usd_per_kwh"),
    ({"rental.csv": RENTAL_HEADER + "x-l4,l4,1,none,on_demand,1e30,0,gpu-cloud,src,2026-11,\n"},
     "usd_per_gpu_hour"),
])
def test_prices_the_solver_cannot_scale_are_refused_in_overlays(
        files: dict[str, str], where: str, tmp_path: Path, cli: Any, rfq: Path) -> None:
    """Issue 33: a GPU or rental price of 1e30 was accepted, then reported as infeasible
    (exit 3, 'solver error: highs returned kUnknown') although a plan exists."""
    overlay = _overlay(tmp_path, files)
    with pytest.raises(InputError, match=where):
        load_catalog(overlay)
    err = refused(cli("solve", str(rfq), "--catalog", overlay), where)
    assert "at most" in err


def test_the_largest_price_still_plans(tmp_path: Path, cli: Any) -> None:
    """At the cap a forced GPU is still planned: the cap is below what the solver scales."""
    from solver.catalog.data import MAX_PRICE_USD

    overlay = _overlay(tmp_path, {"prices.csv": f"id,price_usd\nl4,{MAX_PRICE_USD:g}\n"})
    path = tmp_path / "l4.yaml"
    path.write_text(GOOD.replace("workloads:", "constraints: {gpus: [l4]}\nworkloads:"))
    code, out, err = cli("solve", str(path), "--catalog", overlay, "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["status"] == "optimal"
    assert plan["cost"]["gpus_usd"] == pytest.approx(MAX_PRICE_USD * plan["cluster"][
        "total_gpus"])


@pytest.mark.parametrize("assignment", ["gpu.l4.price_usd=1e30", "server.pcie-8gpu.price_usd=1e30",
                                        "fabric.100gbe.nic_price_usd=1e30",
                                        "costs.electricity_usd_per_kwh=1e30",
                                        "gpu.l4.memory_gb=1e30"])
def test_set_refuses_unscalable_numbers(assignment: str, rfq: Path, cli: Any) -> None:
    path = assignment.split("=")[0]
    err = refused(cli("solve", str(rfq), "--set", assignment), path.split(".")[-1])
    assert path.split(".")[-2] in err


def test_dashboard_price_overlay_refuses_unscalable_prices(catalog: Any,
                                                           rfq_data: dict) -> None:
    """The dashboard's price edits become override pairs (dashboards/state.py)."""
    from solver.rfq.overrides import apply_pairs

    base = validate_rfq(rfq_data, catalog)
    with pytest.raises(InputError, match="price_usd"):
        apply_pairs(catalog, base, [("gpu.rtx-pro-6000.price_usd", 1e30)], "dashboard")


# --- utilisation, solver errors -----------------------------------------------------------


@pytest.mark.parametrize("value", [1e-300, 0.01, 0.049])
def test_target_utilization_must_be_a_sane_fraction(value: float, catalog: Any,
                                                    rfq_data: dict) -> None:
    """Issue 33: `target_utilization: 1e-300` gave 'capacity for 0 % utilization' and
    exit 3."""
    rfq_data["workloads"][0]["target_utilization"] = value
    with pytest.raises(InputError, match="target_utilization"):
        validate_rfq(rfq_data, catalog, "r.yaml")
    rfq_data["workloads"][0]["target_utilization"] = 0.05
    assert validate_rfq(rfq_data, catalog).workloads[0].target_utilization == 0.05


@pytest.fixture
def failing_solver(monkeypatch: pytest.MonkeyPatch) -> None:
    """HiGHS answers every model with an error (as it did for 1e30 coefficients)."""
    from solver.optimize.backends import HighsBackend
    from solver.optimize.linear import Solution

    def solve(self: Any, model: Any, time_limit: Any = None, initial: Any = None) -> Solution:
        return Solution("error", {}, None, 0.0, 0.0, "highs", "highs returned kUnknown")

    monkeypatch.setattr(HighsBackend, "solve", solve)


@pytest.mark.parametrize("args", [["solve"], ["solve", "--json"], ["explain"],
                                  ["pareto"], ["sensitivity", "--workers", "1"],
                                  ["pareto", "--sweep", "growth=0,0.5"]])
def test_a_solver_error_is_never_infeasible(args: list[str], rfq: Path, cli: Any,
                                            failing_solver: None) -> None:
    """Issue 33: a solver error was reported as infeasible (exit 3)."""
    code, out, err = cli(args[0], str(rfq), *args[1:])
    assert code == 1, out + err
    assert "solver error" in err and "highs returned kUnknown" in err, err
    assert "Traceback" not in err and "No plan meets this RFQ" not in out + err


def test_a_solver_error_in_a_quote_is_no_quote(rfq: Path, tmp_path: Path, cli: Any,
                                               failing_solver: None) -> None:
    code, out, err = cli("quote", str(rfq), "-o", str(tmp_path / "q.html"))
    assert code == 1, out + err
    assert "solver error" in err
    assert not (tmp_path / "q.html").exists()


# --- architectures and overrides that would be guessed ------------------------------------


CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4000,
          "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 4,
          "intermediate_size": 8000, "vocab_size": 32000, "max_position_embeddings": 4096}


def test_hidden_size_not_divisible_by_heads_is_refused_unless_head_dim_is_stated(
        catalog: Any, rfq_data: dict) -> None:
    """Issue 33: hidden_size not divisible by the heads was planned with a silently
    truncated head_dim (4000 / 32 = 125 -> 125, 4000 / 48 -> 83)."""
    from solver.catalog.hf_config import parse_hf_config

    bad = {**CONFIG, "num_attention_heads": 48, "num_key_value_heads": 8}
    with pytest.raises(InputError, match="hidden_size"):
        parse_hf_config(bad, "config.json")
    stated = parse_hf_config({**bad, "head_dim": 128}, "config.json")
    assert stated.head_dim == 128
    assert parse_hf_config(CONFIG, "config.json").head_dim == 125  # divisible: derived
    work = rfq_data["workloads"][0]
    work.update(model="odd", architecture=bad)
    work.pop("precision", None)
    with pytest.raises(InputError, match="hidden_size"):
        validate_rfq(rfq_data, catalog, "r.yaml")
    gpt2 = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 770,
            "n_head": 12, "n_layer": 2, "vocab_size": 50257, "n_positions": 1024}
    with pytest.raises(InputError, match="n_embd"):
        parse_hf_config(gpt2, "config.json")


def test_overrides_file_setting_one_value_twice_is_refused(tmp_path: Path, rfq: Path,
                                                           cli: Any) -> None:
    """Issue 33: an overrides file that set one value by a dotted and a nested key took one
    silently."""
    path = tmp_path / "o.yaml"
    path.write_text("gpu.l4.price_usd: 1000\ngpu:\n  l4:\n    price_usd: 2000\n")
    err = refused(cli("solve", str(rfq), "--overrides", str(path)), "gpu.l4.price_usd")
    assert "set twice" in err and "1000" in err and "2000" in err
    path.write_text("gpu.l4.price_usd: 1000\ngpu:\n  l4:\n    tdp_w: 80\n")
    code, out, err = cli("solve", str(rfq), "--overrides", str(path), "--json")
    assert code == 0, err
