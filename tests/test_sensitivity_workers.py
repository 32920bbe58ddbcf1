"""Sensitivity sweeps in forked worker processes (issue 18: a portfolio sensitivity on two
cores): the same report as in one process, the children's solves counted, a bad value
raised as the same input error, a failing child reported instead of a hang."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

import solver.analysis.sensitivity as sensitivity
from solver.common.errors import InputError
from solver.rfq.schema import load_rfq

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                                reason="needs the fork start method")


@pytest.mark.parametrize("scenario", ["chat-70b-one-node", pytest.param(
    "hybrid-service-and-job", marks=pytest.mark.slow)])
def test_forked_sweeps_give_the_report_of_one_process(catalog, scenario):
    rfq = load_rfq(ROOT / "scenarios" / f"{scenario}.yaml", catalog)
    alone = sensitivity.report(catalog, rfq, workers=1, samples=4)
    forked = sensitivity.report(catalog, rfq, workers=3, samples=4)
    alone.pop("seconds")
    forked.pop("seconds")
    assert forked == alone  # rows, order, flips, and the solves of every child counted
    assert len(alone["parameters"]) >= 3


def test_a_bad_value_in_a_child_is_the_same_input_error(catalog):
    rfq = load_rfq(ROOT / "scenarios" / "chat-70b-one-node.yaml", catalog)
    ev = sensitivity.Evaluator(catalog, rfq)
    good = sensitivity.Parameter("costs.pue", "PUE", 1.4, 1.2, 1.6)
    bad = sensitivity.Parameter("costs.pue", "PUE", 1.4, -2.0, 1.6)  # a PUE below zero
    with pytest.raises(InputError) as alone:
        sensitivity.sweeps(ev, [good, bad], samples=3, workers=1)
    with pytest.raises(InputError) as forked:
        sensitivity.sweeps(ev, [good, bad], samples=3, workers=2)
    assert forked.value.problems == alone.value.problems


def test_a_child_that_fails_is_reported(catalog, monkeypatch):
    rfq = load_rfq(ROOT / "scenarios" / "chat-70b-one-node.yaml", catalog)
    ev = sensitivity.Evaluator(catalog, rfq)
    params = [sensitivity.Parameter("costs.pue", "PUE", 1.4, 1.2, 1.6)] * 2

    def broken(*_args, **_kwargs):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(sensitivity, "sweep", broken)  # inherited by the forked children
    with pytest.raises(RuntimeError, match="ZeroDivisionError: boom"):
        sensitivity.sweeps(ev, params, samples=3, workers=2)
