"""A workload served by several layouts states the throughput of all of them: the plan's
``predicted.tokens_per_s`` sums each layout's replicas at their share of the load, as its
``qps_capacity`` and ``max_concurrency`` sum their capacities. Before, it held the first
layout's replicas only (chat-70b-one-node: 478 output tokens/s for 8 GPUs of which that
layout runs 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.optimize.candidates import build_candidates
from solver.optimize.plan import at_load, workload_entry
from solver.rfq.schema import load_rfq

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "chat-70b-one-node.yaml"


def _pick(candidates, tp: int, pp: int):
    return next(c for c in candidates if c.layout.tp == tp and c.layout.pp == pp
                and c.layout.gpus_per_node == 8 and c.fabric == "none")


def test_two_layouts_state_the_throughput_of_both(catalog):
    rfq = load_rfq(SCENARIO, catalog)
    spec = rfq.workloads[0]
    found = build_candidates(catalog, rfq).candidates[spec.name]
    wide, deep = _pick(found, 2, 1), _pick(found, 2, 2)
    picks = [(wide, 2), (deep, 1)]
    capacity = sum(c.concurrency_capacity * n for c, n in picks)
    each = [at_load(catalog, spec, c, n, capacity).predicted.tokens_per_s * n for c, n in picks]
    assert all(t > 0 for t in each)
    both = workload_entry(catalog, spec, picks)["predicted"]
    assert both["tokens_per_s"] == pytest.approx(sum(each), abs=0.06)
    assert both["max_concurrency"] == int(capacity)
    # one layout alone states its own replicas' throughput, at its own share of the load
    alone = workload_entry(catalog, spec, [(wide, 4)])["predicted"]
    one = at_load(catalog, spec, wide, 4, wide.concurrency_capacity * 4)
    assert alone["tokens_per_s"] == pytest.approx(one.predicted.tokens_per_s * 4, abs=0.06)
