"""`procure schema` (JSON Schema of the RFQ) and `procure quote` (the customer document)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from solver.common.console import EXIT_INFEASIBLE, out


def rfq_schema() -> dict:
    """The JSON Schema of an RFQ file, from the pydantic model in :mod:`solver.rfq.schema`."""
    from solver.rfq.schema import Rfq

    schema = Rfq.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "procure RFQ"
    return schema


def register(app: typer.Typer) -> None:
    @app.command()
    def schema() -> None:
        """Print the JSON Schema of the RFQ format (see docs/rfq.md for the prose)."""
        print(json.dumps(rfq_schema(), indent=2))

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
        out.print(f"wrote {output} ({plan['status']})")
        return EXIT_INFEASIBLE if plan["status"] == "infeasible" else 0
