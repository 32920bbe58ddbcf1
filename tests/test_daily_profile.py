"""Issue 29: busy and quiet hours - a recurring job whose window fits a service's quiet
hours runs on the GPUs the service leaves idle then (known answers on a hand-built table)."""

from __future__ import annotations

import pytest
from test_mip import BACKENDS, cand, node, rfq_of, spec, table_of

from solver.catalog.load import load_catalog
from solver.common.errors import InputError
from solver.optimize.mip import node_var, quiet_hours
from solver.optimize.solve import run_mip
from solver.rfq.schema import validate_rfq

BOX = node("s8", "g", 8, 8000)


def _solve(profile: dict | None, window_fits: bool = True, backend: str = "highs"):
    """A chat of 70 users on 1-GPU replicas of 10 users (7 GPUs at peak) and a nightly
    batch of 5 one-GPU replicas; one 8-GPU node type."""
    chat = spec("chat", "inference", concurrency=70,
                **({"daily_profile": profile} if profile else {}))
    batch = spec("nightly", "batch_inference", qps=5.0, recurrence="daily")
    if not window_fits:
        chat["daily_profile"] = {"peak_hours": 23.5, "off_peak_load": 0.2}  # 0.5 h quiet
    cands = [cand("chat", "inference", BOX, 1, conc=10, qps=100),
             cand("nightly", "batch_inference", BOX, 1, qps=1.0)]
    rfq = rfq_of([chat, batch])
    solution = run_mip(table_of([BOX], cands), rfq, solver=backend)
    assert solution.status == "optimal", solution
    return round(solution.values[node_var(BOX.key)]), solution, rfq


@pytest.mark.parametrize("backend", BACKENDS)
def test_nightly_job_fits_the_quiet_hours_and_buys_nothing(backend):
    # quiet hours: the chat keeps ceil(0.2 x 70 / 10) = 2 replicas; the batch's 5 fit the 6
    # idle GPUs -> one node (7 GPUs busy, 7 quiet)
    nodes, solution, rfq = _solve({"peak_hours": 12, "off_peak_load": 0.2}, backend=backend)
    assert quiet_hours(rfq) == 12
    assert nodes == 1
    kept = sum(v for k, v in solution.values.items() if k.startswith("xq["))
    assert kept == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_without_quiet_hours_the_job_needs_its_own_gpus(backend):
    # no profile: 7 + 5 GPUs all day -> two nodes; a window longer than the quiet hours: too
    assert _solve(None, backend=backend)[0] == 2
    assert _solve({"peak_hours": 12, "off_peak_load": 0.2}, window_fits=False,
                  backend=backend)[0] == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_busy_night_leaves_no_room(backend):
    # off-peak load 0.6: the chat keeps 5 replicas at night, 5 + 5 > 8 -> two nodes
    assert _solve({"peak_hours": 12, "off_peak_load": 0.6}, backend=backend)[0] == 2


@pytest.mark.parametrize("profile, field", [
    ({"peak_hours": 0, "off_peak_load": 0.2}, "peak_hours"),
    ({"peak_hours": 25, "off_peak_load": 0.2}, "peak_hours"),
    ({"peak_hours": 12, "off_peak_load": 1.5}, "off_peak_load"),
    ({"peak_hours": 12}, "off_peak_load"),
])
def test_bad_daily_profile_is_refused(profile, field):
    catalog = load_catalog()
    with pytest.raises(InputError) as info:
        validate_rfq({"id": "p", "workloads": [{
            "name": "chat", "kind": "inference", "model": "llama-3.1-8b", "concurrency": 8,
            "input_tokens": 100, "output_tokens": 100, "daily_profile": profile}]}, catalog)
    assert any(p.field == f"workloads[0].daily_profile.{field}"
               for p in info.value.problems), info.value.problems
