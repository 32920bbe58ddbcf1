"""Fit the serving model's labelled factors across measurement sources, and check it with
whole sources held out.

What is fitted (and nothing else): per GPU family, the achievable share of dense tensor
peak of its serving GEMMs at each compute precision (``gemm_efficiency``) and of its memory
bandwidth (``mem_bw_efficiency``); per serving engine, the five factors of
:mod:`solver.physics.serving` (k_d, o_d, r, w, o_p); per measurement source, the time its
client, tokeniser or harness adds to every TTFT it reports (a nuisance term: a held-out source
and a plan get none, so the TTFT a plan states is the engine's). Every factor is confined to
its physical range (:data:`solver.catalog.perf_factors.ENGINE_BOUNDS`; efficiencies in
[:data:`EFFICIENCY_LOW`, :data:`GEMM_HIGH`] of dense peak for GEMMs, up to
:data:`EFFICIENCY_HIGH` of bandwidth; the engine's TTFT overhead at most the
lowest TTFT measured at low load on that engine), so no prediction can exceed the roofline.

The objective is the robust (soft-L1) sum of log errors log(predicted / measured) over the
observations of :mod:`solver.physics.serving_data`, each source counting as the square root
of its rows (the silicon sample's 3,900 rows would otherwise drown a 20-row blog), plus a weak
prior that keeps a factor with little data near the catalog's value. ``scipy``'s bounded
trust-region least squares solves it; a factor's finite differences recompute only the
observations it touches.

*Leave one source out* refits everything without one source and predicts that source's
rows: a family or engine seen only there falls back to its prior (the error a buyer of an
unmeasured GPU should expect). That, per vendor, engine and metric, is what
docs/calibration.md reports; the in-sample *fit check* is reported beside it and is not
validation. ``procure calibrate --write-factors`` writes the all-source fit and the
calibration table (rows and held-out error per family x engine) into
``catalog/efficiency.yaml``.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from solver.catalog.data import Catalog
from solver.catalog.perf_factors import ENGINE_BOUNDS, EngineFactors, Factor, factors
from solver.physics.serving_data import (
    Observation,
    Prepared,
    Skipped,
    holdout_group,
    load_all,
    predict,
    prepare,
)

FITTED_ENGINES = ("vllm", "sglang", "trtllm")
ENGINE_FACTORS = ("tpot_kernel_scale", "tpot_overhead_ms", "tpot_per_request_us",
                  "prefill_wait_share", "ttft_overhead_ms", "ttft_pipeline_steps")
EFFICIENCY_LOW, EFFICIENCY_HIGH = 0.15, 0.95
"""Range of a fitted efficiency: below 15 % of peak no shipping kernel runs; 95 % leaves the
clock and tail effects no copy escapes (the physical bound is 1). The memory-bandwidth share
is fitted beside the engine's k_d >= 1, which divides it: what decode reads at is
``mem_bw_efficiency / k_d`` of the bandwidth (Hopper on TensorRT-LLM: 0.95 / 1.38 = 0.69)."""
GEMM_HIGH = 0.85
"""Most of its dense tensor peak a fitted serving GEMM may reach. A datasheet's peak is the
tensor-core rate at the boost clock; under sustained matmul load the clock settles lower at
the power limit (NVIDIA rated the A100's HPL peak at the 1305 MHz it sustains there, not its
1410 MHz boost: 92.6 %; G. Lockwood, "Peak FLOPS", glennklockwood.com/garden/peak-FLOPS,
read 2026-12-07), and the tiles and waves of a real GEMM's shapes leave a few % more idle.
With 0.95 the fit put Hopper's BF16 GEMMs at 0.944, pulled by a few long-prompt TTFT rows
it over-predicts at any value; at 0.85 the held-out errors moved by 0.8 points at most
(MLPerf v5.1 Offline 14.1 -> 14.9 %; docs/calibration.md)."""
PRIOR_GEMM, PRIOR_BANDWIDTH, PRIOR_MOE = 0.70, 0.80, 0.5
"""Where a family's efficiencies start and what a family with few rows stays near: the middle
of the bands peer models reach (dense GEMMs 60-80 % of dense tensor peak, memory-bound decode
70-90 % of bandwidth) and half of the dense efficiency for expert GEMMs. Fixed, so that a
refit from a refitted catalog lands where the first one did."""
PRIOR_SPREAD, SPREAD_LOW, SPREAD_HIGH = 0.5, 0.0, 1.5
"""Prompt-length spread (coefficient of variation) of the Poisson benchmarks' datasets:
0 = every prompt the stated length; chat datasets such as OpenOrca spread about as widely as
their mean (a CV near 1); bounded at 1.5, with a weak prior like an engine factor's."""
PRIOR_SIGMA = 0.35
"""Log-scale width of the prior on a family's efficiency (about +-40 %): a factor that far
from its prior costs as much as one row off by ROBUST_SCALE."""
ROBUST_SCALE = 0.15
"""Errors beyond ~15 % count linearly, not quadratically (soft-L1): one odd row cannot pull
a factor."""
OVERLOAD_LOG_ERROR = math.log(4.0)
"""Log error charged when the model calls a measured load impossible (overload)."""
LOW_LOAD_USERS = 4.0
HARNESS_HIGH_MS = 1000.0
"""Most a source's client, tokeniser or harness may add to each TTFT it reports (and never
more than the lowest TTFT it reports)."""
MAX_EVALUATIONS = 200
LAST_STATUS: list[int] = []


