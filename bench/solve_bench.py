"""Benchmark: candidate count and solve time as catalog, workload count and demand grow.

Run: ``python bench/solve_bench.py [--solver cbc|highs|cpsat]``. Reports, on this machine:
a single-workload RFQ in-process (candidates + MIP) and as a whole ``procure solve`` process,
a 10-workload RFQ over the full open catalog, and how time grows with workloads and demand.
Targets (issue 4, 2 cores): single ≤ 0.5 s in-process, ≤ 2 s whole process; 10 workloads
proven optimal ≤ 5 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from solver.analysis.explain import solve_rfq
from solver.catalog.load import load_catalog
from solver.optimize.candidates import build_candidates
from solver.rfq.schema import validate_rfq

ROOT = Path(__file__).resolve().parent.parent
MODELS = ["llama-3.1-8b", "qwen2.5-7b", "mistral-7b", "qwen2.5-14b", "qwen2.5-32b",
          "llama-3.1-70b", "gemma-2-27b", "mixtral-8x7b", "qwen2.5-72b", "llama-3.1-8b"]


def workload(i: int, scale: float = 1.0) -> dict:
    model = MODELS[i % len(MODELS)]
    kinds = ["inference", "batch_inference", "lora", "inference", "qlora"]
    kind = kinds[i % len(kinds)]
    if kind == "inference":
        return {"name": f"w{i}", "kind": kind, "model": model, "concurrency": int(16 * scale) or 1,
                "input_tokens": 1500, "output_tokens": 300, "tpot_ms": 60}
    if kind == "batch_inference":
        return {"name": f"w{i}", "kind": kind, "model": model, "requests": int(200000 * scale),
                "input_tokens": 800, "output_tokens": 200, "deadline_hours": 24}
    return {"name": f"w{i}", "kind": kind, "model": model,
            "dataset_tokens": int(50_000_000 * scale), "deadline_hours": 72}


def rfq(n: int, scale: float = 1.0, vendor: str = "open") -> dict:
    return {"id": f"bench-{n}", "constraints": {"vendor": vendor},
            "workloads": [workload(i, scale) for i in range(n)]}


def timed(catalog, data: dict, solver: str, repeats: int = 3
          ) -> tuple[float, float, float, int, str]:
    parsed = validate_rfq(data, catalog)
    build_times, total_times = [], []
    count, status = 0, ""
    for _ in range(repeats):
        start = time.perf_counter()
        table = build_candidates(catalog, parsed)
        built = time.perf_counter()
        plan = solve_rfq(parsed, catalog, solver=solver, table=table, explain=False)
        total_times.append(time.perf_counter() - start)
        build_times.append(built - start)
        count = sum(len(c) for c in table.candidates.values())
        status = plan["status"]
    # first run is cold (no estimate cache); later runs show the warm, cached path
    return build_times[0], total_times[0], statistics.median(total_times[1:]), count, status


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--solver", default="cbc")
    args = parser.parse_args()
    catalog = load_catalog()
    print(f"solver {args.solver}; catalog {len(catalog.gpus)} GPUs")
    print("| case | candidates | candidates s (cold) | total s (cold) | total s (warm) | status |")
    print("|---|---|---|---|---|---|")
    cases = [("1 workload, kentino", rfq(1, vendor="kentino")), ("1 workload, open", rfq(1))]
    cases += [(f"{n} workloads, open", rfq(n)) for n in (2, 5, 10)]
    cases += [(f"1 workload, demand ×{s:g}", rfq(1, scale=s)) for s in (4, 16, 64)]
    cases += [("10 workloads, demand ×4", rfq(10, scale=4))]
    for label, data in cases:
        build, cold, warm, count, status = timed(catalog, data, args.solver)
        print(f"| {label} | {count} | {build:.3f} | {cold:.3f} | {warm:.3f} | {status} |")
    scenario = ROOT / "scenarios" / "chat-70b-one-node.yaml"
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "solver.cli.main", "solve", str(scenario), "--solver",
                        args.solver], check=True, capture_output=True)
        runs.append(time.perf_counter() - start)
    print(f"\nwhole `procure solve {scenario.name}` process: median {statistics.median(runs):.2f} s")


if __name__ == "__main__":
    main()
