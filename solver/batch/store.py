"""The batch results store: one SQLite file (WAL mode), one transaction per finished RFQ.

Table ``results`` holds one row per ``(rfq, source)``: the input (canonical validated RFQ
JSON, or the raw text when invalid), its hash, the catalog version and solver options it
was computed with, the status (optimal | feasible | infeasible | invalid | error), the
plan JSON or the error text, the headline numbers (TCO, capex, nodes, GPUs, GPU and fabric
mix) for summaries and exports, the timings, and the run that last saw it. Table ``runs``
records each ``procure batch`` invocation.

Only the batch driver writes; every finished RFQ is committed on its own, so a run killed at
any moment (SIGKILL included) keeps everything committed before it and never a half row.
WAL with ``synchronous=NORMAL`` is durable against a killed process (not against power loss
of the machine, which would lose at most the last few commits, never corrupt the file).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from solver.common.errors import InputError, Problem, escape_surrogates, shown_path
from solver.common.inputs import path_reason, path_too_long

SCHEMA_VERSION = 1
STATUSES = ("optimal", "feasible", "infeasible", "invalid", "error")

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS runs (
    run_id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    catalog_version TEXT NOT NULL,
    options TEXT NOT NULL,
    inputs TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    rfq TEXT NOT NULL,
    source TEXT NOT NULL,
    input_hash TEXT NOT NULL,
    catalog_version TEXT NOT NULL,
    options TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ({", ".join(repr(s) for s in STATUSES)})),
    tco_usd REAL,
    capex_usd REAL,
    total_nodes INTEGER,
    total_gpus INTEGER,
    gpu TEXT,
    fabric TEXT,
    coupled INTEGER,
    power_kw REAL,
    rack_units INTEGER,
    input TEXT,
    plan_json TEXT,
    error TEXT,
    validate_seconds REAL,
    solve_seconds REAL,
    run_id INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (rfq, source)
);
CREATE INDEX IF NOT EXISTS results_run ON results (run_id);
"""

METRIC_COLUMNS = ("tco_usd", "capex_usd", "total_nodes", "total_gpus", "gpu", "fabric",
                  "coupled", "power_kw", "rack_units")


@dataclass(frozen=True)
class ResultRow:
    """One finished RFQ, as written to the store."""

    rfq: str
    source: str
    input_hash: str
    catalog_version: str
    options: str
    status: str
    metrics: dict[str, Any]
    input: str | None
    plan_json: str | None
    error: str | None
    validate_seconds: float
    solve_seconds: float