@dataclass(frozen=True)
class Param:
    """One fitted factor: where it lives in efficiency.yaml, its catalog value and range."""

    name: str
    value0: float
    low: float
    high: float
    family: str = ""
    precision: str = ""
    engine: str = ""
    factor: str = ""
    source: str = ""  # a source's TTFT harness time: fitted, never in a plan


@dataclass
class Problem:
    """The fitting problem: parameters, prepared rows, their weights and dependencies."""

    params: list[Param]
    rows: list[Prepared]
    weights: list[float]
    gemm_index: list[int]  # per row: the GEMM parameter
    bw_index: list[int]
    moe_index: list[int]  # per row: the expert-GEMM parameter, -1 = a dense model
    spread_index: list[int]  # per row: the prompt-length spread parameter, -1 = none
    engine_index: list[dict[str, int]]  # per row: factor -> parameter index
    harness_index: list[int]  # per row: its source's TTFT harness time, -1 = not a TTFT
    rows_of: list[list[int]]  # per parameter: the rows it touches
    base_engines: dict[str, EngineFactors]


@dataclass
class Result:
    """A fit: parameter values and the prediction of every row."""

    values: dict[str, float]
    predicted: dict[str, float | None]


@dataclass
class Report:
    """All-source fit, leave-one-source-out predictions, and what was left out."""

    observations: list[Observation]
    skipped: list[Skipped]
    unpredictable: list[tuple[Observation, str]]
    fit: Result
    held_out: dict[str, float | None] = field(default_factory=dict)
    params: list[Param] = field(default_factory=list)


# --------------------------------------------------------------------------- problem
def is_low_load_ttft(o: Observation) -> bool:
    """A TTFT of a closed loop or static batch at no more than :data:`LOW_LOAD_USERS`
    requests per replica: the engine's fixed time plus one prefill. The lowest such TTFT of an
    engine bounds its fitted o_p; the report's low-load table compares them with the fit."""
    return (o.metric == "ttft_ms" and o.load in ("closed", "static") and bool(o.concurrency)
            and o.concurrency / o.replicas <= LOW_LOAD_USERS)


def build_problem(catalog: Catalog, rows: list[Prepared]) -> Problem:
    """Parameters for every family x compute precision and family bandwidth the rows use,
    and the factors of every fitted engine they use; source weights; dependencies."""
    eff = factors(catalog)
    params: list[Param] = []
    index: dict[tuple, int] = {}

    def add(key: tuple, param: Param) -> int:
        if key not in index:
            index[key] = len(params)
            params.append(param)
        return index[key]

    gemm_index, bw_index, moe_index, spread_index, engine_index = [], [], [], [], []
    harness_index: list[int] = []
    low_load_ttft: dict[str, float] = {}
    lowest_ttft: dict[str, float] = {}
    for p in rows:
        o = p.obs
        if is_low_load_ttft(o):
            low_load_ttft[o.engine] = min(low_load_ttft.get(o.engine, math.inf), o.value)
        if metric_class(o) == "TTFT":
            lowest_ttft[o.source] = min(lowest_ttft.get(o.source, math.inf), o.value)
    for p in rows:
        gemm_index.append(add(("gemm", p.family, p.compute), Param(
            f"families.{p.family}.gemm_efficiency.{p.compute}", PRIOR_GEMM,
            EFFICIENCY_LOW, GEMM_HIGH, family=p.family, precision=p.compute)))
        bw_index.append(add(("bw", p.family), Param(
            f"families.{p.family}.mem_bw_efficiency", PRIOR_BANDWIDTH,
            EFFICIENCY_LOW, EFFICIENCY_HIGH, family=p.family)))
        moe_index.append(add(("moe",), Param(
            "serving.moe_expert_gemm_efficiency", PRIOR_MOE, 0.05, 1.0))
                         if p.expert_share > 0 else -1)
        spread_index.append(add(("spread",), Param(
            "serving.prompt_length_cv", PRIOR_SPREAD, SPREAD_LOW, SPREAD_HIGH))
                            if p.obs.load == "server" else -1)
        mine: dict[str, int] = {}
        if p.obs.engine in FITTED_ENGINES:
            for name in ENGINE_FACTORS:
                low, high = ENGINE_BOUNDS[name]
                if name == "ttft_overhead_ms":
                    high = min(high, low_load_ttft.get(p.obs.engine, high))
                value0 = 0.5 * (low + high) if name != "tpot_kernel_scale" else 1.0
                mine[name] = add(("engine", p.obs.engine, name), Param(
                    f"serving.engines.{p.obs.engine}.{name}", value0, low, high,
                    engine=p.obs.engine, factor=name))
        engine_index.append(mine)
        harness_index.append(add(("harness", p.obs.source), Param(
            f"harness.{p.obs.source}.ttft_ms", 0.0, 0.0,
            min(HARNESS_HIGH_MS, lowest_ttft[p.obs.source]), source=p.obs.source))
                             if metric_class(p.obs) == "TTFT" else -1)
    rows_of: list[list[int]] = [[] for _ in params]
    for i in range(len(rows)):
        for j in (gemm_index[i], bw_index[i], moe_index[i], spread_index[i],
                  harness_index[i], *engine_index[i].values()):
            if j >= 0:
                rows_of[j].append(i)
    per_source: dict[str, int] = defaultdict(int)
    for p in rows:
        per_source[p.obs.source] += 1
    weights = [per_source[p.obs.source] ** -0.25
               * (OLDER_SOFTWARE_WEIGHT if era_of(p.obs) == "older" else 1.0) for p in rows]
    return Problem(params, rows, weights, gemm_index, bw_index, moe_index, spread_index,
                   engine_index, harness_index, rows_of, dict(eff.serving.engines))


