"""Issue 32: `cost_per_million_tokens_usd` of every serving workload - the unit price buyers
compare with cloud APIs - checked against hand-computed answers and the plan's own totals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from solver.analysis.explain import solve_rfq
from solver.optimize.costs import HOURS_PER_YEAR
from solver.optimize.unit_cost import requests_over_horizon, workload_costs
from solver.rfq.schema import load_rfq, validate_rfq

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
YEAR_S = HOURS_PER_YEAR * 3600.0


def _serving(catalog, **demand):
    data = {"id": "u", "horizon_years": 2, "workloads": [
        {"name": "chat", "kind": "inference", "model": "llama-3.1-8b", "precision": "fp8",
         "input_tokens": 1000, "output_tokens": 100, **demand}]}
    return validate_rfq(data, catalog, source="test").workloads[0]


def test_requests_follow_littles_law_and_the_periods(catalog):
    predicted = {"ttft_ms": 500.0, "tpot_ms": 20.0}  # one request: 0.5 + 100 * 0.02 = 2.5 s
    by_users = _serving(catalog, concurrency=50)
    assert requests_over_horizon(by_users, predicted, 2) == pytest.approx(50 / 2.5 * 2 * YEAR_S)
    by_rate = _serving(catalog, concurrency=50, qps=3)  # the stated rate wins
    assert requests_over_horizon(by_rate, predicted, 2) == pytest.approx(3 * 2 * YEAR_S)
    phased = _serving(catalog, periods=[{"months": 6, "qps": 10}, {"months": 6, "qps": 2}])
    # 6 months at 10/s, then 2/s until the horizon (18 months)
    assert requests_over_horizon(phased, predicted, 2) == pytest.approx(
        (10 * 6 + 2 * 18) * YEAR_S / 12)


def test_workload_costs_split_the_tco_by_owned_gpus_plus_rental():
    plan = {"cost": {"tco_usd": 1000.0, "rental_usd": 100.0},
            "placement": [{"runs": [{"workload": "a", "gpus": 6}, {"workload": "b", "gpus": 2}]},
                          {"runs": [{"workload": "a", "gpus": 1}]}],
            "workloads": [{"name": "a"}, {"name": "b"},
                          {"name": "c", "rental": [{"usd": 100.0}]}]}
    shares = workload_costs(plan)
    assert shares == pytest.approx({"a": 900 * 7 / 9, "b": 900 * 2 / 9, "c": 100.0})
    assert sum(shares.values()) == pytest.approx(1000.0)


@pytest.mark.parametrize("name", ["hybrid-service-and-job.yaml", "batch-corpus-one-box.yaml",
                                  "growing-chat-service.yaml"])
def test_unit_costs_add_up_to_the_plan(catalog, name):
    rfq = load_rfq(SCENARIOS / name, catalog)
    plan = solve_rfq(rfq, catalog)
    specs = {w.name: w for w in rfq.workloads}
    total = 0.0
    for work in plan.workloads:
        unit = work.cost_per_million_tokens_usd
        if work.kind not in ("inference", "batch_inference"):
            assert unit is None
            continue
        spec = specs[work.name]
        assert unit is not None and unit.output_usd is not None
        assert unit.output_tokens == pytest.approx(unit.requests * spec.output_tokens, rel=1e-6)
        assert unit.output_usd * unit.output_tokens / 1e6 == pytest.approx(
            unit.workload_cost_usd, rel=1e-3)
        ratio = (spec.input_tokens + spec.output_tokens) / spec.output_tokens
        assert unit.all_tokens_usd == pytest.approx(unit.output_usd / ratio, rel=1e-3)
        tokens_per_s = unit.output_tokens / (rfq.horizon_years * YEAR_S)
        usd_per_hour = unit.workload_cost_usd / (rfq.horizon_years * HOURS_PER_YEAR)
        assert unit.output_tokens_per_s_per_usd_per_hour == pytest.approx(
            tokens_per_s / usd_per_hour, rel=1e-3)
        if spec.kind == "batch_inference":
            assert unit.requests == spec.requests
        total += unit.workload_cost_usd
    assert plan.cost is not None
    shares = workload_costs(plan.to_json())
    assert sum(shares.values()) == pytest.approx(plan.cost.tco_usd, rel=1e-6)
    assert total <= plan.cost.tco_usd + 1


def test_terminal_quote_and_pareto_hover_show_the_unit_price(catalog, tmp_path):
    """The unit price is shown wherever the plan is: the terminal's workload lines, the
    quote's workload notes and the Pareto chart's hover (with bought or rented), and the
    chart's HTML carries plotly itself (no CDN: it works offline)."""
    from solver.common.wording import serving_lines, unit_cost_text
    from solver.report.charts import frontier_plot
    from solver.report.quote import quote_context, render_html

    rfq = load_rfq(SCENARIOS / "hybrid-service-and-job.yaml", catalog)
    plan = solve_rfq(rfq, catalog)
    chat = next(w for w in plan.workloads if w.name == "chat")
    assert chat.cost_per_million_tokens_usd is not None
    text = unit_cost_text(chat.cost_per_million_tokens_usd.model_dump())
    assert text and text.startswith("$") and "per million output tokens" in text
    lines = serving_lines(chat.model_dump(mode="json"))
    assert f"cost: {text}" in lines and all(len(line) <= 78 for line in lines)
    assert text in render_html(quote_context(plan, rfq, catalog))
    result = {"rfq": rfq.id, "workload": "chat", "axes": ["tco_usd", "tpot_ms"],
              "points": [{"tco_usd": plan.cost.tco_usd, "tpot_ms": 20.0,
                          "plan": plan.to_json()}]}
    page = tmp_path / "frontier.html"
    frontier_plot(result, page)
    html = page.read_text()
    assert not re.search(r"<script[^>]+src=", html)  # no script fetched from anywhere
    assert "Plotly.newPlot" in html and len(html) > 1_000_000
    assert "chat: bought" in html and "per million output tokens" in html
