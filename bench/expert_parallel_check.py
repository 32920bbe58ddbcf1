"""The expert-parallel check (issue 27): TensorRT-LLM ``DEPn`` rows of
``bench/data/serving_published.csv`` (attention data parallelism n with expert parallelism n)
predicted by the serving model and compared with what was measured.

These rows are held out of the serving fit (``serving_data.load_published`` skips them
there), so the error below is a held-out error of the EP / attention-DP terms on top of the
fitted factors. Usage::

    PYTHONPATH=. python bench/expert_parallel_check.py [--json]
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass

from solver.catalog.load import load_catalog
from solver.physics import serving_data
from solver.physics.serving import engine_factors


@dataclass(frozen=True)
class Row:
    id: str
    model: str
    gpu: str
    layout: str
    input_tokens: int
    output_tokens: int
    measured: float
    predicted: float | None
    why: str = ""

    @property
    def error_pct(self) -> float | None:
        if self.predicted is None:
            return None
        return 100.0 * (self.predicted / self.measured - 1.0)


def rows() -> tuple[list[Row], list[serving_data.Skipped]]:
    """Every DEP row with its prediction (None and the reason when the model cannot predict
    it), and the rows the loader could not map."""
    catalog = load_catalog()
    obs, skipped = serving_data.load_published(
        catalog, serving_data.data_dir() / "serving_published.csv", expert_parallel=True)
    skipped = [s for s in skipped if "not an attention-DP" not in s.why]
    out = []
    for o in obs:
        lay = o.layout
        text = f"TP{lay.tp} EP{lay.ep} attention-DP{lay.attention_dp}" + (
            f" PP{lay.pp}" if lay.pp > 1 else "")
        prepared = serving_data.prepare(catalog, o)
        if isinstance(prepared, str):
            out.append(Row(o.id, o.model, o.gpu, text, o.input_tokens, o.output_tokens,
                           o.value, None, prepared))
            continue
        engine = engine_factors(catalog, o.engine, o.gpu)
        out.append(Row(o.id, o.model, o.gpu, text, o.input_tokens, o.output_tokens, o.value,
                       serving_data.predict(prepared, engine)))
    return out, skipped


def summary(found: list[Row]) -> dict:
    """Rows predicted, mean signed error, mean absolute error and the geometric-mean ratio."""
    errors = [r.error_pct for r in found if r.error_pct is not None]
    ratios = [r.predicted / r.measured for r in found if r.predicted]
    return {"rows": len(found), "predicted": len(errors),
            "mean_signed_error_pct": sum(errors) / len(errors) if errors else None,
            "mean_abs_error_pct": sum(map(abs, errors)) / len(errors) if errors else None,
            "geomean_ratio": (math.exp(sum(map(math.log, ratios)) / len(ratios))
                              if ratios else None)}


def main() -> None:
    found, skipped = rows()
    if "--json" in sys.argv:
        print(json.dumps({"rows": [r.__dict__ | {"error_pct": r.error_pct} for r in found],
                          "skipped": [s.__dict__ for s in skipped],
                          "summary": summary(found)}, indent=1))
        return
    print(f"{'row':10} {'model':18} {'gpu':10} {'layout':28} {'isl/osl':>10} "
          f"{'measured':>9} {'predicted':>9} {'error':>7}")
    for r in found:
        pred = f"{r.predicted:9.0f}" if r.predicted is not None else f"{'-':>9}"
        err = f"{r.error_pct:+6.0f}%" if r.error_pct is not None else f" {r.why}"
        print(f"{r.id:10} {r.model[:18]:18} {r.gpu[:10]:10} {r.layout:28} "
              f"{r.input_tokens:>5}/{r.output_tokens:<4} {r.measured:9.0f} {pred} {err}")
    for s in skipped:
        print(f"{s.id:10} skipped: {s.why}")
    print(json.dumps(summary(found)))


if __name__ == "__main__":
    main()
