"""`procure solve` and `procure explain`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from solver.backends import DEFAULT_SOLVER
from solver.console import EXIT_INFEASIBLE, EXIT_TIMEOUT, out
from solver.errors import InputError, Problem

SolverOpt = Annotated[str, typer.Option(
    "--solver", help="MIP backend: highs (default), cbc or cpsat.")]
TimeLimitOpt = Annotated[float | None, typer.Option(
    "--time-limit", min=0.01,
    help="Seconds for the whole run: the best plan found in time (status feasible, with its "
         "gap), or exit 4 when none was found.")]
CatalogOpt = Annotated[str | None, typer.Option(
    "--catalog", help="A catalog directory or price overlay on top of the built-in.")]


def load(rfq_path: Path, catalog_dir: str | None, overrides: list[str] | None = None,
         overrides_file: Path | None = None) -> tuple[Any, Any]:
    """Load catalog (+ scenario overrides) and one RFQ, validated."""
    from solver.catalog import load_catalog
    from solver.rfq import load_rfq

    catalog = load_catalog(catalog_dir)
    rfq = load_rfq(rfq_path, catalog)
    if overrides or overrides_file:
        from solver.overrides import apply_overrides

        catalog, rfq = apply_overrides(catalog, rfq, overrides or [], overrides_file)
    return catalog, rfq


def check_solver(name: str) -> None:
    """Only the requested backend is checked (no solver library is imported here)."""
    from solver.backends import BACKENDS

    if name not in BACKENDS:
        raise InputError([Problem("--solver", "", name,
                                  f"unknown solver; choose one of {', '.join(BACKENDS)}")])
    if not BACKENDS[name].available():
        raise InputError([Problem("--solver", "", name, "this solver is not installed")])


def print_plan(plan: dict[str, Any]) -> None:
    """A readable Rich summary of a plan."""
    from rich.table import Table

    status = plan["status"]
    colour = {"optimal": "green", "feasible": "yellow"}.get(status, "red")
    out.print(f"[bold]RFQ {plan['rfq']}[/]: [{colour}]{status}[/] "
              f"({plan['solver']}, {plan['solve_seconds']} s"
              + (f", gap {plan['gap']:.2%}" if status == "feasible" and plan.get("gap") else "")
              + ")")
    if status in ("optimal", "feasible"):
        cluster = plan["cluster"]
        boxes = ", ".join(f"{n['count']} × {n['server']} with {n['gpus_per_node']} × {n['gpu']}"
                          for n in cluster["nodes"])
        out.print(f"Buy: {boxes}; fabric [bold]{cluster['fabric']}[/] "
                  f"({'coupled' if cluster['coupled'] else 'independent nodes'}); "
                  f"{cluster['total_gpus']} GPUs, {cluster['power_kw']:.1f} kW, "
                  f"{cluster['rack_units']} U")
        table = Table(title="Workloads")
        for column in ("workload", "kind", "model", "precision", "GPU", "TP×PP×DP", "GPUs",
                       "nodes/job", "TTFT ms", "TPOT ms", "QPS cap", "tok/s", "hours",
                       "mem/GPU GB"):
            table.add_column(column)
        for w in plan["workloads"]:
            p = w["predicted"]
            table.add_row(w["name"], w["kind"], w["model"], w["precision"], w["gpu"],
                          f"{w['tp']}×{w['pp']}×{w['dp']}", str(w["gpus"]),
                          str(w["nodes_spanned"]), _fmt(p.get("ttft_ms")),
                          _fmt(p.get("tpot_ms")), _fmt(p.get("qps_capacity")),
                          _fmt(p.get("tokens_per_s")), _fmt(p.get("hours_to_complete")),
                          f"{w['memory']['total_gb']:.1f}/{w['memory']['capacity_gb']:.0f}")
        out.print(table)
        cost = Table(title=f"Cost over the horizon (objective {plan.get('objective', 'tco')})")
        cost.add_column("term")
        cost.add_column("USD", justify="right")
        for key, value in plan["cost"].items():
            label = key.removesuffix("_usd").replace("_", " ")
            style = "bold" if key in ("capex_usd", "tco_usd") else ""
            cost.add_row(label, f"{value:,.0f}", style=style)
        out.print(cost)
    for warning in plan.get("warnings", []):
        out.print(f"[yellow]warning:[/] {warning}", markup=True)
    info = plan.get("infeasibility")
    if info:
        out.print("[red]No plan found within the time limit.[/]" if status == "timeout"
                  else "[red]No plan meets this RFQ.[/]")
        for reason in info["reasons"]:
            out.print(f"  - {reason}", markup=False)
        if info.get("closest"):
            out.print(f"  closest feasible: {json.dumps(info['closest'])}", markup=False)
        out.print(f"  to fix: {info['to_fix']}", markup=False)


def exit_code(plan: dict[str, Any]) -> int:
    """0 a plan; 4 the time limit ran out before any plan; 3 infeasible (or solver error)."""
    if plan["status"] == "timeout":
        return EXIT_TIMEOUT
    return EXIT_INFEASIBLE if plan["status"] in ("infeasible", "error") else 0


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if isinstance(value, float) else str(value)


def register(app: typer.Typer) -> None:
    @app.command()
    def solve(
        rfq: Annotated[Path, typer.Argument(help="RFQ file (.yaml, .yml, .json).")],
        json_out: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
        solver: SolverOpt = DEFAULT_SOLVER,
        time_limit: TimeLimitOpt = None,
        catalog: CatalogOpt = None,
        set_: Annotated[list[str] | None, typer.Option(
            "--set", help="Override a parameter, e.g. gpu.rtx-pro-6000.price_usd=9500.")] = None,
        overrides: Annotated[Path | None, typer.Option(
            "--overrides", help="YAML file of parameter overrides.")] = None,
    ) -> int:
        """The cheapest plan (minimum TCO or capex) that meets every workload of the RFQ."""
        from solver.solve import solve_rfq

        check_solver(solver)
        cat, parsed = load(rfq, catalog, set_, overrides)
        plan = solve_rfq(parsed, cat, solver=solver, time_limit=time_limit)
        if json_out:
            print(json.dumps(plan, indent=2))
        else:
            print_plan(plan)
        return exit_code(plan)

    @app.command()
    def explain(
        rfq: Annotated[Path, typer.Argument(help="RFQ file (.yaml, .yml, .json).")],
        solver: SolverOpt = DEFAULT_SOLVER,
        catalog: CatalogOpt = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
    ) -> int:
        """The guide's decision path for each workload, the plan, and the counterfactuals."""
        from solver.candidates import build_candidates
        from solver.explain import counterfactuals
        from solver.solve import solve_rfq

        check_solver(solver)
        cat, parsed = load(rfq, catalog)
        table = build_candidates(cat, parsed)
        plan = solve_rfq(parsed, cat, solver=solver, table=table)
        alternatives = (counterfactuals(parsed, cat, plan, table, solver)
                        if plan["status"] in ("optimal", "feasible") else [])
        if json_out:
            print(json.dumps({"plan": plan, "counterfactuals": alternatives}, indent=2))
            return EXIT_INFEASIBLE if plan["status"] == "infeasible" else 0
        out.print("[bold]Decision path (domain.md; the first yes ends it)[/]")
        for step in plan["decision_path"]:
            mark = "[green]yes[/]" if step["answer"] else "[dim]no[/]"
            out.print(f"  {step['workload']} · step {step['step']}: {step['question']} {mark}")
            out.print(f"      {step['note']}", markup=False)
        print_plan(plan)
        if alternatives:
            out.print("[bold]Counterfactuals[/]")
            for alt in alternatives:
                if not alt["feasible"]:
                    out.print(f"  - {alt['alternative']}: infeasible — {alt['why']}", markup=False)
                else:
                    out.print(f"  - {alt['alternative']}: TCO ${alt['tco_usd']:,.0f} "
                              f"({alt['delta_usd']:+,.0f}) — {alt['why']}", markup=False)
        return EXIT_INFEASIBLE if plan["status"] == "infeasible" else 0
