"""Quick probe of the serving fit: fit on every source, then hold out only the source groups
named on the command line (a few minutes, where `procure calibrate` refits once per group).

    PYTHONPATH=. python bench/serving_holdout.py mlperf-v5.1 aic-silicon

For each named group it prints the fit check (all sources in the fit) and the held-out error
(the group left out) per metric, as median |error| and median signed error, and the fitted
factors that move most between the two fits. Use it to compare physics changes before a
full `procure calibrate --write-factors`; docs/calibration.md is the reference report.
"""
from __future__ import annotations

import statistics
import sys
import time

from solver.catalog.load import load_catalog
from solver.physics import serving_fit
from solver.physics.serving_data import Prepared, holdout_group, load_all, prepare

METRICS = ("TTFT", "TPOT", "throughput")


def _stats(rows: list[Prepared], predicted: dict[str, float | None], group: str,
           metric: str) -> str:
    errors = [serving_fit.error(predicted[p.obs.id], p.obs) for p in rows
              if holdout_group(p.obs.source) == group
              and serving_fit.metric_class(p.obs) == metric]
    errors = [e for e in errors if e == e]  # NaN: the model called the load impossible
    if not errors:
        return "-"
    return (f"{len(errors)} rows, {statistics.median(abs(e) for e in errors) * 100:.1f} % "
            f"({statistics.median(errors) * 100:+.1f} %)")


def main(groups: list[str]) -> None:
    catalog = load_catalog()
    observations, _ = load_all(catalog)
    rows = [p for p in (prepare(catalog, o) for o in observations) if not isinstance(p, str)]
    known = {holdout_group(p.obs.source) for p in rows}
    unknown = [g for g in groups if g not in known]
    if unknown:
        sys.exit(f"unknown source group(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    problem = serving_fit.build_problem(catalog, rows)
    started = time.perf_counter()
    full = serving_fit.fit(problem)
    print(f"fit on every source: {time.perf_counter() - started:.0f} s")
    for group in groups:
        started = time.perf_counter()
        train = [i for i, p in enumerate(rows) if holdout_group(p.obs.source) != group]
        held = serving_fit.fit(problem, train,
                               start=serving_fit.held_out_start(problem, full.values, group))
        print(f"\n{group} (held out in {time.perf_counter() - started:.0f} s)")
        for metric in METRICS:
            print(f"  {metric:10s} fit check {_stats(rows, full.predicted, group, metric):32s}"
                  f" held out {_stats(rows, held.predicted, group, metric)}")
        moved = sorted(((name, full.values[name], value) for name, value in held.values.items()
                        if not name.startswith("harness.")),
                       key=lambda t: -abs(t[2] / t[1] - 1.0) if t[1] else 0.0)
        for name, before, after in moved[:5]:
            print(f"  {name}: {before:.4g} with it, {after:.4g} without")


if __name__ == "__main__":
    main(sys.argv[1:] or ["mlperf-v5.1"])
