"""The `procure` command line (Typer + Rich). Heavy libraries are imported lazily."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from solver import __version__
from solver.common.console import EXIT_INVALID, err, fail_input, fail_solver, out
from solver.common.errors import InputError, SolverError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pydantic import BaseModel

app = typer.Typer(
    name="procure",
    help="What GPU hardware to buy to run these models, at minimum total cost of ownership.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: wrapped whole, never cut with "…" (issue 32)
)
catalog_app = typer.Typer(help="Inspect and check the hardware catalog.", no_args_is_help=True,
                          rich_markup_mode=None)
app.add_typer(catalog_app, name="catalog")

CatalogOpt = Annotated[
    str | None,
    typer.Option("--catalog", help="A catalog directory, or a price overlay over the built-in one."),
]
COMMAND_MODULES = ("physics", "schema", "solve", "pareto", "batch", "dashboard")


def _version(value: bool) -> None:
    if value:
        out.print(f"procure {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Show the version and exit.")] = False,
) -> None:
    """procure: GPU procurement as an optimisation problem."""


@app.command()
def validate(
    rfqs: Annotated[list[Path], typer.Argument(help="RFQ files (.yaml, .yml, .json).")],
    catalog: CatalogOpt = None,
) -> None:
    """Check RFQ files against the schema and the catalog; exit 2 on the first bad one."""
    from rich.markup import escape

    from solver.catalog.load import load_catalog
    from solver.rfq.schema import load_rfq

    cat = load_catalog(catalog)
    problems = []
    for path in rfqs:
        try:
            rfq = load_rfq(path, cat)
        except InputError as exc:
            problems.extend(exc.problems)
            continue
        out.print(f"[green]ok[/] {escape(str(path))}: {rfq.id} ({len(rfq.workloads)} workload"
                  f"{'s' if len(rfq.workloads) != 1 else ''})")
    if problems:
        raise InputError(problems)


@catalog_app.command("list")
def catalog_list(catalog: CatalogOpt = None) -> None:
    """List GPUs, servers, fabrics, models and vendor profiles."""

    from solver.catalog.load import load_catalog

    cat = load_catalog(catalog)
    gpu_rows = []
    for gpu in cat.gpus.values():
        tf = gpu.dense_tflops
        gpu_rows.append([gpu.id, f"{gpu.memory_gb:g}", f"{gpu.mem_bw_gbs:g}", f"{tf['bf16']:g}",
                         f"{tf.get('fp8', '-')}", f"{tf.get('fp4', '-')}", f"{gpu.tdp_w:g}",
                         gpu.form_factor, f"{gpu.intra_node_gbs:g} {gpu.intra_node_link}",
                         f"{gpu.price_usd:,.0f}", f"{gpu.price_type}, {gpu.price_as_of}",
                         "yes" if gpu.datacenter_use else "NO (licence)",
                         "yes" if gpu.p2p else "no (host-staged)"])
    _catalog_table(f"GPUs (catalog {cat.version})",
                   ["id", "memory GB", "BW GB/s", "bf16 TFLOPS", "fp8", "fp4", "TDP W", "form",
                    "link GB/s", "price USD", "price (type, as of)", "datacenter", "P2P"],
                   gpu_rows)
    _catalog_table("Servers", ["id", "slots", "form factors", "price USD (no GPUs)",
                               "price (type, as of)", "base W", "max W", "max card slots", "U",
                               "cooling", "source"],
                   [[s.id, str(s.gpu_slots), ",".join(s.form_factors), f"{s.price_usd:,.0f}",
                     f"{s.price_type}, {s.price_as_of or s.as_of}",
                     f"{s.base_power_w:g}", f"{s.max_power_w:g}" if s.max_power_w else "-",
                     f"{s.max_width_slots:g}" if s.max_width_slots else "-",
                     str(s.rack_units), "liquid" if s.liquid_cooled else "air", s.source]
                    for s in cat.servers.values()])
    _catalog_table("Fabrics", ["id", "GB/s per NIC", "latency us", "NIC USD", "port USD"],
                   [[f.id, f"{f.effective_gbs:g}", f"{f.latency_us:g}",
                     f"{f.nic_price_usd:,.0f}", f"{f.switch_port_price_usd:,.0f}"]
                    for f in cat.fabrics.values()])
    model_rows = []
    for m in cat.models.values():
        attention: str = m.attention
        arch = m.architecture
        if arch is not None and arch.sliding_layers:
            attention += f" + {arch.sliding_layers} sliding {arch.sliding_window}"
        if arch is not None and arch.linear_layers:
            attention += f" + {arch.linear_layers} linear"
        model_rows.append([m.id, f"{m.params_b:.4g}", f"{m.active_params_b:.4g}",
                           str(m.layers), attention, m.default_precision or "bf16",
                           ", ".join(m.aliases), m.source.split(";")[0]])
    _catalog_table("Models", ["id", "params B", "active B", "layers", "attention",
                              "checkpoint", "aliases", "source"], model_rows)
    out.print("Vendor profiles: " + ", ".join(cat.vendors))


WIDE_COLUMNS = 150
"""Below this terminal width `catalog list` prints one block per entry (issue 32: ids were
cut to ``rt…`` at 80 columns)."""


def _catalog_table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    """A catalog table: columns side by side on a wide terminal; on a narrow one each entry's
    id whole on its own line, its other fields wrapped and indented under it."""
    from rich.table import Table

    from solver.common.console import print_wrapped

    if out.width >= WIDE_COLUMNS:
        table = Table(title=title)
        for index, column in enumerate(columns):
            table.add_column(column, no_wrap=index == 0, overflow="fold")
        for row in rows:
            table.add_row(*row)
        out.print(table)
        return
    out.print(f"[bold]{title}[/]")
    width = max(40, out.width)
    for row in rows:
        out.print(row[0], markup=False, soft_wrap=True)  # the id, whole
        line = "   "
        for column, value in zip(columns[1:], row[1:], strict=True):
            if value in ("", "-"):
                continue
            fact = f"{column}: {value};"
            if len(line) + 1 + len(fact) > width and line.strip():
                out.print(line, markup=False, soft_wrap=True)
                line = "   "
            if len(line) + 1 + len(fact) > width:  # one long fact (a source): wrapped
                print_wrapped(out, fact, first="    ", indent="      ")
                continue
            line += " " + fact
        if line.strip():
            out.print(line.rstrip(";"), markup=False, soft_wrap=True)


@catalog_app.command("show")
def catalog_show(entry_id: Annotated[str, typer.Argument(metavar="ID")],
                 catalog: CatalogOpt = None) -> None:
    """Show one catalog entry (GPU, server, fabric, model or vendor) with its sources."""

    from solver.catalog.load import load_catalog
    from solver.common.errors import Problem, nearest

    cat = load_catalog(catalog)
    tables: dict[str, Mapping[str, BaseModel]] = {
        "gpu": cat.gpus, "server": cat.servers, "fabric": cat.fabrics, "vendor": cat.vendors}
    for kind, table in tables.items():
        if entry_id in table:
            out.print(f"[bold]{kind} {entry_id}[/]")
            _print_yaml(table[entry_id].model_dump(mode="json"))
            return
    if cat.has_model(entry_id) and not entry_id.endswith(".json"):
        out.print(f"[bold]model {cat.model(entry_id).id}[/]")
        _print_yaml(cat.model(entry_id).model_dump(mode="json"))
        return
    known = [*cat.gpus, *cat.servers, *cat.fabrics, *cat.vendors, *cat.model_ids()]
    hint = nearest(entry_id, known)
    raise InputError([Problem("catalog", "ID", entry_id, "no such entry"
                              + (f"; nearest known: {', '.join(hint)}" if hint else ""))])


def _print_yaml(data: object) -> None:
    """``data`` as YAML, each value on one line: neither PyYAML (80 columns) nor Rich (the
    terminal's width) re-wraps it, so a URL stays whole and the text loads back as printed;
    the terminal folds long lines for the eye only."""
    import yaml

    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=float("inf"))
    out.print(text.rstrip("\n"), markup=False, highlight=False, soft_wrap=True)


@catalog_app.command("validate")
def catalog_validate(catalog: CatalogOpt = None) -> None:
    """Load the catalog (with any overlay) and check everything a solve would check."""
    from solver.catalog.load import check_catalog, load_catalog

    cat = load_catalog(catalog)
    check_catalog(cat)
    out.print(f"[green]ok[/] catalog {cat.version}: {len(cat.gpus)} GPUs, {len(cat.servers)} "
              f"servers, {len(cat.fabrics)} fabrics, {len(cat.models)} models, "
              f"{len(cat.vendors)} vendor profiles")


def _register_commands() -> None:
    for name in COMMAND_MODULES:
        module_name = f"solver.cli.{name}"
        if importlib.util.find_spec(module_name) is not None:
            importlib.import_module(module_name).register(app)
    for typer_app in (app, catalog_app):
        for info in typer_app.registered_commands:
            if info.short_help is None and info.callback is not None:
                info.short_help = _first_sentence(info.help or info.callback.__doc__ or "")


def _first_sentence(doc: str) -> str:
    """A command's summary for the command list: its docstring's first sentence, whole
    (click would cut the first paragraph to the column with "...")."""
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[:end + 1]


_register_commands()


def main() -> None:
    """Console-script entry point: input errors exit 2 with a readable message."""
    try:
        result = app(standalone_mode=False)
    except InputError as exc:
        fail_input(exc)
    except SolverError as exc:
        fail_solver(exc)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("aborted")
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - the last guard against tracebacks
        # click (vendored by typer) usage errors: show them the click way, exit 2
        show = getattr(exc, "show", None)
        if callable(show) and hasattr(exc, "exit_code"):
            show()
            sys.exit(exc.exit_code or EXIT_INVALID)
        if type(exc).__name__ == "Exit" and hasattr(exc, "exit_code"):
            sys.exit(exc.exit_code)
        if os.environ.get("PROCURE_DEBUG"):
            raise
        _internal_error(exc)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    sys.exit(result if isinstance(result, int) else 0)


def entry() -> NoReturn:
    """The ``procure`` console script and ``python -m solver.cli``: :func:`main`, then the
    process ends without the interpreter's teardown. The exit handlers still run (temporary
    folders, worker pools) and the output is flushed; what is skipped is freeing every module
    and object one by one, 0.1-0.3 s on a loaded 2-core machine, after the result is out and
    counted against ``--time-limit`` (docs/performance.md, "A limit that holds"). Tests call
    :func:`main`, which leaves the interpreter alone."""
    import atexit

    from solver.common.watchdog import end_process, own_process

    own_process()  # --time-limit's watchdog may end this process (solver.common.watchdog)
    for name in ("stdout", "stderr"):  # started with the descriptor closed: Python has no
        if getattr(sys, name) is None:  # stream at all; write nowhere, keep the exit code
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115
    try:
        main()
        code = 0
    except SystemExit as done:
        if done.code is None or isinstance(done.code, int):
            code = done.code or 0
        else:  # sys.exit("message"): Python prints it and exits 1
            err.print(str(done.code), highlight=False, markup=False)
            code = 1
    atexit._run_exitfuncs()
    end_process(code)


def _internal_error(exc: BaseException) -> NoReturn:
    """A bug: one line on the terminal, the traceback in a log file, exit 1."""
    import tempfile
    import time
    import traceback

    from solver.common.errors import short

    log = Path(tempfile.gettempdir()) / f"procure-crash-{time.strftime('%Y%m%d-%H%M%S')}-" \
        f"{os.getpid()}.log"
    try:
        with log.open("w", encoding="utf-8") as handle:
            handle.write(f"procure {__version__}\nargv: {short(sys.argv, 2000)}\n\n")
            traceback.print_exception(exc, file=handle)
        where = f"details in {log}"
    except OSError:
        where = "rerun with PROCURE_DEBUG=1 for the traceback"
    message = short(str(exc), 200, quote=False).replace("\n", " ")
    err.print(f"internal error ({type(exc).__name__}: {message}); this is a bug in procure, "
              f"not in your input; {where}", markup=False)
    sys.exit(1)


if __name__ == "__main__":
    entry()
