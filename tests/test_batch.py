"""`procure batch` (issue 6): resumable store, corrupt inputs, CSV batches, duplicates,
re-runs, catalog changes, exports, Dask.

Store/skip/export logic runs against an injected fake solver (fast, deterministic); the
kill -9 resume, corrupt-file, catalog-change and Dask checks also run the real solver on
small RFQs (llama-3.1-8b inference on one or two GPUs, a few hundredths of a second each).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from plans import cost, serving_entry, tiny_plan

from solver.batch.export import EXPORT_COLUMNS, export
from solver.batch.runner import find_sources, run_batch
from solver.batch.store import ResultStore
from solver.common.errors import InputError
from solver.optimize.plan_model import Plan

REPO = Path(__file__).resolve().parent.parent
CONTRACT_COLUMNS = ["rfq", "status", "tco_usd", "capex_usd", "total_nodes", "total_gpus", "gpu",
                    "fabric", "coupled", "error"]


def small_rfq(rfq_id: str, concurrency: int = 4, gpus: tuple[str, ...] = ("l40s",),
              output_tokens: int = 200) -> dict[str, Any]:
    """A fast single-workload RFQ: llama-3.1-8b inference on a short GPU list."""
    return {"id": rfq_id, "constraints": {"gpus": list(gpus)},
            "workloads": [{"name": "chat", "kind": "inference", "model": "llama-3.1-8b",
                           "concurrency": concurrency, "input_tokens": 1000,
                           "output_tokens": output_tokens}]}


def write_rfqs(folder: Path, count: int, **kwargs: Any) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for index in range(count):
        path = folder / f"rfq-{index:03d}.yaml"
        path.write_text(yaml.safe_dump(small_rfq(f"rfq-{index:03d}", concurrency=1 + index % 16,
                                                 **kwargs)))
        paths.append(path)
    return paths


def fake_solve(rfq: Any, catalog: Any, *, solver: str = "cbc",
               time_limit: float | None = None) -> Plan:
    """A deterministic stand-in for the solver: TCO from the catalog's L40S price."""
    workload = rfq.workloads[0]
    gpus = getattr(workload, "concurrency", None) or 1
    if gpus == 13:
        raise RuntimeError("solver blew up")
    price = catalog.gpus["l40s"].price_usd
    return tiny_plan("l40s", "pcie-8gpu", gpus, rfq=rfq.id, solver=solver,
                     workloads=[serving_entry(workload.name, workload.model, "l40s", gpus)],
                     cost=cost(price * gpus, 5000.0, 100.0, 100.0))


def rows(db: Path) -> dict[tuple[str, str], dict[str, Any]]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        return {(r["rfq"], r["source"]): dict(r) for r in conn.execute("SELECT * FROM results")}


def comparable(plan_json: str | None) -> Any:
    """A plan without its timings, for comparing two runs."""
    if plan_json is None:
        return None
    plan = json.loads(plan_json)
    plan.pop("solve_seconds", None)
    return plan


def cli(*args: str, **kwargs: Any) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "solver.cli", "batch", *args], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, **kwargs)


