"""No orphaned workers (issue 33): the processes `procure solve` forks for a large RFQ's
first candidate build, `procure sensitivity --workers N` forks for its sweeps and
`procure batch` runs its RFQs in die with their parent, whatever ends it.

Fast tests read each kind of worker's parent-death signal (Linux ``prctl``); the slow ones
kill real runs with SIGTERM and SIGKILL while their workers run and find no survivor. Every
slow test waits (bounded) for the workers to exist before it kills, and kills whatever is
left when it ends.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from plans import cost, tiny_plan

from solver.common.childproc import parent_death_signal
from solver.optimize.plan_model import Plan

ROOT = Path(__file__).resolve().parent.parent
KILL_WAIT_S = 5.0
"""How long killed workers may take to go: the parent-death signal takes milliseconds; an
orphan still has tens of seconds of work left (the runs below are sized for that)."""
LINUX = sys.platform.startswith("linux")
needs_linux = pytest.mark.skipif(not LINUX, reason="parent-death signals are Linux's")


def _death_signal(_: int) -> tuple[int, bool]:
    """In a worker: its parent-death signal, and whether its parent is still there."""
    return parent_death_signal(), os.getppid() != 1


@needs_linux
def test_forked_candidate_builders_die_with_their_parent() -> None:
    from solver.optimize.candidate_workers import PARALLEL_MIN_WORKLOADS, map_workloads

    count = PARALLEL_MIN_WORKLOADS
    found = map_workloads(_death_signal, list(range(count)), workers=2)
    assert found is not None, "not run in forked processes"
    assert found == [(signal.SIGKILL, True)] * count


@needs_linux
def test_sensitivity_sweep_processes_die_with_their_parent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from solver.analysis import sensitivity

    class Counting:
        solves = 0

    def sweep(ev: Any, param: Any, samples: int) -> dict[str, Any]:
        death, parent_alive = _death_signal(0)
        return {"param": param, "death": death, "parent": parent_alive, "pid": os.getpid()}

    monkeypatch.setattr(sensitivity, "sweep", sweep)
    rows = sensitivity.sweeps(Counting(), ["a", "b", "c", "d"], samples=3, workers=2)
    assert [row["param"] for row in rows] == ["a", "b", "c", "d"]
    assert {row["death"] for row in rows} == {signal.SIGKILL}
    assert len({row["pid"] for row in rows}) == 2 and os.getpid() not in {
        row["pid"] for row in rows}


def _death_plan(rfq: Any, catalog: Any, **_: Any) -> Plan:
    death, _alive = _death_signal(0)
    return tiny_plan(rfq=rfq.id, cost=cost(float(death)))


@needs_linux
def test_batch_pool_workers_die_with_their_parent(tmp_path: Path) -> None:
    import sqlite3

    from solver.batch.runner import run_batch

    folder = tmp_path / "in"
    folder.mkdir()
    for n in range(4):
        (folder / f"r{n}.yaml").write_text(
            f"id: r{n}\nworkloads:\n  - {{name: c, kind: inference, model: llama-3.1-8b, "
            "concurrency: 4, input_tokens: 500, output_tokens: 100}\n")
    run_batch([folder], tmp_path / "r.sqlite", workers=2, solve_fn=_death_plan)
    with sqlite3.connect(tmp_path / "r.sqlite") as con:
        signals = {int(v) for (v,) in con.execute("SELECT tco_usd FROM results")}
    assert signals == {signal.SIGKILL}


def test_sigterm_handler_is_restored_after_the_block() -> None:
    from solver.common.childproc import kill_children_on_sigterm

    before = signal.getsignal(signal.SIGTERM)
    with kill_children_on_sigterm(list):
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before


# --- real runs, killed (slow) ---------------------------------------------------------------


def _children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _big_rfq(path: Path, workloads: int = 60) -> Path:
    """Enough distinct workload groups that the first build runs in forked processes for
    seconds."""
    models = ["llama-3.1-8b", "qwen2.5-7b", "mistral-7b", "qwen2.5-14b", "llama-3.1-70b",
              "qwen2.5-32b"]
    work = []
    for i in range(workloads):
        model = models[i % len(models)]
        if i % 2:
            work.append({"name": f"w{i}", "kind": "inference", "model": model,
                         "concurrency": 8 + i, "input_tokens": 1000, "output_tokens": 200})
        else:
            work.append({"name": f"w{i}", "kind": "lora", "model": model,
                         "dataset_tokens": 10**8, "deadline_hours": 72})
    path.write_text(yaml.safe_dump({"id": path.stem, "workloads": work}))
    return path


def _start(*args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PROCURE_DEBUG", None)
    return subprocess.Popen([sys.executable, "-c", "from solver.cli.main import main; main()",
                             *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def _wait_for_children(proc: subprocess.Popen[bytes], count: int,
                       seconds: float = 240) -> list[int]:
    """The child pids of ``proc`` once there are ``count`` of them (bounded wait)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        children = _children(proc.pid)
        if len(children) >= count:
            time.sleep(0.5)  # let them start working
            return _children(proc.pid)
        time.sleep(0.05)
    return []