def _engine(base: EngineFactors, values: dict[str, float]) -> EngineFactors:
    """``base`` with the fitted factor values (no validation: the fit keeps them in range)."""
    update = {name: Factor.model_construct(value=value, source="serving_fit", note="")
              for name, value in values.items()}
    return base.model_copy(update=update)


def _row_prediction(problem: Problem, x: list[float], i: int,
                    engines: dict[str, EngineFactors]) -> float | None:
    p = problem.rows[i]
    moe, spread = problem.moe_index[i], problem.spread_index[i]
    value = predict(p, engines[p.obs.engine], x[problem.gemm_index[i]],
                    x[problem.bw_index[i]], x[moe] if moe >= 0 else None,
                    x[spread] if spread >= 0 else None)
    harness = problem.harness_index[i]
    return value + x[harness] if value is not None and harness >= 0 else value


def _engines(problem: Problem, x: list[float]) -> dict[str, EngineFactors]:
    out = dict(problem.base_engines)
    for name in FITTED_ENGINES:
        values = {prm.factor: x[j] for j, prm in enumerate(problem.params)
                  if prm.engine == name}
        if values:
            out[name] = _engine(problem.base_engines[name], values)
    return out


def _robust(residual: float) -> float:
    """Signed square root of the soft-L1 loss, so that least squares on it minimises
    sum rho(r): errors beyond ROBUST_SCALE weigh linearly."""
    scale = ROBUST_SCALE
    rho = 2.0 * (math.sqrt(1.0 + (residual / scale) ** 2) - 1.0) * scale * scale
    return math.copysign(math.sqrt(rho), residual)


def _log_error(predicted: float | None, measured: float) -> float:
    if predicted is None or not predicted > 0.0 or not math.isfinite(predicted):
        return OVERLOAD_LOG_ERROR
    return max(-OVERLOAD_LOG_ERROR, min(OVERLOAD_LOG_ERROR, math.log(predicted / measured)))


def fit(problem: Problem, include: Iterable[int] | None = None, prior: bool = True,
        start: dict[str, float] | None = None) -> Result:
    """Fit the parameters on the rows ``include`` (default all); predict every row. Without
    ``prior`` the data alone decide (known-answer tests); ``start`` (parameter values, e.g.
    the all-source fit) is where the search starts, the priors stay where they are."""
    import numpy as np
    from scipy.optimize import least_squares
    from scipy.sparse import lil_matrix

    active = sorted(set(range(len(problem.rows)) if include is None else include))
    params = problem.params
    x0 = np.array([(start or {}).get(p.name, p.value0) for p in params])
    lows = np.array([p.low for p in params])
    highs = np.array([p.high for p in params])
    n_rows = len(active)
    position = {row: k for k, row in enumerate(active)}
    cache: dict[str, object] = {"x": None, "res": np.zeros(n_rows)}

    def residuals(x: np.ndarray) -> np.ndarray:
        last = cache["x"]
        if last is None:
            touched = active
        else:
            changed = np.nonzero(x != last)[0]
            touched = sorted({i for j in changed for i in problem.rows_of[j] if i in position})
        engines = _engines(problem, list(x))
        res = cache["res"].copy()  # type: ignore[union-attr]
        for i in touched:
            measured = problem.rows[i].obs.value
            error = _log_error(_row_prediction(problem, list(x), i, engines), measured)
            res[position[i]] = problem.weights[i] * _robust(error)
        cache["x"], cache["res"] = x.copy(), res
        pull = [_prior(p, value) if prior else 0.0 for p, value in zip(params, x, strict=True)]
        return np.concatenate([res, np.array(pull)])

    sparsity = lil_matrix((n_rows + len(params), len(params)), dtype=int)
    for j, rows in enumerate(problem.rows_of):
        for i in rows:
            if i in position:
                sparsity[position[i], j] = 1
        sparsity[n_rows + j, j] = 1
    solution = least_squares(residuals, np.clip(x0, lows, highs), bounds=(lows, highs),
                             jac_sparsity=sparsity, x_scale="jac", max_nfev=MAX_EVALUATIONS,
                             diff_step=1e-3)
    LAST_STATUS[:] = [solution.status, solution.nfev]
    x = list(solution.x)
    engines = _engines(problem, x)
    predicted = {problem.rows[i].obs.id: _row_prediction(problem, x, i, engines)
                 for i in range(len(problem.rows))}
    return Result({p.name: v for p, v in zip(params, x, strict=True)}, predicted)


def _prior(param: Param, value: float) -> float:
    """Weak prior: log scale towards the band's middle for efficiencies; for engine factors a
    tenth of the weight, towards the middle of their range (k_d towards 1)."""
    if param.engine or param.source or param.name == "serving.prompt_length_cv":
        return 0.1 * ROBUST_SCALE * (value - param.value0) / (param.high - param.low)
    return ROBUST_SCALE * math.log(value / param.value0) / PRIOR_SIGMA


