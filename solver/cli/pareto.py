"""`procure pareto` and `procure sensitivity`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from solver.cli.solve import CatalogOpt, SolverOpt, check_outputs, check_solver, load
from solver.common.console import EXIT_INFEASIBLE, err, out, readable
from solver.common.errors import SolverError
from solver.common.jsontext import indented
from solver.common.limits import MAX_PARETO_POINTS, check_range, check_workers
from solver.optimize.backends import DEFAULT_SOLVER

SetOpt = Annotated[list[str] | None, typer.Option(
    "--set", help="Override a parameter, e.g. gpu.l4.price_usd=2500.")]
OverridesOpt = Annotated[Path | None, typer.Option(
    "--overrides", help="YAML file of parameter overrides.")]
RfqArg = Annotated[Path, typer.Argument(help="RFQ file (.yaml, .yml, .json).")]


def _print_frontier(result: dict[str, Any]) -> None:
    from rich.table import Table

    from solver.report.charts import cluster_text

    cost_key, metric = result["axes"]
    better = "lower" if result["lower_is_better"][metric] else "higher"
    table = Table(title=f"Pareto frontier of {result['rfq']}: {cost_key} vs "
                        f"{result['workload']} {metric} ({better} is better)")
    for column in ("#", cost_key, metric, "GPUs", "nodes", "cluster", "layout"):
        table.add_column(column, justify="right" if column in ("#", cost_key, metric, "GPUs",
                                                                "nodes") else "left")
    for index, point in enumerate(result["points"], start=1):
        plan = point["plan"]
        work = next(w for w in plan["workloads"] if w["name"] == result["workload"])
        table.add_row(str(index), f"{point[cost_key]:,.0f}", f"{point[metric]:,.2f}",
                      str(plan["cluster"]["total_gpus"]), str(plan["cluster"]["total_nodes"]),
                      cluster_text(plan["cluster"]),
                      f"{work['precision']} TP{work['tp']}×PP{work['pp']}×DP{work['dp']}")
    out.print(table)
    out.print(f"{len(result['points'])} non-dominated plans from {result['candidates_solved']} "
              f"solves in {result['seconds']} s ({result['method']})", markup=False)


def _print_report(report: dict[str, Any]) -> None:
    from rich.table import Table

    base = report["base"]
    out.print(f"[bold]RFQ {report['rfq']}[/]: base {report['objective']} "
              f"{base['tco_usd'] or 0:,.0f} USD — {base['cluster']}")
    table = Table(title="Tornado: cost at the ends of each parameter's range")
    for column in ("parameter", "range", "cost at low", "cost at high", "swing", "flips"):
        table.add_column(column, justify="left" if column in ("parameter", "range")
                         else "right")
    for row in report["parameters"]:
        table.add_row(row["label"], f"{readable(row['low'])} .. {readable(row['high'])}",
                      _usd(row["tco_low_usd"]), _usd(row["tco_high_usd"]),
                      _usd(row["swing_usd"]), str(len(row["flips"])) if row["flips"] else "-")
    out.print(table)
    flipping = [row for row in report["parameters"] if row["flips"]]
    if flipping:  # below the table: a cluster is too long for a column at 80 characters
        out.print("[bold]Where the plan flips[/]")
    for row in flipping:
        out.print(f"{row['label']}:", markup=False)
        for flip in row["flips"]:
            at = readable(flip["at"], flip.get("below"), flip.get("above"))
            out.print(f"  at {at} → {flip['to']}", markup=False)
    out.print(f"{report['solves']} solves in {report['seconds']} s", markup=False)


def _print_sweep(result: dict[str, Any]) -> None:
    from rich.table import Table

    kind = result["sweep"]
    table = Table(title=f"What-if sweep of {result['rfq']}: {kind} ({result['meaning']})")
    for column in (kind, "total cost", "rental", "choice", "per workload", "bought"):
        table.add_column(column, justify="right" if column in (kind, "total cost", "rental")
                         else "left", overflow="fold")  # node type ids wrap, never cut
    for point in result["points"]:
        if point["choice"] is None:
            table.add_row(readable(point[kind]), point["status"], "-", "-", "-", "-")
            continue
        work = ", ".join(f"{name} {how}" for name, how in point["sourcing"].items())
        bought = point["cluster"]
        if len(point["nodes_bought"]) > 1:
            bought += " (nodes at months " + ", ".join(
                f"{m:g}: {n}" for m, n in zip(point["start_months"], point["nodes_bought"],
                                               strict=True)) + ")"
        table.add_row(readable(point[kind]), _usd(point["tco_usd"]), _usd(point["rental_usd"]),
                      point["choice"], work, bought)
    out.print(table)
    if result["note"]:
        out.print(f"note: {result['note']}", markup=False)
    out.print(f"{len(result['points'])} solves in {result['seconds']} s", markup=False)


def _sweep_csv(results: list[dict[str, Any]], path: Path) -> None:
    import csv

    from solver.common.spreadsheet import safe_row

    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sweep", "value", "status", "tco_usd", "rental_usd", "capex_usd",
                         "choice", "sourcing", "cluster"])
        for result in results:
            for p in result["points"]:
                writer.writerow(safe_row([
                    result["sweep"], p[result["sweep"]], p["status"], p.get("tco_usd"),
                    p.get("rental_usd"), p.get("capex_usd"), p.get("choice"),
                    ";".join(f"{k}={v}" for k, v in (p.get("sourcing") or {}).items()),
                    p.get("cluster")]))


def _usd(value: float | None) -> str:
    return "infeasible" if value is None else f"{value:,.0f}"


def _prepare(rfq: Path, catalog: str | None, set_: list[str] | None,
             overrides: Path | None, solver: str, plot: Path | None,
             csv_out: Path | None = None) -> tuple[Any, Any]:
    """Check the solver and the output paths (``--plot``, ``--csv``: a file in an existing
    folder, never an input), then load catalog + RFQ with overrides applied."""
    check_solver(solver)
    if plot is not None:
        from solver.report.charts import check_plot_path

        check_plot_path(plot, "--plot")
    check_outputs({"--plot": plot, "--csv": csv_out}, rfq, catalog, overrides)
    return load(rfq, catalog, set_, overrides)


def pareto(
    rfq: RfqArg,
    json_out: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
    points: Annotated[int | None, typer.Option(
        "--points", min=1, help="At most N plans (the cheapest and N-1 spread out; "
        f"N <= {MAX_PARETO_POINTS}).")] = None,
    csv_out: Annotated[Path | None, typer.Option("--csv", help="Write the points as CSV.")
                       ] = None,
    plot: Annotated[Path | None, typer.Option(
        "--plot", help="Write a chart: out.html (plotly) or out.png (matplotlib).")] = None,
    metric: Annotated[str | None, typer.Option(
        "--metric", help="WORKLOAD:METRIC — tpot_ms, ttft_ms, hours_to_complete, "
                         "headroom or failure_domains (default: first workload's).")] = None,
    sweep: Annotated[list[str] | None, typer.Option(
        "--sweep", help="What-if instead of the frontier: KIND=V1,V2,... with KIND "
                        "rental-price (offer $/GPU-h multiplier) or growth (serving "
                        "demand growth per year); repeatable. Cost and buy/rent "
                        "choice at each value (docs/rental.md).")] = None,
    over: Annotated[str | None, typer.Option(
        "--over", help="budget: the share of demand served (objective max_served) at "
                       "--points budgets up to the one that serves everything.")] = None,
    solver: SolverOpt = DEFAULT_SOLVER,
    catalog: CatalogOpt = None,
    set_: SetOpt = None,
    overrides: OverridesOpt = None,
    scheduler: Annotated[str | None, typer.Option(
        "--scheduler", help="Solve the independent levels on the Dask cluster at "
        "tcp://HOST:PORT (needs pip install 'procure[cluster]'): the headroom, "
        "failure_domains and batch hours_to_complete targets, --over budget's budgets, "
        "--sweep's values. The tpot_ms/ttft_ms and training-hours walks are sequential "
        "(each level set by the plan before) and run here. Same answer as without.")
    ] = None,
) -> int:
    """Non-dominated plans: cost against latency or time-to-finish (or, with --sweep,
    the cost and the buy/rent choice across rental prices or demand growth; with
    --over budget, the share of demand each budget serves)."""
    if scheduler:
        from solver.analysis.cluster import check_scheduler

        check_scheduler(scheduler)
    if over is not None:
        return _over(rfq, over, points, solver, catalog, set_, overrides, json_out, csv_out,
                     scheduler)
    if sweep:
        return _sweeps(rfq, sweep, solver, catalog, set_, overrides, json_out, csv_out,
                       scheduler)
    check_range("--points", points, 1, MAX_PARETO_POINTS)
    cat, parsed = _prepare(rfq, catalog, set_, overrides, solver, plot, csv_out)
    return _frontier(cat, parsed, metric, points, solver, json_out, csv_out, plot, scheduler)


def _over(rfq: Path, over: str, points: int | None, solver: str, catalog: str | None,
          set_: list[str] | None, overrides: Path | None, json_out: bool,
          csv_out: Path | None, scheduler: str | None = None) -> int:
    """``pareto --over budget``: served share against budget (solver/analysis/budget.py);
    with ``scheduler`` each budget is solved on that Dask cluster."""
    from solver.analysis.budget import budget_curve, budget_lines
    from solver.cli.progress import stderr_progress
    from solver.common.errors import InputError, Problem
    from solver.common.progress import report

    if over != "budget":
        raise InputError([Problem("command line", "--over", over,
                                  "the only sweep over a limit is 'budget'")])
    check_range("--points", points, 2, MAX_PARETO_POINTS)
    cat, parsed = _prepare(rfq, catalog, set_, overrides, solver, None, csv_out)
    where = " on the Dask cluster" if scheduler else ""
    with stderr_progress():
        report("Pareto: the full-demand plan")
        result = budget_curve(cat, parsed, points=points, solver=solver, scheduler=scheduler,
                              progress=lambda done, total: report(
                                  f"Pareto: budgets{where}", done, total))
    if csv_out is not None:
        _budget_csv(result, csv_out)
    if json_out:
        print(indented(result))
    else:
        for line in budget_lines(result):
            out.print(line, markup=False)
    return 0 if result["points"] else EXIT_INFEASIBLE


def _budget_csv(result: dict[str, Any], path: Path) -> None:
    """One row per budget: budget, served share, GPUs, TCO and each workload's share."""
    import csv

    from solver.common.spreadsheet import safe_row

    names = list(result.get("weights", {}))
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(safe_row(["budget_usd", "served_share", "total_gpus", "tco_usd"]
                                 + [f"served_{n}" for n in names]))
        for point in result["points"]:
            writer.writerow(safe_row(
                [point["budget_usd"], point.get("served_share"), point.get("total_gpus"),
                 point.get("tco_usd")] + [point.get("workloads", {}).get(n) for n in names]))


