"""`procure solve` and `procure explain`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from solver.common.console import EXIT_INFEASIBLE, EXIT_TIMEOUT, out, print_wrapped
from solver.common.errors import InputError, Problem, SolverError
from solver.common.jsontext import indented
from solver.common.limits import MAX_TIME_LIMIT_S, check_range
from solver.optimize.backends import DEFAULT_SOLVER

if TYPE_CHECKING:
    from solver.optimize.plan_model import Plan, WorkloadPlan
    from solver.rfq.schema import AnyWorkload, Rfq

SolverOpt = Annotated[str, typer.Option(
    "--solver", help="MIP backend: highs (default), cbc or cpsat.")]
TimeLimitOpt = Annotated[float | None, typer.Option(
    "--time-limit", min=0.01,
    help="Seconds for the whole run: the best plan found in time (status feasible, with its "
         "gap), or exit 4 when none was found.")]
CatalogOpt = Annotated[str | None, typer.Option(
    "--catalog", help="A catalog directory, or a price overlay over the built-in one.")]


def load(rfq_path: Path, catalog_dir: str | None, overrides: list[str] | None = None,
         overrides_file: Path | None = None) -> tuple[Any, Any]:
    """Load catalog (+ scenario overrides) and one RFQ, validated."""
    from solver.catalog.load import load_catalog
    from solver.rfq.schema import load_rfq

    catalog = load_catalog(catalog_dir)
    rfq = load_rfq(rfq_path, catalog)
    if overrides or overrides_file:
        from solver.rfq.overrides import apply_overrides

        catalog, rfq = apply_overrides(catalog, rfq, overrides or [], overrides_file)
    return rfq.catalog(catalog), rfq


def check_outputs(outputs: dict[str, Path | None], rfq: Path, catalog: str | None,
                  overrides: Path | None = None) -> None:
    """Each output path given (by its flag) is a file in an existing folder that is none of
    the run's inputs (the RFQ, the overrides file, the files of a catalog overlay): checked
    before anything is solved (:func:`solver.common.outputs.check_output_path`)."""
    from solver.catalog.load import overlay_files
    from solver.common.outputs import check_output_path

    inputs = [rfq, *([overrides] if overrides else []), *overlay_files(catalog)]
    for flag, path in outputs.items():
        if path is not None:
            check_output_path(path, flag, inputs=inputs)


def plan_with_alternatives(rfq: Path, catalog: str | None, solver: str):
    """Load and solve an RFQ, then re-solve its counterfactuals (none when infeasible):
    what `explain` and `quote` both present. Returns (catalog, rfq, plan, alternatives)."""
    from solver.analysis.explain import counterfactuals, solve_rfq
    from solver.optimize.candidate_workers import default_workers
    from solver.optimize.candidates import build_candidates

    check_solver(solver)
    cat, parsed = load(rfq, catalog)
    table = build_candidates(cat, parsed)
    plan = solve_rfq(parsed, cat, solver=solver, table=table, binding=True,
                     workers=default_workers(),  # the binding re-solves of a large RFQ
                     alternative=True)
    alternatives = counterfactuals(parsed, cat, plan, table, solver) if plan.feasible else []
    return cat, parsed, plan, alternatives


def check_solver(name: str) -> None:
    """Only the requested backend is checked (no solver library is imported here)."""
    from solver.optimize.backends import BACKENDS

    if name not in BACKENDS:
        raise InputError([Problem("--solver", "", name,
                                  f"unknown solver; choose one of {', '.join(BACKENDS)}")])
    if not BACKENDS[name].available():
        raise InputError([Problem("--solver", "", name, "this solver is not installed")])


def print_plan(plan: Plan, assumptions: dict[str, Any] | None = None,
               rfq: Rfq | None = None, console: Any | None = None) -> None:
    """A readable summary of a plan that fits 80 columns: one block per workload.

    ``assumptions`` (from :func:`solver.common.wording.assumptions`) adds the horizon, electricity,
    PUE, overhead factor and price dates to the header; ``rfq`` adds each workload's targets.
    """
    from solver.common.wording import (
        assumption_lines,
        node_lines,
        plural,
        served_summary,
        timetable_lines,
        usd,
        years,
    )

    con = console or out
    status = plan.status
    colour = {"optimal": "green", "feasible": "yellow"}.get(status, "red")
    con.print(f"[bold]RFQ {plan.rfq}[/]: [{colour}]{status}[/] "
              f"({plan.solver}, {plan.solve_seconds} s"
              + (f", gap {plan.gap:.2%}" if status == "feasible" and plan.gap else "")
              + ")")
    if assumptions:
        con.print("[bold]Assumptions[/]")
        for line in assumption_lines(assumptions):
            print_wrapped(con, line, first="  ", indent="    ")
    specs = {w.name: w for w in rfq.workloads} if rfq is not None else {}
    horizon = assumptions["horizon_years"] if assumptions else None
    consumer = [w for w in plan.warnings if w.startswith(CONSUMER_WARNING)]
    if plan.feasible and (consumer or plan.licensed_alternative is not None):
        _print_licence(plan, consumer, con)  # before the plan, beside its price
    if plan.feasible and plan.cost is not None:
        cluster, cost = plan.cluster, plan.cost
        con.print(f"[bold]Buy[/] (TCO {usd(cost.tco_usd)}"
                  + (f" over {years(horizon)}" if horizon else "")
                  + f", capex {usd(cost.capex_usd)}):")
        for line in node_lines(cluster.model_dump()):
            con.print(f"  {line}", markup=False)
        fabric = (f"fabric {cluster.fabric}, {plural(cluster.coupled_nodes, 'node')} "
                  "coupled" if cluster.coupled else "no fabric: independent nodes")
        con.print(f"  {fabric}; {plural(cluster.total_gpus, 'GPU')}, "
                  f"{cluster.power_kw:,.1f} kW, {cluster.rack_units} U", markup=False)
        if cluster.frontend is not None:
            print_wrapped(con, f"front-end: {cluster.frontend.note}", first="  ",
                          indent="    ")
        budget = rfq.budget_usd if rfq is not None else None
        for line in served_summary([s.model_dump(mode="json") for s in plan.served or []],
                                   budget):
            con.print(line, markup=False)
        day = timetable_lines([s.model_dump(mode="json") for s in plan.timetable or []])
        if day:
            con.print("[bold]Over the day[/] (busy and quiet hours):")
        for line in day:
            con.print(f"  {line}", markup=False)
        for w in plan.workloads:
            _print_workload(w, specs.get(w.name), con)
        con.print()
        _print_rental(plan, con)
        _print_buy_or_rent(plan, con)
        _print_bom(plan, con)
        _print_cost(plan, horizon, con)
    if plan.binding:
        from solver.common.wording import binding_lines

        con.print("[bold]Binding constraints (each relaxed one step and re-solved)[/]")
        for line in binding_lines([b.model_dump() for b in plan.binding], plan.objective):
            con.print(f"  {line}", markup=False)
    elif plan.binding is not None and plan.feasible:
        from solver.common.wording import UNPRICED_WARNING

        unpriced = any(w.startswith(UNPRICED_WARNING) for w in plan.warnings)
        con.print("[bold]Binding constraints[/]: " + (
            "none found (one or more relaxations not priced in time: see the warnings)"
            if unpriced else "none (relaxing any one saves nothing)"))
    for warning in plan.warnings:
        if not (plan.feasible and warning.startswith(CONSUMER_WARNING)):  # shown above
            print_wrapped(con, warning, first="warning: ", style="yellow")
    _print_infeasibility(plan, horizon, con)


CONSUMER_WARNING = "consumer card "
"""How solver.analysis.realism.consumer_card_warnings begins each warning."""


def _print_licence(plan: Plan, consumer: list[str], con: Any) -> None:
    """A plan on consumer cards: the licence warnings and the datacenter-licensed
    alternative with its extra cost, before the plan (issue 32)."""
    from solver.common.wording import licensed_alternative_line

    con.print("[bold yellow]Consumer cards[/] (licence):")
    for warning in consumer:
        print_wrapped(con, warning, first="  warning: ", indent="    ", style="yellow")
    alt = plan.licensed_alternative
    line = licensed_alternative_line(alt.model_dump() if alt else None, plan.objective)
    if line is not None:
        print_wrapped(con, line, first="  ", indent="    ")


def _print_workload(work: WorkloadPlan, spec: AnyWorkload | None, con: Any) -> None:
    """One workload's block: its layouts, memory per GPU, serving figures and targets."""
    from rich.table import Table

    from solver.common.wording import layout_rows, serving_lines, target_rows

    con.print()
    # wrapped in bytes as well as characters (the dash is 3 bytes; a model given as a
    # config.json path can be long), the name in bold
    print_wrapped(con, f"— {work.kind.replace('_', ' ')}, {work.model}, "
                  f"{work.precision.upper()}", first=f"{work.name} ", style="bold")
    w = work.model_dump(mode="json")  # the wording helpers read the plan JSON
    rows = layout_rows(w)
    layouts = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0))
    # expert parallelism or disaggregated units: say it per row (a unit's pools below)
    expert = any(r["ep"] > 1 or r["mode"] == "disaggregated" for r in rows)
    columns = ("GPU", "precision", "TP×PP×DP") + (("layout",) if expert else ()) + (
        "GPUs", "nodes each")
    for column in columns:
        layouts.add_column(column, justify="left" if column in ("GPU", "layout") else "right",
                           no_wrap=True)
    for row in rows:
        layouts.add_row(row["gpu"], row["precision"],
                        f"{row['tp']}×{row['pp']}×{row['dp']}",
                        *(("disaggregated" if row["mode"] == "disaggregated" else
                           row["layout"],) if expert else ()), str(row["gpus"]),
                        str(row["nodes_per_replica"]))
    if len(rows) > 1:
        layouts.add_row("total", "", "", *(("",) if expert else ()),
                        str(sum(r["gpus"] for r in rows)), "", style="bold")
    con.print(layouts)
    for row in rows:  # a disaggregated unit's pools are too long for the table's column
        if row["mode"] == "disaggregated":
            print_wrapped(con, f"{row['gpu']} unit ({row['gpus'] // row['dp']} GPUs, "
                               f"{row['dp']}×): {row['layout']}", first="  ", indent="    ")
    mem = work.memory
    training = work.kind in ("lora", "qlora", "full_finetune", "pretrain")
    dp_means = ("DP = data-parallel copies inside the one job" if training
                else "DP = independent replicas")
    con.print(f"  {dp_means}; memory per GPU {mem.total_gb:,.1f} of "
              f"{mem.capacity_gb:,.0f} GB"
              + (" (first layout)" if len(rows) > 1 else ""), markup=False)
    for line in serving_lines(w):  # wrapped at the width, continuation lines indented
        for part in line.split("\n"):
            print_wrapped(con, part.strip(), first="  " + " " * (len(part) - len(part.lstrip())),
                          indent="    ")
    targets = target_rows(w, spec)
    if targets:
        checks = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0))
        for column in ("metric", "predicted", "target", "verdict"):
            checks.add_column(column, justify="left" if column in ("metric", "verdict")
                              else "right", no_wrap=column != "metric")
        for row in targets:
            checks.add_row(row["metric"], row["predicted"], row["target"],
                           row["verdict"])
        con.print(checks)


