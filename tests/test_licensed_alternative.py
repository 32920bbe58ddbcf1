"""Issue 32: a plan on GeForce cards shows, beside it, the cheapest plan on
datacenter-licensed GPUs and its extra cost (plan JSON ``licensed_alternative``, terminal
before the plan, explain, quote, dashboard)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from solver.analysis import licence
from solver.analysis.explain import solve_rfq
from solver.optimize.plan_model import plan_schema
from solver.optimize.solve import solve_table
from solver.rfq.schema import load_rfq

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
CONSUMER = SCENARIOS / "batch-corpus-one-box.yaml"


@pytest.fixture(scope="module")
def corpus(catalog_module):
    rfq = load_rfq(CONSUMER, catalog_module)
    return rfq, solve_rfq(rfq, catalog_module, alternative=True)


@pytest.fixture(scope="module")
def catalog_module():
    from solver.catalog.load import load_catalog

    return load_catalog()


def test_the_licensed_alternative_is_the_plan_without_consumer_cards(corpus, catalog_module):
    """Known answer (the issue's $1,494) and the invariants: it is exactly the optimum of
    the RFQ with datacenter_grade_only, buys no consumer card, and costs no less."""
    rfq, plan = corpus
    alt = plan.licensed_alternative
    assert alt is not None and alt.status == "optimal"
    assert alt.consumer_gpus == ["rtx-5090"]
    assert alt.extra_usd == pytest.approx(1494.41, abs=1.0)
    licensed_rfq = rfq.model_copy(update={"constraints": rfq.constraints.model_copy(
        update={"datacenter_grade_only": True})})
    independent, _ = solve_table(licensed_rfq, catalog_module)
    assert independent.cost is not None and plan.cost is not None
    assert alt.tco_usd == pytest.approx(independent.cost.tco_usd, abs=0.01)
    assert alt.capex_usd == pytest.approx(independent.cost.capex_usd, abs=0.01)
    assert alt.extra_usd == pytest.approx(independent.cost.tco_usd - plan.cost.tco_usd,
                                          abs=0.01)
    assert alt.extra_usd >= 0  # excluding cards never makes the optimum cheaper
    assert all(catalog_module.gpus[n.gpu].datacenter_use for n in independent.cluster.nodes)
    assert "rtx-pro-6000" in (alt.cluster or "") and "rtx-5090" not in (alt.cluster or "")


def test_a_plan_without_consumer_cards_has_no_field(catalog_module):
    rfq = load_rfq(SCENARIOS / "chat-70b-one-node.yaml", catalog_module)
    plan = solve_rfq(rfq, catalog_module, alternative=True)
    assert plan.feasible and licence.consumer_gpus(catalog_module, plan) == []
    assert plan.licensed_alternative is None
    assert "licensed_alternative" not in plan.to_json()


def test_not_asked_for_it_is_left_out(corpus, catalog_module):
    rfq, _ = corpus
    plan = solve_rfq(rfq, catalog_module)  # a library or batch solve
    assert plan.licensed_alternative is None


def test_a_time_limit_too_short_skips_the_re_solve(corpus, catalog_module, monkeypatch):
    rfq, plan = corpus

    def never(*_args, **_kwargs):
        raise AssertionError("re-solved although the time limit left no room")

    monkeypatch.setattr(licence, "solve_table", never)
    alt = licence.licensed_alternative(rfq, catalog_module, plan, time_left=0.5,
                                       plan_seconds=2.0, time_limit=10.0)
    assert alt is not None and alt.status == "skipped"
    assert alt.extra_usd is None and alt.tco_usd is None
    assert "--time-limit" in alt.note


def test_the_re_solve_is_bounded_by_the_time_left(corpus, catalog_module, monkeypatch):
    rfq, plan = corpus
    limits: list[float | None] = []

    def timed_out(licensed_rfq, catalog, *, solver, time_limit):
        assert licensed_rfq.constraints.datacenter_grade_only
        limits.append(time_limit)
        from solver.optimize.solve import timeout_plan

        return timeout_plan(licensed_rfq, solver, time_limit, time_limit or 0.0), None

    monkeypatch.setattr(licence, "solve_table", timed_out)
    alt = licence.licensed_alternative(rfq, catalog_module, plan, time_left=5.0,
                                       plan_seconds=1.0, time_limit=10.0)
    assert limits == [pytest.approx(4.0)]  # 5 s left, 10 % of the 10 s limit kept free
    assert alt is not None and alt.status == "timeout" and alt.extra_usd is None


def test_the_plan_schema_and_docs_name_the_field():
    schema = plan_schema()
    assert "licensed_alternative" in schema["properties"]
    assert "LicensedAlternative" in schema["$defs"]
    assert "`licensed_alternative`" in (ROOT / "docs" / "plan.md").read_text()


def _procure(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "solver.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_terminal_shows_it_before_the_plan_with_the_licence_warning():
    result = _procure("solve", str(CONSUMER))
    assert result.returncode == 0, result.stderr
    text = result.stdout
    flat = " ".join(text.split())
    assert "Datacenter-licensed alternative (1 x pcie-4gpu with 2 x rtx-pro-6000): TCO " \
           "$114,938, $1,494 more than this plan." in flat
    buy = text.index("Buy (")
    assert text.index("Datacenter-licensed alternative") < buy
    assert text.index("consumer card rtx-5090") < buy  # the licence warning too
    assert text.count("consumer card rtx-5090") == 1  # not repeated after the plan
    as_json = json.loads(_procure("solve", str(CONSUMER), "--json").stdout)
    assert as_json["licensed_alternative"]["extra_usd"] == pytest.approx(1494.41, abs=1.0)
    schema = json.loads(_procure("schema", "--plan").stdout)
    assert "licensed_alternative" in schema["properties"]


def test_the_quote_shows_it_in_html_and_as_xlsx_figures(corpus, catalog_module, tmp_path):
    from openpyxl import load_workbook

    from solver.report.quote import write_quote

    rfq, plan = corpus
    html, xlsx = tmp_path / "q.html", tmp_path / "q.xlsx"
    write_quote(html, plan, rfq, catalog_module, [])
    write_quote(xlsx, plan, rfq, catalog_module, [])
    text = html.read_text()
    assert 'id="licence"' in text
    assert "Datacenter-licensed alternative (1 x pcie-4gpu with 2 x rtx-pro-6000): TCO " \
           "$114,938, $1,494 more than this plan." in text
    assert text.index('id="licence"') < text.index('id="totals"')  # beside the price
    assert "datacenter_grade_only" not in text.split('id="licence"')[1].split("</p>")[0]
    rows = {r[0]: r[1] for r in load_workbook(xlsx)["Summary"].iter_rows(values_only=True)}
    assert rows["Extra cost (USD)"] == pytest.approx(1494.41, abs=1.0)
    assert rows["Its cost (USD)"] == pytest.approx(plan.licensed_alternative.tco_usd)
    assert isinstance(rows["Extra cost (USD)"], float)


def test_the_quote_of_a_plan_without_consumer_cards_says_nothing(catalog_module, tmp_path):
    from solver.report.quote import quote_context

    rfq = load_rfq(SCENARIOS / "chat-70b-one-node.yaml", catalog_module)
    plan = solve_rfq(rfq, catalog_module, alternative=True)
    context = quote_context(plan, rfq, catalog_module, [])
    assert context["licence"] == "" and context["licence_extra_usd"] is None


def test_explain_shows_it_too():
    result = _procure("explain", str(CONSUMER))
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert text.index("Datacenter-licensed alternative") < text.index("Buy (")
    data = json.loads(_procure("explain", str(CONSUMER), "--json").stdout)
    assert data["plan"]["licensed_alternative"]["consumer_gpus"] == ["rtx-5090"]
