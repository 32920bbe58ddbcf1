"""`procure batch`: evaluate many RFQs into a resumable results store, optionally export."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from solver.common.console import EXIT_OK, err, out

EXIT_INTERRUPTED = 130
STATUS_STYLE = {"optimal": "green", "feasible": "green", "infeasible": "yellow",
                "invalid": "red", "error": "bold red"}


class PlainLog:
    """Progress as plain log lines (not a terminal): one line per RFQ, stamped."""

    def __init__(self) -> None:
        self.total = 0
        self.done = 0
        self.started = time.perf_counter()

    def start(self, total: int) -> None:
        self.total = total
        print(f"batch: {total} RFQs", file=sys.stderr, flush=True)

    def advance(self, event: Any) -> None:
        self.done += 1
        elapsed = time.perf_counter() - self.started
        what = "skipped (unchanged)" if event.skipped else f"{event.seconds:.2f}s"
        print(f"[{self.done}/{self.total} {elapsed:7.1f}s] {event.rfq_id}: {event.status} {what}",
              file=sys.stderr, flush=True)


class RichProgress:
    """A Rich progress bar with count, rate and ETA (a terminal)."""

    def __init__(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("[bold]batch"), BarColumn(), MofNCompleteColumn(), TaskProgressColumn(),
            TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("ETA"),
            TimeRemainingColumn(), TextColumn("{task.fields[last]}"), console=err,
            transient=False)
        self.task: Any = None
        self.done = 0
        self.started = time.perf_counter()

    def __enter__(self) -> RichProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def start(self, total: int) -> None:
        self.task = self.progress.add_task("batch", total=total, rate="", last="")
        self.started = time.perf_counter()

    def advance(self, event: Any) -> None:
        self.done += 1
        rate = self.done / max(time.perf_counter() - self.started, 1e-9)
        style = STATUS_STYLE.get(event.status, "")
        self.progress.update(self.task, advance=1, rate=f"{rate:.1f}/s",
                             last=f"[{style}]{escape(event.rfq_id)}: {event.status}[/]")
        total = self.progress.tasks[0].total if self.progress.tasks else None
        if self.task is not None and total is not None and self.done > total:
            self.progress.update(self.task, total=self.done)


def print_summary(summary: Any) -> None:
    """The end-of-run summary: counts by status, TCO, GPU and fabric mix, slowest RFQs."""
    from rich.table import Table

    table = Table(title=f"batch run {summary.run_id} → {escape(str(summary.db))} (catalog "
                        f"{summary.catalog_version})", show_header=False)
    table.add_column("", style="bold")
    table.add_column("")
    table.add_row("RFQs", f"{summary.total} ({summary.computed} evaluated, "
                          f"{summary.skipped} unchanged and skipped)")
    table.add_row("by status", ", ".join(
        f"[{STATUS_STYLE.get(s, '')}]{s}[/] {n}" for s, n in summary.by_status.items()))
    if summary.median_tco_usd is not None:
        table.add_row("TCO", f"total ${summary.total_tco_usd:,.0f}, "
                             f"median ${summary.median_tco_usd:,.0f}")
    if summary.gpu_mix:
        table.add_row("GPUs", ", ".join(f"{g} {n}" for g, n in summary.gpu_mix.items()))
    if summary.fabric_mix:
        table.add_row("fabrics", ", ".join(f"{f} {n}" for f, n in summary.fabric_mix.items()))
    if summary.slowest:
        table.add_row("slowest", ", ".join(f"{r} {s:.2f}s" for r, s in summary.slowest))
    if summary.computed:
        table.add_row("speed", f"{summary.rate_per_s:.1f} RFQs/s over "
                               f"{summary.wall_seconds:.1f}s wall")
    out.print(table)
    for rfq, status, reason in summary.problems:
        out.print(f"[{STATUS_STYLE[status]}]{status}[/] {escape(rfq)}: ", end="")
        out.print(reason, markup=False)
    bad = sum(summary.by_status.get(s, 0) for s in ("invalid", "error"))
    if bad > len(summary.problems):
        out.print(f"... and {bad - len(summary.problems)} more invalid or failed RFQs: see "
                  f"--export or the results table in {summary.db}")


def register(app: typer.Typer) -> None:
    """Add `procure batch` to the app."""

    @app.command()
    def batch(
        inputs: Annotated[list[Path], typer.Argument(
            metavar="INPUT", help="RFQ files, folders of them (recursive), CSV batches.")],
        db: Annotated[Path, typer.Option("--db", help="SQLite results file (created if new).")],
        workers: Annotated[int | None, typer.Option(
            "--workers", min=1, help="Worker processes (default: CPU cores).")] = None,
        export: Annotated[Path | None, typer.Option(
            "--export", help="Also write the results to .csv, .parquet or .xlsx.")] = None,
        executor: Annotated[str, typer.Option(
            "--executor", help="local (process pool) or dask.")] = "local",
        scheduler: Annotated[str | None, typer.Option(
            "--scheduler", help="Dask scheduler address tcp://HOST:PORT (default: start "
                                "a LocalCluster).")] = None,
        solver: Annotated[str, typer.Option("--solver", help="highs (default), cbc or cpsat.")] = "highs",
        time_limit: Annotated[float | None, typer.Option(
            "--time-limit", min=0.0, help="Solver time limit per RFQ, seconds.")] = None,
        catalog: Annotated[str | None, typer.Option(
            "--catalog", help="A catalog directory, or a price overlay over the built-in one.")
        ] = None,
    ) -> None:
        """Evaluate many RFQs, resumable: results go to --db as each finishes."""
        from solver.batch.runner import run_batch
        from solver.common.errors import InputError, Problem, shown_path
        from solver.common.limits import MAX_TIME_LIMIT_S, check_range, check_workers

        check_workers(workers)
        check_range("--time-limit", time_limit, 0.0, MAX_TIME_LIMIT_S)
        if executor not in ("local", "dask"):
            raise InputError([Problem("--executor", "", executor, "use local or dask")])
        if solver not in ("cbc", "highs", "cpsat"):
            raise InputError([Problem("--solver", "", solver, "use cbc, highs or cpsat")])
        kwargs: dict[str, Any] = {
            "catalog_dir": catalog, "workers": workers, "executor": executor,
            "scheduler": scheduler, "solver": solver, "time_limit": time_limit,
            "export": export}
        try:
            if err.is_terminal:
                with RichProgress() as progress:
                    summary = run_batch(inputs, db, observer=progress, **kwargs)
            else:
                summary = run_batch(inputs, db, observer=PlainLog(), **kwargs)
        except KeyboardInterrupt:
            err.print(f"[yellow]interrupted[/]: every finished RFQ is saved in {db}; run the "
                      "same command again to resume")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        print_summary(summary)
        if summary.exported is not None and export is not None:
            out.print(f"exported {summary.exported} RFQs to {shown_path(export)}")
        raise typer.Exit(EXIT_OK)