def children(pid: int) -> list[str]:
    """Child process ids (Linux /proc; empty elsewhere)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError):
            if stat.read_text().rsplit(")", 1)[1].split()[1] == str(pid):
                found.append(stat.parent.name)
    return found


# --- the real solver ----------------------------------------------------------------------

TOTAL = 100


@pytest.mark.slow  # kills a batch of 100 RFQs mid-run and resumes it (CI runs the slow marker)
def test_kill9_mid_run_then_resume_equals_uninterrupted_run(tmp_path: Path) -> None:
    inputs = tmp_path / "rfqs"
    write_rfqs(inputs, TOTAL - 1, gpus=("l40s", "rtx-pro-6000"))
    (inputs / "rfq-050b.yaml").write_text("id: rfq-050b\nworkloads: {{{\n")  # corrupt
    whole, resumed = tmp_path / "whole.db", tmp_path / "resumed.db"

    first = cli(str(inputs), "--db", str(whole), "--workers", "2")
    _, stderr = first.communicate(timeout=120)
    assert first.returncode == 0, stderr
    assert f"[{TOTAL}/{TOTAL}" in stderr  # plain log lines when not a terminal

    killed = cli(str(inputs), "--db", str(resumed), "--workers", "2")
    deadline = time.monotonic() + 60
    committed = 0
    while time.monotonic() < deadline and killed.poll() is None:
        if resumed.exists():
            try:
                with sqlite3.connect(f"file:{resumed}?mode=ro", uri=True) as conn:
                    committed = conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
            except sqlite3.OperationalError:
                committed = 0
            if committed >= 5:
                break
        time.sleep(0.01)
    workers = children(killed.pid)
    assert workers or not Path("/proc").is_dir(), "the pool should be running"
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    assert killed.returncode == -signal.SIGKILL
    try:
        before = rows(resumed)
        assert 5 <= len(before) < TOTAL, "the run should be killed part-way"
        deadline = time.monotonic() + 10  # orphaned pool workers notice and exit
        while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in workers):
            time.sleep(0.1)
        assert not [p for p in workers if Path(f"/proc/{p}").exists()], "orphaned workers"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(killed.pid, signal.SIGKILL)

    rerun = cli(str(inputs), "--db", str(resumed), "--workers", "2", "--export",
                str(tmp_path / "out.csv"))
    stdout, stderr = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, stderr  # 0 although one RFQ is invalid
    assert len((tmp_path / "out.csv").read_text().splitlines()) == TOTAL + 1
    assert f"{TOTAL - len(before)} evaluated, {len(before)} unchanged and skipped" in stdout

    after, expected = rows(resumed), rows(whole)
    assert len(after) == TOTAL and set(after) == set(expected)
    for key, row in after.items():
        assert row["status"] == expected[key]["status"]
        assert row["status"] == ("invalid" if key[0] == "rfq-050b" else "optimal")
        assert row["error"] == expected[key]["error"]
        assert row["input_hash"] == expected[key]["input_hash"]
        assert comparable(row["plan_json"]) == comparable(expected[key]["plan_json"])
        assert row["tco_usd"] == expected[key]["tco_usd"]
    for key, row in before.items():  # committed before the kill: kept, not recomputed
        assert after[key]["created_at"] == row["created_at"]


def test_corrupt_file_in_the_middle_is_invalid_and_the_rest_solve(tmp_path: Path) -> None:
    paths = write_rfqs(tmp_path / "rfqs", 5)
    paths[2].write_text("id: rfq-002\nworkloads: [ {name: chat, kind: inference\n")
    (tmp_path / "rfqs" / "rfq-003.yaml").write_bytes(b"\x00\xff\xfe garbage")
    summary = run_batch([tmp_path / "rfqs"], tmp_path / "b.db", workers=1)
    assert summary.by_status == {"optimal": 3, "invalid": 2}
    stored = {rfq: row for (rfq, _), row in rows(tmp_path / "b.db").items()}
    assert "YAML syntax error" in stored["rfq-002"]["error"]
    assert stored["rfq-003"]["status"] == "invalid"
    for rfq in ("rfq-000", "rfq-001", "rfq-004"):
        assert stored[rfq]["status"] == "optimal" and stored[rfq]["tco_usd"] > 0
        assert json.loads(stored[rfq]["plan_json"])["cluster"]["total_gpus"] >= 1


def test_catalog_change_recomputes_with_the_real_solver(tmp_path: Path) -> None:
    write_rfqs(tmp_path / "rfqs", 3)
    db = tmp_path / "b.db"
    base = run_batch([tmp_path / "rfqs"], db, workers=1)
    assert base.computed == 3
    overlay = tmp_path / "quotes"
    overlay.mkdir()
    (overlay / "prices.csv").write_text("id,price_usd,as_of,source\n"
                                        "l40s,99000,2026-09,test quote\n")
    again = run_batch([tmp_path / "rfqs"], db, workers=1, catalog_dir=str(overlay))
    assert again.computed == 3 and again.skipped == 0
    assert again.catalog_version != base.catalog_version
    assert again.total_tco_usd > base.total_tco_usd
    assert run_batch([tmp_path / "rfqs"], db, workers=1,
                     catalog_dir=str(overlay)).skipped == 3


def test_dask_local_cluster_gives_the_same_results_as_local(tmp_path: Path) -> None:
    pytest.importorskip("dask.distributed")
    write_rfqs(tmp_path / "rfqs", 6, gpus=("l40s", "rtx-pro-6000"))
    local = run_batch([tmp_path / "rfqs"], tmp_path / "local.db", workers=2)
    dask = run_batch([tmp_path / "rfqs"], tmp_path / "dask.db", executor="dask", workers=2,
                     dask_options={"processes": False})
    assert local.by_status == dask.by_status == {"optimal": 6}
    one, two = rows(tmp_path / "local.db"), rows(tmp_path / "dask.db")
    assert set(one) == set(two)
    for key in one:
        assert comparable(one[key]["plan_json"]) == comparable(two[key]["plan_json"])


# --- store, skip, duplicates, CSV: the fake solver -----------------------------------------


def test_rerun_skips_unchanged_and_recomputes_changed(tmp_path: Path) -> None:
    paths = write_rfqs(tmp_path / "rfqs", 6)
    db = tmp_path / "b.db"
    first = run_batch([tmp_path / "rfqs"], db, workers=2, solve_fn=fake_solve)
    assert (first.computed, first.skipped) == (6, 0)
    paths[1].write_text(yaml.safe_dump(small_rfq("rfq-001", concurrency=9)))
    # formatting-only change: same canonical RFQ, same hash, still skipped
    paths[2].write_text(json.dumps(small_rfq("rfq-002", concurrency=3)).replace(",", ", "))
    second = run_batch([tmp_path / "rfqs"], db, workers=2, solve_fn=fake_solve)
    assert (second.computed, second.skipped) == (1, 5)
    assert second.total == 6 and len(rows(db)) == 6
    third = run_batch([tmp_path / "rfqs"], db, workers=1, solve_fn=fake_solve, solver="cbc")
    assert third.computed == 6  # other solver options: recomputed


def test_bad_rfqs_and_solver_errors_never_stop_the_batch(tmp_path: Path) -> None:
    write_rfqs(tmp_path / "rfqs", 16)  # concurrency 13 makes the fake solver raise
    (tmp_path / "rfqs" / "rfq-100.yaml").write_text(
        yaml.safe_dump(small_rfq("rfq-100") | {"colour": "blue"}))
    db = tmp_path / "b.db"
    summary = run_batch([tmp_path / "rfqs"], db, workers=2, solve_fn=fake_solve)
    assert summary.by_status == {"optimal": 15, "error": 1, "invalid": 1}
    stored = {rfq: row for (rfq, _), row in rows(db).items()}
    assert "RuntimeError: solver blew up" in stored["rfq-012"]["error"]
    assert "colour" in stored["rfq-100"]["error"] and "unknown key" in stored["rfq-100"]["error"]
    rerun = run_batch([tmp_path / "rfqs"], db, workers=2, solve_fn=fake_solve)
    assert (rerun.computed, rerun.skipped) == (1, 16)  # errors are retried, invalid skipped


def test_duplicate_ids_are_recorded_naming_both_sources(tmp_path: Path) -> None:
    write_rfqs(tmp_path / "a", 2)
    (tmp_path / "b").mkdir()
    copy = tmp_path / "b" / "other.json"
    copy.write_text(json.dumps(small_rfq("rfq-001", concurrency=7)))
    db = tmp_path / "b.db"
    summary = run_batch([tmp_path / "a", tmp_path / "b"], db, workers=1, solve_fn=fake_solve)
    assert summary.by_status == {"optimal": 2, "invalid": 1}
    assert len(summary.duplicates) == 1
    stored = rows(db)
    first = stored[("rfq-001", str((tmp_path / "a" / "rfq-001.yaml").resolve()))]
    second = stored[("rfq-001", str(copy.resolve()))]
    assert first["status"] == "optimal" and first["total_gpus"] == 2
    assert second["status"] == "invalid"
    assert "duplicate id 'rfq-001'" in second["error"]
    assert "rfq-001.yaml" in second["error"] and "other.json" in second["error"]


def test_csv_batch_groups_rows_by_id_and_names_rows_in_errors(tmp_path: Path) -> None:
    header = "id,customer,constraints.gpus,name,kind,model,concurrency,input_tokens," \
             "output_tokens\n"
    body = ("two,ACME,l40s,chat,inference,llama-3.1-8b,4,1000,200\n"
            "one,Beta,l40s;rtx-pro-6000,chat,inference,llama-3.1-8b,8,1000,200\n"
            "two,ACME,l40s,bot,inference,llama-3.1-8b,2,500,100\n"
            "clash,X,l40s,chat,inference,llama-3.1-8b,4,1000,200\n"
            "clash,Y,l40s,bot,inference,llama-3.1-8b,4,1000,200\n"
            "bad,Z,l40s,chat,inference,llama-9-8b,4,1000,200\n"
            ",Z,l40s,chat,inference,llama-3.1-8b,4,1000,200\n")
    batch = tmp_path / "batch.csv"
    batch.write_text(header + body)
    db = tmp_path / "b.db"
    summary = run_batch([batch], db, workers=1, solve_fn=fake_solve)
    stored = {rfq: row for (rfq, _), row in rows(db).items()}
    assert summary.by_status == {"invalid": 3, "optimal": 2}
    assert len(json.loads(stored["two"]["input"])["workloads"]) == 2
    assert json.loads(stored["one"]["input"])["constraints"]["gpus"] == ["l40s", "rtx-pro-6000"]
    assert "row 6.customer" in stored["clash"]["error"]
    assert "differs from row 5" in stored["clash"]["error"]
    assert "row 7" in stored["bad"]["error"] and "llama-3.1-8b" in stored["bad"]["error"]
    assert stored["row-8"]["status"] == "invalid"
    assert run_batch([batch], db, workers=1, solve_fn=fake_solve).skipped == 5


def test_csv_file_level_error_is_one_invalid_row(tmp_path: Path) -> None:
    broken = tmp_path / "broken.csv"
    broken.write_text("customer,kind\nACME,inference\n")
    write_rfqs(tmp_path / "rfqs", 1)
    summary = run_batch([broken, tmp_path / "rfqs"], tmp_path / "b.db", workers=1,
                        solve_fn=fake_solve)
    assert summary.by_status == {"invalid": 1, "optimal": 1}
    stored = {rfq: row for (rfq, _), row in rows(tmp_path / "b.db").items()}
    assert "'id' column" in stored["broken"]["error"]


def test_summary_counts_tco_median_and_mix(tmp_path: Path) -> None:
    write_rfqs(tmp_path / "rfqs", 4)  # concurrency 1..4
    summary = run_batch([tmp_path / "rfqs"], tmp_path / "b.db", workers=1, solve_fn=fake_solve)
    price = 5200.0
    from solver.catalog.load import load_catalog

    gpu = load_catalog().gpus["l40s"].price_usd
    tcos = [gpu * n + price for n in (1, 2, 3, 4)]
    assert summary.total_tco_usd == pytest.approx(sum(tcos))
    assert summary.median_tco_usd == pytest.approx((tcos[1] + tcos[2]) / 2)
    assert summary.gpu_mix == {"l40s": 4} and summary.fabric_mix == {"none": 4}
    assert len(summary.slowest) == 4


# --- exports ------------------------------------------------------------------------------


def test_export_csv_parquet_and_xlsx(tmp_path: Path) -> None:
    pytest.importorskip("openpyxl")
    write_rfqs(tmp_path / "rfqs", 14)
    (tmp_path / "rfqs" / "zz.yaml").write_text("not: [valid")
    db = tmp_path / "b.db"
    summary = run_batch([tmp_path / "rfqs"], db, workers=1, solve_fn=fake_solve)
    with ResultStore(db) as store:
        for name in ("out.csv", "out.parquet", "out.xlsx"):
            export(store, tmp_path / name, summary.run_id)

    import csv

    with (tmp_path / "out.csv").open() as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames is not None
        assert reader.fieldnames[: len(CONTRACT_COLUMNS)] == CONTRACT_COLUMNS
        table = list(reader)
    assert len(table) == 15
    by_id = {row["rfq"]: row for row in table}
    assert by_id["rfq-000"]["status"] == "optimal" and by_id["rfq-000"]["gpu"] == "l40s"
    assert by_id["rfq-000"]["coupled"] == "False"
    assert by_id["rfq-012"]["status"] == "error" and by_id["zz"]["status"] == "invalid"

    import pyarrow.parquet as pq

    frame = pq.read_table(tmp_path / "out.parquet")
    assert frame.num_rows == 15 and frame.column_names == list(EXPORT_COLUMNS)

    from openpyxl import load_workbook

    book = load_workbook(tmp_path / "out.xlsx")
    assert book.sheetnames[0] == "Summary" and len(book.sheetnames) == 16
    sheet = book["Summary"]
    header = [cell.value for cell in sheet[1]]
    assert header[: len(CONTRACT_COLUMNS)] == CONTRACT_COLUMNS
    assert sheet["A1"].font.bold and sheet.column_dimensions["A"].width > 10
    assert sheet["C2"].number_format.startswith('"$"')
    detail = book["rfq-001"]
    labels = [row[0] for row in detail.iter_rows(values_only=True)]
    assert {"Workloads", "Layout", "Cost breakdown", "Total cost of ownership"} <= set(labels)


# --- usage --------------------------------------------------------------------------------


def test_find_sources_recurses_skips_hidden_and_rejects_missing(tmp_path: Path) -> None:
    write_rfqs(tmp_path / "a" / "deep", 2)
    (tmp_path / "a" / ".hidden").mkdir()
    (tmp_path / "a" / ".hidden" / "x.yaml").write_text("id: x")
    (tmp_path / "a" / "notes.txt").write_text("hello")
    found = find_sources([tmp_path / "a", tmp_path / "a" / "deep" / "rfq-000.yaml"])
    assert [p.name for p in found] == ["rfq-000.yaml", "rfq-001.yaml"]
    with pytest.raises(InputError, match="no such file"):
        find_sources([tmp_path / "missing"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no RFQ files"):
        find_sources([tmp_path / "empty"])


@pytest.mark.parametrize("case", ["no-inputs", "db-folder-missing", "db-is-folder",
                                  "db-not-sqlite", "bad-export", "bad-executor"])
def test_usage_errors_exit_2(tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    from solver.cli import main as cli

    write_rfqs(tmp_path / "rfqs", 1)
    (tmp_path / "empty").mkdir()
    (tmp_path / "junk.db").write_text("this is not sqlite " * 100)
    args = {
        "no-inputs": [str(tmp_path / "empty"), "--db", str(tmp_path / "b.db")],
        "db-folder-missing": [str(tmp_path / "rfqs"), "--db", str(tmp_path / "no" / "b.db")],
        "db-is-folder": [str(tmp_path / "rfqs"), "--db", str(tmp_path / "rfqs")],
        "db-not-sqlite": [str(tmp_path / "rfqs"), "--db", str(tmp_path / "junk.db")],
        "bad-export": [str(tmp_path / "rfqs"), "--db", str(tmp_path / "b.db"), "--export",
                       str(tmp_path / "out.txt")],
        "bad-executor": [str(tmp_path / "rfqs"), "--db", str(tmp_path / "b.db"),
                         "--executor", "spark"],
    }[case]
    monkeypatch.setattr(sys, "argv", ["procure", "batch", *args])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 2
    assert "--" in capsys.readouterr().err or case == "no-inputs"


def test_dask_missing_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_rfqs(tmp_path / "rfqs", 1)
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    with pytest.raises(InputError, match=r"procure\[cluster\]"):
        run_batch([tmp_path / "rfqs"], tmp_path / "b.db", executor="dask", solve_fn=fake_solve)


def test_folder_search_leaves_model_configs_out() -> None:
    """The shipped scenarios folder holds a Hugging Face config an RFQ points at: a batch
    over the folder takes every RFQ and no config (the README's `procure batch scenarios/`)."""
    from solver.batch.runner import find_sources

    root = Path(__file__).resolve().parent.parent / "scenarios"
    found = find_sources([root])
    assert not [p for p in found if p.name.endswith("config.json")]
    rfqs = {p.name for p in root.iterdir() if p.suffix in (".yaml", ".yml", ".json")}
    assert rfqs <= {p.name for p in found}
    configs = [p for p in root.rglob("*.json") if p.name.endswith("config.json")]
    assert configs, "the scenarios folder is expected to ship a model config"


def test_workers_forked_after_an_in_process_highs_solve_do_not_hang(tmp_path: Path) -> None:
    """HiGHS keeps a thread pool; a worker forked from a process that already solved with
    HiGHS inherits the pool's state without its threads. The driver stops the pool before
    forking (backends.release_solver_threads); run in a child so a regression fails, not hangs."""
    write_rfqs(tmp_path / "rfqs", 4, gpus=("l40s",))
    script = (
        "import sys; from pathlib import Path\n"
        "from solver.analysis.explain import solve_rfq\n"
        "from solver.catalog.load import load_catalog\n"
        "from solver.rfq.schema import load_rfq\n"
        "from solver.batch.runner import run_batch\n"
        "root = Path(sys.argv[1]); cat = load_catalog()\n"
        "first = sorted((root / 'rfqs').glob('*.yaml'))[0]\n"
        "assert solve_rfq(load_rfq(first, cat), cat, solver='highs').status == 'optimal'\n"
        "summary = run_batch([root / 'rfqs'], root / 'b.db', workers=2, solver='highs')\n"
        "print(summary.by_status)\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "'optimal': 4" in done.stdout


SLOW_BATCH = """
import sys, time
sys.path.insert(0, {repo!r})
from solver.batch.runner import run_batch

def slow_solve(rfq, catalog, *, solver="highs", time_limit=None):
    time.sleep(120)

if __name__ == "__main__":
    run_batch([{inputs!r}], {db!r}, workers={workers}, solve_fn=slow_solve)
"""


def _default_signals() -> None:
    """In the batch's process: SIGTERM and SIGHUP at their default, as in a terminal. Under
    ``nohup`` (a CI job started that way) SIGHUP is ignored and every child inherits that;
    the batch rightly leaves an ignored signal alone, and the SIGHUP case would wait forever."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
@pytest.mark.parametrize(("sig", "workers"), [(signal.SIGTERM, 1), (signal.SIGHUP, 1),
                                              (signal.SIGTERM, 2)],
                         ids=["SIGTERM-in-driver", "SIGHUP-in-driver", "SIGTERM-pool"])
def test_terminated_batch_removes_its_lock_file(tmp_path: Path, sig: int, workers: int) -> None:
    """Issue 32: SIGTERM or SIGHUP to a running batch (a closed terminal, a stopped job)
    removes results.sqlite.lock, kills its workers and ends by the signal; the store opens
    again (a killed -9 run's lock file stays, but its flock is gone: tested above)."""
    inputs = tmp_path / "in"
    write_rfqs(inputs, 3)
    db = tmp_path / "results.sqlite"
    lock = tmp_path / "results.sqlite.lock"
    script = tmp_path / "slow_batch.py"
    script.write_text(SLOW_BATCH.format(repo=str(REPO), inputs=str(inputs), db=str(db),
                                        workers=workers))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=_default_signals)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (lock.exists() and (
                workers == 1 or len(children(proc.pid)) >= workers)):
            time.sleep(0.05)
        assert lock.exists(), proc.stderr.read() if proc.poll() is not None else "no lock"
        time.sleep(0.5)  # inside the solve (driver) or waiting on the pool
        workers_seen = children(proc.pid)
        started = time.monotonic()
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=30)
        assert time.monotonic() - started < 20  # not after the 120 s solve
        assert proc.returncode == -sig, stderr
        assert "Traceback" not in stderr
        assert not lock.exists()
        assert not [p for p in workers_seen if Path(f"/proc/{p}").exists()]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    with ResultStore(db, lock=True):  # nobody holds it
        assert lock.exists()
    assert not lock.exists()
