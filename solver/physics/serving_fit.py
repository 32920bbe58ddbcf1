"""Fit and check the serving engines' factors on measured TTFT/TPOT under load.

``serving_latency.csv`` (bench/data; AIConfigurator's measured silicon sample, see its .md)
holds 2,326 closed-loop points: one model on one engine and layout, at a fixed concurrency.
For each point the physics (:func:`solver.physics.serving.features`) gives A, P, S, W at the
point's per-replica batch; the engine's latencies are linear in its factors::

    TPOT = k_d A + i P + o_d + r B          TTFT = k_p S + w W + o_p

so each engine's factors are the non-negative least-squares solution of the *relative*
errors (every point weighs the same, whatever its milliseconds). The reported error holds
out whole configurations (leave-one-configuration-out: a configuration is the source's
``cfgNNN``, every concurrency and length of it), so no point is predicted by factors that
saw it. The fit writes nothing by itself: ``procure calibrate --serving --write`` puts the
all-data fit into ``catalog/efficiency.yaml`` and the report into docs/calibration.md.
"""

from __future__ import annotations

import csv
import itertools
import re
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path

from solver.catalog.data import Catalog
from solver.physics.calibration import DATASET_TOKENS, match_gpu, match_model
from solver.physics.calibration import _precision as calibration_precision
from solver.physics.calibration import default_csv as calibration_csv
from solver.physics.layout import Layout, Workload
from solver.physics.memory import memory_plan
from solver.physics.performance import estimate
from solver.physics.serving import Features, constants, engine_factors, features, queued

TPOT_FACTORS = ("tpot_kernel_scale", "tpot_prefill_interference", "tpot_overhead_ms",
                "tpot_per_request_us")
TTFT_FACTORS = ("ttft_kernel_scale", "ttft_wave_fraction", "ttft_overhead_ms")
ENGINES = ("vllm", "sglang", "trtllm")
_PRECISION = {"fp8": "fp8", "fp4": "fp4", "nvfp4": "fp4", "int4": "int4", "bf16": "bf16",
              "fp16": "bf16", "w4a16": "int4", "mxfp4": "fp4"}


@dataclass
class Point:
    """One measured point and its physics features (seconds)."""

    row_id: str
    group: str
    engine: str
    gpu: str
    model: str
    ttft_ms: float
    tpot_ms: float
    feat: Features | None = None
    skipped: str = ""


@dataclass
class EngineFit:
    """Factors of one engine, in the order of TPOT_FACTORS and TTFT_FACTORS."""

    tpot: tuple[float, ...]
    ttft: tuple[float, ...]


@dataclass
class Report:
    points: list[Point]
    fits: dict[str, EngineFit]
    held_out: dict[str, tuple[float, float]] = field(default_factory=dict)  # row -> (ttft, tpot)


def default_csv() -> Path:
    """The bundled measurement file (bench/data, next to calibration.csv)."""
    return calibration_csv().parent / "serving_latency.csv"


def _group(row_id: str) -> str:
    """The configuration of a point: the source's ``cfgNNN``, else the row id without its
    concurrency and run number (every concurrency and length of one layout)."""
    found = re.search(r"(cfg\d+)$", row_id)
    if found:
        return found.group(1)
    return re.sub(r"_\d+$", "", re.sub(r"_c\d*_", "_", re.sub(r"_\d+x\d+_", "_", row_id)))


def _precision(row: dict[str, str]) -> str:
    for key in ("gemm_quant", "precision"):
        value = (row.get(key) or "").strip().lower()
        if value in _PRECISION:
            return _PRECISION[value]
    return "bf16"


def load_points(catalog: Catalog, path: Path) -> list[Point]:
    """Map every row of ``path`` to a layout and compute its features."""
    points: list[Point] = []
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            point = Point(row["row_id"], _group(row["row_id"]), row["engine"], row["gpu"],
                          row["model_hf"], float(row["ttft_ms"]), float(row["tpot_ms"]))
            points.append(point)
            try:
                point.feat = _features(catalog, row)
            except (KeyError, ValueError, ZeroDivisionError) as exc:
                point.skipped = f"{type(exc).__name__}: {exc}"
    return points


