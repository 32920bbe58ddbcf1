"""`procure schema` (JSON Schema of the RFQ, or with ``--plan`` of the plan JSON) and
`procure quote` (the customer document)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from solver.common.console import EXIT_INFEASIBLE, out


def rfq_schema(catalog_dir: str | None = None) -> dict:
    """The JSON Schema of an RFQ file, from the pydantic model in :mod:`solver.rfq.schema`;
    its serving engines are those of the catalog (the built-in one, or ``catalog_dir``)."""
    from solver.rfq.schema import Rfq

    schema = Rfq.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "procure RFQ"
    _engines_from_the_catalog(schema, catalog_dir)
    return schema


def _engines_from_the_catalog(schema: dict, catalog_dir: str | None) -> None:
    """``engine``: the catalog's serving engines (``efficiency.yaml`` ``serving.engines``,
    the one list of them), and its default engine."""
    from solver.catalog.load import load_catalog
    from solver.rfq.schema import serving_engines

    default, engines = serving_engines(load_catalog(catalog_dir))
    for definition in schema.get("$defs", {}).values():
        field = definition.get("properties", {}).get("engine")
        if field is not None:
            field["anyOf"] = [{"enum": engines, "type": "string"}, {"type": "null"}]
            field["default"] = default


def plan_json_schema() -> dict:
    """The JSON Schema of the plan JSON (``procure solve --json``), from the typed records of
    :mod:`solver.optimize.plan_model` (docs/plan.md for the prose)."""
    from solver.optimize.plan_model import plan_schema

    schema = plan_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "procure plan"
    return schema


def register(app: typer.Typer) -> None:
    @app.command()
    def schema(
        plan: Annotated[bool, typer.Option(
            "--plan", help="The JSON Schema of the plan (procure solve --json) instead.")]
        = False,
        catalog: Annotated[str | None, typer.Option(
            "--catalog", help="A catalog directory or overlay: its serving engines are the "
            "ones the RFQ schema offers.")] = None,
    ) -> None:
        """Print the JSON Schema of the RFQ format (docs/rfq.md), or with --plan of the plan
        JSON (docs/plan.md)."""
        print(json.dumps(plan_json_schema() if plan else rfq_schema(catalog), indent=2))

    @app.command()
    def quote(
        rfq: Annotated[Path, typer.Argument(help="RFQ file (.yaml, .yml, .json).")],
        output: Annotated[Path, typer.Option(
            "-o", "--output", help="The quote file: .html (print-ready) or .xlsx.")],
        solver: Annotated[str, typer.Option("--solver", help="MIP backend: highs (default), "
                                                        "cbc or cpsat.")] = "highs",
        catalog: Annotated[str | None, typer.Option(
            "--catalog", help="A catalog directory or price overlay.")] = None,
        valid_days: Annotated[int, typer.Option(
            "--valid-days", min=1, max=365, help="Days the quoted prices are valid.")] = 30,
    ) -> int:
        """A customer-ready quote: summary, cluster picture, bill of materials, margins,
        assumptions, alternatives, risks and validity date."""
        from solver.cli.solve import check_outputs, check_solved, plan_with_alternatives
        from solver.common.errors import InputError, Problem
        from solver.report.quote import write_quote

        suffix = output.suffix.lower()
        if suffix not in (".html", ".htm", ".xlsx"):
            raise InputError([Problem("-o", "", str(output),
                                      "the quote must be a .html or .xlsx file")])
        check_outputs({"-o": output}, rfq, catalog)  # before the solve: not an input, a folder
        cat, parsed, plan, alternatives = plan_with_alternatives(rfq, catalog, solver)
        check_solved(plan)  # a solver failure is no quote
        write_quote(output, plan, parsed, cat, alternatives, valid_days=valid_days)
        out.print(f"wrote {output} ({plan.status})")
        return EXIT_INFEASIBLE if plan.status == "infeasible" else 0
