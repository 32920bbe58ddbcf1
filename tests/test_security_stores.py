"""Results stores and exports that cannot be destroyed, and batches that lose no file
(issue 33).

* an ``--export``, ``--plot``, ``--csv`` or quote ``-o`` path that is the results store, an
  input or in a missing folder is refused (exit 2) before anything is solved;
* the batch writer lock is taken on the real file, so two ``--db`` names of one store (a
  symbolic link) share it, and the lock file is gone after the run;
* every file of a batch folder that cannot be read (a dangling link, a link loop, a pipe,
  a device) is recorded with its reason; a file name of any bytes is handled and shown
  escaped, with one worker and with two.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from plans import cost, tiny_plan

from solver.batch.runner import run_batch
from solver.batch.store import ResultStore
from solver.common.errors import InputError
from solver.optimize.plan_model import Plan

ROOT = Path(__file__).resolve().parent.parent
GOOD = ("id: {id}\nworkloads:\n  - {{name: chat, kind: inference, model: llama-3.1-8b,\n"
        "     concurrency: 4, input_tokens: 500, output_tokens: 100}}\n")
CSV = ("id,name,kind,model,concurrency,input_tokens,output_tokens\n"
       "c1,chat,inference,llama-3.1-8b,4,500,100\n")
BAD_NAME = os.fsdecode(b"bad\xff.yaml")  # not UTF-8: a lone surrogate in Python's str


def fake_solve(rfq: Any, catalog: Any, **_: Any) -> Plan:
    return tiny_plan(rfq=rfq.id, cost=cost(1.0))


def no_solve(rfq: Any, catalog: Any, **_: Any) -> dict[str, Any]:
    raise AssertionError(f"solved {rfq.id} although the run should have been refused")


def rfqs(folder: Path, *ids: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for rfq_id in ids:
        (folder / f"{rfq_id}.yaml").write_text(GOOD.format(id=rfq_id), encoding="utf-8")
    return folder


def results(db: Path) -> dict[str, tuple[str, str | None]]:
    with sqlite3.connect(db) as con:
        return {f"{rfq}|{source}": (status, error) for rfq, source, status, error in
                con.execute("SELECT rfq, source, status, error FROM results")}


# --- an export must not destroy the store or an input ------------------------------------


def test_export_onto_the_store_is_refused_and_the_store_survives(tmp_path: Path,
                                                                  cli: Any) -> None:
    """Issue 33: `batch DIR --db results.csv --export results.csv` exported over its own
    store (later runs: 'database disk image is malformed')."""
    folder = rfqs(tmp_path / "in", "a", "b")
    db = tmp_path / "results.csv"
    code, _, err = cli("batch", str(folder), "--db", str(db), "--export", str(db),
                       "--workers", "1")
    assert code == 2, err
    assert "--export" in err and "results store" in err
    assert not db.exists()  # refused before the store was even created
    run_batch([folder], db, workers=1, solve_fn=fake_solve)
    before = results(db)
    link = tmp_path / "link.csv"
    link.symlink_to(db)
    hard = tmp_path / "hard.csv"
    os.link(db, hard)
    for target in (db, link, hard):
        with pytest.raises(InputError, match="results store"):
            run_batch([folder], db, workers=1, solve_fn=no_solve, export=target)
    with pytest.raises(InputError, match="results store"):  # the store named by a link
        run_batch([folder], link, workers=1, solve_fn=no_solve, export=db)
    assert results(db) == before  # intact: the next run reads it
    assert run_batch([folder], db, workers=1, solve_fn=fake_solve).skipped == 2


def test_export_onto_an_input_is_refused(tmp_path: Path) -> None:
    """Issue 33: `--export` onto the batch's own input CSV replaced the input."""
    batch = tmp_path / "batch.csv"
    batch.write_text(CSV, encoding="utf-8")
    link = tmp_path / "alias.csv"
    link.symlink_to(batch)
    for target in (batch, link):
        with pytest.raises(InputError, match="an input"):
            run_batch([batch], tmp_path / "r.sqlite", workers=1, solve_fn=no_solve,
                      export=target)
    assert batch.read_text(encoding="utf-8") == CSV
    assert not (tmp_path / "r.sqlite").exists()
    empty = tmp_path / "empty.csv"  # SQLite would take an empty file for a new store
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="--db"):
        run_batch([empty], empty, workers=1, solve_fn=no_solve)
    assert empty.read_bytes() == b""


