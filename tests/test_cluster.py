"""Issue 31: batch, sensitivity and pareto on a real Dask cluster — a ``dask scheduler`` and two
``dask worker`` processes started here — give the same answers as in one machine.

Slow (the cluster takes seconds to start): run with ``-m slow``; part of ``.ci/run``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from solver.analysis.cluster import check_scheduler
from solver.common.errors import InputError

pytestmark = pytest.mark.slow
SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def _dask() -> str:
    pytest.importorskip("dask.distributed")
    found = shutil.which("dask", path=str(Path(sys.executable).parent)) or shutil.which("dask")
    if found is None:
        pytest.skip("the dask command is not installed")
    return found


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory) -> Iterator[str]:
    """The address of a scheduler with two single-threaded workers (processes)."""
    dask = _dask()
    folder = tmp_path_factory.mktemp("dask")
    file = folder / "scheduler.json"
    env = {**os.environ, "PROCURE_CANDIDATE_CACHE": "off"}
    started = [subprocess.Popen([dask, "scheduler", "--scheduler-file", str(file), "--port", "0",
                                 "--no-dashboard"], cwd=folder, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        for _ in range(600):
            if file.exists() and file.stat().st_size:
                break
            time.sleep(0.1)
        address = json.loads(file.read_text())["address"]
        started += [subprocess.Popen([dask, "worker", address, "--nthreads", "1",
                                      "--no-dashboard", "--name", f"w{i}"], cwd=folder, env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    for i in range(2)]
        from dask.distributed import Client

        with Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=120)
        yield address
    finally:
        for process in reversed(started):
            process.send_signal(signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


def _procure(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "solver.cli", *args], capture_output=True,
                          text=True, check=False)


def test_sensitivity_on_the_cluster_equals_local(scheduler):
    rfq = str(SCENARIOS / "chat-70b-one-node.yaml")
    local = _procure("sensitivity", rfq, "--json", "--workers", "1")
    remote = _procure("sensitivity", rfq, "--json", "--scheduler", scheduler)
    assert local.returncode == remote.returncode == 0, remote.stderr
    one, two = json.loads(local.stdout), json.loads(remote.stdout)
    for report in (one, two):
        report.pop("seconds")
    assert one == two  # every row, flip and the solve count
    assert len(one["parameters"]) >= 3


def _untimed(value):
    """A JSON document without its timings (``seconds``, each plan's ``solve_seconds``)."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in ("seconds", "solve_seconds")}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


@pytest.mark.parametrize("args", [["--metric", "headroom"], ["--metric", "failure_domains"],
                                  ["--over", "budget", "--points", "4"]])
def test_pareto_on_the_cluster_equals_local(scheduler, args):
    rfq = str(SCENARIOS / "chat-70b-one-node.yaml")
    local = _procure("pareto", rfq, "--json", *args)
    remote = _procure("pareto", rfq, "--json", *args, "--scheduler", scheduler)
    assert local.returncode == remote.returncode == 0, remote.stderr
    one, two = json.loads(local.stdout), json.loads(remote.stdout)
    assert _untimed(one) == _untimed(two)  # the same points, in the same order, same costs
    assert len(one["points"]) >= 3


def test_batch_on_the_cluster_equals_local(scheduler, tmp_path):
    folder = tmp_path / "rfqs"
    folder.mkdir()
    for name in ("chat-70b-one-node.yaml", "portfolio-lab.yaml", "infeasible-budget.yaml",
                 "small-models-lab.json"):
        shutil.copy(SCENARIOS / name, folder / name)
    results = {}
    for mode, extra in (("local", ["--workers", "1"]),
                        ("dask", ["--executor", "dask", "--scheduler", scheduler])):
        store = tmp_path / f"{mode}.db"
        done = _procure("batch", str(folder), "--db", str(store), *extra)
        assert done.returncode in (0, 3), done.stderr
        with sqlite3.connect(store) as db:
            results[mode] = db.execute(
                "SELECT rfq, status, tco_usd, capex_usd, total_nodes, total_gpus, gpu, fabric "
                "FROM results ORDER BY rfq").fetchall()
    assert results["local"] == results["dask"]
    assert len(results["local"]) == 4


def test_a_bad_or_unreachable_scheduler_is_an_input_error():
    with pytest.raises(InputError):
        check_scheduler("localhost:8786")
    result = _procure("sensitivity", str(SCENARIOS / "chat-70b-one-node.yaml"), "--scheduler",
                      "tcp://127.0.0.1:9")
    assert result.returncode == 2
    assert "--scheduler" in result.stderr and "Traceback" not in result.stderr
