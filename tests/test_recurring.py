"""Issue 29: recurring jobs - every run over the horizon is costed: rented per run (with the
offer's minimum term), or run on owned GPUs."""

from __future__ import annotations

import pytest

from solver.analysis.explain import solve_rfq
from solver.catalog.load import load_catalog
from solver.common.errors import InputError
from solver.common.wording import recurrence_lines
from solver.rfq.schema import validate_rfq

CATALOG = load_catalog()
TUNE = {"name": "tune", "kind": "lora", "model": "llama-3.1-8b",
        "dataset_tokens": 50_000_000, "deadline_hours": 24}
BATCH = {"name": "nightly", "kind": "batch_inference", "model": "llama-3.1-8b",
         "requests": 200_000, "input_tokens": 1000, "output_tokens": 200,
         "deadline_hours": 8}


def _plan(workload: dict, rental: str = "only", horizon: float = 3):
    rfq = validate_rfq({"id": "r", "rental": rental, "horizon_years": horizon,
                        "constraints": {"vendor": "open"}, "workloads": [workload]}, CATALOG)
    return solve_rfq(rfq, CATALOG)


@pytest.mark.parametrize("workload, every, runs", [
    (TUNE, "weekly", 156), (BATCH, "daily", 1095), (BATCH, "monthly", 36)])
def test_rented_recurring_job_costs_runs_times_one_run(workload, every, runs):
    """Issue 29: the rental of a recurring job is runs × the rental of one run (the same
    job once), in the plan's cost, its rental lines and its recurrence entry."""
    once = _plan(workload)
    again = _plan({**workload, "recurrence": every})
    assert once.cost is not None and again.cost is not None
    one_run = once.cost.rental_usd
    assert one_run > 0
    cents = 0.005 * runs + 0.01  # the plan rounds one run's cost to cents
    assert again.cost.rental_usd == pytest.approx(runs * one_run, abs=cents)
    entry = again.workloads[0]
    assert entry.recurrence is not None
    assert entry.recurrence.runs == runs and entry.recurrence.every == every
    assert entry.recurrence.rented_per_run_usd == pytest.approx(one_run, abs=0.01)
    assert entry.rental and entry.rental[0].runs == runs
    assert entry.rental[0].usd == pytest.approx(runs * one_run, abs=cents)
    text = " ".join(recurrence_lines(entry.model_dump(mode="json")))
    assert f"{runs:,} runs" in text


def test_nightly_job_is_not_priced_as_one_run_when_renting_is_allowed():
    """Issue 29's report: a nightly batch was priced as one rental over the horizon (TCO
    $118); run every night, renting is priced per night and owning may win."""
    once = _plan(BATCH, rental="allow")
    nightly = _plan({**BATCH, "recurrence": "daily"}, rental="allow")
    assert once.cost is not None and nightly.cost is not None
    assert nightly.cost.tco_usd > 100 * once.cost.tco_usd
    owned_only = _plan({**BATCH, "recurrence": "daily"}, rental="forbid")
    assert owned_only.cost is not None
    assert nightly.cost.tco_usd <= owned_only.cost.tco_usd + 1e-6
    entry = owned_only.workloads[0]
    assert entry.recurrence is not None and entry.recurrence.rented_usd is None
    assert "on owned GPUs" in " ".join(recurrence_lines(entry.model_dump(mode="json")))


@pytest.mark.parametrize("extra, reason", [
    ({"window_hours": 8}, "window_hours needs a recurrence"),
    ({"recurrence": "daily", "deadline_hours": 30}, "must finish before the next one"),
    ({"recurrence": "daily", "window_hours": 6, "deadline_hours": 8}, "differ"),
])
def test_bad_recurrence_is_refused_with_a_reason(extra, reason):
    with pytest.raises(InputError) as info:
        validate_rfq({"id": "r", "workloads": [{**BATCH, **extra}]}, CATALOG)
    problem = info.value.problems[0]
    assert "workloads[0]" in problem.field and reason in problem.reason, problem


def test_window_alone_sets_the_deadline():
    batch = {k: v for k, v in BATCH.items() if k != "deadline_hours"}
    rfq = validate_rfq({"id": "r", "workloads": [{**batch, "recurrence": "daily",
                                                  "window_hours": 6}]}, CATALOG)
    assert rfq.workloads[0].deadline_hours == 6
    assert rfq.workloads[0].runs(2) == 730


def test_quote_lists_every_run_of_a_recurring_rental():
    from solver.report.quote import quote_context

    rfq = validate_rfq({"id": "r", "rental": "only", "constraints": {"vendor": "open"},
                        "workloads": [{**BATCH, "recurrence": "daily"}]}, CATALOG)
    plan = solve_rfq(rfq, CATALOG)
    notes = " ".join(" ".join(w["notes"]) for w in quote_context(plan, rfq, CATALOG)["workloads"])
    assert "1,095 runs" in notes and "rented per run" in notes
