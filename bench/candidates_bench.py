"""Candidate generation (the estimate stage) for every shipped scenario, caches cleared, CPU seconds of this process (steady under load):
issue 10 asks it to stay within 2x of the fixed-batch serving model's time.

    python bench/candidates_bench.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from solver.catalog.load import load_catalog
from solver.optimize.candidates import build_candidates, clear_caches
from solver.rfq.schema import load_rfq

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    catalog = load_catalog()
    total = 0.0
    for path in sorted(SCENARIOS.glob("*.yaml")):
        rfq = load_rfq(path, catalog)
        times = []
        for _ in range(args.repeat):
            clear_caches()  # estimates, rankings, knob searches, memory plans, links
            start = time.process_time()
            build_candidates(catalog, rfq)
            times.append(time.process_time() - start)
        total += statistics.median(times)
        print(f"{path.name:36s} {statistics.median(times):7.3f} s")
    print(f"{'all scenarios':36s} {total:7.3f} s (medians of {args.repeat})")


if __name__ == "__main__":
    main()
