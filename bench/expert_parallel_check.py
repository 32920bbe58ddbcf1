"""The expert-parallel check (issue 27, :mod:`solver.physics.expert_check`): measured
serving with attention data parallelism and expert parallelism, held out of the serving
fit, against the model's prediction. Usage::

    PYTHONPATH=. python bench/expert_parallel_check.py [--silicon] [--rows] [--json]
    PYTHONPATH=. python bench/expert_parallel_check.py --fit

Default: the TensorRT-LLM DEP rows of serving_published.csv (output tokens/s per GPU) and
the attention-DP runs of serving_found.csv, every row printed, the summary per metric; ``--silicon``: the attention-DP rows of serving_latency.csv (TTFT and
TPOT), the summary per metric (``--rows`` prints them all); all at the catalog's
``serving.attention_dp_step_factor``. ``--fit``: that factor fitted on both sets, and each
set's errors at the value fitted on the other (whole source held out).
"""

from __future__ import annotations

import json
import sys

from solver.catalog.load import load_catalog
from solver.physics import expert_check


def fit() -> None:
    catalog = load_catalog()
    both, held = expert_check.held_out(catalog)
    print(f"serving.attention_dp_step_factor fitted on both sets: {both:g} "
          f"(grid {expert_check.STEP_GRID[0]:g}..{expert_check.STEP_GRID[-1]:g})")
    for h in held:
        for metric in sorted({r.metric for r in h.rows}):
            s = expert_check.summary([r for r in h.rows if r.metric == metric])
            print(f"held out {h.source} {metric} at {h.value:g} (fitted on {h.fitted_on}): "
                  + json.dumps(s))


def main() -> None:
    if "--fit" in sys.argv:
        fit()
        return
    silicon = "--silicon" in sys.argv
    found, skipped = expert_check.rows(load_catalog(), "silicon" if silicon else "published")
    if "--json" in sys.argv:
        print(json.dumps({"rows": [r.__dict__ | {"error_pct": r.error_pct} for r in found],
                          "skipped": [s.__dict__ for s in skipped],
                          "summary": expert_check.summary(found)}, indent=1))
        return
    if not silicon or "--rows" in sys.argv:
        print(f"{'row':10} {'model':18} {'gpu':10} {'layout':28} {'isl/osl':>10} "
              f"{'measured':>9} {'predicted':>9} {'error':>7}")
        for r in found:
            pred = f"{r.predicted:9.0f}" if r.predicted is not None else f"{'-':>9}"
            err = f"{r.error_pct:+6.0f}%" if r.error_pct is not None else f" {r.why}"
            print(f"{r.id:10} {r.model[:18]:18} {r.gpu[:10]:10} {r.layout:28} "
                  f"{r.input_tokens:>5}/{r.output_tokens:<4} {r.measured:9.0f} {pred} {err}")
    for s in skipped:
        print(f"{s.id} skipped: {s.why}")
    for metric in sorted({r.metric for r in found}):
        print(metric, json.dumps(expert_check.summary([r for r in found
                                                       if r.metric == metric])))


if __name__ == "__main__":
    main()
