"""The expert-parallel check (issue 27): measured serving with attention data parallelism and
expert parallelism, predicted by the serving model and compared with what was measured.

Two sets, both left out of the serving fit (:mod:`solver.physics.serving_data` skips them
there), so every error here is a held-out error of the EP / attention-DP terms on top of the
fitted factors; nothing is fitted to them:

* ``published``: the TensorRT-LLM ``DEPn`` rows of ``serving_published.csv`` (attention
  data parallelism n with expert parallelism n, attention TP 1), output tokens/s per GPU at
  max throughput, and the attention-DP runs of ``serving_found.csv`` (TensorRT-LLM's
  DeepSeek-R1 blog: trtllm-bench at 1,024 and 3,072 requests, output tokens/s of the system
  and mean request latency);
* ``silicon``: the attention-DP rows of ``serving_latency.csv`` (AIConfigurator's silicon
  sample: vLLM and TensorRT-LLM, TTFT and TPOT under a closed loop).

One labelled factor is fitted on these two sets, not on the serving fit's rows:
``serving.attention_dp_step_factor`` (an aggregated attention-DP step waits for its busiest
rank), the one value on :data:`STEP_GRID` with the least mean over both sets of the median
absolute log error (:func:`fit_step_factor`). Its errors are quoted with whole sources held
out (:func:`held_out`): each set predicted at the factor fitted on the other.

``bench/expert_parallel_check.py`` prints the rows; docs/expert-parallel.md reports them.
"""

from __future__ import annotations

import copy
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from solver.catalog.data import Catalog
from solver.catalog.perf_factors import ATTENTION_DP_STEP_BOUNDS, factors
from solver.common.wording import layout_words
from solver.physics import serving_data
from solver.physics.serving import engine_factors

SOURCES = ("published", "silicon")
STEP_GRID: tuple[float, ...] = tuple(
    round(ATTENTION_DP_STEP_BOUNDS[0] + 0.05 * i, 2)
    for i in range(round((ATTENTION_DP_STEP_BOUNDS[1] - ATTENTION_DP_STEP_BOUNDS[0]) / 0.05) + 1))
"""The values :func:`fit_step_factor` tries: its physical bounds in steps of 0.05."""


@dataclass(frozen=True, kw_only=True)
class Compared:
    """A measured value and the model's prediction of it (None and ``why`` when it cannot
    predict it)."""

    measured: float
    predicted: float | None
    why: str = ""

    @property
    def error_pct(self) -> float | None:
        if self.predicted is None:
            return None
        return 100.0 * (self.predicted / self.measured - 1.0)


@dataclass(frozen=True, kw_only=True)
class Row(Compared):
    """One measured attention-DP / EP value and the model's prediction of it."""

    id: str
    model: str
    gpu: str
    layout: str
    input_tokens: int
    output_tokens: int
    metric: str
    concurrency: float | None


def rows(catalog: Catalog, source: str = "published", folder: Path | None = None,
         ) -> tuple[list[Row], list[serving_data.Skipped]]:
    """Every attention-DP row of ``source`` (module doc) with its prediction (None and the
    reason when the model cannot predict it), and the rows the loader could not map."""
    folder = folder or serving_data.data_dir()
    if source == "published":
        obs, skipped = serving_data.load_published_files(catalog, folder, expert_parallel=True)
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