def _print_buy_or_rent(plan: Plan, con: Any) -> None:
    """Owning against renting, each workload alone, with the break-evens (when the catalog
    rents the GPUs the workload could use)."""
    rows = plan.buy_vs_rent or []
    if not any(row.rented_usd is not None for row in rows):
        return
    from solver.optimize.rental import buy_vs_rent_lines

    con.print("[bold]Buy or rent (each workload alone)[/]")
    for line in buy_vs_rent_lines(rows):
        con.print(f"  {line}", markup=False)


def _print_cost(plan: Plan, horizon: float | None, con: Any) -> None:
    """The cost terms of the plan (capex and TCO in bold)."""
    from rich.table import Table

    from solver.common.wording import cost_label, usd, years

    if plan.cost is None:
        return
    table = Table(title="Cost" + (f" over {years(horizon)}" if horizon else "")
                  + f" (objective {plan.objective})", title_justify="left")
    table.add_column("term", no_wrap=True)
    table.add_column("USD", justify="right", no_wrap=True)
    for key, value in plan.cost.model_dump().items():
        style = "bold" if key in ("capex_usd", "tco_usd") else ""
        table.add_row(cost_label(key), usd(value), style=style)
    con.print(table)


def _print_infeasibility(plan: Plan, horizon: float | None, con: Any) -> None:
    """Why no plan was found, and the nearest feasible changes."""
    from solver.common.wording import relaxations

    info = plan.infeasibility
    if info and plan.status == "error":  # no answer about the RFQ: said once, by the caller
        return
    if info:
        con.print("[red]No plan found within the time limit.[/]" if plan.status == "timeout"
                  else "[red]No plan meets this RFQ.[/]")
        for reason in info.reasons:
            print_wrapped(con, reason, first="  - ", indent="    ")
        words = relaxations(info.model_dump(mode="json"), plan.objective, horizon)
        if words:
            con.print("Nearest feasible changes:")
            for line in words:
                print_wrapped(con, line, first="  - ", indent="    ")
        else:
            print_wrapped(con, str(info.to_fix), first="  to fix: ", indent="    ")