@pytest.fixture
def run_and_kill() -> Iterator[Any]:
    """Start a procure command, wait for its workers, kill it with a signal; returns the
    workers that outlived it. Everything left is killed at the end."""
    started: list[subprocess.Popen[bytes]] = []
    seen: list[int] = []

    def run(args: list[str], sig: int, workers: int = 2) -> list[int]:
        proc = _start(*args)
        started.append(proc)
        children = _wait_for_children(proc, workers)
        if not children:
            pytest.fail(f"{args[0]} finished or never started its {workers} workers")
        seen.extend(children)
        proc.send_signal(sig)
        proc.wait(timeout=30)
        deadline = time.monotonic() + KILL_WAIT_S
        while time.monotonic() < deadline and any(_alive(pid) for pid in children):
            time.sleep(0.1)
        return [pid for pid in children if _alive(pid)]

    yield run
    for pid in seen:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def _two_cores() -> None:
    from solver.common.limits import usable_cores

    if usable_cores() < 2:
        pytest.skip("one core: procure solve builds the candidates in this process")


@pytest.mark.slow
@needs_linux
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_killed_solve_leaves_no_candidate_builder(sig: int, tmp_path: Path,
                                                  run_and_kill: Any) -> None:
    """Issue 33: SIGTERM or SIGKILL to `procure solve` while candidates built in forked
    processes left 2 workers running."""
    _two_cores()
    survivors = run_and_kill(["solve", str(_big_rfq(tmp_path / "big.yaml"))], sig)
    assert survivors == [], "candidate builders survived procure solve"


@pytest.mark.slow
@needs_linux
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_killed_sensitivity_leaves_no_sweep_process(sig: int, tmp_path: Path,
                                                    run_and_kill: Any) -> None:
    """Issue 33: the same for `procure sensitivity --workers 2` (100 % CPU for minutes). The
    RFQ's sweeps take each process about half a minute, so an orphan outlives the wait."""
    rfq = _big_rfq(tmp_path / "twelve.yaml", workloads=12)
    survivors = run_and_kill(["sensitivity", str(rfq), "--workers", "2"], sig)
    assert survivors == [], "sweep processes survived procure sensitivity"


@pytest.mark.slow
@needs_linux
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_killed_batch_leaves_no_pool_worker(sig: int, tmp_path: Path,
                                            run_and_kill: Any) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for n in range(6):
        _big_rfq(folder / f"r{n}.yaml", workloads=12)
    survivors = run_and_kill(["batch", str(folder), "--db", str(tmp_path / "r.sqlite"),
                              "--workers", "2"], sig)
    assert survivors == [], "pool workers survived procure batch"
