"""Varied portfolio RFQs built from the shipped scenarios' workloads, seeded.

Used by the backend agreement tests (tests/test_backends.py) and the scaling benchmark
(bench/scale_bench.py): a portfolio of ``n`` workloads draws workloads from
``scenarios/*.yaml|json`` (models, kinds and SLOs a buyer actually asks for), scales each
one's demand by a random factor, and puts them under one RFQ with the vendor profile and
limits of a random scenario (or none). Same seed, same RFQ.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

from solver.common.paths import REPOSITORY, data_dir

SCENARIOS = data_dir("procure_scenarios", "scenarios", "chat-70b-one-node.yaml") or REPOSITORY / "scenarios"
DEMAND_KEYS = ("concurrency", "qps", "requests", "dataset_tokens")
"""Workload fields scaled by a portfolio's demand factor (all ≥ 0, integers except qps)."""
DEMAND_FACTORS = (0.25, 0.5, 1.0, 1.0, 2.0, 4.0)
"""Demand scale factors a generated workload draws from (dimensionless)."""


def scenario_rfqs(directory: Path = SCENARIOS) -> list[dict[str, Any]]:
    """The raw RFQ dicts of the shipped scenarios, sorted by file name."""
    import yaml

    out = []
    for path in sorted(directory.iterdir()):
        if path.suffix == ".json":
            out.append(json.loads(path.read_text()))
        elif path.suffix in (".yaml", ".yml"):
            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            out.append(yaml.load(path.read_text(), Loader=loader))  # noqa: S506 - safe
        else:
            continue
        for work in out[-1].get("workloads") or []:  # config.json paths: relative to the RFQ
            model = work.get("model")
            if isinstance(model, str) and model.endswith(".json"):
                work["model"] = str((path.parent / model).resolve())
    return out


def workload_pool(rfqs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every workload of the given RFQs (copies)."""
    return [copy.deepcopy(w) for rfq in rfqs for w in rfq.get("workloads", [])]


def portfolio_rfq(n: int, seed: int, *, limits: bool = True,
                  rfqs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A portfolio RFQ of ``n`` workloads (seeded). ``limits=False`` puts it on the open
    catalog without node, GPU, power, rack-unit or budget limits (the scale benchmark);
    otherwise the constraints of one random scenario apply (infeasible outcomes included)."""
    rng = random.Random(seed)
    rfqs = rfqs if rfqs is not None else scenario_rfqs()
    pool = workload_pool(rfqs)
    frame = copy.deepcopy(rng.choice(rfqs))
    constraints = dict(frame.get("constraints") or {})
    if not limits:  # the whole open catalog, no limits: a plan exists whenever each fits
        constraints = {"vendor": "open"}
        frame.pop("budget_usd", None)
    workloads = []
    for index in range(n):
        work = copy.deepcopy(rng.choice(pool))
        factor = rng.choice(DEMAND_FACTORS)
        for key in DEMAND_KEYS:
            if work.get(key):
                scaled = work[key] * factor
                work[key] = scaled if key == "qps" else max(1, int(scaled))
        work["name"] = f"w{index:03d}-{work['name']}"[:60]
        workloads.append(work)
    data = {key: value for key, value in frame.items() if key != "workloads"}
    data.update(id=f"portfolio-{n}-{seed}", constraints=constraints, workloads=workloads)
    data["objective"] = rng.choice(("tco", "tco", "capex"))
    return data