def _print_rental(plan: Plan, con: Any) -> None:
    """What the plan rents (solver/optimize/rental.py) and its phased purchase schedule
    (solver/optimize/schedule.py), when it has them."""
    from solver.optimize.rental import rent_lines

    lines = rent_lines(plan)
    if lines:
        con.print(f"[bold]Rent[/] (rental {_money(plan.cost.rental_usd if plan.cost else None)}):")
        for line in lines:
            con.print(f"  {line}", markup=False)
        con.print()
    from solver.optimize.schedule import schedule_lines

    phased = schedule_lines(plan)
    if phased:
        con.print("[bold]Purchase schedule[/] (demand over time):")
        for line in phased:
            con.print(f"  {line}", markup=False)
        con.print()


def _money(value: Any) -> str:
    return "-" if value is None else f"${value:,.0f}"


def _print_bom(plan: Plan, con: Any) -> None:
    """The bill of materials (plan key ``bill_of_materials``), when the plan has one."""
    from rich.table import Table

    from solver.common.wording import opex_rows, qty, usd

    bill = plan.bill_of_materials
    if bill is None or not bill.lines:
        return
    table = Table(title="Bill of materials", title_justify="left")
    table.add_column("item", overflow="fold")
    table.add_column("qty", justify="right", no_wrap=True)
    table.add_column("unit", justify="right", no_wrap=True)
    table.add_column("total", justify="right", no_wrap=True)
    for line in bill.lines:
        item = f"{line.sku}: {line.description}"
        if line.source.startswith("entered "):  # typed on the dashboard
            item += f" (quote, entered {line.as_of})"
        elif line.as_of:
            item += f" ({line.price_type} {line.as_of})"
        table.add_row(item, qty(line.quantity), usd(line.unit_price_usd),
                      usd(line.line_total_usd))
    table.add_row("capex", "", "", usd(bill.capex_usd), style="bold")
    con.print(table)
    rows = opex_rows(bill.opex_per_year.model_dump())
    if rows:
        yearly = Table(title="Running costs per year", title_justify="left")
        yearly.add_column("item", overflow="fold")
        yearly.add_column("USD/year", justify="right", no_wrap=True)
        for label, value in rows:
            yearly.add_row(label, usd(value), style="bold" if label == "total per year" else "")
        con.print(yearly)


