"""Cold and warm whole ``procure solve`` processes (issue 31: the disk cache of candidates).

Run by hand: ``python bench/warm_bench.py [--sizes 1,50,100] [--repeats 3]``. For a
single-workload scenario (size 1: chat-70b-one-node) and seeded portfolios (open catalog, no
limits), times ``procure solve --json`` with the candidate cache off (cold: every estimate
computed; forked builders on every core for 8+ workloads), then with an empty cache (the
first run fills it) and again (warm: candidates read from disk). ``procure --version`` is
timed in the same run: ratios to it hold better than seconds on a shared machine. Medians of
``--repeats`` (one run for sizes >= 50); ``--pareto`` adds a 15-point frontier of a
two-workload RFQ (cold, first, warm). Prints a Markdown table and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from solver.rfq.portfolio import portfolio_rfq

ROOT = Path(__file__).resolve().parent.parent
SINGLE = ROOT / "scenarios" / "chat-70b-one-node.yaml"
TWO_WORKLOADS = {
    "id": "bench-two", "constraints": {"gpus": ["rtx-pro-6000", "l40s", "h100-sxm"]},
    "workloads": [{"name": "chat", "kind": "inference", "model": "llama-3.1-70b",
                   "concurrency": 48, "input_tokens": 2000, "output_tokens": 400,
                   "tpot_ms": 50},
                  {"name": "tune", "kind": "lora", "model": "llama-3.1-8b",
                   "dataset_tokens": 200_000_000, "deadline_hours": 100}]}
"""The dashboard's case of issue 31: a Pareto frontier (the chat's TPOT) of two workloads."""


def run(args: list[str], cache: str) -> tuple[float, str]:
    env = {**os.environ, "PROCURE_CANDIDATE_CACHE": cache, "PROCURE_PROGRESS": "off"}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "solver.cli", *args], capture_output=True,
                          text=True, check=False, env=env)
    seconds = time.perf_counter() - start
    status = (json.loads(done.stdout).get("status", "") if done.stdout.startswith("{")
              else f"exit {done.returncode}")
    return seconds, status


def median(args: list[str], cache: str, repeats: int) -> tuple[float, str]:
    runs = [run(args, cache) for _ in range(repeats)]
    return statistics.median(s for s, _ in runs), runs[-1][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,50,100")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pareto", action="store_true",
                        help="also a 15-point `procure pareto` of a two-workload RFQ")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    version, _ = median(["--version"], "off", args.repeats)
    print(f"`procure --version`: {version:.2f} s\n")
    print("| RFQ | cold, cache off | first, cache empty | warm repeat | warm / --version "
          "| status |")
    print("|---|---:|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as folder:
        for size in (int(s) for s in args.sizes.split(",")):
            if size == 1:
                path, name = SINGLE, SINGLE.name
            else:
                path = Path(folder) / f"portfolio-{size}.json"
                path.write_text(json.dumps(portfolio_rfq(size, 1, limits=False)))
                name = f"portfolio of {size}"
            repeats = args.repeats if size < 50 else 1
            cache = str(Path(folder) / f"cache-{size}")
            solve = ["solve", str(path), "--json"]
            cold, status = median(solve, "off", repeats)
            first, _ = run(solve, cache)
            warm, _ = median(solve, cache, repeats)
            print(f"| {name} | {cold:.2f} s ({cold / version:.1f}x) | {first:.2f} s | "
                  f"{warm:.2f} s | {warm / version:.1f}x | {status} |")
        if args.pareto:
            path = Path(folder) / "two-workloads.json"
            path.write_text(json.dumps(TWO_WORKLOADS))
            cache = str(Path(folder) / "cache-pareto")
            pareto = ["pareto", str(path), "--points", "15", "--json"]
            cold, _ = run(pareto, "off")
            first, _ = run(pareto, cache)
            warm, _ = run(pareto, cache)
            print(f"| Pareto, 15 points, two workloads | {cold:.2f} s | {first:.2f} s | "
                  f"{warm:.2f} s | {warm / version:.1f}x | |")
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