def summary(found: Sequence[Compared]) -> dict:
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
    """The section of docs/calibration.md: both sets by metric, held out (each at the step
    factor fitted on the other) and as a fit check (at the catalog's value)."""
    grid = _grid(catalog, folder)
    both, held = held_out(catalog, folder, grid)
    current = factors(catalog).serving.attention_dp_step_factor
    value = current.value if current is not None else 1.0
    # the fit check at the catalog's value: the grid's rows when the value is on it
    checked = grid.get(value) or {s: rows(with_step_factor(catalog, value), s, folder)[0]
                                  for s in SOURCES}
    lines = ["## Expert parallelism with attention data parallelism (issue 27)", "",
             "Measured layouts with attention data parallelism and expert parallelism are "
             "left out of the serving fit and predicted with its factors, the labelled "
             "`serving.moe_ep_load_imbalance` (an assumption, not fitted) and "
             "`serving.attention_dp_step_factor`, the one factor fitted on these two sets "
             f"(on a grid of [1, 2], both sets: {both:g}; the catalog holds {value:g}). "
             "Held out = each set predicted at the factor fitted on the other set alone, "
             "its whole source left out; fit check = at the catalog's value. Error = "
             "predicted / measured - 1. Details and rows: docs/expert-parallel.md.", "",
             "| set | metric | rows | step factor | held out: median abs error | "
             "mean signed error | geomean predicted / measured | fit check: median abs "
             "error |", "|---|---|---|---|---|---|---|---|"]
    for h in held:
        fit_rows = checked[h.source]
        for metric in sorted({r.metric for r in h.rows}):
            s = summary([r for r in h.rows if r.metric == metric])
            f = summary([r for r in fit_rows if r.metric == metric])
            if not s["predicted"]:
                continue
            lines.append(f"| {h.source} | {metric} | {s['predicted']} | {h.value:g} "
                         f"(fitted on {h.fitted_on}) | {s['median_abs_error_pct']:.1f}% | "
                         f"{s['mean_signed_error_pct']:+.1f}% | {s['geomean_ratio']:.2f} | "
                         f"{f['median_abs_error_pct']:.1f}% |")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the step factor
def with_step_factor(catalog: Catalog, value: float) -> Catalog:
    """``catalog`` with ``serving.attention_dp_step_factor`` set to ``value``."""
    eff = copy.deepcopy(catalog.efficiency)
    factor = dict(eff["serving"].get("attention_dp_step_factor") or {})
    factor.update(value=value, source=factor.get("source", "assumption"))
    eff["serving"]["attention_dp_step_factor"] = factor
    return catalog.model_copy(update={"efficiency": eff})


def misfit(found: list[Row]) -> float:
    """Median absolute log error (predicted / measured) of the predicted rows; inf when none
    is predicted."""
    logs = [abs(math.log(r.predicted / r.measured)) for r in found if r.predicted]
    return statistics.median(logs) if logs else math.inf


def _grid(catalog: Catalog, folder: Path | None) -> dict[float, dict[str, list[Row]]]:
    return {v: {s: rows(with_step_factor(catalog, v), s, folder)[0] for s in SOURCES}
            for v in STEP_GRID}


def fit_step_factor(catalog: Catalog, sources: tuple[str, ...] = SOURCES,
                    folder: Path | None = None,
                    grid: dict[float, dict[str, list[Row]]] | None = None) -> float:
    """The value of :data:`STEP_GRID` with the least mean :func:`misfit` over ``sources``
    (each set counts once, whatever its rows); the smaller value on a tie."""
    grid = grid or _grid(catalog, folder)
    return min(STEP_GRID, key=lambda v: (sum(misfit(grid[v][s]) for s in sources)
                                         / len(sources), v))


@dataclass(frozen=True)
class HeldOut:
    """One set predicted at the step factor fitted on the other set."""

    source: str
    fitted_on: str
    value: float
    rows: list[Row]


def held_out(catalog: Catalog, folder: Path | None = None,
             grid: dict[float, dict[str, list[Row]]] | None = None,
             ) -> tuple[float, list[HeldOut]]:
    """The factor fitted on both sets, and each set at the factor fitted on the other."""
    grid = grid or _grid(catalog, folder)
    both = fit_step_factor(catalog, SOURCES, folder, grid)
    out = []
    for source in SOURCES:
        other = tuple(s for s in SOURCES if s != source)
        value = fit_step_factor(catalog, other, folder, grid)
        out.append(HeldOut(source, other[0], value, grid[value][source]))
    return both, out
