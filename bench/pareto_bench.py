"""Benchmark (issue 5): a 15-point Pareto frontier (target <= 5 s) and a full sensitivity
report (target <= 30 s) for a single-workload RFQ. Run: ``python bench/pareto_bench.py``."""

from __future__ import annotations

import json
import time

from solver.analysis.pareto import frontier
from solver.analysis.sensitivity import report
from solver.catalog.load import load_catalog
from solver.rfq.schema import validate_rfq

RFQ = {"id": "bench-chat-70b", "constraints": {"gpus": ["rtx-pro-6000", "l40s"]},
       "workloads": [{"name": "chat", "kind": "inference", "model": "llama-3.1-70b",
                      "concurrency": 48, "input_tokens": 2000, "output_tokens": 400,
                      "tpot_ms": 50}]}
TUNE = {"id": "bench-lora-70b", "constraints": {"gpus": ["rtx-pro-6000", "l40s"]},
        "workloads": [{"name": "tune", "kind": "lora", "model": "llama-3.1-70b",
                       "dataset_tokens": 200_000_000, "deadline_hours": 200}]}


def main() -> None:
    catalog = load_catalog()
    results = {}
    for name, data in (("inference", RFQ), ("lora", TUNE)):
        rfq = validate_rfq(data, catalog)
        start = time.perf_counter()
        front = frontier(catalog, rfq, points=15)
        results[f"pareto_15_points_{name}_s"] = round(time.perf_counter() - start, 2)
        results[f"pareto_points_{name}"] = len(front["points"])
        start = time.perf_counter()
        rep = report(catalog, rfq)
        results[f"sensitivity_full_{name}_s"] = round(time.perf_counter() - start, 2)
        results[f"sensitivity_solves_{name}"] = rep["solves"]
    results["targets_s"] = {"pareto_15_points": 5, "sensitivity_full": 30}
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