def print_explanation(plan: Plan, alternatives: list[dict[str, Any]],
                      assumptions: dict[str, Any] | None = None, rfq: Rfq | None = None
                      ) -> None:
    """The decision path (about the chosen hardware), the plan, counterfactuals, glossary."""
    from solver.analysis.explain import GLOSSARY, money_delta

    if plan.binding:  # the path leads with what drives the price
        from solver.common.wording import binding_lines

        first = binding_lines([plan.binding[0].model_dump()], plan.objective)[0]
        print_wrapped(out, first, first="Dominant constraint: ", style="bold")
    out.print("[bold]Decision path (the buying guide's steps; the first yes ends it)[/]")
    for step in plan.decision_path:
        print_wrapped(out, f"{step.question} {'yes' if step.answer else 'no'}",
                      first=f"  {step.workload} · step {step.step}: ", indent="      ")
        print_wrapped(out, step.note, first="      ", indent="      ")
        if step.reference:
            print_wrapped(out, f"(for comparison, {step.reference})", first="      ",
                          indent="      ")
    print_plan(plan, assumptions, rfq)
    if alternatives:
        out.print("[bold]Counterfactuals (each re-solved)[/]")
        for alt in alternatives:
            if not alt["feasible"]:
                print_wrapped(out, f"{alt['alternative']}: infeasible — {alt['why']}",
                              first="  - ", indent="    ")
            else:
                print_wrapped(out, f"{alt['alternative']}: TCO ${alt['tco_usd']:,.0f}, "
                              f"{money_delta(alt['delta_usd'])} — {alt['why']}",
                              first="  - ", indent="    ")
    out.print("[bold]Glossary[/]")
    for term, meaning in GLOSSARY.items():
        print_wrapped(out, f"{term}: {meaning}", first="  ", indent="    ")