def run(catalog: Catalog, folder: Path | None = None, held_out: bool = True,
        progress: Callable[[str, int, int], None] | None = None) -> Report:
    """Fit on every source; with ``held_out`` also refit once per source group without it
    (``progress`` is told each group as it starts, with its place and the count)."""
    observations, skipped = load_all(catalog, folder)
    rows: list[Prepared] = []
    unpredictable: list[tuple[Observation, str]] = []
    for o in observations:
        found = prepare(catalog, o)
        if isinstance(found, str):
            unpredictable.append((o, found))
        else:
            rows.append(found)
    problem = build_problem(catalog, rows)
    report = Report(observations, skipped, unpredictable, fit(problem), params=problem.params)
    if held_out:
        groups = sorted({holdout_group(p.obs.source) for p in rows})
        for place, group in enumerate(groups, 1):
            if progress is not None:
                progress(group, place, len(groups))
            train = [i for i, p in enumerate(rows) if holdout_group(p.obs.source) != group]
            result = fit(problem, train, start=held_out_start(problem, report.fit.values, group))
            for p in rows:
                if holdout_group(p.obs.source) == group:
                    report.held_out[p.obs.id] = result.predicted[p.obs.id]
    return report


def held_out_start(problem: Problem, values: dict[str, float], group: str) -> dict[str, float]:
    """Where the fit without source group ``group`` starts: the all-source ``values``, except
    that the group's sources have no harness time. A source nobody has seen has no known
    harness, so its TTFT is predicted as the engine's (no row of the fit touches that
    parameter, so it stays at 0)."""
    return {prm.name: (0.0 if prm.source and holdout_group(prm.source) == group
                       else values[prm.name]) for prm in problem.params}


# --------------------------------------------------------------------------- statistics
def vendor_of(catalog: Catalog, o: Observation) -> str:
    return catalog.gpus[o.gpu].vendor


def metric_class(o: Observation) -> str:
    """TTFT, TPOT (incl. decode rates), throughput (incl. prefill rates, request latency)."""
    if o.metric == "ttft_ms":
        return "TTFT"
    if o.metric in ("tpot_ms", "decode_tps"):
        return "TPOT"
    return "throughput"


def error(predicted: float | None, o: Observation) -> float:
    """predicted / measured - 1, with 'the model calls this load impossible' as +300 %
    (latency) or -100 % (throughput)."""
    if predicted is None:
        return 3.0 if metric_class(o) != "throughput" else -1.0
    return predicted / o.value - 1.0


def summary(errors: list[float]) -> dict[str, float]:
    """Rows, median |error| and median signed error."""
    if not errors:
        return {"n": 0, "abs": float("nan"), "signed": float("nan")}
    return {"n": len(errors), "abs": statistics.median(abs(e) for e in errors),
            "signed": statistics.median(errors)}


def table(catalog: Catalog, report: Report, key, predictions: dict[str, float | None],
          where=None) -> dict[tuple, dict[str, float]]:  # noqa: ANN001 - callables
    """Error summaries grouped by ``key(observation)``, over the rows in ``predictions``."""
    groups: dict[tuple, list[float]] = defaultdict(list)
    for o in report.observations:
        if o.id not in predictions or (where is not None and not where(o)):
            continue
        groups[key(o)].append(error(predictions[o.id], o))
    return {k: summary(v) for k, v in sorted(groups.items())}


def calibration_entries(catalog: Catalog, report: Report) -> dict[str, dict[str, float]]:
    """Per 'family/engine': rows, sources and the median held-out |error| (percent)."""
    groups: dict[str, list[Observation]] = defaultdict(list)
    for o in report.observations:
        if o.id in report.fit.predicted:
            groups[f"{catalog.gpus[o.gpu].family}/{o.engine}"].append(o)
    out: dict[str, dict[str, float]] = {}
    for name, obs in sorted(groups.items()):
        held = [abs(error(report.held_out[o.id], o)) for o in obs if o.id in report.held_out]
        out[name] = {"rows": len(obs), "sources": len({o.source for o in obs}),
                     "held_out_error_pct": (round(100.0 * statistics.median(held), 1)
                                            if held else None)}
    return out


def low_load_ttft(report: Report) -> list[dict[str, float | str]]:
    """TTFT at one to :data:`LOW_LOAD_USERS` requests per replica (closed loops and static
    batches) against the all-source fit, by source group and engine: rows, the medians of
    measured and predicted milliseconds, of measured - predicted and of measured / predicted.
    At such loads a TTFT is the engine's fixed time plus one prefill; a source far above the
    physics at every GPU and prompt carries a fixed time the others do not (its client,
    tokeniser or harness), which the bounded o_p cannot take up."""
    groups: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for o in report.observations:
        predicted = report.fit.predicted.get(o.id)
        if not is_low_load_ttft(o) or not predicted:
            continue
        groups[(holdout_group(o.source), o.engine)].append((o.value, predicted))
    return [{"group": group, "engine": engine, "rows": len(pairs),
             "measured_ms": statistics.median(m for m, _ in pairs),
             "predicted_ms": statistics.median(p for _, p in pairs),
             "excess_ms": statistics.median(m - p for m, p in pairs),
             "ratio": statistics.median(m / p for m, p in pairs)}
            for (group, engine), pairs in sorted(groups.items())]


