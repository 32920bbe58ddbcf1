"""Demand over time in the RFQ form (docs/rental.md): ``growth_per_year`` or ``periods``
made explicit before the schema validates a workload. The phased purchase model that plans
against these periods is :mod:`solver.optimize.schedule`."""

from __future__ import annotations

import math
from typing import Any, TypeGuard

MONTHS_PER_YEAR = 12.0


def expand_demand_over_time(data: Any) -> Any:
    """RFQ data with every serving workload's demand over time made explicit (before the
    schema validates it): ``growth_per_year`` becomes yearly ``periods`` whose demand is the
    year's *end* value (capacity must hold through the period: ``D0 × (1+g)^(y+1)``), and a
    workload with ``periods`` gets ``concurrency``/``qps`` = the peak over its periods (the
    plan for buying everything at month 0). Malformed values are left for the schema."""
    if not isinstance(data, dict) or not isinstance(data.get("workloads"), list):
        return data
    horizon = data.get("horizon_years", 3)
    if not _is_number(horizon) or horizon <= 0:
        return data
    out = dict(data)
    out["workloads"] = [_expand_workload(w, float(horizon)) for w in data["workloads"]]
    return out


def _expand_workload(work: Any, horizon_years: float) -> Any:
    if not isinstance(work, dict) or work.get("kind") != "inference":
        return work
    growth = work.get("growth_per_year")
    periods = work.get("periods")
    if growth is not None and periods is not None:
        if not _is_expansion(growth, periods, horizon_years):
            raise ValueError(f"workload {work.get('name')!r}: give periods or "
                             "growth_per_year, not both")
        growth = None  # an RFQ validated before (a plan's or the dashboard's copy): keep it
    work = dict(work)
    if _is_number(growth) and growth > -0.9:
        periods = []
        for year, months in enumerate(_yearly_months(horizon_years)):
            factor = (1.0 + growth) ** (year + 1)
            period: dict[str, Any] = {"months": months}
            if isinstance(work.get("qps"), int | float):
                period["qps"] = round(work["qps"] * factor, 6)
            if isinstance(work.get("concurrency"), int):
                period["concurrency"] = max(1, math.ceil(work["concurrency"] * factor - 1e-9))
            periods.append(period)
        work["periods"] = periods
    if isinstance(periods, list) and all(isinstance(p, dict) for p in periods):
        for key in ("qps", "concurrency"):
            values = [p[key] for p in periods if _is_number(p.get(key))]
            if values:
                work[key] = max(values)
    return work


def _yearly_months(horizon_years: float) -> list[float]:
    """The months of each yearly period over the horizon (the last may be shorter)."""
    years = max(1, math.ceil(horizon_years - 1e-9))
    return [round(min(MONTHS_PER_YEAR, MONTHS_PER_YEAR * horizon_years - 12 * year), 6)
            for year in range(years)]


def _is_expansion(growth: Any, periods: Any, horizon_years: float) -> bool:
    """Whether ``periods`` is what ``growth_per_year`` expands into over the horizon: yearly
    periods whose demand grows by ``1 + growth`` a year (concurrency rounded up). This is an
    RFQ that was validated once already, dumped and read back, so validating it again must
    keep it as it is; anything else gives both forms of demand over time and is an error."""
    if (not _is_number(growth) or growth <= -0.9 or not isinstance(periods, list)
            or not all(isinstance(p, dict) for p in periods)):
        return False
    if [p.get("months") for p in periods] != _yearly_months(horizon_years):
        return False
    for key in ("qps", "concurrency"):
        values = [p.get(key) for p in periods]
        if all(v is None for v in values):
            continue
        if not all(_is_number(v) and v > 0 for v in values):
            return False
        for year, value in enumerate(values):
            expected = values[0] * (1.0 + growth) ** year
            rounding = (1.0 + growth) ** year if key == "concurrency" else 1e-6  # rounded up
            if abs(value - expected) > 1e-6 * expected + rounding:
                return False
    return True


def _is_number(value: Any) -> TypeGuard[float]:
    """An int or float that is not a bool (malformed values are left for the schema)."""
    return isinstance(value, int | float) and not isinstance(value, bool)
