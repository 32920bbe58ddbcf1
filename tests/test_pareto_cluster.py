"""Issue 31: ``procure pareto --scheduler`` — the frontier's independent levels on a Dask
cluster (here an in-process one: a scheduler and one single-threaded worker in this
process) give the same frontier as the local run; a missing dask, a malformed or an
unreachable address are input errors (exit 2, no traceback).

The real cluster (a ``dask scheduler`` and two ``dask worker`` processes) is in
tests/test_cluster.py (slow).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import solver.analysis.cluster as cluster
from solver.analysis.budget import budget_curve
from solver.analysis.pareto import frontier, frontier_json, sequential_walk
from solver.analysis.whatif import sweep
from solver.common.errors import InputError
from solver.rfq.schema import validate_rfq

# concurrency 48: a frontier of at least two points under the serving fit of 2026-12-07
# (at 64 the cheapest plan was the only point)
SMALL = {"id": "pareto-cluster", "constraints": {"gpus": ["l40s"], "max_nodes": 2},
         "workloads": [{"name": "chat", "kind": "inference", "model": "llama-3.1-8b",
                        "concurrency": 48, "input_tokens": 1000, "output_tokens": 200,
                        "tpot_ms": 20}]}


def _rfq(catalog: Any) -> Any:
    return validate_rfq(SMALL, catalog)


def _same(value: Any) -> Any:
    """``value`` without its timings (``seconds``, ``solve_seconds``)."""
    if isinstance(value, dict):
        return {k: _same(v) for k, v in value.items() if k not in ("seconds", "solve_seconds")}
    if isinstance(value, list):
        return [_same(v) for v in value]
    return value


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    """An in-process cluster: one worker thread (HiGHS is not run in two threads at once;
    docs/batch.md asks for --nthreads 1 on real workers too)."""
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as local:
        yield local.scheduler_address


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many items each call of map_on_cluster sent to the cluster."""
    counts: list[int] = []
    real = cluster.map_on_cluster

    def counting(client: Any, task: Any, items: Any, progress: Any = None) -> Any:
        counts.append(len(items))
        return real(client, task, items, progress)

    monkeypatch.setattr(cluster, "map_on_cluster", counting)
    return counts


@pytest.mark.parametrize("metric", ["headroom", "failure_domains"])
def test_sampled_frontier_on_the_cluster_equals_local(catalog: Any, scheduler: str,
                                                      sent: list[int], metric: str) -> None:
    rfq = _rfq(catalog)
    local = frontier_json(frontier(catalog, rfq, metric=metric, points=4))
    remote = frontier_json(frontier(catalog, rfq, metric=metric, points=4,
                                    scheduler=scheduler))
    assert _same(remote) == _same(local)  # the same points, in the same order, same costs
    assert len(local["points"]) >= 2
    assert sent == [3]  # targets 2..4 went to the cluster; the first is solved here


def test_a_walk_is_sequential_and_solved_here(catalog: Any, scheduler: str,
                                              sent: list[int]) -> None:
    rfq = _rfq(catalog)
    assert "sequential" in (sequential_walk(rfq) or "")
    assert sequential_walk(rfq, "headroom") is None
    local = frontier_json(frontier(catalog, rfq, points=3))
    remote = frontier_json(frontier(catalog, rfq, points=3, scheduler=scheduler))
    assert _same(remote) == _same(local)
    assert sent == []


def test_budget_curve_and_sweep_on_the_cluster_equal_local(catalog: Any, scheduler: str,
                                                           sent: list[int]) -> None:
    rfq = _rfq(catalog)
    local = budget_curve(catalog, rfq, points=3)
    assert _same(budget_curve(catalog, rfq, points=3, scheduler=scheduler)) == _same(local)
    swept = sweep(catalog, rfq, "rental-price", [0.5, 2.0])
    assert _same(sweep(catalog, rfq, "rental-price", [0.5, 2.0],
                       scheduler=scheduler)) == _same(swept)
    assert sent == [len(local["points"]), 2]


def _cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
         *args: str) -> tuple[int, str, str]:
    from solver.cli import main as cli

    monkeypatch.setattr(sys, "argv", ["procure", "pareto", *args])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    captured = capsys.readouterr()
    return int(exit_info.value.code or 0), captured.out, captured.err


@pytest.fixture(scope="module")
def rfq_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("rfq") / "small.json"
    path.write_text(json.dumps(SMALL))
    return str(path)


def test_the_cli_on_the_cluster_prints_the_local_json(
        rfq_file: str, scheduler: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for metric in ("failure_domains", "tpot_ms"):
        code, out, err = _cli(monkeypatch, capsys, rfq_file, "--metric", metric, "--json")
        local = json.loads(out)
        code, out, err = _cli(monkeypatch, capsys, rfq_file, "--metric", metric, "--json",
                              "--scheduler", scheduler)
        assert code == 0 and _same(json.loads(out)) == _same(local) and local["points"]
        # the walk's note is on stderr, never in the JSON
        assert ("sequential" in err) == (metric == "tpot_ms")


@pytest.mark.parametrize("case", ["malformed", "no-dask", "unreachable"])
def test_scheduler_errors_exit_2_without_a_traceback(
        case: str, rfq_file: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    address = "localhost:8786" if case == "malformed" else "tcp://127.0.0.1:9"
    if case == "no-dask":
        monkeypatch.setitem(sys.modules, "dask.distributed", None)
    if case == "unreachable":
        pytest.importorskip("dask.distributed")
        monkeypatch.setattr(cluster, "CONNECT_TIMEOUT", "0.2s")
    for extra in (["--metric", "headroom"], [], ["--over", "budget"],
                  ["--sweep", "rental-price=1"]):
        code, out, err = _cli(monkeypatch, capsys, rfq_file, *extra, "--scheduler", address)
        assert code == 2 and "--scheduler" in err and "Traceback" not in err, (extra, err)
        assert out == ""
        if case == "no-dask":
            assert "pip install 'procure[cluster]'" in err
        if case == "malformed":
            assert "tcp://HOST:PORT" in err


def test_frontier_without_dask_is_an_input_error(catalog: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    with pytest.raises(InputError, match=r"procure\[cluster\]"):
        frontier(catalog, _rfq(catalog), metric="headroom", scheduler="tcp://127.0.0.1:9")