# --------------------------------------------------------------------------- roofline
def roofline_share(catalog: Catalog, p: Prepared, output_tokens_per_s: float) -> float:
    """The share of the GPUs' dense peak FLOP/s that a predicted output throughput needs at
    the least: every prompt and output token's matmul FLOPs (2 x active parameters), spread
    evenly over the replica's GPUs. Work conservation says <= 1."""
    o = p.obs
    requests = output_tokens_per_s / o.output_tokens / o.replicas  # per replica per second
    tokens = requests * (o.input_tokens + o.output_tokens)
    flops_per_gpu = tokens * 2.0 * p.base.geo.matmul_active_params / (o.tp * o.pp)
    return flops_per_gpu / (catalog.gpus[o.gpu].dense_tflops[p.compute] * 1e12)


# --------------------------------------------------------------------------- report
TARGETS = {"TTFT": 0.35, "TPOT": 0.20, "throughput": 0.20}
"""Issue 26's targets on published sources (median |error|, with |bias| <= 10 %)."""

CURRENT_SOFTWARE = "2025-04"
"""Measurements of software that ran from this month on count as *current*: vLLM's V1
engine became its default in v0.8 (March 2025), and SGLang and TensorRT-LLM releases of the
same spring changed their schedulers and MoE/MLA kernels as much. A buyer runs current
engines; the era table of the report shows how the error splits."""


OLDER_SOFTWARE_WEIGHT = 0.3
"""The fit's weight of a measurement of older software (:func:`era_of`) against a current
one: plans are for the engines a buyer installs now, and engines of 2024 ran the same GPUs
at a half to a fifth of today's speed on new models (DeepSeek-R1 at launch, ROCm vLLM of
2024). They still count - a third - where they are all a family has. One value, set before
it was tried; the era table of docs/calibration.md reports both eras held out."""


def era_of(o: Observation) -> str:
    """'current' (software that ran from :data:`CURRENT_SOFTWARE` on), 'older', or 'undated'
    (the source states no date precise enough to tell)."""
    when = o.released
    if when is None or (len(when) == 4 and when == CURRENT_SOFTWARE[:4]):
        return "undated"
    if len(when) == 4:
        return "current" if when > CURRENT_SOFTWARE[:4] else "older"
    return "current" if when >= CURRENT_SOFTWARE else "older"


def _fmt(stats: dict[str, float]) -> str:
    if not stats["n"]:
        return "- | - | -"
    return f"{int(stats['n'])} | {stats['abs']:.1%} | {stats['signed']:+.1%}"


HELD = ("held out: rows", "median abs. error", "median signed error")
FIT = ("fit check: rows", "median abs. error", "median signed error")


def _header(*columns: str | tuple[str, ...]) -> list[str]:
    """A markdown table's header and rule; a tuple is the three cells of :func:`_fmt`."""
    cells = [c for column in columns
             for c in (column if isinstance(column, tuple) else (column,))]
    return ["| " + " | ".join(cells) + " |", "|" + "---|" * len(cells)]


def _target(metric: str) -> str:
    """Issue 26's target for a metric, without a ``|`` (it would split the cell)."""
    return f"median <= {TARGETS[metric]:.0%}, signed within +-10 %"


