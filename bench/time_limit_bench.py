"""Does ``--time-limit`` hold? (issue 31: wall time <= limit x 1.1 + 0.3 s).

Run by hand: ``python bench/time_limit_bench.py [--sizes 50,100] [--limits 1,3,15]``.
For each portfolio size (open catalog, no limits, seeded: :func:`portfolio_rfq`) and each
limit, a whole ``procure solve --time-limit L --json`` process is timed (wall seconds, the
process start-up included) with its status; ``procure --version`` is timed in the same run
so the start-up share can be read off. Prints a Markdown table. The machine may be shared:
the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from solver.rfq.portfolio import portfolio_rfq

PROCURE = [sys.executable, "-m", "solver.cli.main"]


def timed(args: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(PROCURE + args, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    status = ""
    if done.stdout.strip().startswith("{"):
        status = json.loads(done.stdout).get("status", "")
    return seconds, status or f"exit {done.returncode}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,100")
    parser.add_argument("--limits", default="1,3,15")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    version, _ = timed(["--version"])
    print(f"`procure --version`: {version:.2f} s\n")
    print("| workloads | --time-limit | wall s | bound (x1.1+0.3) | held | status |")
    print("|---:|---:|---:|---:|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for size in (int(s) for s in args.sizes.split(",")):
            path = Path(folder) / f"portfolio-{size}.json"
            path.write_text(json.dumps(portfolio_rfq(size, 1, limits=False)))
            for limit in (float(x) for x in args.limits.split(",")):
                seconds, status = timed(["solve", str(path), "--json",
                                         "--time-limit", f"{limit:g}"])
                bound = limit * 1.1 + 0.3
                print(f"| {size} | {limit:g} | {seconds:.2f} | {bound:.2f} | "
                      f"{'yes' if seconds <= bound else 'NO'} | {status} |")
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
