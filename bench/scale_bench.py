"""Scaling benchmark (issue 18.5): portfolio RFQs of 1, 10, 50, 100 workloads, each backend.

Run once, by hand (not in CI): ``python bench/scale_bench.py [--sizes 1,10,50,100]
[--repeats 3] [--limit 120] [--backends cbc,highs,cpsat]``. For each size a varied portfolio
is drawn from the shipped scenarios' workloads (:func:`solver.rfq.portfolio.portfolio_rfq`, no
limits, seeded); candidates are built once (cold, then warm), and each backend solves the
same MIP in-process (median of ``--repeats``; one run for sizes ≥ 50). A first build in one
forked process per core (what ``procure solve`` does) is timed too. "Cold" empties every
physics memo first (before issue 18 item 3 it followed the build that filters the
workloads, so its estimates were warm); both candidate columns give wall and CPU seconds. ``--limit`` caps one
MIP solve (seconds); a run that hits it reports its status and gap. ``--reference`` also
solves the former model with HiGHS (``build_model(reference=True)``: per-candidate n+1
big-M rows, no rounded rows, no vendor-stack cases), the "before" of issue 18 part 2. The load average is printed before and after (the
development machine is shared). It also times whole ``procure solve`` processes on a
single-workload scenario against ``procure --version`` (``--no-process`` skips that).
Prints Markdown tables (the figures in docs/performance.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from solver.catalog.load import load_catalog
from solver.optimize.backends import BACKENDS, EXTRA_BACKENDS, installed_backends
from solver.optimize.candidate_workers import default_workers
from solver.optimize.candidates import build_candidates, clear_caches
from solver.optimize.mip import build_model
from solver.rfq.portfolio import portfolio_rfq
from solver.rfq.schema import validate_rfq

ROOT = Path(__file__).resolve().parent.parent
SINGLE = ROOT / "scenarios" / "chat-70b-one-node.yaml"


def process_seconds(args: list[str], repeats: int) -> float:
    """Median wall time of a whole ``procure`` process."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "solver.cli.main", *args], cwd=ROOT,
                       capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1,10,50,100")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=float, default=120.0)
    parser.add_argument("--backends", default=",".join(installed_backends() + ["highs-pulp"]))
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--reference", action="store_true")
    parser.add_argument("--no-process", action="store_true")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    catalog = load_catalog()
    backends = {**BACKENDS, **EXTRA_BACKENDS}
    names = [b for b in args.backends.split(",") if b in backends and backends[b].available()]
    columns = [f"{b} MIP s" for b in names] + (["highs former model s"] if args.reference else [])

    print(f"| workloads | variables | rows | candidates s (cold, {default_workers()} processes) | "
          "candidates s (cold) | candidates s (warm) | " + " | ".join(columns) + " | agree |")
    print("|---" * (7 + len(columns)) + "|")
    for size in (int(s) for s in args.sizes.split(",")):
        data = portfolio_rfq(size, args.seed + size, limits=False)
        rfq = validate_rfq(data, catalog)
        fits = build_candidates(catalog, rfq).candidates  # keep workloads that fit somewhere
        data["workloads"] = [w for w in data["workloads"] if fits[w["name"]]]
        rfq = validate_rfq(data, catalog)
        clear_caches()  # cold: every memo emptied (the filter above filled them)
        start = time.perf_counter()  # first in forked processes, as `procure solve` does:
        build_candidates(catalog, rfq, workers=default_workers())  # these memos stay cold
        forked = time.perf_counter() - start
        start, cpu = time.perf_counter(), time.process_time()
        table = build_candidates(catalog, rfq)
        cold, cold_cpu = time.perf_counter() - start, time.process_time() - cpu
        start, cpu = time.perf_counter(), time.process_time()
        table = build_candidates(catalog, rfq)
        warm, warm_cpu = time.perf_counter() - start, time.process_time() - cpu
        model = build_model(table, rfq)
        cells, objectives = [], set()
        repeats = args.repeats if size < 50 else 1
        runs = [(name, backends[name], False) for name in names]
        if args.reference:
            runs.append(("highs", backends["highs"], True))
        for _name, backend, reference in runs:
            times, last = [], None
            for _ in range(repeats):
                last = backend.solve(build_model(table, rfq, reference=reference), args.limit)
                times.append(last.seconds)
            cell = f"{statistics.median(times):.2f}"
            if last.status != "optimal":
                cell += f" ({last.status}" + (f", gap {last.gap:.2%}" if last.gap else "") + ")"
            else:
                objectives.add(round(last.objective, 2))
            cells.append(cell)
        print(f"| {len(rfq.workloads)} | {len(model.variables)} | {len(model.constraints)} | "
              f"{forked:.2f} | {cold:.2f} ({cold_cpu:.2f} CPU) | {warm:.2f} ({warm_cpu:.2f} CPU) | "
              + " | ".join(cells) + f" | {len(objectives) <= 1} |", flush=True)

    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.no_process:
        return
    print()
    version = process_seconds(["--version"], 5)
    print("| process | median s (5 runs) | × --version |")
    print("|---|---|---|")
    print(f"| procure --version | {version:.2f} | 1.0 |")
    for name in installed_backends():
        solve = process_seconds(["solve", str(SINGLE), "--json", "--solver", name], 5)
        print(f"| procure solve (1 workload, {name}) | {solve:.2f} | {solve / version:.1f} |",
              flush=True)


if __name__ == "__main__":
    main()