def report_markdown(catalog: Catalog, report: Report) -> str:
    """The serving section of docs/calibration.md."""
    held, fitted = report.held_out, report.fit.predicted
    lines = ["## Serving: throughput, TTFT and TPOT across sources, each held out", "",
             "What is fitted: per GPU family, the share of dense tensor peak its serving GEMMs "
             "reach at each compute precision and the share of memory bandwidth decode reaches; "
             "the expert-GEMM efficiency of MoE models; per engine, k_d, o_d, r, w and o_p "
             "(solver/physics/serving.py); per source, the time its client or harness adds to "
             "each TTFT (a nuisance term: fit checks include it, held-out predictions and "
             "plans do not). Every factor is bounded to its physical range "
             "(GEMM efficiencies 0.15-0.85 of dense peak, bandwidth 0.15-0.95, k_d >= 1, "
             "0 <= w <= 1, o_p at most the lowest "
             "TTFT measured at low load), so no prediction needs more FLOP/s or bytes/s than "
             "the GPU has. *Held out*: each source group (one MLPerf round with every "
             "submitter; otherwise one publication or dataset) is predicted by factors fitted "
             "on all the others; a family or engine seen only there falls back to its prior. "
             "*Fit check*: all sources in the fit (in-sample, not validation). Measurements of "
             f"software older than {CURRENT_SOFTWARE} weigh {OLDER_SOFTWARE_WEIGHT:g} in "
             "the fit (plans are for current engines). Poisson benchmarks (MLPerf Server) "
             "draw prompts of many lengths from their datasets: the model spreads them "
             "log-normally with one fitted coefficient of variation "
             f"(serving.prompt_length_cv = {report.fit.values.get('serving.prompt_length_cv', 0.0):.2f}), "
             "so a TTFT percentile takes that percentile's prompt and an M/G/1 queue's wait; "
             "RFQ workloads, whose lengths the buyer states, are planned at one length. Error = "
             "predicted / measured - 1; cells: rows | median |error| | median signed error.", ""]
    observed = [o for o in report.observations if o.id in fitted]
    groups = sorted({holdout_group(o.source) for o in observed})
    lines += ["### Held out, by vendor, engine and metric", "",
              *_header("vendor", "engine", "metric", HELD, FIT)]
    by_vem = table(catalog, report, lambda o: (vendor_of(catalog, o), o.engine,
                                               metric_class(o)), held)
    fit_vem = table(catalog, report, lambda o: (vendor_of(catalog, o), o.engine,
                                                metric_class(o)), fitted)
    for key, stats in by_vem.items():
        lines.append(f"| {' | '.join(key)} | {_fmt(stats)} | {_fmt(fit_vem[key])} |")
    lines += ["", "### Held out, by vendor and metric; published sources only (the silicon "
              "sample apart)", "", *_header("vendor", "metric", HELD, "target")]
    for vendor in ("all", "nvidia", "amd"):
        for metric in ("TTFT", "TPOT", "throughput"):
            def keep(o: Observation, v: str = vendor, m: str = metric) -> bool:
                return (o.source != "aic-silicon" and metric_class(o) == m
                        and (v == "all" or vendor_of(catalog, o) == v))
            stats = table(catalog, report, lambda o: 0, held, where=keep).get(0, summary([]))
            lines.append(f"| {vendor} | {metric} | {_fmt(stats)} | {_target(metric)} |")
    lines += ["", f"### Held out, by when the measured software ran (current: from "
              f"{CURRENT_SOFTWARE}, vLLM's V1 engine and the same spring's SGLang and "
              "TensorRT-LLM; published sources only)", "",
              *_header("software", "vendor", "metric", HELD, "target")]
    for era in ("current", "older", "undated"):
        for vendor in ("all", "nvidia", "amd"):
            for metric in ("TTFT", "TPOT", "throughput"):
                def in_era(o: Observation, e: str = era, v: str = vendor,
                           m: str = metric) -> bool:
                    return (o.source != "aic-silicon" and metric_class(o) == m
                            and era_of(o) == e
                            and (v == "all" or vendor_of(catalog, o) == v))
                stats = table(catalog, report, lambda o: 0, held,
                              where=in_era).get(0, summary([]))
                if stats["n"]:
                    lines.append(f"| {era} | {vendor} | {metric} | {_fmt(stats)} | "
                                 f"{_target(metric)} |")
    silicon = table(catalog, report, metric_class, held,
                    where=lambda o: o.source == "aic-silicon")
    lines += ["", "The silicon sample (AIConfigurator, closed loops) held out as one source: "
              + "; ".join(f"{m} {_fmt(s)}" for m, s in silicon.items()) + ".", ""]
    lines += ["### TTFT at low load against the fit, by source group and engine", "",
              f"Closed loops and static batches of 1 to {LOW_LOAD_USERS:g} requests per "
              "replica: a TTFT there is the engine's fixed time (o_p) plus one prefill. A "
              "source far above the physics at every GPU and prompt length carries a fixed "
              "time the other sources do not show (its client, tokeniser or harness). The fit "
              "gives each source such a harness time (next table), at most its lowest TTFT; "
              "o_p is bounded by the lowest low-load TTFT any source measured. The predictions "
              "here include the source's harness time. Medians; fit check (all sources in the "
              "fit).", "",
              *_header("source group", "engine", "rows", "measured ms", "predicted ms",
                       "measured - predicted ms", "measured / predicted")]
    lines += [f"| {r['group']} | {r['engine']} | {r['rows']} | {r['measured_ms']:.0f} | "
              f"{r['predicted_ms']:.0f} | {r['excess_ms']:+.0f} | {r['ratio']:.2f} |"
              for r in low_load_ttft(report)]
    harness = [prm for prm in report.params if prm.source]
    lines += ["", "### TTFT harness time per source (fitted; never in a plan)", "",
              "What a source adds to every TTFT it reports beyond the engine (client, "
              "tokeniser, network, benchmark harness), fitted beside the physics, 0 to "
              f"{HARNESS_HIGH_MS:.0f} ms and at most the source's lowest TTFT. Only the sum with "
              "an engine's o_p is in the data; the weak pull of each harness time towards 0 "
              "splits them, so the source that adds the least is taken to add none. A held-out "
              "source is predicted without one (no one knows its harness before measuring it), "
              "and so is a plan: the TTFT a plan states is the engine's, from the request "
              "reaching the server to its first token leaving it - what the held-out errors "
              "above measure.", "", "| source | harness ms | range ms |", "|---|---|---|"]
    lines += [f"| {prm.source} | {report.fit.values[prm.name]:.0f} | "
              f"{prm.low:g}-{prm.high:.0f} |" for prm in sorted(harness, key=lambda q: q.source)]
    lines.append("")
    lines += ["### Poisson (server) benchmarks of current software, by statistic", "",
              "What the prompt-length spread moves: the median and mean TTFT (a median prompt "
              "is shorter than the mean one) and the p99 (a long prompt behind a longer "
              "wait); published sources.", "",
              *_header("metric", "statistic", HELD, FIT)]

    def poisson(o: Observation) -> bool:
        return o.load == "server" and era_of(o) == "current" and o.source != "aic-silicon"

    def by_stat(o: Observation) -> tuple[str, str]:
        return metric_class(o), o.statistic

    held_stat = table(catalog, report, by_stat, held, where=poisson)
    fit_stat = table(catalog, report, by_stat, fitted, where=poisson)
    for key, stats in sorted(held_stat.items()):
        lines.append(f"| {key[0]} | {key[1]} | {_fmt(stats)} | {_fmt(fit_stat[key])} |")
    lines += ["", "### Held out, by source group", "",
              *_header("source group", "metric", HELD, FIT)]
    by_group = table(catalog, report, lambda o: (holdout_group(o.source), metric_class(o)), held)
    fit_group = table(catalog, report, lambda o: (holdout_group(o.source), metric_class(o)),
                      fitted)
    for key, stats in by_group.items():
        lines.append(f"| {key[0]} | {key[1]} | {_fmt(stats)} | {_fmt(fit_group[key])} |")
    lines += _by_gpu(catalog, report, held, fitted)
    offline = [o for o in observed if o.file == "calibration.csv" and o.load == "offline"
               and o.source.startswith("mlperf")]
    if offline:
        lines += ["", "### MLPerf Offline rows of calibration.csv (issue 26: <= 10 % median)", "",
                  "| row | model | GPU | measured tokens/s | fit check | held out |",
                  "|---|---|---|---|---|---|"]
        for o in offline:
            lines.append(f"| {o.id} | {o.model} | {o.gpu} | {o.value:,.0f} | "
                         f"{error(fitted[o.id], o):+.1%} | {error(held.get(o.id), o):+.1%} |")
        lines.append(f"| median | | | | {summary([error(fitted[o.id], o) for o in offline])['abs']:.1%} "
                     f"| {summary([error(held.get(o.id), o) for o in offline])['abs']:.1%} |")
    lines += ["", "### Fitted factors", "", "| factor | value | prior | range |",
              "|---|---|---|---|"]
    for prm in report.params:
        if prm.source:
            continue  # in the harness table above
        lines.append(f"| {prm.name} | {report.fit.values[prm.name]:.4g} | {prm.value0:.4g} | "
                     f"{prm.low:g}-{prm.high:g} |")
    entries = calibration_entries(catalog, report)
    lines += ["", "### Calibration per GPU family and engine (what a plan states)", "",
              "| family / engine | rows | sources | held-out median abs error |",
              "|---|---|---|---|"]
    for name, e in entries.items():
        err = "-" if e["held_out_error_pct"] is None else f"{e['held_out_error_pct']:.1f} %"
        lines.append(f"| {name} | {e['rows']} | {e['sources']} | {err} |")
    lines += ["", "A family x engine with fewer than `calibrated_min_rows` rows (or none: "
              "consumer Blackwell, Hopper PCIe on most engines, AMD on SGLang) is planned with "
              "an uncertainty margin: the held-out error of the nearest calibrated family "
              "(solver/physics/coverage.py); the plan's `workloads[].calibration` states it.", ""]
    shares = [_share(catalog, report, o) for o in observed]
    worst = max((s for s in shares if s is not None), default=0.0)
    lines += [f"Roofline check: the largest share of dense peak FLOP/s any prediction above "
              f"needs (its matmul FLOPs at the fitted efficiencies' ceiling) is {worst:.0%}.", ""]
    left = defaultdict(int)
    for s_ in report.skipped:
        left[s_.why.split(" (")[0]] += 1
    for _, why in report.unpredictable:
        left[why.split(":")[0][:80]] += 1
    lines += ["Rows left out: " + "; ".join(f"{n} {why}" for why, n in
                                            sorted(left.items(), key=lambda kv: -kv[1])) + ".",
              "", "Source groups: " + ", ".join(groups) + ".", ""]
    return "\n".join(lines)


