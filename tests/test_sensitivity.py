"""Sensitivity (issue 5): break-evens bracket a real flip; higher price never buys more."""

from __future__ import annotations

from typing import Any

import pytest

from solver.analysis.sensitivity import Evaluator, parse_range, report
from solver.analysis.whatif import describe, gpu_counts
from solver.common.errors import InputError
from solver.rfq.schema import validate_rfq


@pytest.fixture(scope="module")
def chat(catalog: Any) -> Any:
    return validate_rfq({"id": "sens-test", "constraints": {"gpus": ["l40s", "rtx-pro-6000"]},
                         "workloads": [{"name": "chat", "kind": "inference",
                                        "model": "llama-3.1-70b", "concurrency": 48,
                                        "input_tokens": 2000, "output_tokens": 400,
                                        "tpot_ms": 50}]}, catalog)


@pytest.fixture(scope="module")
def full(catalog: Any, chat: Any) -> dict[str, Any]:
    return report(catalog, chat)


def test_report_shape_and_tornado_order(full: dict[str, Any]) -> None:
    paths = [row["path"] for row in full["parameters"]]
    for path in ("gpu.rtx-pro-6000.price_usd", "costs.electricity_usd_per_kwh", "costs.pue",
                 "rfq.horizon_years", "costs.multinode_overhead_factor", "demand"):
        assert path in paths
    assert "gpu.l40s.price_usd" in paths  # the runner-up GPU
    swings = [row["swing_usd"] for row in full["parameters"]]
    assert swings == sorted(swings, reverse=True)
    assert full["base"]["status"] == "optimal"


def _pairs(path: str, value: float) -> list[tuple[str, Any]]:
    return [("demand", value)] if path == "demand" else [(path, value)]


def test_break_evens_verified_below_and_above(catalog: Any, chat: Any,
                                              full: dict[str, Any]) -> None:
    ev = Evaluator(catalog, chat)
    flips = [(row, flip) for row in full["parameters"] for flip in row["flips"]]
    assert flips, "demand growth x0.5..x4 must change the plan"
    for row, flip in flips:
        width = row["high"] - row["low"]
        assert flip["above"] - flip["below"] <= 0.011 * width
        below = ev.solve(_pairs(row["path"], flip["below"]))
        above = ev.solve(_pairs(row["path"], flip["above"]))
        assert below.signature != above.signature
        assert describe(below.signature) == flip["from"]
        assert describe(above.signature) == flip["to"]


def test_higher_gpu_price_never_buys_more_of_it(catalog: Any, chat: Any) -> None:
    ev = Evaluator(catalog, chat)
    for gpu in ("rtx-pro-6000", "l40s"):
        base = catalog.gpus[gpu].price_usd
        counts = []
        for factor in (0.3, 0.6, 0.9, 1.0, 1.3, 2.0, 4.0):
            out = ev.solve([(f"gpu.{gpu}.price_usd", base * factor)])
            counts.append(gpu_counts(out.table, out.signature).get(gpu, 0))
        assert counts == sorted(counts, reverse=True), (gpu, counts)


def test_single_parameter_and_ranges(catalog: Any, chat: Any) -> None:
    one = report(catalog, chat, param="costs.electricity_usd_per_kwh", range_text="0.05:0.5")
    row = one["parameters"][0]
    assert (row["low"], row["high"]) == (0.05, 0.5)
    assert row["tco_high_usd"] > row["tco_low_usd"]
    assert parse_range("-30%:+30%", 100.0) == pytest.approx((70.0, 130.0))
    with pytest.raises(InputError):
        parse_range("abc", 1.0)
    with pytest.raises(InputError, match="nearest valid"):
        report(catalog, chat, param="gpu.rtx-pro-6000.pricee")


def test_a_shown_bracket_still_holds_its_flip() -> None:
    """A break-even's ``below`` is shown rounded down and its ``above`` rounded up: a demand
    factor of 50 / 48 rounded to nearest (1.041667) is already past the 50th request."""
    import math

    from solver.analysis.sensitivity import Parameter, _shown

    param = Parameter("demand", "demand growth (×)", 1.0, 0.5, 4.0, multiplier=True)
    lo, hi = 50 / 48 - 1e-9, 50 / 48 + 1e-9
    below, above = _shown(param, lo, math.floor), _shown(param, hi, math.ceil)
    assert below <= lo and above >= hi
    assert math.ceil(48 * below) == 50 and math.ceil(48 * above - 1e-9) == 51
    assert _shown(param, 2.0, math.floor) == 2.0 == _shown(param, 2.0, math.ceil)
    assert _shown(param, lo) == 1.041667  # to nearest: past the step