def test_export_into_a_missing_folder_is_refused_before_the_store(tmp_path: Path) -> None:
    folder = rfqs(tmp_path / "in", "a")
    with pytest.raises(InputError, match="does not exist"):
        run_batch([folder], tmp_path / "r.sqlite", workers=1, solve_fn=no_solve,
                  export=tmp_path / "nodir" / "r.csv")
    assert not (tmp_path / "r.sqlite").exists()


@pytest.mark.parametrize("args", [
    ("pareto", "{rfq}", "--plot", "{tmp}/nodir/x.html"),
    ("pareto", "{rfq}", "--csv", "{tmp}/nodir/x.csv"),
    ("pareto", "{rfq}", "--csv", "{rfq}"),
    ("pareto", "{rfq}", "--sweep", "growth=0,0.5", "--csv", "{rfq}"),
    ("pareto", "{rfq}", "--csv", "{tmp}/cat/prices.csv", "--catalog", "{tmp}/cat"),
    ("sensitivity", "{rfq}", "--plot", "{tmp}/nodir/t.png"),
    ("quote", "{rfq}", "-o", "{tmp}/nodir/q.html"),
])
def test_outputs_are_checked_before_solving(args: tuple[str, ...], tmp_path: Path, cli: Any,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33: `pareto --plot nodir/x.html` ended with exit 1 after the solve; `--csv` onto
    the RFQ or the catalog's prices.csv overwrote an input."""
    import solver.analysis.explain
    import solver.analysis.pareto
    import solver.analysis.sensitivity
    import solver.analysis.whatif

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("solved before the output path was checked")

    for module, name in ((solver.analysis.pareto, "frontier"),
                         (solver.analysis.sensitivity, "report"),
                         (solver.analysis.whatif, "sweep"),
                         (solver.analysis.explain, "solve_rfq")):
        monkeypatch.setattr(module, name, refuse)
    rfq = tmp_path / "r.yaml"
    rfq.write_text(GOOD.format(id="r"), encoding="utf-8")
    (tmp_path / "cat").mkdir()
    prices = "id,price_usd\nl4,2500\n"
    (tmp_path / "cat" / "prices.csv").write_text(prices, encoding="utf-8")
    code, out, err = cli(*(a.format(rfq=rfq, tmp=tmp_path) for a in args))
    assert code == 2, out + err
    assert "Traceback" not in err and "internal error" not in err
    assert ("does not exist" in err) or ("an input" in err), err
    assert rfq.read_text(encoding="utf-8") == GOOD.format(id="r")
    assert (tmp_path / "cat" / "prices.csv").read_text(encoding="utf-8") == prices


# --- one writer per store, whatever its name ---------------------------------------------


def test_a_symlinked_db_shares_the_lock_and_the_lock_file_goes(tmp_path: Path) -> None:
    """Issue 33: two writers shared one store through a symlinked --db (the lock was per
    name, not per file)."""
    folder = rfqs(tmp_path / "in", "a")
    db = tmp_path / "r.sqlite"
    link = tmp_path / "other-name.sqlite"
    link.symlink_to(db)
    with ResultStore(db, lock=True), pytest.raises(InputError, match="another procure batch"):
        run_batch([folder], link, workers=1, solve_fn=no_solve)
    with ResultStore(link, lock=True), pytest.raises(InputError, match="another procure batch"):
        run_batch([folder], db, workers=1, solve_fn=no_solve)
    assert run_batch([folder], link, workers=1, solve_fn=fake_solve).by_status == {
        "optimal": 1}
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".lock")) == []


def test_the_lock_file_goes_after_a_refused_run_too(tmp_path: Path) -> None:
    folder = rfqs(tmp_path / "in", "a")
    with pytest.raises(InputError):
        run_batch([folder], tmp_path / "r.sqlite", workers=1, solve_fn=no_solve,
                  catalog_dir=str(tmp_path / "no-such-catalog"))
    with ResultStore(tmp_path / "r.sqlite", lock=True):
        assert (tmp_path / "r.sqlite.lock").exists()
    assert not (tmp_path / "r.sqlite.lock").exists()