GPU_OFF = 0.10
"""A GPU whose own throughput rows the fit (all sources in) misses by more than this, median
signed, is named under the by-GPU table: its family's shared factors describe it poorly."""


def _by_gpu(catalog: Catalog, report: Report, held: dict[str, float | None],
            fitted: dict[str, float | None]) -> list[str]:
    """Throughput error by GPU, on measurements of current (or undated) software, which is
    what plans are for: the GPUs of one family share its fitted efficiencies, so a GPU far
    off in the fit check is one a plan on it gets wrong by about that much. (Older software
    is far slower on some GPUs: the 2024 dstack sets on H200 and MI300X run 1.5-5x below
    the fit.)"""
    def through(o: Observation) -> bool:
        return metric_class(o) == "throughput" and era_of(o) != "older"

    def key(o: Observation) -> tuple[str, str]:
        return (o.gpu, catalog.gpus[o.gpu].family)

    by_held = table(catalog, report, key, held, where=through)
    by_fit = table(catalog, report, key, fitted, where=through)
    lines = ["", "### Throughput by GPU (current or undated software)", "",
             "Measurements of software from 2025-04 on, or undated; plans are for current "
             "engines. The GPUs of one family share its fitted efficiencies; a GPU whose own "
             "rows sit far from zero in the fit check (all sources in) is one its family's factors "
             "describe poorly, and a plan on it is off by about that much (below zero: "
             "conservative, it buys more than needed).", "",
             *_header("GPU", "family", HELD, FIT)]
    for k, stats in by_fit.items():
        lines.append(f"| {k[0]} | {k[1]} | {_fmt(by_held.get(k, summary([])))} | "
                     f"{_fmt(stats)} |")
    off = [f"{k[0]} ({stats['signed']:+.0%} on {int(stats['n'])} rows)"
           for k, stats in by_fit.items() if stats["n"] and abs(stats["signed"]) > GPU_OFF]
    if off:
        lines += ["", f"More than {GPU_OFF:.0%} off in the fit check: {', '.join(off)}."]
    return lines