def _features(catalog: Catalog, row: dict[str, str]) -> Features:
    model = catalog.model(row["model_hf"]).id
    tp, pp = int(float(row["tp"])), int(float(row["pp"]))
    adp = max(1, int(float(row["attention_dp"] or 1)))
    if adp > 1:
        raise ValueError("attention data parallelism (each GPU reads only its own requests' "
                         "KV while the experts are shared) is not a layout procure plans")
    gpus = tp * pp * adp
    if tp > 8:
        raise ValueError("TP beyond 8 GPUs: the engines run these world sizes as expert "
                         "parallelism with data-parallel attention, a layout procure does "
                         "not plan (its serving TP stays within an 8-GPU NVLink board)")
    # attention data parallelism: ``adp`` attention replicas share the experts; the
    # per-GPU weights and batch are those of a tp x adp group serving batch_size each.
    # One instance is one NVLink domain (8-GPU HGX board, or GB200's 72-GPU NVL72)
    layout = Layout(model=model, gpu=row["gpu"], precision=_precision(row), tp=tp * adp,
                    pp=pp, dp=1, gpus_per_node=max(8, gpus), fabric="none")
    workload = Workload("inference", input_tokens=int(float(row["input_tokens"])),
                        output_tokens=int(float(row["output_tokens"])))
    c = _constants(catalog, layout, workload)
    batch = float(row["batch_size"] or row["concurrency"]) * adp
    return features(c, batch, workload.input_tokens, workload.output_tokens)


_CONSTANTS: dict[tuple, object] = {}


def _constants(catalog: Catalog, layout: Layout, workload: Workload):  # noqa: ANN202
    key = (catalog.version, layout, workload)
    if key not in _CONSTANTS:
        _CONSTANTS[key] = constants(catalog, layout, memory_plan(catalog, layout, workload))
    return _CONSTANTS[key]


def _nnls(a, b):  # noqa: ANN001 - numpy arrays
    """Non-negative least squares in a few unknowns: the best feasible active set."""
    import numpy as np

    k = a.shape[1]
    best, best_err = np.zeros(k), float("inf")
    for size in range(k, 0, -1):
        for active in itertools.combinations(range(k), size):
            sol, *_ = np.linalg.lstsq(a[:, active], b, rcond=None)
            if (sol < 0).any():
                continue
            err = float(((a[:, active] @ sol - b) ** 2).sum())
            if err < best_err:
                best = np.zeros(k)
                best[list(active)] = sol
                best_err = err
    return best


def _fit_relative(features: list[tuple[float, ...]], measured: list[float],
                  fixed: list[float] | None = None) -> tuple[float, ...]:
    """Factors x >= 0 of ``measured ~ fixed + features @ x`` by least absolute *relative*
    error (iteratively reweighted least squares), then one common scale of ``x`` so the
    median relative error is zero: every point weighs the same, and the fit is neither
    optimistic nor pessimistic on the points it saw."""
    import numpy as np

    y = np.asarray(measured, dtype=float)
    base = np.zeros(len(y)) if fixed is None else np.asarray(fixed, dtype=float) / y
    a = np.asarray(features, dtype=float) / y[:, None]
    target = 1.0 - base
    weights = np.ones(len(y))
    x = np.zeros(a.shape[1])
    for _ in range(IRLS_ITERATIONS):
        x = _nnls(a * weights[:, None], target * weights)
        weights = 1.0 / np.sqrt(np.maximum(np.abs(a @ x - target), 0.02))
    fitted = a @ x
    lo, hi = 0.0, 10.0  # the median ratio grows with the scale: bisect it to 1
    if np.median(base + hi * fitted) >= 1.0 > np.median(base):
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if np.median(base + mid * fitted) < 1.0 else (lo, mid)
        x = x * 0.5 * (lo + hi)
    return tuple(float(v) for v in x)


IRLS_ITERATIONS = 15


def _tpot_row(f: Features) -> tuple[float, ...]:
    """TPOT features in ms (per unit of each factor of TPOT_FACTORS)."""
    return (f.decode * 1e3, f.interference * 1e3, 1.0, f.batch * 1e-3)


def _ttft_row(f: Features) -> tuple[float, ...]:
    """TTFT features in ms (per unit of each factor of TTFT_FACTORS)."""
    return (f.prefill * 1e3, f.wait * 1e3, 1.0)


PREFILL_KERNEL_SCALE = 1.0
"""k_p is not fitted: a prompt's prefill kernels are the physics calibrated on the prefill
and latency rows of calibration.csv; the engine fit adds only what the engine adds."""


