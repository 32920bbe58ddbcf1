"""Batch RFQ evaluation: discover inputs, skip what is done, solve the rest in parallel, store.

:func:`run_batch` is the library behind ``procure batch``. Inputs are RFQ files (.yaml,
.yml, .json), folders searched recursively for them, and CSV batch files (one workload per
row, grouped by ``id``). Every RFQ is validated in the driver; an unchanged RFQ (same input
hash, catalog version and solver options as its stored row, and not an ``error``) is
skipped; the others are solved by an executor (:mod:`solver.batch.executors`) and each result is
committed to the store (:mod:`solver.batch.store`) as soon as it arrives. Bad RFQs are
recorded as ``invalid`` and never stop the batch; an id seen twice in one batch is recorded
as ``invalid`` for the later source, naming both. Inputs are streamed: the driver holds only
the RFQs in flight, not the batch.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from solver.batch.executors import SolveFn, SolveOutcome, SolveTask, default_solve, make_executor
from solver.batch.export import check_export_path
from solver.batch.export import export as export_store
from solver.batch.store import ResultRow, ResultStore
from solver.catalog.data import Catalog
from solver.catalog.load import load_catalog, overlay_files
from solver.common.childproc import unwind_on_termination
from solver.common.errors import InputError, Problem, escape_surrogates, short, shown_path
from solver.common.inputs import path_reason, path_too_long
from solver.common.limits import check_workers
from solver.common.outputs import same_file
from solver.optimize.backends import DEFAULT_SOLVER
from solver.rfq.schema import Rfq, iter_csv_rfqs, load_rfq, parse_text

RFQ_SUFFIXES = (".yaml", ".yml", ".json")
CSV_SUFFIX = ".csv"
MAX_STORED_INPUT_CHARS = 200_000
MAX_ID_CHARS = 128
PROBLEMS_SHOWN = 10


@dataclass(frozen=True)
class BatchItem:
    """One RFQ of the batch after validation: either ``rfq`` or ``error`` is set."""

    rfq_id: str
    source: str
    input_hash: str
    rfq: Rfq | None
    error: str | None
    input_text: str | None
    validate_seconds: float
    id_from_content: bool = True


@dataclass(frozen=True)
class ProgressEvent:
    """One RFQ finished (or skipped), for progress display."""

    rfq_id: str
    source: str
    status: str
    seconds: float
    skipped: bool


class BatchObserver(Protocol):
    """Receives progress: the expected total first, then one event per RFQ."""

    def start(self, total: int) -> None: ...

    def advance(self, event: ProgressEvent) -> None: ...


@dataclass
class BatchSummary:
    """What a batch run did, read back from the store (this run's rows only)."""

    run_id: int
    db: str
    catalog_version: str
    total: int = 0
    computed: int = 0
    skipped: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    total_tco_usd: float = 0.0
    median_tco_usd: float | None = None
    gpu_mix: dict[str, int] = field(default_factory=dict)
    fabric_mix: dict[str, int] = field(default_factory=dict)
    slowest: list[tuple[str, float]] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    problems: list[tuple[str, str, str]] = field(default_factory=list)
    wall_seconds: float = 0.0
    exported: int | None = None

    @property
    def rate_per_s(self) -> float:
        """RFQs solved (not skipped) per second of wall time."""
        return self.computed / self.wall_seconds if self.wall_seconds > 0 else 0.0


# --- discovery ------------------------------------------------------------------------


def is_model_config(path: Path) -> bool:
    """A Hugging Face model config an RFQ points at (``config.json``, ``*.config.json``),
    not an RFQ: a folder search leaves it out."""
    name = path.name.lower()
    return name == "config.json" or name.endswith(".config.json")


def _search(folder: Path) -> list[Path]:
    """The RFQ files under ``folder`` (recursive, links to folders not followed), sorted.

    Every entry with an RFQ suffix that is not a folder is taken - also a dangling or
    looping link, a pipe or a device, so that the batch records it with its reason instead
    of dropping it; a subfolder that cannot be listed is taken too (recorded as such).
    Hidden files and folders and model configs are left out."""
    found: list[Path] = []

    def unlisted(exc: OSError) -> None:
        if exc.filename is not None and os.fspath(exc.filename) != os.fspath(folder):
            found.append(Path(os.fspath(exc.filename)))

    for top, folders, files in os.walk(folder, onerror=unlisted):
        folders[:] = [name for name in folders if not name.startswith(".")]
        for name in files:
            path = Path(top) / name
            if not name.startswith(".") and path.suffix.lower() in RFQ_SUFFIXES \
                    and not is_model_config(path):
                found.append(path)
    return sorted(found)


def _source_key(path: Path) -> str:
    """Where a source is, as stored: its real path (links followed) when it can be read,
    else its folder's real path and its own name (a dangling link is shown as itself);
    bytes that are not UTF-8 escaped."""
    if path_reason(path) is None:
        return shown_path(os.path.realpath(path))
    return shown_path(os.path.join(os.path.realpath(path.parent), path.name))


def find_sources(inputs: Sequence[str | Path]) -> list[Path]:
    """The RFQ files and CSV batches named by ``inputs`` (folders searched recursively).

    Raises :class:`InputError` (usage: exit 2) for a missing path, a file of another type,
    or when nothing at all is found. Hidden files and folders are ignored, and so are the
    Hugging Face model configs RFQs point at (``config.json``, ``*.config.json``) when a
    folder is searched; a file named twice is used once. A file that is there but cannot be
    read (a dangling link, a pipe, a device) is a source: the batch records why.
    """
    found: list[Path] = []
    seen: set[str] = set()
    problems: list[Problem] = []
    for raw in inputs:
        path = Path(raw)
        shown = shown_path(path)
        if path_reason(path, folder=True) is None:
            candidates = _search(path)
        elif os.path.lexists(path) and path_too_long(os.fspath(path)) is None:
            if path.suffix.lower() not in (*RFQ_SUFFIXES, CSV_SUFFIX):
                problems.append(Problem(shown, "INPUT", path.suffix,
                                        "unsupported file type: use .yaml, .yml, .json or .csv"))
                continue
            candidates = [path]
        else:
            reason = path_reason(path)
            problems.append(Problem(shown, "INPUT", None, "no such file or folder"
                                    if reason in ("file not found", None) else reason))
            continue
        for candidate in candidates:
            key = _source_key(candidate)
            if key not in seen:
                seen.add(key)
                found.append(candidate)
    if problems:
        raise InputError(problems)
    if not found:
        raise InputError([Problem(", ".join(map(str, inputs)) or "INPUT", "INPUT", None,
                                  "no RFQ files (.yaml, .yml, .json) or CSV batches found")])
    return found


def count_rfqs(sources: Iterable[Path]) -> int:
    """How many RFQs the sources hold (for progress; a broken CSV counts approximately)."""
    total = 0
    for path in sources:
        if path.suffix.lower() != CSV_SUFFIX or path_reason(path) is not None:
            total += 1  # an RFQ file, or a CSV that cannot be read (recorded as one row)
            continue
        try:
            with path.open(encoding="utf-8", newline="") as handle:
                ids = {(row.get("id") or "").strip() or f"#{n}"
                       for n, row in enumerate(csv.DictReader(handle))}
            total += max(1, len(ids))
        except Exception:  # noqa: BLE001 - only a progress estimate; the reader reports it
            total += 1
    return total


def canonical_json(rfq: Rfq) -> str:
    """The canonical JSON of a validated RFQ (what its input hash is taken of)."""
    return json.dumps(rfq.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _problems_text(exc: InputError) -> str:
    return "\n".join(str(problem) for problem in exc.problems)


def _valid_item(rfq: Rfq, source: str, seconds: float) -> BatchItem:
    text = canonical_json(rfq)
    return BatchItem(rfq.id, source, _sha256(text.encode()), rfq, None, text, seconds)


def _file_item(path: Path, catalog: Catalog, confine: bool = False) -> BatchItem:
    source = _source_key(path)
    started = time.perf_counter()
    try:
        if path_reason(path, folder=True) is None:  # a subfolder the search could not list
            raise InputError([Problem(shown_path(path), "", None,
                                      f"a folder that cannot be listed: {_unlisted(path)}")])
        rfq = load_rfq(path, catalog, confine=confine)
    except InputError as exc:
        error = _problems_text(exc)
    except Exception as exc:  # noqa: BLE001 - one bad file never stops the batch
        error = f"{source}: cannot read: {type(exc).__name__}: {short(str(exc), 200, quote=False)}"
    else:
        return _valid_item(rfq, source, time.perf_counter() - started)
    raw = _raw_bytes(path)
    text = raw.decode("utf-8", errors="replace")
    try:
        rfq_id, from_content = _id_of(text, source, path)
    except Exception:  # noqa: BLE001 - the id of a broken file is best effort
        rfq_id, from_content = escape_surrogates(path.stem), False
    return BatchItem(rfq_id, source, _sha256(raw), None, error, text,
                     time.perf_counter() - started, from_content)


def _raw_bytes(path: Path) -> bytes:
    """The first bytes of a file that could not be loaded (stored with its row); for a path
    that is no readable regular file, its reason instead (never opened: a pipe blocks)."""
    reason = path_reason(path)
    if reason is not None:
        return f"unreadable: {reason}".encode()
    try:
        with path.open("rb") as handle:
            return handle.read(MAX_STORED_INPUT_CHARS)
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}".encode()


def _unlisted(path: Path) -> str:
    try:
        os.listdir(path)
    except OSError as exc:
        return exc.strerror or str(exc)
    return "it changed while the batch searched it"


def _id_of(text: str, source: str, path: Path) -> tuple[str, bool]:
    """The id an invalid file claims, if it can be read; else the file name."""
    try:
        data: Any = parse_text(text, source, path.suffix.lower())
    except InputError:
        data = None
    value = data.get("id") if isinstance(data, dict) else None
    if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
        text = "".join(ch if ch.isprintable() else "?" for ch in str(value).strip()[:1000])
        return short(text.encode("utf-8", "replace").decode("utf-8"), MAX_ID_CHARS,
                     quote=False), True
    return escape_surrogates(path.stem), False


def _csv_items(path: Path, catalog: Catalog, confine: bool = False) -> Iterator[BatchItem]:
    source = _source_key(path)
    started = time.perf_counter()
    try:
        for rfq_id, result in iter_csv_rfqs(path, catalog, confine=confine):
            seconds = time.perf_counter() - started
            if isinstance(result, InputError):
                error = _problems_text(result)
                yield BatchItem(rfq_id, source, _sha256(error.encode()), None, error, None,
                                seconds, not rfq_id.startswith("row-"))
            else:
                yield _valid_item(result, source, seconds)
            started = time.perf_counter()
    except Exception as exc:  # noqa: BLE001 - one bad file never stops the batch
        error = _problems_text(exc) if isinstance(exc, InputError) else (
            f"{source}: cannot read: {type(exc).__name__}: {short(str(exc), 200, quote=False)}")
        yield BatchItem(escape_surrogates(path.stem), source, _sha256(error.encode()), None,
                        error, None, time.perf_counter() - started, False)


def iter_items(sources: Iterable[Path], catalog: Catalog, confine: bool = False
               ) -> Iterator[BatchItem]:
    """Validate the sources' RFQs one by one (streamed, in discovery order); ``confine``:
    uploaded files, whose model config paths must stay in their folder
    (:func:`solver.rfq.schema.validate_rfq`)."""
    for path in sources:
        if path.suffix.lower() == CSV_SUFFIX:
            yield from _csv_items(path, catalog, confine)
        else:
            yield _file_item(path, catalog, confine)


# --- the run ----------------------------------------------------------------------------


def solver_options(solver: str, time_limit: float | None) -> str:
    """The options a stored result depends on besides input and catalog."""
    return f"solver={solver};time_limit={time_limit if time_limit is not None else 'none'}"


def _row_of(outcome: SolveOutcome, catalog_version: str, options: str) -> ResultRow:
    task = outcome.task
    return ResultRow(task.rfq_id, task.source, task.input_hash, catalog_version, options,
                     outcome.status, outcome.metrics, task.input_json,
                     outcome.plan_json, outcome.error, task.validate_seconds,
                     outcome.solve_seconds)


def _invalid_row(item: BatchItem, catalog_version: str, options: str,
                 error: str) -> ResultRow:
    return ResultRow(item.rfq_id, item.source, item.input_hash, catalog_version, options,
                     "invalid", {}, item.input_text, None, error, item.validate_seconds, 0.0)


class _Driver:
    """Turns validated items into tasks, recording skips, invalid RFQs and duplicates."""

    def __init__(self, store: ResultStore, run_id: int, catalog_version: str, options: str,
                 observer: BatchObserver | None) -> None:
        self.store, self.run_id = store, run_id
        self.catalog_version, self.options = catalog_version, options
        self.observer = observer
        self.first_source: dict[str, str] = {}
        self.skipped = 0
        self.computed = 0
        self.duplicates: list[str] = []

    def _event(self, rfq_id: str, source: str, status: str, seconds: float,
               skipped: bool) -> None:
        if self.observer is not None:
            self.observer.advance(ProgressEvent(rfq_id, source, status, seconds, skipped))

    def _record(self, row: ResultRow) -> None:
        self.store.write(row, self.run_id)
        self.computed += 1
        self._event(row.rfq, row.source, row.status, row.solve_seconds, False)

    def tasks(self, items: Iterable[BatchItem]) -> Iterator[SolveTask]:
        for item in items:
            if item.id_from_content:
                first = self.first_source.setdefault(item.rfq_id, item.source)
                if first != item.source:
                    why = (f"duplicate id {item.rfq_id!r}: {item.source} and {first} both "
                           "define it; only the first was evaluated. Give each RFQ its own id.")
                    self.duplicates.append(f"{item.rfq_id}: {first} | {item.source}")
                    self._record(_invalid_row(item, self.catalog_version, self.options, why))
                    continue
            stored = self.store.stored_key(item.rfq_id, item.source)
            if (stored is not None and stored.status != "error"
                    and stored.input_hash == item.input_hash
                    and stored.catalog_version == self.catalog_version
                    and stored.options == self.options
                    and (item.rfq is not None or stored.status == "invalid")):
                self.store.touch(item.rfq_id, item.source, self.run_id)
                self.skipped += 1
                self._event(item.rfq_id, item.source, stored.status, 0.0, True)
                continue
            if item.rfq is None:
                self._record(_invalid_row(item, self.catalog_version, self.options,
                                          item.error or "invalid"))
                continue
            yield SolveTask(item.rfq_id, item.source, item.input_hash, item.rfq,
                            item.input_text or canonical_json(item.rfq), item.validate_seconds)

    def finished(self, outcome: SolveOutcome) -> None:
        self._record(_row_of(outcome, self.catalog_version, self.options))


def run_batch(
    inputs: Sequence[str | Path],
    db: str | Path,
    *,
    catalog_dir: str | None = None,
    workers: int | None = None,
    executor: str = "local",
    scheduler: str | None = None,
    solver: str = DEFAULT_SOLVER,
    time_limit: float | None = None,
    solve_fn: SolveFn = default_solve,
    observer: BatchObserver | None = None,
    dask_options: dict[str, Any] | None = None,
    export: str | Path | None = None,
    confine_models: bool = False,
) -> BatchSummary:
    """Evaluate every RFQ of ``inputs`` into the store ``db``; returns the run's summary.

    ``solve_fn(rfq, catalog, solver=, time_limit=)`` is the solver (injectable for tests;
    it must be picklable for a process pool or Dask). ``workers``: processes (default:
    cores; 1 solves in the driver). ``executor``: ``local`` or ``dask`` (``scheduler``
    ``tcp://host:port``, or none to start a LocalCluster with ``dask_options``).
    ``export``: also write this run's rows to a .csv, .parquet or .xlsx file, while the store
    is still locked (the path is checked before anything is solved: never the store, an
    input or a catalog overlay file). ``confine_models``: the inputs were uploaded (the
    dashboard), so an RFQ may name only model config files inside its own folder.
    Raises :class:`InputError` for usage errors (no inputs, bad or busy db, unwritable export
    path, bad catalog, too many workers), always before the first solve.
    """
    started = time.perf_counter()
    if workers is not None:
        check_workers(workers, "--workers")
    for source in inputs:  # SQLite would write its pages into an (empty) input file
        if same_file(db, source):
            raise InputError([Problem(shown_path(db), "--db", None, f"is an input of this "
                                      f"run ({shown_path(source)}); choose another file name")])
    export_path = check_export_path(export, store=db, inputs=[
        *inputs, *overlay_files(catalog_dir)]) if export is not None else None
    catalog = load_catalog(catalog_dir)
    sources = find_sources(inputs)
    options = solver_options(solver, time_limit)
    with unwind_on_termination(), ResultStore(db, lock=True) as store:
        # SIGTERM/SIGHUP: the workers killed, the store closed and its lock file removed
        engine = make_executor(executor, catalog, solve_fn, solver, time_limit, workers,
                               scheduler, dask_options)
        try:
            run_id = store.start_run(catalog.version, options, [shown_path(i) for i in inputs])
            driver = _Driver(store, run_id, catalog.version, options, observer)
            if observer is not None:
                observer.start(count_rfqs(sources))
            for outcome in engine.run(driver.tasks(iter_items(sources, catalog,
                                                              confine_models))):
                driver.finished(outcome)
        finally:
            engine.close()
        store.finish_run(run_id)
        summary = summarize(store, run_id, catalog.version)
        if export_path is not None:
            export_store(store, export_path, run_id)
            summary.exported = store.count(run_id)
    summary.computed, summary.skipped = driver.computed, driver.skipped
    summary.duplicates = driver.duplicates
    summary.wall_seconds = time.perf_counter() - started
    return summary


def summarize(store: ResultStore, run_id: int, catalog_version: str = "") -> BatchSummary:
    """Counts by status, total and median TCO, GPU and fabric mix, slowest RFQs of a run."""
    summary = BatchSummary(run_id, shown_path(store.path), catalog_version)
    args = (run_id,)
    summary.by_status = dict(store.query(
        "SELECT status, COUNT(*) FROM results WHERE run_id = ? GROUP BY status "
        "ORDER BY COUNT(*) DESC", args))
    summary.total = sum(summary.by_status.values())
    planned = "run_id = ? AND status IN ('optimal', 'feasible') AND tco_usd IS NOT NULL"
    count, total = store.query(f"SELECT COUNT(*), SUM(tco_usd) FROM results WHERE {planned}",
                               args)[0]
    summary.total_tco_usd = float(total or 0.0)
    if count:
        middle = store.query(f"SELECT tco_usd FROM results WHERE {planned} ORDER BY tco_usd "
                             "LIMIT ? OFFSET ?", (run_id, 2 - count % 2, (count - 1) // 2))
        summary.median_tco_usd = sum(r[0] for r in middle) / len(middle)
    summary.gpu_mix = dict(store.query(
        "SELECT gpu, COUNT(*) FROM results WHERE run_id = ? AND gpu IS NOT NULL "
        "GROUP BY gpu ORDER BY COUNT(*) DESC, gpu", args))
    summary.fabric_mix = dict(store.query(
        "SELECT fabric, COUNT(*) FROM results WHERE run_id = ? AND fabric IS NOT NULL "
        "GROUP BY fabric ORDER BY COUNT(*) DESC, fabric", args))
    summary.slowest = [(f"{rfq}", float(sec)) for rfq, sec in store.query(
        "SELECT rfq, solve_seconds FROM results WHERE run_id = ? AND solve_seconds > 0 "
        "ORDER BY solve_seconds DESC LIMIT 5", args)]
    summary.problems = [(rfq, status, (error or "").splitlines()[0] if error else "")
                        for rfq, status, error in store.query(
        "SELECT rfq, status, error FROM results WHERE run_id = ? AND status IN "
        "('invalid', 'error') ORDER BY rfq LIMIT ?", (run_id, PROBLEMS_SHOWN))]
    return summary
