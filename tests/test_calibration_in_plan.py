"""Issue 26: every serving workload of a plan states how well the serving model is measured
for its GPU family and engine, and an uncalibrated one shows its margin in the plan JSON,
the terminal, the warnings (explain), the quote and the dashboard."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from solver.analysis.explain import solve_rfq
from solver.cli.solve import print_plan
from solver.common.wording import assumptions
from solver.optimize.plan_model import Plan
from solver.physics.coverage import serving_calibration
from solver.report.quote import quote_context, render_html
from solver.rfq.schema import load_rfq

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
SERVING = ("inference", "batch_inference")


@pytest.fixture(scope="module")
def portfolio(catalog):
    """Serving (vLLM), batch inference and a LoRA job on RTX PRO 6000: no published vLLM
    measurement of that family."""
    rfq = load_rfq(SCENARIOS / "portfolio-lab.yaml", catalog)
    return rfq, solve_rfq(rfq, catalog)


@pytest.fixture(scope="module")
def hopper(catalog):
    """A vLLM service on H100: the best-measured family."""
    rfq = load_rfq(SCENARIOS / "capex-open-datacenter.yaml", catalog)
    return rfq, solve_rfq(rfq, catalog)


def _text(rfq, plan: Plan, catalog) -> str:
    console = Console(width=100, file=io.StringIO(), highlight=False, color_system=None)
    print_plan(plan, assumptions(catalog, rfq, plan.to_json()), rfq, console=console)
    return console.file.getvalue()


def test_every_serving_workload_carries_its_calibration_and_jobs_none(portfolio, hopper,
                                                                      catalog):
    for _rfq, plan in (portfolio, hopper):
        kinds = set()
        for w in plan.workloads:
            kinds.add(w.kind)
            if w.kind not in SERVING:
                assert w.calibration is None
                continue
            cal = w.calibration
            assert cal is not None and cal.engine is not None
            # the entry is the one of the main layout's GPU on the workload's engine
            expected = serving_calibration(catalog, w.gpu, cal.engine)
            assert cal.family == catalog.gpus[w.gpu].family
            assert cal.margin_applied_pct == pytest.approx(expected.margin_applied_pct,
                                                           abs=0.05)
            assert cal.calibrated == (cal.margin_applied_pct == 0.0)
            for use in w.layouts or []:
                assert use.calibration is not None
                assert use.calibration.family == catalog.gpus[use.gpu].family
            data = plan.to_json()["workloads"]
            assert "calibration" in next(d for d in data if d["name"] == w.name)
        assert kinds & set(SERVING)


def test_calibrated_family_is_planned_as_predicted(hopper, catalog):
    _rfq, plan = hopper
    cal = next(w.calibration for w in plan.workloads if w.kind == "inference")
    table = catalog.efficiency["serving"]["calibration"]
    entry = table[f"{cal.family}/{cal.engine}"]
    assert cal.calibrated and cal.margin_applied_pct == 0.0
    assert (cal.rows, cal.sources) == (entry["rows"], entry["sources"])
    assert cal.sources >= 2
    assert not any("no calibration" in w for w in plan.warnings)


def test_uncalibrated_family_shows_its_margin_everywhere(portfolio, catalog):
    rfq, plan = portfolio
    uncal = [w for w in plan.workloads if w.calibration is not None
             and not w.calibration.calibrated]
    assert {w.kind for w in uncal} == set(SERVING)
    from solver.catalog.perf_factors import factors

    floor = factors(catalog).serving.uncalibrated_margin_floor_pct
    for w in uncal:
        assert w.calibration.margin_applied_pct >= floor
        margin = f"{w.calibration.margin_applied_pct:.0f} %"
        # explain's warnings (shown in terminal, quote and dashboard)
        warning = [x for x in plan.warnings if x.startswith(f"{w.name}: ")
                   and "no calibration" in x]
        assert len(warning) == 1 and margin in warning[0]
        assert w.calibration.family in warning[0]
    text = _text(rfq, plan, catalog)
    assert text.count("model not calibrated for") == len(uncal)
    assert f"planned with a {uncal[0].calibration.margin_applied_pct:.0f} % margin" in text
    html = render_html(quote_context(plan, rfq, catalog))
    assert "planned with a" in html and "carries a safety margin" in html


def test_quote_of_a_calibrated_plan_does_not_claim_a_margin(hopper, catalog):
    rfq, plan = hopper
    html = render_html(quote_context(plan, rfq, catalog))
    assert "carries a safety margin" not in html
    assert "checked against published measurements" in html
    assert "model calibrated for" in html


def test_dashboard_note_names_the_margin(portfolio):
    from dashboards.components import serving_note

    _rfq, plan = portfolio
    chat = next(w for w in plan.workloads if w.kind == "inference")
    note = serving_note(chat)
    assert "not calibrated" in note
    assert f"{chat.calibration.margin_applied_pct:.0f} % margin" in note
