"""The disaggregated-serving check (issue 27, :mod:`solver.physics.disagg_check`): measured
prefill and decode pools of disaggregated deployments with wide expert parallelism against
the model's prediction; nothing is fitted to them. Usage::

    PYTHONPATH=. python bench/disaggregated_check.py [--json | --markdown]
"""

from __future__ import annotations

import json
import sys

from solver.catalog.load import load_catalog
from solver.physics import disagg_check


def main() -> None:
    catalog = load_catalog()
    if "--markdown" in sys.argv:
        print(disagg_check.markdown(catalog))
        return
    found = disagg_check.rows(catalog)
    if "--json" in sys.argv:
        print(json.dumps({"rows": [r.__dict__ | {"error_pct": r.error_pct} for r in found],
                          "summary": {p: disagg_check.summary([r for r in found
                                                               if r.phase == p])
                                      for p in ("prefill", "decode")}}, indent=1))
        return
    print(f"{'row':22} {'gpu':9} {'pool':8} {'layout':26} {'measured':>9} {'predicted':>9} "
          f"{'error':>7}")
    for r in found:
        pred = f"{r.predicted:9.0f}" if r.predicted is not None else f"{'-':>9}"
        err = f"{r.error_pct:+6.1f}%" if r.error_pct is not None else f" {r.why}"
        print(f"{r.id:22} {r.gpu:9} {r.phase:8} {r.layout:26} {r.measured:9.0f} {pred} {err}")
    for phase in ("prefill", "decode"):
        print(phase, json.dumps(disagg_check.summary([r for r in found if r.phase == phase])))


if __name__ == "__main__":
    main()
