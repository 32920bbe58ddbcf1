"""Which other source makes a held-out group miss? (issue 26)

    PYTHONPATH=. python bench/leave_two_out.py mlperf-v5.1 [--factor KEY ...]

The serving fit is refitted with the named source group held out, and then once more with
each other group held out too. Each line gives the factors that matter (``--factor``, the
Hopper and B200 GEMM efficiencies and Hopper's bandwidth by default) and the held-out group's
median signed error per metric. If one other source alone pulled the fit away from the held-
out group, leaving it out as well would bring the errors near the fit check's. ~1 minute per
group on one core (about 20 minutes for the 21 groups).
"""

from __future__ import annotations

import argparse
import statistics

from solver.catalog.load import load_catalog
from solver.physics import serving_fit
from solver.physics.serving_data import holdout_group, load_all, prepare

FACTORS = ("families.hopper-sxm.gemm_efficiency.fp8", "families.hopper-sxm.mem_bw_efficiency",
           "families.blackwell-sxm.gemm_efficiency.fp4",
           "families.blackwell-sxm.gemm_efficiency.fp8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("group", help="the source group held out (e.g. mlperf-v5.1)")
    parser.add_argument("--factor", action="append", help="a factor to print (repeatable)")
    args = parser.parse_args()
    keys = tuple(args.factor or FACTORS)
    catalog = load_catalog()
    observations, _ = load_all(catalog, None)
    rows = [p for p in (prepare(catalog, o) for o in observations) if not isinstance(p, str)]
    problem = serving_fit.build_problem(catalog, rows)
    full = serving_fit.fit(problem)
    groups = sorted({holdout_group(p.obs.source) for p in rows})
    if args.group not in groups:
        parser.error(f"no source group {args.group!r}; the groups: {', '.join(groups)}")

    def errors(values: dict[str, float]) -> str:
        by: dict[str, list[float]] = {}
        for p in rows:
            if holdout_group(p.obs.source) == args.group:
                by.setdefault(serving_fit.metric_class(p.obs), []).append(
                    serving_fit.error(values[p.obs.id], p.obs))
        return " ".join(f"{m} {statistics.median(v):+.1%}" for m, v in sorted(by.items()))

    print("| also held out | " + " | ".join(keys) + " | held-out group's median signed error |")
    print("|---" * (len(keys) + 2) + "|")
    print("| (fit check: nothing held out) | "
          + " | ".join(f"{full.values[k]:.3f}" for k in keys) + f" | {errors(full.predicted)} |")
    for other in [None, *(g for g in groups if g != args.group)]:
        train = [i for i, p in enumerate(rows)
                 if holdout_group(p.obs.source) not in (args.group, other)]
        refit = serving_fit.fit(problem, train, start=full.values)
        print(f"| {other or '(none)'} | " + " | ".join(f"{refit.values[k]:.3f}" for k in keys)
              + f" | {errors(refit.predicted)} |", flush=True)


if __name__ == "__main__":
    main()