@dataclass(frozen=True)
class StoredKey:
    """What a stored row was computed from (to decide whether to skip it)."""

    input_hash: str
    catalog_version: str
    options: str
    status: str


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class ResultStore:
    """The SQLite results file. Use as a context manager; only the driver writes."""

    def __init__(self, path: str | Path, *, lock: bool = False) -> None:
        """Open (or create) the store. ``lock``: take the exclusive run lock (one writing
        ``procure batch`` per file) and check that the file can be written, so that a
        read-only or busy store is refused before any RFQ is solved. The file is opened and
        locked by its real path (links followed), so two names of one store are one store."""
        self.path = Path(path)
        _check_path(self.path)
        self.real_path = Path(os.path.realpath(self.path))
        self._lock = RunLock(self.path) if lock else None
        self._db: sqlite3.Connection | None = None
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    @property
    def db(self) -> sqlite3.Connection:
        """The open connection (a closed store refuses to be used)."""
        if self._db is None:
            raise RuntimeError(f"the batch store {self.path} is closed")
        return self._db

    def _open(self) -> None:
        path = self.path
        try:
            self._db = sqlite3.connect(self.real_path, isolation_level=None, timeout=30.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in self._db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if version not in (0, SCHEMA_VERSION) or (version == 0
                                                      and tables - {"sqlite_sequence"}):
                raise InputError([Problem(shown_path(path), "--db", None,
                                          "an SQLite file that is not a procure batch store "
                                          f"(schema {version}); choose another --db file")])
            self._db.executescript(_SCHEMA)
            if version != SCHEMA_VERSION:
                self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            if self._lock is not None:  # a write now, not after the first solve
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise InputError([Problem(shown_path(path), "--db", None,
                                      f"not a usable, writable SQLite results file: {exc}")]
                             ) from None

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file (all writes are already committed) and release the run lock."""
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    # --- runs -----------------------------------------------------------------------

    def start_run(self, catalog_version: str, options: str, inputs: list[str]) -> int:
        """Record a new run; returns its id."""
        cursor = self.db.execute(
            "INSERT INTO runs (started_at, catalog_version, options, inputs) VALUES (?, ?, ?, ?)",
            (_now(), catalog_version, options, _storable("\n".join(inputs))))
        return int(cursor.lastrowid or 0)

    def finish_run(self, run_id: int) -> None:
        """Stamp the run as finished."""
        self.db.execute("UPDATE runs SET finished_at = ? WHERE run_id = ?", (_now(), run_id))

    def last_run(self) -> int | None:
        """The latest run id, or None for an empty store."""
        row = self.db.execute("SELECT MAX(run_id) FROM runs").fetchone()
        return row[0] if row and row[0] is not None else None

    # --- results --------------------------------------------------------------------

    def stored_key(self, rfq: str, source: str) -> StoredKey | None:
        """What the stored row for this RFQ was computed from, if any."""
        row = self.db.execute(
            "SELECT input_hash, catalog_version, options, status FROM results "
            "WHERE rfq = ? AND source = ?", (_storable(rfq), _storable(source))).fetchone()
        return StoredKey(*row) if row else None

    def touch(self, rfq: str, source: str, run_id: int) -> None:
        """Mark an unchanged (skipped) row as part of this run."""
        self.db.execute("UPDATE results SET run_id = ? WHERE rfq = ? AND source = ?",
                        (run_id, _storable(rfq), _storable(source)))

    def write(self, row: ResultRow, run_id: int) -> None:
        """Commit one finished RFQ in its own transaction (replacing an older row)."""
        columns = ("rfq", "source", "input_hash", "catalog_version", "options", "status",
                   *METRIC_COLUMNS, "input", "plan_json", "error", "validate_seconds",
                   "solve_seconds", "run_id", "created_at")
        values = tuple(_storable(value) for value in (
            row.rfq, row.source, row.input_hash, row.catalog_version, row.options,
            row.status, *(row.metrics.get(column) for column in METRIC_COLUMNS),
            row.input, row.plan_json, row.error, round(row.validate_seconds, 6),
            round(row.solve_seconds, 6), run_id, _now()))
        with self._transaction():
            self.db.execute(f"INSERT OR REPLACE INTO results ({', '.join(columns)}) "
                             f"VALUES ({', '.join('?' * len(columns))})", values)

    def _transaction(self) -> _Transaction:
        return _Transaction(self.db)

    def count(self, run_id: int | None = None) -> int:
        """Rows in the store (of one run when given)."""
        where, args = _run_filter(run_id)
        return int(self.db.execute(f"SELECT COUNT(*) FROM results {where}", args).fetchone()[0])

    def rows(self, run_id: int | None = None, columns: str = "*") -> Iterator[sqlite3.Row]:
        """Stream rows (ordered by rfq id, then source) without loading them all."""
        where, args = _run_filter(run_id)
        cursor = self.db.cursor()
        cursor.row_factory = sqlite3.Row
        cursor.execute(f"SELECT {columns} FROM results {where} ORDER BY rfq, source", args)
        yield from cursor

    def query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """A small read-only aggregate query (summaries)."""
        return self.db.execute(sql, args).fetchall()


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self._db.execute("ROLLBACK" if exc_type else "COMMIT")


def _storable(value: Any) -> Any:
    """Text SQLite can store: a lone surrogate (a byte of a file name that is not UTF-8, a
    JSON ``\\ud800`` escape in a bad file's id or message) would fail the insert; it is
    stored escaped (``\\xff``, ``\\ud800``)."""
    if isinstance(value, str):
        return escape_surrogates(value)
    return value


LOCK_ATTEMPTS = 50
"""Times a run re-opens the lock file that a finishing run removed under it."""


class RunLock:
    """An exclusive lock for one writing ``procure batch`` per store: ``<db>.lock`` next to
    the store's *real* file (links followed, so every name of one store shares the lock),
    held with ``flock`` for the life of the run (released by the kernel when the process
    dies, so a killed run never leaves a stale lock) and removed when the run ends. Where
    ``flock`` is missing it does nothing."""

    def __init__(self, db: Path) -> None:
        real = Path(os.path.realpath(db))
        self.path = real.with_name(real.name + ".lock")
        self._fd: int | None = None
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock
            return
        for _ in range(LOCK_ATTEMPTS):
            fd = self._open(db)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown"
                os.close(fd)
                raise InputError([Problem(shown_path(db), "--db", None,
                                          f"another procure batch is writing to this store "
                                          f"({holder}); wait for it to finish, or use another "
                                          "--db")]) from None
            if self._still_there(fd):
                break
            os.close(fd)  # locked a file the finishing run had just removed: again
        else:
            raise InputError([Problem(shown_path(db), "--db", None, "the lock file "
                                      f"{self.path.name} keeps disappearing; try again")])
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, started {_now()}".encode(), 0)
        self._fd = fd

    def _open(self, db: Path) -> int:
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise InputError([Problem(shown_path(db), "--db", None,
                                      f"cannot create the lock file {self.path.name} next to "
                                      f"it: {exc.strerror or exc}; is the folder writable?")]
                             ) from None

    def _still_there(self, fd: int) -> bool:
        """Whether the locked file is still the lock file's name (not removed meanwhile)."""
        try:
            named, held = os.stat(self.path), os.fstat(fd)
        except OSError:
            return False
        return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)

    def release(self) -> None:
        """Remove the lock file, then give the lock up (closing the file releases it): a
        run waiting on the old file sees it gone and takes a new one."""
        if self._fd is not None:
            if self._still_there(self._fd):
                self.path.unlink(missing_ok=True)
            os.close(self._fd)
            self._fd = None


def _run_filter(run_id: int | None) -> tuple[str, tuple[Any, ...]]:
    return ("WHERE run_id = ?", (run_id,)) if run_id is not None else ("", ())


def _check_path(path: Path) -> None:
    """A usable --db path: not too long, not a folder, in an existing folder."""
    too_long = path_too_long(os.fspath(path))
    if too_long is not None:
        raise InputError([Problem(shown_path(path), "--db", None, too_long)])
    if path.is_dir():
        raise InputError([Problem(shown_path(path), "--db", None,
                                  "is a folder; give a file name")])
    if path_reason(path.parent, folder=True) is not None:
        raise InputError([Problem(shown_path(path), "--db", None,
                                  f"folder {shown_path(path.parent)} does not exist")])
