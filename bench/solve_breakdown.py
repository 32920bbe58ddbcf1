"""Where a portfolio's ``procure solve`` spends its time (issue 31).

Run by hand: ``python bench/solve_breakdown.py [--sizes 10,50] [--seed-base 2026]
[--workers 1,2]``. For each seeded open-catalog portfolio (:func:`solver.rfq.portfolio.
portfolio_rfq`, no limits; the workloads of ``bench/scale_bench.py``), in this process:
the candidate build (as the candidate cache finds it: set ``PROCURE_CANDIDATE_CACHE``), the
MIP (one solve), plan assembly and annotation, and the binding list, which re-solves the
whole MIP once per lifted limit, relaxed SLO, deadline and pinned precision
(:mod:`solver.analysis.binding`) - with each ``--workers`` count in turn, so the ratios come
from the same minutes. Prints wall seconds, CPU seconds (this process and its children),
the number of re-solves and the load average; the binding lists of the runs must be equal.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from solver.analysis import binding
from solver.analysis.explain import annotate
from solver.catalog.load import load_catalog
from solver.optimize.candidates import build_candidates
from solver.optimize.solve import solve_table
from solver.rfq.portfolio import portfolio_rfq
from solver.rfq.schema import validate_rfq


def cpu_seconds() -> float:
    """CPU of this process and of its reaped children (the forked re-solves)."""
    own, kids = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                     resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,50")
    parser.add_argument("--seed-base", type=int, default=2026)
    parser.add_argument("--workers", default="1,2")
    args = parser.parse_args()
    os.environ.setdefault("PROCURE_PROGRESS", "off")
    catalog = load_catalog()
    print("| workloads | candidates s | MIP s | plan s | re-solves | binding s (workers: wall, "
          "CPU) | load |")
    print("|---|---|---|---|---|---|---|")
    for size in (int(s) for s in args.sizes.split(",")):
        rfq = validate_rfq(portfolio_rfq(size, args.seed_base + size, limits=False), catalog)
        start = time.perf_counter()
        table = build_candidates(catalog, rfq)
        built = time.perf_counter()
        plan, used = solve_table(rfq, catalog, table=table)
        assert used is not None
        plan = annotate(plan, rfq, catalog, used)
        annotated = time.perf_counter()
        cells, lists = [], []
        for workers in (int(w) for w in args.workers.split(",")):
            clock, cpu = time.perf_counter(), cpu_seconds()
            lists.append(binding.binding_constraints(rfq, catalog, plan, used,
                                                     workers=workers))
            cells.append(f"{workers}: {time.perf_counter() - clock:.1f}, "
                         f"{cpu_seconds() - cpu:.1f}")
        base = binding.Base(1.0)
        steps = (len(binding._limit_entries(rfq, catalog, used, "highs", base))
                 + sum(len(binding._workload_entries(rfq, catalog, used, "highs", base, s))
                       for s in rfq.workloads)
                 + len(binding._rfq_entries(rfq, catalog, "highs", base)))
        same = all(found == lists[0] for found in lists)
        print(f"| {len(rfq.workloads)} | {built - start:.2f} | {plan.solve_seconds:.2f} | "
              f"{annotated - built - plan.solve_seconds:.2f} | {steps} | {'; '.join(cells)}"
              f"{'' if same else ' (LISTS DIFFER)'} | {os.getloadavg()[0]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
