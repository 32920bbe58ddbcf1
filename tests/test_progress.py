"""Issue 31: long work says what it is doing, on stderr (never stdout) and to the dashboard."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from solver.cli.progress import progress_mode, stderr_progress
from solver.common.progress import report, reporting
from solver.optimize.candidates import build_candidates
from solver.rfq.schema import load_rfq

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def _procure(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "solver.cli", *args], capture_output=True,
                          text=True, check=False, env={**os.environ, **env})


def test_reports_reach_the_receiver_of_this_process_only():
    seen: list[tuple[str, int | None, int | None]] = []
    report("nobody listens")  # no receiver: nothing happens
    with reporting(lambda *call: seen.append(call)):
        report("a", 1, 3)
        with reporting(None):
            report("silenced")
        report("b")
    report("after")
    assert seen == [("a", 1, 3), ("b", None, None)]


def test_a_forked_child_does_not_draw_over_the_parents_bar():
    seen: list[str] = []
    with reporting(lambda what, *_: seen.append(what)):
        pid = os.fork()
        if pid == 0:  # the child reports, into its inherited receiver
            report("from the child")
            os._exit(0 if not seen else 1)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert seen == []


def test_the_candidate_build_reports_each_workload(catalog):
    rfq = load_rfq(SCENARIOS / "portfolio-lab.yaml", catalog)
    seen: list[tuple[str, int | None, int | None]] = []
    with reporting(lambda *call: seen.append(call)):
        build_candidates(catalog, rfq)
    names = [spec.name for spec in rfq.workloads]
    assert seen[1:] == [(f"candidate layouts: {name}", index, len(names))
                        for index, name in enumerate(names)]


def test_json_output_stays_clean_while_progress_goes_to_stderr():
    """Issue 31: ``--json`` keeps stdout one JSON document; the steps are on stderr."""
    result = _procure("solve", str(SCENARIOS / "portfolio-lab.yaml"), "--json",
                      PROCURE_PROGRESS="plain")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "optimal"
    lines = result.stderr.splitlines()
    assert any("candidate layouts: chat" in line for line in lines)
    assert any("choosing what to buy (highs" in line for line in lines)
    quiet = _procure("solve", str(SCENARIOS / "portfolio-lab.yaml"), "--json",
                     PROCURE_PROGRESS="off")
    assert quiet.stderr == ""
    plans = [json.loads(run.stdout) for run in (quiet, result)]
    for plan in plans:
        plan.pop("solve_seconds")
    assert plans[0] == plans[1]


def test_pareto_and_sensitivity_report_their_steps():
    pareto = _procure("pareto", str(SCENARIOS / "chat-70b-one-node.yaml"), "--json",
                      PROCURE_PROGRESS="plain")
    assert pareto.returncode == 0, pareto.stderr
    json.loads(pareto.stdout)
    assert "Pareto: candidate layouts" in pareto.stderr
    sens = _procure("sensitivity", str(SCENARIOS / "chat-70b-one-node.yaml"), "--json",
                    "--param", "demand", "--workers", "1", PROCURE_PROGRESS="plain")
    assert sens.returncode == 0, sens.stderr
    json.loads(sens.stdout)
    assert "sensitivity: demand" in sens.stderr


def test_a_terminal_gets_a_rich_bar_that_goes_away(monkeypatch):
    monkeypatch.delenv("PROCURE_PROGRESS", raising=False)
    buffer = io.StringIO()
    terminal = Console(file=buffer, force_terminal=True, width=80)
    assert progress_mode(terminal) == "rich"
    assert progress_mode(Console(file=io.StringIO())) == "off"  # a pipe, a log file
    with stderr_progress(terminal):
        report("candidate layouts: chat", 0, 2)
    assert "candidate layouts: chat" in buffer.getvalue()