# --- every file of a batch accounted for -------------------------------------------------


def test_unreadable_files_of_a_batch_folder_are_recorded_with_their_reason(
        tmp_path: Path) -> None:
    """Issue 33: a dangling file in the batch folder was dropped without a word."""
    folder = rfqs(tmp_path / "in", "good")
    (folder / "dangling.yaml").symlink_to(tmp_path / "gone.yaml")
    (folder / "loop.yaml").symlink_to(folder / "loop.yaml")
    (folder / "zero.yaml").symlink_to("/dev/zero")
    os.mkfifo(folder / "fifo.yaml")
    summary = run_batch([folder], tmp_path / "r.sqlite", workers=1, solve_fn=fake_solve)
    assert summary.by_status == {"optimal": 1, "invalid": 4}
    errors = {key.split("|")[0]: error for key, (status, error) in
              results(tmp_path / "r.sqlite").items() if status == "invalid"}
    assert "symbolic link to a missing file" in errors["dangling"]
    assert "symbolic link loop" in errors["loop"]
    assert "device" in errors["zero"]
    assert "named pipe" in errors["fifo"]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_file_name_of_any_bytes_is_solved_and_shown_escaped(tmp_path: Path,
                                                              workers: int) -> None:
    """Issue 33: a file named with non-UTF-8 bytes ended the batch with exit 1
    (UnicodeEncodeError: surrogates not allowed); with --workers 2 nothing was committed."""
    folder = rfqs(tmp_path / "in", "good")
    (folder / BAD_NAME).write_text(GOOD.format(id="odd-name"), encoding="utf-8")
    broken = os.fsdecode(b"broken\xfe.yaml")
    (folder / broken).write_text("id: [unclosed\n", encoding="utf-8")
    db = tmp_path / "r.sqlite"
    summary = run_batch([folder], db, workers=workers, solve_fn=fake_solve)
    assert summary.by_status == {"optimal": 2, "invalid": 1}
    stored = results(db)
    odd = next(key for key in stored if key.startswith("odd-name|"))
    assert odd.endswith("/bad\\xff.yaml")
    (error,) = [e for (status, e) in stored.values() if status == "invalid"]
    assert "broken\\xfe.yaml" in error and "syntax error" in error
    again = run_batch([folder], db, workers=workers, solve_fn=fake_solve)  # re-run: skipped
    assert again.skipped == 3


def test_cli_batch_and_solve_with_a_non_utf8_name(tmp_path: Path, cli: Any) -> None:
    folder = rfqs(tmp_path / "in", "good")
    (folder / BAD_NAME).write_text("id: x\nworkloads: 3\n", encoding="utf-8")
    code, out, err = cli("batch", str(folder), "--db", str(tmp_path / "r.sqlite"),
                         "--workers", "1", "--export", str(tmp_path / "r.csv"))
    assert code == 0, out + err
    assert "bad\\xff.yaml" in (tmp_path / "r.csv").read_text(encoding="utf-8")
    code, out, err = cli("solve", str(folder / BAD_NAME))
    assert code == 2, out + err
    assert "bad\\xff.yaml" in err and "workloads" in err


def test_a_subfolder_that_cannot_be_listed_is_recorded(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder search that cannot list a subfolder (permission denied) records it instead
    of skipping its RFQs without a word (the permission is simulated: tests may run as
    root, who can list anything)."""
    import solver.batch.runner as runner

    folder = rfqs(tmp_path / "in", "good")
    locked = rfqs(folder / "locked", "hidden-from-us")
    walk = os.walk

    def walk_denied(top: Any, onerror: Any = None, **kwargs: Any) -> Any:
        for here, folders, files in walk(top, onerror=onerror, **kwargs):
            if "locked" in folders:
                folders.remove("locked")
                onerror(PermissionError(13, "Permission denied", str(locked)))
            yield here, folders, files

    monkeypatch.setattr(runner.os, "walk", walk_denied)
    summary = run_batch([folder], tmp_path / "r.sqlite", workers=1, solve_fn=fake_solve)
    assert summary.by_status == {"optimal": 1, "invalid": 1}
    (error,) = [e for status, e in results(tmp_path / "r.sqlite").values() if status == "invalid"]
    assert "locked" in error and "cannot be listed" in error
