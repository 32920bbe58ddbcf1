"""The unit price a buyer compares with cloud APIs: per serving workload, the cost per
million tokens at the planned load over the horizon, and tokens per second per dollar-hour.

A workload's cost is its share of the plan's total cost of ownership: the owned part
(TCO minus rental) split in proportion to the owned GPUs each workload runs on (idle GPUs
are spread the same way), plus the rental of its own rented instances. Its tokens are
those of the stated demand (not the capacity bought): requests per second - the RFQ's
``qps``, or its ``concurrency`` over the predicted median time of one request (Little's
law) - over each demand period until the horizon ends; a batch-inference job processes its
``requests`` once per run (a recurring job runs ``recurrence.runs`` times). Under
``objective: max_served`` only the share served counts.
"""

from __future__ import annotations

from typing import Any

from solver.optimize.costs import HOURS_PER_YEAR
from solver.rfq.schema import AnyWorkload, BatchInferenceWorkload, InferenceWorkload, Rfq

SERVING_KINDS = frozenset({"inference", "batch_inference"})
MONTHS_PER_YEAR = 12.0


def _request_rate(qps: float | None, concurrency: float | None,
                  seconds_per_request: float | None) -> float:
    """Requests per second of one demand: the rate, else concurrency / time per request."""
    if qps:
        return float(qps)
    if concurrency and seconds_per_request:
        return float(concurrency) / seconds_per_request
    return 0.0


def requests_over_horizon(spec: AnyWorkload, predicted: dict[str, Any],
                          horizon_years: float) -> float:
    """Requests the workload serves over the horizon at its stated (planned) demand."""
    if spec.kind == "batch_inference":
        return float(spec.requests)
    if not isinstance(spec, InferenceWorkload):
        return 0.0
    ttft, tpot = predicted.get("ttft_ms"), predicted.get("tpot_ms")
    seconds = ((ttft or 0.0) + spec.output_tokens * (tpot or 0.0)) / 1000.0 or None
    horizon_months = horizon_years * MONTHS_PER_YEAR
    seconds_per_month = HOURS_PER_YEAR * 3600.0 / MONTHS_PER_YEAR
    periods = [(p.months, p.qps, p.concurrency) for p in spec.periods or []] or \
        [(horizon_months, spec.qps, spec.concurrency)]
    total, start = 0.0, 0.0
    for index, (months, qps, concurrency) in enumerate(periods):
        last = index == len(periods) - 1
        length = max(0.0, (horizon_months if last else min(start + months, horizon_months))
                     - start)
        total += _request_rate(qps, concurrency, seconds) * length * seconds_per_month
        start += months
    return total


def workload_costs(plan: dict[str, Any]) -> dict[str, float]:
    """Each workload's share of the plan's TCO (owned share by owned GPUs, plus its rental)."""
    cost = plan.get("cost") or {}
    rental_total = float(cost.get("rental_usd") or 0.0)
    owned_total = float(cost.get("tco_usd") or 0.0) - rental_total
    gpus: dict[str, int] = {}
    for node in plan.get("placement") or []:
        for run in node.get("runs") or []:
            gpus[run["workload"]] = gpus.get(run["workload"], 0) + int(run["gpus"])
    placed = sum(gpus.values())
    shares: dict[str, float] = {}
    for work in plan["workloads"]:
        own = owned_total * gpus.get(work["name"], 0) / placed if placed else 0.0
        shares[work["name"]] = own + sum(float(r["usd"]) for r in work.get("rental") or [])
    return shares


def add_unit_costs(plan: dict[str, Any], rfq: Rfq) -> None:
    """Set ``cost_per_million_tokens_usd`` on every serving workload of a plan being built."""
    if not plan.get("cost"):
        return
    specs = {spec.name: spec for spec in rfq.workloads}
    costs = workload_costs(plan)
    hours = rfq.horizon_years * HOURS_PER_YEAR
    for work in plan["workloads"]:
        spec = specs.get(work["name"])
        if not isinstance(spec, InferenceWorkload | BatchInferenceWorkload):
            continue
        requests = requests_over_horizon(spec, work["predicted"], rfq.horizon_years)
        requests *= float((work.get("recurrence") or {}).get("runs") or 1)  # a recurring job
        served = work.get("served_fraction")  # objective max_served: only what is served
        if served is not None:
            requests *= float(served)
        output = requests * spec.output_tokens
        tokens = requests * (spec.input_tokens + spec.output_tokens)
        usd = costs.get(work["name"], 0.0)
        per_hour = usd / hours if hours else 0.0
        work["cost_per_million_tokens_usd"] = {
            "output_usd": round(usd / output * 1e6, 4) if output else None,
            "all_tokens_usd": round(usd / tokens * 1e6, 4) if tokens else None,
            "output_tokens_per_s_per_usd_per_hour":
                round(output / (hours * 3600.0) / per_hour, 3) if per_hour and hours else None,
            "workload_cost_usd": round(usd, 2),
            "requests": round(requests, 1),
            "output_tokens": round(output),
            "basis": ("the batch's requests, every run" if spec.kind == "batch_inference" else
                      "the stated demand over the horizon") + "; its share of the TCO by "
                      "the owned GPUs it runs on, plus its own rental",
        }