def _sweeps(rfq: Path, sweep: list[str], solver: str, catalog: str | None,
            set_: list[str] | None, overrides: Path | None, json_out: bool,
            csv_out: Path | None, scheduler: str | None = None) -> int:
    """``pareto --sweep``: the cost and buy/rent choice at each value of each sweep (the
    sweeps are checked before anything is loaded); with ``scheduler`` each value is solved
    on that Dask cluster."""
    from solver.analysis.whatif import parse_sweep
    from solver.analysis.whatif import sweep as run_sweep
    from solver.cli.progress import stderr_progress
    from solver.common.progress import report

    asked = [parse_sweep(text) for text in sweep]
    cat, parsed = _prepare(rfq, catalog, set_, overrides, solver, None, csv_out)
    with stderr_progress():
        results = []
        for kind, values in asked:
            report(f"Pareto: {kind} sweep")
            results.append(run_sweep(cat, parsed, kind, values, solver, scheduler))
    if csv_out is not None:
        _sweep_csv(results, csv_out)
    if json_out:
        print(indented(results[0] if len(results) == 1 else results))
    else:
        for result in results:
            _print_sweep(result)
    feasible = any(p["choice"] is not None for r in results for p in r["points"])
    if {p["status"] for r in results for p in r["points"]} == {"error"}:  # not infeasible
        raise SolverError(str(results[0]["points"][0].get("error") or "every solve failed")
                          .removeprefix("solver error: "))
    return 0 if feasible else EXIT_INFEASIBLE


