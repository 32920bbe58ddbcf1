"""Issue 30: the plan JSON has a written contract (docs/plan.md) and a JSON Schema
(`procure schema --plan`); every scenario's `procure solve --json` output validates against
it, and every presenter's cost breakdown adds up to the TCO."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from in_process import procure

from solver.analysis.explain import solve_rfq
from solver.common.wording import CAPEX_TERMS, COST_LABELS, COST_TERMS
from solver.optimize.plan_model import Plan, plan_markdown
from solver.rfq.schema import load_rfq

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
FAST = {"infeasible-budget.yaml", "best-for-a-budget.yaml", "day-chat-night-batch.yaml",
        "rent-oneoff-jobs.yaml", "growing-chat-service.yaml", "batch-corpus-one-box.yaml"}
"""Scenarios whose plans carry every optional part (infeasibility, served, timetable,
rental, phasing, licensed_alternative) run in the default test run; the others under
``-m slow``."""
NAMES = [name if name in FAST else pytest.param(name, marks=pytest.mark.slow)
         for name in sorted(p.name for p in SCENARIOS.iterdir()
                            if p.suffix in (".yaml", ".json"))]



@pytest.fixture(scope="module")
def plan_schema() -> dict:
    done = procure("schema", "--plan")
    assert done.returncode == 0, done.stderr
    schema = json.loads(done.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


@pytest.mark.parametrize("name", NAMES)
def test_every_scenarios_plan_json_validates_against_the_schema(plan_schema, name):
    done = procure("solve", str(SCENARIOS / name), "--json")
    assert done.returncode in (0, 3), done.stderr
    data = json.loads(done.stdout)
    jsonschema.validate(data, plan_schema)
    # and the JSON is the typed plan's dump, key for key (nothing added or lost)
    assert Plan.model_validate(data).to_json() == data


def test_the_schema_refuses_what_the_contract_does_not_allow(plan_schema):
    data = json.loads(procure("solve", str(SCENARIOS / "chat-70b-one-node.yaml"),
                               "--json").stdout)
    jsonschema.validate(data, plan_schema)
    for broken in (dict(data, surprise=1),                     # unknown key
                   {k: v for k, v in data.items() if k != "cost"},  # a required key missing
                   dict(data, status="great"),                 # not a status
                   dict(data, cluster=dict(data["cluster"], total_gpus="8"))):  # wrong type
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, plan_schema)


def test_fields_that_do_not_apply_are_left_out_not_null(catalog):
    plan = solve_rfq(load_rfq(SCENARIOS / "hybrid-service-and-job.yaml", catalog), catalog)
    data = plan.to_json()
    serving, job = data["workloads"]
    assert "training" not in serving and "n_plus_1" not in serving and "layouts" not in serving
    assert "demand" not in job and "margins" not in job and "engine" not in job
    assert "ttft_ms_p90" in serving["predicted"] and "ttft_ms_p90" not in job["predicted"]
    # present-but-null stays null: a job's TTFT is null, not left out
    assert job["predicted"]["ttft_ms"] is None


def test_docs_plan_md_is_the_generated_contract():
    """docs/plan.md is generated from the records: every field with its type and meaning."""
    text = (ROOT / "docs" / "plan.md").read_text()
    assert text == plan_markdown(), "regenerate: python -m solver.optimize.plan_model"
    for field in Plan.model_fields:
        assert f"| `{field}` |" in text


def test_the_plan_is_frozen_and_refuses_unknown_keys(catalog):
    from pydantic import ValidationError

    plan = solve_rfq(load_rfq(SCENARIOS / "chat-70b-one-node.yaml", catalog), catalog,
                     explain=False)
    with pytest.raises(ValidationError):
        setattr(plan, "status", "infeasible")  # noqa: B010 - frozen: it must refuse
    with pytest.raises(ValidationError):
        Plan.model_validate(dict(plan.to_json(), extra_key=1))


# --- one table of cost labels: every breakdown adds up to the TCO -----------------------

def _terms_add_up(amounts: dict[str, float]) -> None:
    assert sum(amounts[k] for k in CAPEX_TERMS) == pytest.approx(amounts["capex_usd"], abs=0.05)
    assert sum(amounts[k] for k in COST_TERMS) == pytest.approx(amounts["tco_usd"], abs=0.05)


@pytest.mark.parametrize("name", ["rent-oneoff-jobs.yaml", "hybrid-service-and-job.yaml",
                                  "chat-70b-one-node.yaml"])
def test_cost_terms_add_up_and_rental_is_one_of_them(catalog, name):
    plan = solve_rfq(load_rfq(SCENARIOS / name, catalog), catalog, explain=False)
    assert set(COST_LABELS) == set(plan.cost.model_dump())
    _terms_add_up(plan.cost.model_dump())
    if name != "chat-70b-one-node.yaml":
        assert plan.cost.rental_usd > 0


def test_xlsx_export_breakdown_of_a_renting_plan_adds_up_to_its_tco(catalog, tmp_path):
    """Issue 30: the export's cost table left out rental_usd, so a renting plan's rows did
    not add up to its TCO."""
    from openpyxl import load_workbook

    from solver.batch.export import export
    from solver.batch.runner import run_batch
    from solver.batch.store import ResultStore

    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("rent-oneoff-jobs.yaml", "hybrid-service-and-job.yaml"):
        (folder / name).write_text((SCENARIOS / name).read_text())
    db = tmp_path / "r.sqlite"
    run_batch([folder], db, workers=1)
    out = export(ResultStore(db), tmp_path / "out.xlsx")
    book = load_workbook(out)
    labels = {COST_LABELS[k].label: k for k in COST_LABELS}
    checked = 0
    for sheet in book.worksheets[1:]:
        rows = list(sheet.iter_rows(values_only=True))
        start = next(i for i, r in enumerate(rows) if r and r[0] == "Cost breakdown")
        amounts = {labels[r[0]]: r[1] for r in rows[start + 2:] if r and r[0] in labels}
        assert set(amounts) == set(COST_LABELS)
        assert amounts["rental_usd"] > 0
        _terms_add_up(amounts)
        checked += 1
    assert checked == 2


def test_quote_and_terminal_cost_rows_add_up_to_the_tco(catalog):
    import io

    from rich.console import Console

    from solver.cli.solve import print_plan
    from solver.report.quote import quote_context

    rfq = load_rfq(SCENARIOS / "hybrid-service-and-job.yaml", catalog)
    plan = solve_rfq(rfq, catalog)
    rows = dict(quote_context(plan, rfq, catalog)["costs"])
    dollars = {k: float(v.replace("$", "").replace(",", "")) for k, v in rows.items()}
    total = dollars.pop(COST_LABELS["tco_usd"].label)
    assert sum(dollars.values()) == pytest.approx(total, abs=len(dollars))  # whole dollars
    assert COST_LABELS["rental_usd"].label in rows
    console = Console(width=100, file=io.StringIO(), color_system=None)
    print_plan(plan, rfq=rfq, console=console)
    text = console.file.getvalue()
    for key in COST_LABELS:
        assert COST_LABELS[key].label in text