def fit_engine(points: list[Point]) -> EngineFit:
    """Factors of one engine on ``points`` (all with features)."""
    feats = [p.feat for p in points]
    tpot = _fit_relative([_tpot_row(f) for f in feats],  # type: ignore[arg-type]
                         [p.tpot_ms for p in points])
    rows = [_ttft_row(f) for f in feats]  # type: ignore[arg-type]
    ttft = _fit_relative([r[1:] for r in rows], [p.ttft_ms for p in points],
                         [PREFILL_KERNEL_SCALE * r[0] for r in rows])
    return EngineFit(tpot=tpot, ttft=(PREFILL_KERNEL_SCALE, *ttft))


def predict(fit: EngineFit, f: Features) -> tuple[float, float]:
    """(TTFT, TPOT) in ms of one point at the median (the measurement's statistic)."""
    ttft = sum(a * b for a, b in zip(fit.ttft, _ttft_row(f), strict=True))
    tpot = sum(a * b for a, b in zip(fit.tpot, _tpot_row(f), strict=True))
    return ttft, tpot


def run(catalog: Catalog, path: Path | None = None) -> Report:
    """Fit every engine on all its points, and predict each point with its whole
    configuration held out."""
    points = load_points(catalog, path or default_csv())
    usable = [p for p in points if p.feat is not None]
    report = Report(points, {})
    for engine in ENGINES:
        mine = [p for p in usable if p.engine == engine]
        if not mine:
            continue
        report.fits[engine] = fit_engine(mine)
        for group in sorted({p.group for p in mine}):
            train = [p for p in mine if p.group != group]
            if len(train) < 6:
                continue
            held = fit_engine(train)
            for p in mine:
                if p.group == group:
                    report.held_out[p.row_id] = predict(held, p.feat)  # type: ignore[arg-type]
    return report


def errors(report: Report, key: str) -> dict[str, dict[str, float]]:
    """Held-out error statistics per value of ``key`` (engine, gpu, model) and metric:
    median |error|, signed median, points."""
    out: dict[str, dict[str, float]] = {}
    by: dict[str, list[Point]] = {}
    for p in report.points:
        if p.row_id in report.held_out:
            by.setdefault(getattr(p, key), []).append(p)
    by["all"] = [p for p in report.points if p.row_id in report.held_out]
    for name, pts in by.items():
        ttft = [report.held_out[p.row_id][0] / p.ttft_ms - 1.0 for p in pts]
        tpot = [report.held_out[p.row_id][1] / p.tpot_ms - 1.0 for p in pts]
        out[name] = {"n": len(pts),
                     "ttft_abs": statistics.median(abs(e) for e in ttft),
                     "ttft_signed": statistics.median(ttft),
                     "tpot_abs": statistics.median(abs(e) for e in tpot),
                     "tpot_signed": statistics.median(tpot)}
    return out


# --------------------------------------------------------------------------- MLPerf Server
@dataclass
class ServerRow:
    """An MLPerf Server row (Poisson arrivals) with its measured and predicted latencies."""

    id: str
    layout: str
    qps: float
    measured: dict[str, float]   # mean_TTFT_ms, p99_TTFT_ms, mean_TPOT_ms, p99_TPOT_ms
    predicted: dict[str, float]  # the same keys (median for the means)