def _frontier(cat: Any, parsed: Any, metric: str | None, points: int | None, solver: str,
              json_out: bool, csv_out: Path | None, plot: Path | None,
              scheduler: str | None = None) -> int:
    """``pareto``: the non-dominated plans, printed, as JSON, CSV and/or a chart."""
    from solver.analysis.pareto import frontier, frontier_json
    from solver.cli.progress import stderr_progress
    from solver.report.charts import frontier_csv, frontier_plot

    if scheduler:
        from solver.analysis.pareto import sequential_walk

        why = sequential_walk(parsed, metric)
        if why:
            err.print(f"note: --scheduler: {why}", markup=False)
    with stderr_progress():
        result = frontier_json(frontier(cat, parsed, metric=metric, points=points,
                                        solver=solver, scheduler=scheduler))
    if csv_out is not None:
        frontier_csv(result, csv_out)
    if plot is not None and result["points"]:
        frontier_plot(result, plot)
        err.print(f"wrote {plot}")  # stderr: --json output stays JSON
    if json_out:
        print(indented(result))
    elif result["points"]:
        _print_frontier(result)
    else:
        out.print("[red]No plan meets this RFQ[/] — run `procure solve` for what binds.")
    return 0 if result["points"] else EXIT_INFEASIBLE


def sensitivity(
    rfq: RfqArg,
    param: Annotated[str | None, typer.Option(
        "--param", help="One parameter path, e.g. gpu.rtx-pro-6000.price_usd or demand."
    )] = None,
    range_: Annotated[str | None, typer.Option(
        "--range", help="LOW:HIGH, relative (-30%:+30%) or absolute (0.1:0.3).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
    plot: Annotated[Path | None, typer.Option(
        "--plot", help="Write a tornado chart: .html (plotly) or .png (matplotlib).")
    ] = None,
    solver: SolverOpt = DEFAULT_SOLVER,
    catalog: CatalogOpt = None,
    set_: SetOpt = None,
    overrides: OverridesOpt = None,
    workers: Annotated[int | None, typer.Option(
        "--workers", min=1, help="Processes sweeping the parameters (default: CPU cores; "
        "1 = in this process). Same report either way.")] = None,
    scheduler: Annotated[str | None, typer.Option(
        "--scheduler", help="Sweep on the Dask cluster at tcp://HOST:PORT instead (needs "
        "pip install 'procure[cluster]'). Same report.")] = None,
) -> int:
    """How TCO and the chosen plan move with prices, power, overhead, demand; flips."""
    from solver.analysis.sensitivity import report as build_report
    from solver.optimize.candidate_workers import default_workers
    from solver.report.charts import tornado_plot

    check_workers(workers)
    if scheduler:
        from solver.analysis.cluster import check_scheduler

        check_scheduler(scheduler)
    cat, parsed = _prepare(rfq, catalog, set_, overrides, solver, plot)
    from solver.cli.progress import stderr_progress

    with stderr_progress():
        report = build_report(cat, parsed, param=param, range_text=range_, solver=solver,
                              workers=workers or default_workers(), scheduler=scheduler)
    if report["base"]["status"] == "error":  # no answer about the RFQ: never infeasible
        raise SolverError(report["base"].get("error") or f"{solver} failed on the base RFQ")
    if plot is not None:
        tornado_plot(report, plot)
        err.print(f"wrote {plot}")
    if json_out:
        print(indented(report))
    else:
        _print_report(report)
    return 0 if report["base"]["status"] in ("optimal", "feasible") else EXIT_INFEASIBLE


def register(app: typer.Typer) -> None:
    """Add `pareto` and `sensitivity` to the `procure` app."""
    app.command()(pareto)
    app.command()(sensitivity)