def _share(catalog: Catalog, report: Report, o: Observation) -> float | None:
    """Roofline share of one throughput observation's prediction (None for latencies)."""
    if metric_class(o) != "throughput" or o.metric not in ("output_tps", "output_tps_gpu",
                                                           "total_tps"):
        return None
    predicted = report.fit.predicted.get(o.id)
    if not predicted:
        return None
    found = prepare(catalog, o)
    if isinstance(found, str):
        return None
    output = predicted
    if o.metric == "output_tps_gpu":
        output = predicted * o.gpus
    elif o.metric == "total_tps":
        output = predicted * o.output_tokens / (o.input_tokens + o.output_tokens)
    return roofline_share(catalog, found, output)


# --------------------------------------------------------------------------- writing
def write_factors(catalog: Catalog, report: Report, efficiency_yaml: Path) -> None:
    """Write the all-source fit into ``efficiency_yaml``: each fitted family efficiency and
    the expert-GEMM efficiency in place (value, source ``serving_fit``), the engines' five
    factors, and the ``serving.calibration`` table."""
    lines = efficiency_yaml.read_text(encoding="utf-8").splitlines(keepends=True)
    values = report.fit.values
    for prm in report.params:
        value = values[prm.name]
        if prm.source:
            continue  # a measurement source's harness time describes the source, not a GPU
        if prm.family:
            key = f"gemm_efficiency.{prm.precision}" if prm.precision else "mem_bw_efficiency"
            _set(lines, ["families:", f"  {prm.family}:", *_path(key)], value,
                 "held-out fit across serving sources (procure calibrate)")
        elif prm.engine:
            _set(lines, ["serving:", "  engines:", f"    {prm.engine}:", f"      {prm.factor}:"],
                 value, _ENGINE_NOTES[prm.factor])
        elif prm.name == "serving.prompt_length_cv":
            _set(lines, ["serving:", "  prompt_length_cv:"], value,
                 "prompt-length spread of the Poisson benchmarks (MLPerf Server datasets); "
                 "fitted across serving sources; RFQ workloads use their stated length")
        else:
            _set(lines, ["serving:", "  moe_expert_gemm_efficiency:"], value,
                 "expert GEMMs relative to dense GEMMs (few rows per expert, imbalance), on "
                 "the expert share of the active FLOPs; fitted across serving sources")
    text = "".join(lines)
    text = _replace_block(text, "  calibration:", calibration_yaml(catalog, report))
    efficiency_yaml.write_text(text, encoding="utf-8")


_ENGINE_NOTES = {
    "tpot_kernel_scale": "k_d: multiplier >= 1 on a step's reads, collectives and launch time",
    "tpot_overhead_ms": "o_d: engine time per decode step beyond the kernels, ms",
    "tpot_per_request_us": "r: engine CPU time per running request per step, us",
    "prefill_wait_share": "w: share of the other requests' prefill before the median "
                          "request's first token",
    "ttft_overhead_ms": "o_p: fixed time to first token beyond the kernels, ms",
    "ttft_pipeline_steps": "s_p: engine steps between a prompt's prefill and its first "
                           "token reaching the client",
}


def _path(key: str) -> list[str]:
    parts = key.split(".")
    return [f"    {parts[0]}:"] + ([f"      {parts[1]}:"] if len(parts) > 1 else [])


def _set(lines: list[str], path: list[str], value: float, note: str) -> None:
    """Replace the flow-mapping factor at ``path`` (YAML keys with their indentation) by
    ``{value, source: serving_fit, note}``; add it under its parent when it is missing."""
    start, end = 0, len(lines)
    for depth, key in enumerate(path):
        found = next((i for i in range(start, end) if lines[i].startswith(key)), None)
        if found is None:
            if depth == len(path) - 1:
                lines.insert(start, f"{key} {{value: {value:.4g}, source: serving_fit, "
                                    f'note: "{note}"}}\n')
                return
            raise KeyError(f"{' > '.join(p.strip() for p in path[:depth + 1])} not in the file")
        indent = len(key) - len(key.lstrip())
        start = found + 1
        end = next((i for i in range(start, len(lines)) if lines[i].strip()
                    and len(lines[i]) - len(lines[i].lstrip()) <= indent), len(lines))
        if depth == len(path) - 1:
            lines[found] = (f"{key} {{value: {value:.4g}, source: serving_fit, "
                            f'note: "{note}"}}\n')


def calibration_yaml(catalog: Catalog, report: Report) -> str:
    """The ``serving.calibration`` block: rows, sources, held-out error per family/engine."""
    out = ["  calibration:  # written by procure calibrate --write-factors (docs/calibration.md)"]
    for name, e in calibration_entries(catalog, report).items():
        err = "null" if e["held_out_error_pct"] is None else f"{e['held_out_error_pct']:.1f}"
        out.append(f'    "{name}": {{rows: {e["rows"]}, sources: {e["sources"]}, '
                   f"held_out_error_pct: {err}}}")
    return "\n".join(out) + "\n"


def _replace_block(text: str, header: str, block: str) -> str:
    """Replace the YAML block that starts with the line ``header`` (and its more-indented
    lines) by ``block``; insert it before ``  default_engine:`` when it is missing."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip().startswith(header)), None)
    if start is None:
        anchor = next(i for i, line in enumerate(lines) if line.startswith("  default_engine:"))
        return "".join(lines[:anchor]) + block + "".join(lines[anchor:])
    end = start + 1
    while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
        end += 1
    return "".join(lines[:start]) + block + "".join(lines[end:])