def exit_code(plan: Plan) -> int:
    """0 a plan; 4 the time limit ran out before any plan; 3 infeasible. A solver error is
    no answer about the RFQ: :class:`SolverError` (exit 1), never 3."""
    check_solved(plan)
    if plan.status == "timeout":
        return EXIT_TIMEOUT
    return EXIT_INFEASIBLE if plan.status == "infeasible" else 0


def check_solved(plan: Plan) -> None:
    """Raise :class:`SolverError` for a plan whose solver failed (status ``error``)."""
    if plan.status == "error":
        reasons = (plan.infeasibility.reasons if plan.infeasibility else None) \
            or ["unknown failure"]
        raise SolverError(str(reasons[0]).removeprefix("solver error: "))


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
            "--set", help="Override a parameter, e.g. gpu.l4.price_usd=2500.")] = None,
        overrides: Annotated[Path | None, typer.Option(
            "--overrides", help="YAML file of parameter overrides.")] = None,
        binding: Annotated[str, typer.Option(
            "--binding", metavar="auto|all|rfq",
            help="Which binding constraints to price by re-solving: all; rfq (the RFQ's "
                 "limits, facility, vendor and budget only); auto (all up to 8 workloads, "
                 "else rfq). None with --time-limit.")] = "auto",
    ) -> int:
        """The cheapest plan (minimum TCO or capex) that meets every workload of the RFQ."""
        from solver.analysis.explain import solve_rfq
        from solver.optimize.candidate_workers import default_workers

        check_range("--time-limit", time_limit, 0.01, MAX_TIME_LIMIT_S)
        check_solver(solver)
        if binding not in ("auto", "all", "rfq"):
            raise InputError([Problem("--binding", "", binding,
                                      "one of auto, all, rfq")])
        cat, parsed = load(rfq, catalog, set_, overrides)
        from solver.cli.progress import stderr_progress
        from solver.common.clock import left_of
        from solver.common.watchdog import armed

        def show(plan: Plan) -> int:
            if json_out:
                print(indented(plan.to_json()))
            else:
                from solver.common.wording import assumptions

                print_plan(plan, assumptions(cat, parsed, plan.to_json()), parsed)
            return exit_code(plan)

        def time_is_up() -> int:  # the watchdog's answer: no plan in hand at the limit
            from solver.common.clock import process_age_s
            from solver.optimize.solve import timeout_plan

            return show(timeout_plan(parsed, solver, time_limit, process_age_s()))

        with stderr_progress(), armed(time_limit, time_is_up):
            plan = solve_rfq(parsed, cat, solver=solver, time_limit=left_of(time_limit),
                             workers=default_workers(),
                             binding=time_limit is None, binding_scope=binding,
                             alternative=True, stated_limit=time_limit)
        return show(plan)

    @app.command()
    def explain(
        rfq: Annotated[Path, typer.Argument(help="RFQ file (.yaml, .yml, .json).")],
        solver: SolverOpt = DEFAULT_SOLVER,
        catalog: CatalogOpt = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
    ) -> int:
        """The guide's decision path for each workload, the plan, and the counterfactuals."""
        cat, parsed, plan, alternatives = plan_with_alternatives(rfq, catalog, solver)
        if json_out:
            print(indented({"plan": plan.to_json(),
                             "counterfactuals": alternatives}))
            return exit_code(plan)
        check_solved(plan)
        from solver.common.wording import assumptions

        print_explanation(plan, alternatives, assumptions(cat, parsed, plan.to_json()), parsed)
        return exit_code(plan)
