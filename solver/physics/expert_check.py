"""The expert-parallel check (issue 27): measured serving with attention data parallelism and
expert parallelism, predicted by the serving model and compared with what was measured.

Two sets, both left out of the serving fit (:mod:`solver.physics.serving_data` skips them
there), so every error here is a held-out error of the EP / attention-DP terms on top of the
fitted factors; nothing is fitted to them:

* ``published``: the TensorRT-LLM ``DEPn`` rows of ``serving_published.csv`` (attention
  data parallelism n with expert parallelism n, attention TP 1), output tokens/s per GPU at
  max throughput;
* ``silicon``: the attention-DP rows of ``serving_latency.csv`` (AIConfigurator's silicon
  sample: vLLM and TensorRT-LLM, TTFT and TPOT under a closed loop).

``bench/expert_parallel_check.py`` prints the rows; docs/expert-parallel.md reports them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from solver.catalog.data import Catalog
from solver.common.wording import layout_words
from solver.physics import serving_data
from solver.physics.serving import engine_factors

SOURCES = ("published", "silicon")


@dataclass(frozen=True)
class Row:
    """One measured attention-DP / EP value and the model's prediction of it."""

    id: str
    model: str
    gpu: str
    layout: str
    input_tokens: int
    output_tokens: int
    metric: str
    concurrency: float | None
    measured: float
    predicted: float | None
    why: str = ""

    @property
    def error_pct(self) -> float | None:
        if self.predicted is None:
            return None
        return 100.0 * (self.predicted / self.measured - 1.0)


def rows(catalog: Catalog, source: str = "published", folder: Path | None = None,
         ) -> tuple[list[Row], list[serving_data.Skipped]]:
    """Every attention-DP row of ``source`` (module doc) with its prediction (None and the
    reason when the model cannot predict it), and the rows the loader could not map."""
    folder = folder or serving_data.data_dir()
    if source == "published":
        obs, skipped = serving_data.load_published(
            catalog, folder / "serving_published.csv", expert_parallel=True)
    else:
        obs, skipped = serving_data.load_silicon(
            catalog, folder / "serving_latency.csv", expert_parallel=True)
    skipped = [s for s in skipped if "not an attention-DP" not in s.why]
    out = []
    for o in obs:
        lay = o.layout
        text = layout_words(lay.tp, lay.pp, lay.ep, lay.attention_dp)
        prepared = serving_data.prepare(catalog, o)
        predicted, why = None, ""
        if isinstance(prepared, str):
            why = prepared
        else:
            predicted = serving_data.predict(prepared, engine_factors(catalog, o.engine,
                                                                      o.gpu))
        out.append(Row(id=o.id, model=o.model, gpu=o.gpu, layout=text,
                       input_tokens=o.input_tokens, output_tokens=o.output_tokens,
                       metric=o.metric, concurrency=o.concurrency, measured=o.value,
                       predicted=predicted, why=why))
    return out, skipped


def summary(found: list[Row]) -> dict:
    """Rows, rows predicted, median / mean absolute error, mean signed error (percent) and
    the geometric mean of predicted / measured."""
    errors = [r.error_pct for r in found if r.error_pct is not None]
    ratios = [r.predicted / r.measured for r in found if r.predicted]
    absolute = sorted(map(abs, errors))
    n = len(absolute)
    median = ((absolute[n // 2] if n % 2 else (absolute[n // 2 - 1] + absolute[n // 2]) / 2)
              if n else None)
    return {"rows": len(found), "predicted": n, "median_abs_error_pct": median,
            "mean_abs_error_pct": sum(absolute) / n if n else None,
            "mean_signed_error_pct": sum(errors) / n if n else None,
            "geomean_ratio": (math.exp(sum(map(math.log, ratios)) / len(ratios))
                              if ratios else None)}


def markdown(catalog: Catalog, folder: Path | None = None) -> str:
    """The section of docs/calibration.md: held-out errors of both sets by metric."""
    lines = ["## Expert parallelism with attention data parallelism (held out, issue 27)", "",
             "Measured layouts with attention data parallelism and expert parallelism are "
             "left out of the serving fit and predicted with its factors and the labelled "
             "`serving.moe_ep_load_imbalance` (an assumption, not fitted): every row below "
             "is held out of the fit. Their sources are not: the same sources' TP layouts "
             "are in it (TensorRT-LLM perf overview 1.2, the silicon sample). Error = "
             "predicted / measured - 1. Details, rows and the imbalance sensitivity: "
             "docs/expert-parallel.md.", "",
             "| set | metric | rows | median abs error | mean signed error | "
             "geomean predicted / measured |", "|---|---|---|---|---|---|"]
    for source in SOURCES:
        found, _ = rows(catalog, source, folder)
        for metric in sorted({r.metric for r in found}):
            s = summary([r for r in found if r.metric == metric])
            if not s["predicted"]:
                continue
            lines.append(f"| {source} | {metric} | {s['predicted']} | "
                         f"{s['median_abs_error_pct']:.1f}% | "
                         f"{s['mean_signed_error_pct']:+.1f}% | {s['geomean_ratio']:.2f} |")
    return "\n".join(lines) + "\n"