def mlperf_server(catalog: Catalog, csv_path: Path | None = None) -> list[ServerRow]:
    """The MLPerf Server rows of calibration.csv on TensorRT-LLM, open loop at their
    measured request rate (tokens/s / output tokens) and at the live requests per replica
    that Little's law gives from the measured rate and latencies (the harness fills batches
    up to its TPOT limit - a policy, not physics; our open loop alone would run smaller
    batches). Means compared with our medians, p99 with
    p99. Rows whose model or GPU is not in the catalog are left out."""
    out: list[ServerRow] = []
    with (csv_path or calibration_csv()).open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if row["workload_kind"] != "inference-server":
                continue
            stats = dict(re.findall(r"(\w+_ms)=([\d.]+)", row["latency_stats"]))
            model = match_model(catalog, row["model"])
            gpu = match_gpu(catalog, row["gpu_family"], row["gpu_sku"])
            tokens = next((v for k, v in DATASET_TOKENS.items()
                           if k in row["benchmark_or_task"].lower()), None)
            if not (stats and model and gpu and tokens):
                continue
            total = int(row["total_gpus"])
            found = re.search(r"TP(\d+)", row["parallelism"])
            qps = float(row["value"]) / tokens[1]
            precision = calibration_precision(row["precision"], "fp8" in catalog.gpus[gpu].dense_tflops,
                                   True)
            best = None
            for tp in ([int(found.group(1))] if found else [t for t in (1, 2, 4, 8)
                                                            if total % t == 0]):
                layout = Layout(model=model, gpu=gpu, precision=precision, tp=tp,
                                dp=total // tp, gpus_per_node=max(total, 1))
                workload = Workload("inference", input_tokens=tokens[0],
                                    output_tokens=tokens[1], qps=qps, engine="trtllm",
                                    percentile=99)
                est = estimate(catalog, layout, workload)
                if est.fits:  # latencies are taken at the measured load below
                    best = est
                    break
            if best is None:
                continue
            p = best.predicted
            # the harness batches up to its TPOT limit: compare TPOT at the live requests
            # Little's law gives from the measurement, not at the smallest possible batch
            per_replica = qps / best.layout.dp
            live = per_replica * (float(stats["mean_TTFT_ms"]) + tokens[1]
                                  * float(stats["mean_TPOT_ms"])) / 1e3
            c = constants(catalog, best.layout, memory_plan(catalog, best.layout,
                                                            best.workload))
            lat = queued(c, engine_factors(catalog, "trtllm"), per_replica, live, *tokens)
            if lat is None:  # the model says this replica cannot keep up with the rate
                continue
            p = replace(p, ttft_ms=lat.ttft[50] * 1e3, ttft_ms_p99=lat.ttft[99] * 1e3,
                        tpot_ms=lat.tpot[50] * 1e3, tpot_ms_p99=lat.tpot[99] * 1e3)
            out.append(ServerRow(
                row["id"], f"{best.layout.tp}x{best.layout.dp} {gpu} {precision}", qps,
                {k: float(v) for k, v in stats.items()},
                {"mean_TTFT_ms": p.ttft_ms or 0.0, "p99_TTFT_ms": p.ttft_ms_p99 or 0.0,
                 "mean_TPOT_ms": p.tpot_ms or 0.0, "p99_TPOT_ms": p.tpot_ms_p99 or 0.0}))
    return out


# --------------------------------------------------------------------------- outputs
_NOTES = {
    "tpot_kernel_scale": "k_d: multiplier on the decode step's kernel time",
    "tpot_prefill_interference": "i: share of the steady-state prefill a decode step sees",
    "tpot_overhead_ms": "o_d: engine time per output token beyond the kernels, ms",
    "ttft_kernel_scale": "k_p: multiplier on a prompt's own prefill time (fixed at 1: the calibrated prefill physics)",
    "ttft_wave_fraction": "w: median wait behind other live requests' prefill, fraction",
    "ttft_overhead_ms": "o_p: fixed time to first token beyond the kernels, ms",
    "tpot_per_request_us": "r: engine CPU time per live request per step, us",
}


ROOFLINE = """    roofline:
      label: "the bare step physics, no engine: calibration rows measured outside vLLM, SGLang and TensorRT-LLM (llama.cpp, kernel benchmarks); optimistic for planning"
      tpot_kernel_scale: {value: 1.0, source: notes, note: "kernels as modelled"}
      tpot_prefill_interference: {value: 1.0, source: notes, note: "all of the steady-state prefill in every step"}
      tpot_overhead_ms: {value: 0.0, source: notes, note: "none beyond the family's launch overhead"}
      tpot_per_request_us: {value: 0.0, source: notes, note: "none"}
      ttft_kernel_scale: {value: 1.0, source: notes, note: "kernels as modelled"}
      ttft_wave_fraction: {value: 0.5, source: notes, note: "a synchronised wave: the median request waits for half the others' prefill"}
      ttft_overhead_ms: {value: 0.0, source: notes, note: "none"}
"""


def engines_yaml(report: Report) -> str:
    """The ``serving.engines`` block of efficiency.yaml: the all-data fit of every engine,
    and the fixed ``roofline`` set."""
    lines = ["  engines:"]
    for engine, fit in report.fits.items():
        n = sum(1 for p in report.points if p.engine == engine and p.feat is not None)
        lines.append(f"    {engine}:")
        lines.append(f'      label: "fit on {n} points of serving_latency.csv"')
        for name, value in zip(TPOT_FACTORS + TTFT_FACTORS, fit.tpot + fit.ttft, strict=True):
            lines.append(f'      {name}: {{value: {value:.4g}, source: serving_fit, '
                         f'note: "{_NOTES[name]}"}}')
    return "\n".join(lines) + "\n" + ROOFLINE


def write_factors(report: Report, efficiency_yaml: Path) -> None:
    """Replace the ``serving.engines`` block of ``efficiency_yaml`` with the fit."""
    text = efficiency_yaml.read_text(encoding="utf-8").splitlines(keepends=True)
    start = next(i for i, line in enumerate(text) if line.startswith("  engines:"))
    end = start + 1
    while end < len(text) and (text[end].startswith("    ") or not text[end].strip()):
        end += 1
    efficiency_yaml.write_text("".join(text[:start]) + engines_yaml(report)
                               + "".join(text[end:]), encoding="utf-8")


def report_markdown(report: Report, server: list[ServerRow]) -> str:
    """The serving section of docs/calibration.md: held-out errors and factors."""
    lines = ["## Serving latency under load (serving_latency.csv, held out by configuration)",
             "",
             "Each point is predicted with its engine's factors fitted on every *other* "
             "configuration (leave-one-configuration-out; a configuration is the source's "
             "`cfgNNN` or one layout at every concurrency and length). Error = predicted / "
             "measured - 1; `|err|` median of absolute errors, `signed` median of errors "
             "(negative = optimistic). Targets (issue 10, on the blind set): TTFT <= 25 %, "
             "TPOT <= 12 %, signed within +-5 %.", ""]
    skipped = [p for p in report.points if p.feat is None]
    for key, title in (("engine", "engine"), ("gpu", "GPU"), ("model", "model")):
        lines += [f"| {title} | points | TTFT abs | TTFT signed | TPOT abs | TPOT signed |",
                  "|---|---|---|---|---|---|"]
        for name, e in sorted(errors(report, key).items(), key=lambda kv: kv[0] == "all"):
            lines.append(f"| {name} | {int(e['n'])} | {e['ttft_abs']:.1%} | "
                         f"{e['ttft_signed']:+.1%} | {e['tpot_abs']:.1%} | "
                         f"{e['tpot_signed']:+.1%} |")
        lines.append("")
    reasons = sorted({p.skipped.split(':', 1)[-1].strip() for p in skipped})
    lines += [f"Left out: {len(skipped)} of {len(report.points)} points ("
              + "; ".join(reasons) + ")." if skipped else "Every point is covered.", ""]
    lines += ["Fitted factors (all points of the engine; `catalog/efficiency.yaml` "
              "`serving.engines`):", "",
              "| engine | k_d | i | o_d ms | r us | k_p | w | o_p ms |",
              "|---|---|---|---|---|---|---|---|"]
    for engine, fit in report.fits.items():
        values = " | ".join(f"{v:.3g}" for v in fit.tpot + fit.ttft)
        lines.append(f"| {engine} | {values} |")
    lines += ["", "MLPerf Server rows (Poisson arrivals, TensorRT-LLM; TPOT at the live "
              "requests Little's law gives from the measured rate and latencies, prefill "
              "queued M/D/1 at the measured rate; target TPOT <= 15 %):", "",
              "| row | layout | req/s | metric | measured | predicted | error |",
              "|---|---|---|---|---|---|---|"]
    for row in server:
        for metric, measured in row.measured.items():
            predicted = row.predicted[metric]
            lines.append(f"| {row.id} | {row.layout} | {row.qps:.1f} | {metric} | "
                         f"{measured:.4g} | {predicted:.4g} | {predicted / measured - 1:+.0%} |")
    lines += ["", "Percentiles: a closed loop's wait is uniform over the wave (p90 = 1.8 x "
              "the median wait); an open loop's prefill wait is M/D/1 with an exponential "
              "tail and its TPOT is taken at N + z sqrt(N) live requests. Only the MLPerf "
              "p99 values above check them: their p99 TTFT comes mostly from the spread of "
              "the dataset's prompt lengths, which a fixed-length RFQ does not describe, so "
              "the model under-predicts it; TPOT p99 is within the TPOT error.", "",
              "Not in the fit: the decode steps some schedulers run between a prompt's "
              "chunks (fitting them lowered the held-out TTFT error to 28.8 % but tripled "
              "the MLPerf Server TTFT: it does not extrapolate to large batches).", ""]
    return "\n".join(lines)
