"""Time of one candidate's estimate (memory + performance), uncached: the solver scores
thousands per RFQ, so issue 10 asks for about a millisecond each.

    python bench/estimate_bench.py [--repeat 5]

Prints the median per-call CPU time over the repeats, for serving with SLOs (the queueing
model's two capacity searches), serving at a stated load, and training.
"""

from __future__ import annotations

import argparse
import statistics
import time

from solver.catalog.load import load_catalog
from solver.physics.layout import Layout, Workload
from solver.physics.performance import ESTIMATES, estimate

LAYOUTS = [Layout(m, g, "fp8", tp=t) for m in ("llama-3.1-70b", "qwen2.5-32b", "mixtral-8x7b")
           for g in ("rtx-pro-6000", "h100-sxm", "l40s") for t in (1, 2, 4, 8)]
CASES = {
    "serving, capacity under SLOs": [Workload("inference", 2000, 400, ttft_ms=2000, tpot_ms=50,
                                              percentile=p) for p in (50, 90, 99)],
    "serving at a stated load": [Workload("inference", 2000, 400, concurrency=c)
                                 for c in (8, 32, 64)],
    "training": [Workload("lora"), Workload("pretrain")],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    catalog = load_catalog()
    for name, works in CASES.items():
        times = []
        for _ in range(args.repeat):
            ESTIMATES.clear()
            start = time.process_time()
            for layout in LAYOUTS:
                for work in works:
                    estimate(catalog, layout, work)
            times.append((time.process_time() - start) / (len(LAYOUTS) * len(works)))
        print(f"{name:32s} {statistics.median(times) * 1e3:7.3f} ms per estimate "
              f"(median of {args.repeat}, {len(LAYOUTS) * len(works)} estimates each)")


if __name__ == "__main__":
    main()
