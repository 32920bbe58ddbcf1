"""A first candidate build in forked processes (issue 18): the same table as one process
builds, errors raised as one process raises them, small RFQs left in this process."""

from __future__ import annotations

import multiprocessing

import pytest

from solver.common.errors import InputError, Problem
from solver.optimize import candidate_workers
from solver.optimize.candidate_workers import map_workloads, workload_groups
from solver.optimize.candidates import clear_caches
from solver.optimize.linear import TimeLimitReached
from solver.optimize.solve import solve_table
from solver.rfq.portfolio import portfolio_rfq
from solver.rfq.schema import validate_rfq

pytestmark = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                                reason="no fork on this platform")


def test_groups_keep_equal_keys_together_largest_first():
    keys = ["a", "b", "a", "c", "b", "a"]
    assert workload_groups(keys) == [[0, 2, 5], [1, 4], [3]]


def test_results_come_back_in_workload_order():
    keys = [i % 3 for i in range(10)]
    assert map_workloads(lambda i: i * i, keys, 2) == [i * i for i in range(10)]


@pytest.mark.parametrize(("keys", "workers"), [
    (list(range(candidate_workers.PARALLEL_MIN_WORKLOADS - 1)), 2),  # too few workloads
    (list(range(20)), 1),  # one worker
    (["same"] * 20, 4),  # one group: one process would build it all anyway
])
def test_small_or_single_group_work_stays_here(keys, workers):
    assert map_workloads(lambda i: i, keys, workers) is None


def _raise_at(bad: int, error: Exception):
    def task(index: int) -> int:
        if index == bad:
            raise error
        return index
    return task


def test_an_input_error_in_a_child_is_raised_here_as_itself():
    error = InputError([Problem("rfq.yaml", "workloads[5].model", "x", "unknown model")])
    with pytest.raises(InputError) as raised:
        map_workloads(_raise_at(5, error), list(range(10)), 2)
    assert raised.value.problems == error.problems


def test_the_time_limit_in_a_child_is_raised_here():
    with pytest.raises(TimeLimitReached):
        map_workloads(_raise_at(3, TimeLimitReached("late")), list(range(10)), 2)


def _portfolio(catalog, size: int, seed: int):
    rfq = validate_rfq(portfolio_rfq(size, seed), catalog)
    assert len(rfq.workloads) >= candidate_workers.PARALLEL_MIN_WORKLOADS
    return rfq


def test_a_parallel_first_build_is_the_serial_table_and_plan(catalog):
    rfq = _portfolio(catalog, 9, 4)
    assert len(workload_groups([(s.model, s.kind) for s in rfq.workloads])) > 1
    clear_caches()
    serial_plan, serial = solve_table(rfq, catalog)
    clear_caches()
    parallel_plan, parallel = solve_table(rfq, catalog, workers=2)
    assert parallel.node_types == serial.node_types
    assert parallel.fabrics.keys() == serial.fabrics.keys()
    assert parallel.candidates == serial.candidates  # every field of every estimate
    assert {k: [c.estimate.training for c in v] for k, v in parallel.candidates.items()} == {
        k: [c.estimate.training for c in v] for k, v in serial.candidates.items()}
    assert parallel.rejected == serial.rejected
    assert parallel.storage == serial.storage
    assert serial_plan.status == "optimal"
    # the only timing in a plan
    assert parallel_plan.model_copy(update={"solve_seconds": 0.0}) == serial_plan.model_copy(
        update={"solve_seconds": 0.0})
