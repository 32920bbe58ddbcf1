"""The command line as a user meets it: exit codes, readable errors, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from in_process import procure

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"


def process(*args: str) -> subprocess.CompletedProcess:
    """A real ``python -m solver.cli`` process: for what only one shows (the entry point,
    C libraries writing to the file descriptors). The other tests run the same command line
    in this process (:func:`in_process.procure`)."""
    return subprocess.run([sys.executable, "-m", "solver.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)


def test_version_and_help():
    assert process("--version").stdout.startswith("procure ")
    result = process("--help")
    assert result.returncode == 0
    for command in ("solve", "explain", "fit", "estimate", "validate", "catalog"):
        assert command in result.stdout
    for command in ("solve", "explain", "validate", "fit", "estimate"):
        assert procure(command, "--help").returncode == 0


def test_solve_json_matches_contract_shape():
    result = procure("solve", str(SCENARIOS / "chat-70b-one-node.yaml"), "--json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert set(plan) >= {"rfq", "status", "solver", "gap", "solve_seconds", "cluster",
                         "workloads", "cost", "decision_path", "warnings", "infeasibility"}
    assert set(plan["cluster"]) >= {"nodes", "total_nodes", "total_gpus", "fabric", "coupled",
                                    "power_kw", "rack_units"}
    workload = plan["workloads"][0]
    assert set(workload) >= {"name", "kind", "model", "precision", "gpu", "tp", "pp", "dp",
                             "gpus", "nodes_spanned", "memory", "predicted"}
    assert set(workload["memory"]) >= {"weights_gb", "kv_cache_gb", "activations_gb",
                                       "optimizer_gb", "total_gb", "capacity_gb",
                                       "weights_fraction", "utilization"}
    assert set(workload["predicted"]) >= {"ttft_ms", "tpot_ms", "qps_capacity", "tokens_per_s",
                                          "hours_to_complete", "scaling_efficiency"}
    assert set(plan["cost"]) == {"gpus_usd", "servers_usd", "network_usd", "storage_usd",
                                 "capex_usd", "power_usd", "operations_usd",
                                 "multinode_overhead_usd", "rental_usd", "tco_usd"}
    cost = plan["cost"]
    assert cost["capex_usd"] == pytest.approx(cost["gpus_usd"] + cost["servers_usd"]
                                              + cost["network_usd"] + cost["storage_usd"])
    assert cost["tco_usd"] == pytest.approx(cost["capex_usd"] + cost["power_usd"]
                                            + cost["operations_usd"]
                                            + cost["multinode_overhead_usd"]
                                            + cost["rental_usd"])
    assert plan["decision_path"][0]["step"] == 1


def test_readable_summary_without_json():
    result = procure("solve", str(SCENARIOS / "chat-70b-one-node.yaml"))
    assert result.returncode == 0
    assert "optimal" in result.stdout and "tco" in result.stdout


def test_infeasible_exits_3_with_to_fix():
    result = procure("solve", str(SCENARIOS / "infeasible-budget.yaml"))
    assert result.returncode == 3
    assert "raise the budget to $" in result.stdout and "that buys" in result.stdout
    plan = json.loads(procure("solve", str(SCENARIOS / "infeasible-budget.yaml"),
                              "--json").stdout)
    assert plan["status"] == "infeasible" and plan["infeasibility"]["closest"]


@pytest.mark.parametrize("content, fragment", [
    ("id: x\nworkloads:\n  - name: a\n    kind: inference\n    model: llama-3.1-7b\n"
     "    concurrency: 4\n    input_tokens: 10\n    output_tokens: 10\n",
     "workloads[0].model"),
    ("id: x\nworkloads: [\n", "line"),
    ("id: x\nbudget_usd: .nan\nworkloads: []\n", "budget_usd"),
])
def test_invalid_rfq_exits_2_without_traceback(tmp_path, content, fragment):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    for command in ("solve", "validate", "explain"):
        result = procure(command, str(path))
        assert result.returncode == 2, (command, result.stderr)
        assert fragment in result.stderr
        assert str(path) in result.stderr
        assert "Traceback" not in result.stderr + result.stdout


def test_usage_errors_exit_2():
    assert procure("solve").returncode == 2
    assert procure("solve", str(SCENARIOS / "chat-70b-one-node.yaml"), "--solver",
                   "gurobi").returncode == 2
    result = procure("catalog", "show", "rtx-pro-600")
    assert result.returncode == 2 and "rtx-pro-6000" in result.stderr


def test_catalog_commands(tmp_path):
    assert "rtx-pro-6000" in procure("catalog", "list").stdout
    shown = procure("catalog", "show", "llama-3.3-70b")
    assert shown.returncode == 0 and "llama-3.1-70b" in shown.stdout and "source" in shown.stdout
    assert procure("catalog", "validate").returncode == 0
    (tmp_path / "prices.csv").write_text("id,price_usd\nrtx-pro-6000,abc\n")
    bad = procure("catalog", "validate", "--catalog", str(tmp_path))
    assert bad.returncode == 2 and "prices.csv" in bad.stderr


def test_price_overlay_changes_the_bill(tmp_path):
    base = json.loads(procure("solve", str(SCENARIOS / "one-box-not-two.yaml"), "--json").stdout)
    (tmp_path / "prices.csv").write_text("id,price_usd,as_of,source\n"
                                         "rtx-pro-6000,10565,2026-12,quote\n")
    dearer = json.loads(procure("solve", str(SCENARIOS / "one-box-not-two.yaml"), "--json",
                                "--catalog", str(tmp_path)).stdout)
    gpus = base["cluster"]["total_gpus"]
    assert dearer["cost"]["gpus_usd"] - base["cost"]["gpus_usd"] == pytest.approx(2000 * gpus)


def test_validate_many(tmp_path):
    result = procure("validate", *[str(p) for p in sorted(SCENARIOS.iterdir()) if p.is_file()])
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("ok") >= 12


@pytest.mark.parametrize("backend", ["highs", "cpsat"])
def test_json_stays_clean_with_every_backend(backend):
    """Regression: HiGHS printed its banner on stdout and broke --json."""
    result = process("solve", str(SCENARIOS / "chat-70b-one-node.yaml"), "--json", "--solver",
                     backend)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["solver"] == backend


@pytest.mark.parametrize(("args", "code", "stream", "text"), [
    (["--version"], 0, "stdout", "procure "),
    (["solve", "no-such-rfq.yaml"], 2, "stderr", "file not found")])
def test_the_console_script_runs_exit_handlers_and_keeps_its_exit_code(args, code, stream,
                                                                       text):
    """``entry`` (the ``procure`` script) ends the process without the interpreter's
    teardown: the exit handlers still run, the output is all there, the code is main's."""
    script = ("import atexit, sys\n"
              "atexit.register(lambda: print('handler ran', file=sys.stderr))\n"
              "from solver.cli.main import entry\n"
              f"sys.argv = ['procure', *{args!r}]\n"
              "entry()\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == code
    assert text in getattr(done, stream)
    assert done.stderr.rstrip().endswith("handler ran")


@pytest.mark.parametrize(("scenario", "code"), [("chat-70b-one-node.yaml", 0),
                                                ("infeasible-budget.yaml", 3)])
def test_a_closed_stdout_keeps_the_exit_code(scenario, code):
    """``procure solve x.yaml >&-`` (file descriptor 1 closed: Python has no sys.stdout at
    all) answered with an internal error, exit 1: HiGHS's stdout guard and the final flush
    called None.flush(). The answer goes nowhere; the exit code is the plan's."""
    script = ("import sys\n"
              "from solver.cli.main import entry\n"
              f"sys.argv = ['procure', 'solve', {str(ROOT / 'scenarios' / scenario)!r}]\n"
              "entry()\n")
    done = subprocess.run([sys.executable, "-c", script], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=300,
                          pass_fds=(), close_fds=True,
                          preexec_fn=lambda: __import__("os").close(1))
    assert done.returncode == code, done.stderr
    assert "internal error" not in done.stderr
