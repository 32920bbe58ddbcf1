"""Published serving measurements as one table of observations, each with its source.

Four files in ``bench/data`` (each with its own ``.md``: sources, URLs, dates, caveats):

* ``serving_latency.csv`` — NVIDIA AIConfigurator's measured silicon sample: closed-loop
  TTFT/TPOT of one engine layout at a fixed concurrency (source ``aic-silicon``);
* ``serving_published.csv`` — NIM, TensorRT-LLM 1.2 perf overview, Oracle's MI300X blog,
  GPUStack's performance lab (source = the row-id prefix);
* ``serving_found.csv`` — further published measurements (MLPerf Inference rounds, AMD ROCm
  documentation and blogs, engine blogs), its ``source`` column naming each source;
* ``calibration.csv`` — the inference rows of the general calibration set (MLPerf v4.1,
  TensorRT-LLM perf overviews, llama.cpp), mapped by :mod:`solver.physics.calibration`.

An :class:`Observation` is one measured number at one operating point: what was run (model,
GPU, precision, layout, engine, prompt/output lengths), under which load (a closed loop of
``concurrency`` users, a static batch, a burst of requests, offline throughput, or Poisson
arrivals at ``rate``) and what was measured (``metric`` and its ``statistic``). Rows the
model cannot express (attention data parallelism with expert parallelism, disaggregated
serving, models or GPUs not in the catalog) are kept with the reason they are left out.
:func:`predict` evaluates an observation with the serving physics the planner uses.
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from solver.catalog.data import Catalog, content_key
from solver.catalog.perf_factors import EngineFactors, factors
from solver.common.memo import Memo
from solver.physics.calibration import DATASET_TOKENS, match_gpu, match_model, row_estimate
from solver.physics.calibration import default_csv as calibration_csv
from solver.physics.layout import Layout, Workload
from solver.physics.memory import MemoryPlan, memory_plan
from solver.physics.performance import estimate
from solver.physics.serving import (
    Constants,
    closed_loop,
    constants,
    engine_factors,
    open_loop,
    queued,
    wave,
)
from solver.physics.serving import (
    slots as serving_slots,
)

Load = Literal["closed", "static", "burst", "offline", "server"]
Metric = Literal["ttft_ms", "tpot_ms", "output_tps", "output_tps_gpu", "total_tps",
                 "e2e_s", "prefill_tps", "decode_tps"]
Statistic = Literal["median", "mean", "p90", "p99"]


@dataclass(frozen=True)
class Observation:
    """One published measurement at one operating point (see module doc)."""

    id: str
    source: str
    file: str
    model: str
    gpu: str
    precision: str
    engine: str
    tp: int
    pp: int
    replicas: int
    input_tokens: int
    output_tokens: int
    load: Load
    concurrency: float | None  # closed / static / burst: requests over all replicas
    rate: float | None  # server: requests/s over all replicas
    metric: Metric
    statistic: Statistic
    value: float
    gpus_per_node: int = 8
    live: float | None = None  # server: requests in flight per replica (Little's law on the
    # measured rate and mean latencies: MLPerf's harness batches up to its TPOT limit)
    released: str | None = None  # when the measured software ran: 'YYYY-MM', 'YYYY' or None
    ep: int = 1  # expert parallelism (issue 27; only the expert-parallel check reads these)
    attention_dp: int = 1  # attention data-parallel ranks per replica
    fabric: str = "none"  # between the nodes a replica spans (the expert-parallel check)

    @property
    def gpus(self) -> int:
        return self.tp * self.attention_dp * self.pp * self.replicas

    @property
    def layout(self) -> Layout:
        return Layout(model=self.model, gpu=self.gpu, precision=self.precision, tp=self.tp,
                      pp=self.pp, dp=self.replicas,
                      gpus_per_node=(self.gpus_per_node if self.fabric != "none" else
                                     max(self.gpus_per_node,
                                         self.tp * self.attention_dp * self.pp)),
                      ep=self.ep, attention_dp=self.attention_dp, fabric=self.fabric)

    @property
    def workload(self) -> Workload:
        kind = "inference" if self.load in ("closed", "server") else "batch_inference"
        return Workload(kind, input_tokens=self.input_tokens,
                        output_tokens=self.output_tokens, engine=self.engine)


@dataclass(frozen=True)
class Skipped:
    """A measured row the model cannot express, and why."""

    id: str
    source: str
    file: str
    why: str


def data_dir() -> Path:
    """The bundled measurement folder (bench/data in a checkout, the package data when
    installed)."""
    return calibration_csv().parent


# --------------------------------------------------------------------------- loaders
_MONTHS = {m: i + 1 for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul",
                                             "aug", "sep", "oct", "nov", "dec"))}


def released_of(text: str) -> str | None:
    """When a measurement's software ran, from its source's date text: the first ISO date
    ('2025-09-04' -> '2025-09'), else a month name with a year ('Dec 2023' -> '2023-12'), else
    a bare year ('late 2023' -> '2023'); None when the text names no year."""
    iso = re.search(r"\b(20\d\d)-(\d\d)\b", text or "")
    if iso:
        return f"{iso.group(1)}-{iso.group(2)}"
    named = re.search(r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? (20\d\d)\b",
                      (text or "").lower())
    if named:
        return f"{named.group(2)}-{_MONTHS[named.group(1)]:02d}"
    year = re.search(r"\b(20\d\d)\b", text or "")
    return year.group(1) if year else None


_PRECISION = {"fp8": "fp8", "fp4": "fp4", "nvfp4": "fp4", "mxfp4": "fp4", "int4": "int4",
              "w4a16": "int4", "bf16": "bf16", "fp16": "bf16", "int8": "int8"}


def _precision_word(*texts: str) -> str | None:
    for text in texts:
        value = (text or "").strip().lower()
        for word, precision in _PRECISION.items():
            if value.startswith(word):
                return precision
    return None


_UNSTATED_PRECISION = re.compile(r"run-time precision is not stated|precision not read|"
                                 r"precision of that engine not clear", re.IGNORECASE)
"""What the data files' notes say of a row whose precision field is blank because the source
does not give the precision the run used (MLPerf rows whose weights the submitter quantised
from an FP16 checkpoint; a TensorRT-LLM engine of DeepSeek-R1 whose README converts to BF16,
which 8 H200s could not hold): such a row is left out, not served at the checkpoint's
precision."""


def _serving_precision(catalog: Catalog, gpu: str, stated: str | None, model: str) -> str:
    """The precision a row is served at in the model: as stated, with FP4 on a GPU without
    FP4 tensor cores (MXFP4 weights on Hopper) run as weight-only 4-bit. A blank precision
    is the checkpoint's own: the catalog model's ``default_precision`` (gpt-oss ships MXFP4
    experts), else BF16; rows whose notes say the run's precision is not stated are left
    out before this. A cell that names only the KV cache's dtype ("kv-cache fp8") states no
    weight precision."""
    precision = stated or catalog.model(model).default_precision or "bf16"
    if precision == "fp4" and "fp4" not in catalog.gpus[gpu].dense_tflops:
        return "int4"
    if precision == "fp8" and "fp8" not in catalog.gpus[gpu].dense_tflops:
        return "bf16"
    return precision


EP_FABRIC = "ib-ndr-400"
"""The fabric assumed between the nodes of a measured expert-parallel instance wider than
one node (the source does not say; NDR InfiniBand is what such B200/H200 runs use)."""


def load_silicon(catalog: Catalog, path: Path,
                 expert_parallel: bool = False) -> tuple[list[Observation], list[Skipped]]:
    """``serving_latency.csv``: closed-loop TTFT and TPOT (statistic not stated: taken as
    the median). Rows with attention data parallelism are left out of the serving fit;
    ``expert_parallel`` reads only those (attention TP ``tp`` on ``attention_dp`` ranks,
    experts over ``moe_ep`` GPUs, each split ``moe_tp`` ways): the held-out check of
    docs/expert-parallel.md."""
    obs: list[Observation] = []
    skipped: list[Skipped] = []
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            rid = row["row_id"]
            adp = max(1, int(float(row["attention_dp"] or 1)))
            tp, pp = int(float(row["tp"])), int(float(row["pp"]))
            # the serving fit keeps its TP layouts as they were (EP inside TP unmodelled
            # there); only the attention-DP rows of the check take the experts' EP
            ep = max(1, int(float(row.get("moe_ep") or 1))) if adp > 1 else 1
            if expert_parallel != (adp > 1):
                skipped.append(Skipped(rid, "aic-silicon", path.name,
                                       "attention data parallelism with expert parallelism: "
                                       "held out of the serving fit, the expert-parallel "
                                       "check (docs/expert-parallel.md)" if adp > 1 else
                                       "not an attention-DP row"))
                continue
            if tp > 8 or (adp > 1 and ep == 1):
                skipped.append(Skipped(rid, "aic-silicon", path.name,
                                       "TP beyond 8 GPUs, or attention data parallelism "
                                       "with the experts split by TP only (not modelled)"))
                continue
            try:
                model = catalog.model(row["model_hf"]).id
            except KeyError:
                skipped.append(Skipped(rid, "aic-silicon", path.name, "model not in catalog"))
                continue
            gpu = row["gpu"]
            if gpu not in catalog.gpus:
                skipped.append(Skipped(rid, "aic-silicon", path.name, "GPU not in catalog"))
                continue
            precision = _serving_precision(
                catalog, gpu, _precision_word(row["gemm_quant"], row["precision"]), model)
            base = dict(source="aic-silicon", file=path.name, model=model, gpu=gpu,
                        precision=precision, engine=row["engine"], tp=tp, pp=pp, replicas=1,
                        ep=ep, attention_dp=adp,
                        fabric=EP_FABRIC if tp * adp * pp > 8 else "none",
                        input_tokens=int(float(row["input_tokens"])),
                        output_tokens=int(float(row["output_tokens"])), load="closed",
                        # attention DP: the instance's requests, all ranks together
                        concurrency=float(row["concurrency"] if adp > 1
                                          else row["batch_size"] or row["concurrency"]),
                        rate=None, statistic="median")
            obs.append(Observation(id=f"{rid}:ttft", metric="ttft_ms",
                                   value=float(row["ttft_ms"]), **base))
            obs.append(Observation(id=f"{rid}:tpot", metric="tpot_ms",
                                   value=float(row["tpot_ms"]), **base))
    return obs, skipped


_GPU_WORDS = (("gb200", "gb200"), ("b300", "b300-sxm"), ("b200", "b200-sxm"),
              ("h200", "h200-sxm"), ("h100 pcie", "h100-pcie"), ("h100-pcie", "h100-pcie"),
              ("h100", "h100-sxm"), ("a100", "a100-80g-sxm"), ("l40s", "l40s"),
              ("rtx pro 6000", "rtx-pro-6000"), ("rtx-pro-6000", "rtx-pro-6000"),
              ("mi355x", "mi355x"), ("mi325x", "mi325x"), ("mi300x", "mi300x"),
              ("rtx 4090", "rtx-4090"), ("rtx 5090", "rtx-5090"), ("l4", "l4"))


_NOT_IN_CATALOG = re.compile(r"gh200|h[12]00[- ]nvl|rtx pro 4500|mi350x|gb300|l40\b(?!s)")
"""GPUs whose names contain a catalog GPU's (GH200 contains H200) but that are other parts
(PCIe H100/H200 NVL cards, the Grace Hopper superchip, the MI350X, ...): left out."""


def _gpu_id(catalog: Catalog, text: str) -> str | None:
    lowered = text.lower()
    if _NOT_IN_CATALOG.search(lowered):
        return None
    for word, gpu in _GPU_WORDS:
        if word in lowered:
            return gpu if gpu in catalog.gpus else None
    return match_gpu(catalog, text, text)


def _engine_id(text: str) -> str | None:
    lowered = text.lower()
    for word, engine in (("sglang", "sglang"), ("vllm", "vllm"), ("tensorrt", "trtllm"),
                         ("trt-llm", "trtllm"), ("trtllm", "trtllm"), ("nim", "trtllm")):
        if word in lowered:
            return engine
    return None


_METRICS: dict[str, tuple[Metric, Statistic]] = {
    "e2e_ms": ("e2e_s", "mean"),
    "ttft_ms": ("ttft_ms", "median"), "ttft_ms_median": ("ttft_ms", "median"),
    "ttft_ms_mean": ("ttft_ms", "mean"), "ttft_ms_p99": ("ttft_ms", "p99"),
    "ttft_ms_p90": ("ttft_ms", "p90"),
    "itl_ms": ("tpot_ms", "median"), "tpot_ms": ("tpot_ms", "median"),
    "tpot_ms_median": ("tpot_ms", "median"), "tpot_ms_mean": ("tpot_ms", "mean"),
    "tpot_ms_p99": ("tpot_ms", "p99"), "tpot_ms_p90": ("tpot_ms", "p90"),
    "itl_ms_median": ("tpot_ms", "median"), "itl_ms_mean": ("tpot_ms", "mean"),
    "itl_ms_p99": ("tpot_ms", "p99"),
    "request_latency_s_mean": ("e2e_s", "mean"), "e2e_s_mean": ("e2e_s", "mean"),
    "e2e_ms_mean": ("e2e_s", "mean"), "e2e_ms_median": ("e2e_s", "median"),
}


def _throughput_metric(metric: str, unit: str) -> Metric | None:
    text = f"{metric} {unit}".lower()
    if "sample" in text or "request" in text and "token" not in text:
        return None
    if "input+output" in text or "input + output" in text or metric.lower().startswith(
            "total") and "output tokens presumed" not in text:
        return "total_tps"
    if "/gpu" in text or "per gpu" in text or "per_gpu" in text:
        return "output_tps_gpu"
    if "token" in text or "throughput" in text:
        return "output_tps"
    return None


def _load_of(text: str) -> tuple[Load, float | None] | None:
    """The load a published row ran under, from its ``concurrency`` cell."""
    lowered = text.strip().lower()
    if not lowered:
        return None
    if lowered.startswith("burst"):
        found = re.search(r"(\d+)", lowered)
        return ("burst", float(found.group(1))) if found else None
    if lowered.startswith("batch"):
        found = re.search(r"(\d+)", lowered)
        return ("static", float(found.group(1))) if found else None
    if "offline" in lowered or "max" in lowered:
        return ("offline", None)
    if "server" in lowered or "interactive" in lowered:
        return ("server", None)
    try:
        return ("closed", float(lowered))
    except ValueError:
        return None


def load_published(catalog: Catalog, path: Path, source_column: str | None = None,
                   expert_parallel: bool = False) -> tuple[list[Observation], list[Skipped]]:
    """``serving_published.csv`` / ``serving_found.csv``: one measured number per row (the
    columns of the files' .md). The source is the ``source`` column where the file has one,
    else the row id's prefix. Rows of one operating point (everything equal but the metric
    and value) are read together: a Poisson-arrival row's requests in flight come from its
    point's mean TTFT and TPOT (Little's law).

    TensorRT-LLM ``DEPn`` rows (attention data parallelism n with expert parallelism n) are
    left out of the serving fit; ``expert_parallel`` reads those rows only (attention TP 1,
    ``attention_dp = ep = n``): the held-out check of docs/expert-parallel.md."""
    obs: list[Observation] = []
    skipped: list[Skipped] = []
    if not path.exists():
        return obs, skipped
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    points: dict[tuple, list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        points[_point_key(row)].append(row)
    for point in points.values():
        means = {r["metric"].strip().lower(): r["value"] for r in point}
        for row in point:
            rid = row["id"]
            source = ((row.get(source_column) or "").strip() if source_column else "") \
                or rid.split("-", 1)[0].lower()
            found = _published(catalog, row, rid, source, path.name, means, expert_parallel)
            (obs if isinstance(found, Observation) else skipped).append(found)
    return obs, skipped


_POINT_EXCLUDE = ("id", "metric", "value", "unit", "notes")


def _point_key(row: dict[str, str]) -> tuple:
    """What one operating point's rows share (all but the metric, its value and notes),
    with the file line of an MLPerf log stripped from the notes' scenario text."""
    return tuple(v for k, v in sorted(row.items()) if k not in _POINT_EXCLUDE)


DATASET_LENGTHS: dict[str, tuple[int, int]] = {
    "llama-2-70b": DATASET_TOKENS["llama2-70b"],
    "mixtral-8x7b": DATASET_TOKENS["mixtral"],
}
"""Mean prompt / output tokens of the MLPerf datasets whose logs state no lengths (the
labelled assumption of :data:`solver.physics.calibration.DATASET_TOKENS`); the output length
of a row is its log's tokens per sample where the notes give both rates. Other MLPerf
benchmarks (Llama-3.1-405B/8B, DeepSeek-R1, gpt-oss) state no mean prompt length in what
was read: their rows are left out."""


def _lengths(model: str, row: dict[str, str]) -> tuple[int, int] | None:
    try:
        return max(1, round(float(row["isl"]))), max(1, round(float(row["osl"])))
    except ValueError:
        pass
    dataset = DATASET_LENGTHS.get(model)
    if dataset is None:
        return None
    notes = row.get("notes", "")
    tokens = re.search(r"[Tt]okens per second: ([\d.]+)", notes)
    samples = (re.search(r"[Ss]amples per second: ([\d.]+)", notes)
               or re.search(r"completed ([\d.]+) samples/s", notes))
    out = dataset[1]
    if tokens and samples and float(samples.group(1)) > 0:
        out = round(float(tokens.group(1)) / float(samples.group(1)))
    return dataset[0], max(1, out)


_SPECULATIVE = re.compile(r"\bMTP\b|speculative|\beagle|draft model", re.IGNORECASE)
"""Notes of a run with speculative decoding: DeepSeek's multi-token prediction, EAGLE or a
draft model emit several tokens per step."""
_PER_USER = re.compile(r"per user|/user", re.IGNORECASE)
"""Units of a per-user rate (trtllm-bench's 'Per User Output Throughput')."""
_ATTENTION_DP_ON = re.compile(r"attention[ -]?DP on\b", re.IGNORECASE)
"""TensorRT-LLM's words for attention data parallelism (with the row's EP): a DEP row."""
_STATIC_BATCH = re.compile(r"static batch|'Latency Measurements' table|"
                           r"batch_size/total_latency", re.IGNORECASE)
"""Notes of a row whose concurrency cell is the size of one batch sent at once: a static
batch (vLLM's ``benchmark_latency``, behind AMD's 'Latency Measurements' tables;
TensorRT-LLM's session benchmark, out_tps = output_seqlen x batch_size / total_latency)."""


def _published(catalog: Catalog, row: dict[str, str], rid: str, source: str,
               file: str, means: dict[str, str],
               expert_parallel: bool = False) -> Observation | Skipped:
    def skip(why: str) -> Skipped:
        return Skipped(rid, source, file, why)

    notes = f"{row.get('notes', '')} {row.get('tp', '')}"
    dep = ("DEP" in notes or "attention data-parallel" in notes.lower()
           or _ATTENTION_DP_ON.search(notes) is not None)
    if expert_parallel and not dep:
        return skip("not an attention-DP / expert-parallel row")
    if "disagg" in notes.lower():
        return skip("disaggregated prefill/decode serving (issue 27)")
    if _SPECULATIVE.search(notes):
        return skip("speculative decoding (MTP or a draft model): several tokens per step, "
                    "which the serving model does not model")
    if _PER_USER.search(row["unit"]):
        return skip("a per-user output rate (one request's tokens/s), not the system's "
                    "throughput")
    if dep and not expert_parallel:
        return skip("attention data parallelism with expert parallelism: held out of the "
                    "serving fit, the expert-parallel check (docs/expert-parallel.md)")
    try:
        model = catalog.model(re.sub(r"\s*\(.*$", "", row["model"]).strip()).id
    except KeyError:
        model = match_model(catalog, row["model"])
    if model is None:
        return skip("model not in catalog")
    gpu = _gpu_id(catalog, row["gpu"])
    if gpu is None:
        return skip(f"GPU not in catalog ({row['gpu']})")
    engine = _engine_id(row["engine"])
    if engine is None:
        return skip(f"engine not modelled ({row['engine']})")
    metric_stat = _METRICS.get(row["metric"].strip().lower())
    if metric_stat is None:
        tput = _throughput_metric(row["metric"], row["unit"])
        if tput is None:
            return skip(f"metric not modelled ({row['metric']} in {row['unit']})")
        metric_stat = (tput, "mean")
    metric, statistic = metric_stat
    load = _load_of(row["concurrency"])
    if load is None:
        return skip(f"load not stated ({row['concurrency']!r})")
    kind, concurrency = load
    if kind == "closed" and _STATIC_BATCH.search(row.get("notes", "")):
        kind = "static"  # the benchmark sent one batch of that size (notes say so)
    if kind == "server" and metric not in ("ttft_ms", "tpot_ms"):
        return skip("throughput under Poisson arrivals is the offered rate (no information)")
    lengths = _lengths(model, row)
    if lengths is None:
        return skip("prompt/output lengths not stated (dataset means unknown)")
    isl, osl = lengths
    try:
        value = float(row["value"])
        num_gpus = int(float(row["num_gpus"]))
    except ValueError:
        return skip("GPU count or value not numeric")
    stated = (_precision_word(row["precision"])
              or _precision_word(_model_precision(row["model"])))
    if stated is None and _UNSTATED_PRECISION.search(row.get("notes", "")):
        return skip("run-time precision not stated (the submitter quantised the weights; "
                    "taken as BF16 it would credit the GPU's BF16 peak with the run's work)")
    precision = _serving_precision(catalog, gpu, stated, model)
    layout = _layout(catalog, row, model, gpu, precision, engine, num_gpus, isl, osl)
    if isinstance(layout, str):
        return skip(layout)
    tp, pp = layout
    ranks = ep = 1
    if dep:  # DEPn: stored as tp = ep = n; attention runs TP 1 on n data-parallel ranks
        ranks = ep = tp
        tp = 1
    rate = live = None
    if kind == "server":
        try:
            rate = float(row["request_rate"])
        except ValueError:
            return skip("Poisson arrivals without a request rate")
        try:
            live = rate / (num_gpus // (tp * ranks * pp)) * (
                float(means["ttft_ms_mean"]) + osl * float(means["tpot_ms_mean"])) / 1e3
        except (KeyError, ValueError):
            live = None
    if metric == "e2e_s" and "ms" in row["unit"].lower():
        value /= 1e3
    gpn = 72 if catalog.gpus[gpu].form_factor == "superchip" else 8
    return Observation(id=rid, source=source, file=file, model=model, gpu=gpu,
                       precision=precision, engine=engine, tp=tp, pp=pp,
                       replicas=num_gpus // (tp * ranks * pp), input_tokens=isl,
                       output_tokens=osl, load=kind, concurrency=concurrency, rate=rate,
                       metric=metric, statistic=statistic, value=value, gpus_per_node=gpn,
                       live=live, released=released_of(row.get("source_date", "")),
                       ep=ep, attention_dp=ranks)


def _model_precision(name: str) -> str:
    """A precision named in a checkpoint's name (``...-FP8-KV``), else ''."""
    found = re.search(r"(fp8|fp4|nvfp4|mxfp4|int4|bf16)", name.lower())
    return found.group(1) if found else ""


def _layout(catalog: Catalog, row: dict[str, str], model: str, gpu: str, precision: str,
            engine: str, gpus: int, isl: int, osl: int) -> tuple[int, int] | str:
    """(tp, pp) as the row states them; where it states none (MLPerf systems), the split of
    the system's GPUs into replicas with the best throughput, as a submitter tunes it."""
    try:
        tp = int(float(row["tp"]))
        pp = int(float(row["pp"] or 1))
    except ValueError:
        return LAYOUTS.get((content_key(catalog), model, gpu, precision, engine, gpus, isl, osl),
                           lambda: _best_split(catalog, model, gpu, precision, engine, gpus,
                                               isl, osl))
    if tp * pp > gpus or gpus % (tp * pp):
        return f"layout tp{tp} pp{pp} does not divide {gpus} GPUs"
    return tp, pp


LAYOUTS: Memo[tuple[int, int] | str] = Memo(4096)
"""Best splits of systems whose layout is not stated, keyed by catalog content and query."""


def _best_split(catalog: Catalog, model: str, gpu: str, precision: str, engine: str,
                gpus: int, isl: int, osl: int) -> tuple[int, int] | str:
    per_node = 72 if catalog.gpus[gpu].form_factor == "superchip" else 8
    workload = Workload("batch_inference", input_tokens=isl, output_tokens=osl, engine=engine)
    best: tuple[float, tuple[int, int]] | None = None
    for tp in (1, 2, 4, 8):
        if gpus % tp or tp > per_node:
            continue
        # one replica (replicas run independently, on as many nodes as the system has)
        est = estimate(catalog, Layout(model=model, gpu=gpu, precision=precision, tp=tp,
                                       gpus_per_node=per_node), workload)
        per_gpu = est.predicted.tokens_per_s / tp
        if est.fits and (best is None or per_gpu > best[0]):
            best = (per_gpu, (tp, 1))
    return best[1] if best else "no TP split of the system's GPUs fits memory"


def _calibration_source(row: dict[str, str]) -> str:
    text = row["source"].lower()
    if "mlperf inference v4.1" in text or "inference_results_v4.1" in text:
        return "mlperf-inf-v4.1"
    if "perf-overview" in text:
        return "trtllm-perf-overview-1.0"
    if "performance.md" in text:
        return "trtllm-perf-0.6"
    if "gpu-benchmarks-on-llm-inference" in text:
        return "llama.cpp-bench"
    return re.sub(r"[^a-z0-9.]+", "-", text)[:32].strip("-")


def load_calibration(catalog: Catalog, path: Path) -> tuple[list[Observation], list[Skipped]]:
    """The inference rows of ``calibration.csv``: offline throughput (at every slot the
    engine has), latency at batch 1, prefill and decode rates, MLPerf Server latencies at
    the measured request rate."""
    obs: list[Observation] = []
    skipped: list[Skipped] = []
    with path.open(newline="", encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["workload_kind"].startswith("inference")]
    for row in rows:
        source = _calibration_source(row)
        est = row_estimate(catalog, row)
        if est is None:
            skipped.append(Skipped(row["id"], source, path.name,
                                   "not mappable (model or GPU not in the catalog, or lengths "
                                   "not stated)"))
            continue
        obs.extend(_calibration_observations(row, est.layout, est.workload, source,
                                             path.name))
    return obs, skipped


def _calibration_observations(row: dict[str, str], layout: Layout, workload: Workload,
                              source: str, file: str) -> list[Observation]:
    engine = workload.engine
    kind = row["workload_kind"]
    unit = row["unit"].lower()
    base = dict(source=source, file=file, model=layout.model, gpu=layout.gpu,
                precision=layout.precision, engine=engine, tp=layout.tp, pp=layout.pp,
                replicas=layout.dp, input_tokens=workload.input_tokens,
                output_tokens=workload.output_tokens, gpus_per_node=layout.gpus_per_node,
                released=released_of(row.get("date_or_version", "")))
    value = float(row["value"])
    if kind == "inference-server":
        stats = dict(re.findall(r"(\w+_ms)=([\d.]+)", row["latency_stats"]))
        rate = value / workload.output_tokens
        live = None
        if "mean_TTFT_ms" in stats and "mean_TPOT_ms" in stats:
            live = rate / layout.dp * (float(stats["mean_TTFT_ms"]) + workload.output_tokens
                                       * float(stats["mean_TPOT_ms"])) / 1e3
        out = []
        for key, (metric, stat) in (("mean_TTFT_ms", ("ttft_ms", "mean")),
                                    ("p99_TTFT_ms", ("ttft_ms", "p99")),
                                    ("mean_TPOT_ms", ("tpot_ms", "mean")),
                                    ("p99_TPOT_ms", ("tpot_ms", "p99"))):
            if key in stats:
                out.append(Observation(id=f"{row['id']}:{key}", load="server",
                                       concurrency=None, rate=rate, metric=metric,
                                       statistic=stat, value=float(stats[key]), live=live,
                                       **base))
        return out
    if kind == "inference-latency":
        return [Observation(id=row["id"], load="static", concurrency=1.0, rate=None,
                            metric="ttft_ms", statistic="mean", value=value, **base)]
    if kind == "inference-prefill":
        return [Observation(id=row["id"], load="static", concurrency=1.0, rate=None,
                            metric="prefill_tps", statistic="mean", value=value, **base)]
    if kind == "inference-decode":
        return [Observation(id=row["id"], load="static", concurrency=1.0, rate=None,
                            metric="decode_tps", statistic="mean", value=value, **base)]
    metric: Metric = "output_tps_gpu" if ("/gpu" in unit or "per gpu" in unit
                                          or "unclear if per gpu" in unit) else "output_tps"
    if workload.concurrency is not None:
        return [Observation(id=row["id"], load="static",
                            concurrency=float(workload.concurrency), rate=None,
                            metric=metric, statistic="mean", value=value, **base)]
    return [Observation(id=row["id"], load="offline", concurrency=None, rate=None,
                        metric=metric, statistic="mean", value=value, **base)]


def load_all(catalog: Catalog, folder: Path | None = None,
             ) -> tuple[list[Observation], list[Skipped]]:
    """Every observation of the four measurement files, and the rows left out."""
    folder = folder or data_dir()
    obs: list[Observation] = []
    skipped: list[Skipped] = []
    for loaded in (load_silicon(catalog, folder / "serving_latency.csv"),
                   load_published_files(catalog, folder),
                   load_calibration(catalog, folder / "calibration.csv")):
        obs.extend(loaded[0])
        skipped.extend(loaded[1])
    return obs, skipped


def load_published_files(catalog: Catalog, folder: Path, expert_parallel: bool = False,
                         ) -> tuple[list[Observation], list[Skipped]]:
    """``serving_published.csv`` then ``serving_found.csv`` (whose ``source`` column names
    each row's source), read with :func:`load_published`."""
    published = load_published(catalog, folder / "serving_published.csv",
                               expert_parallel=expert_parallel)
    found = load_published(catalog, folder / "serving_found.csv", "source",
                           expert_parallel=expert_parallel)
    return published[0] + found[0], published[1] + found[1]


def holdout_group(source: str) -> str:
    """The group a source is held out with: one MLPerf round (every submitter of it, the
    calibration set's own rows of that round included), else the source itself."""
    found = re.match(r"mlperf-(?:inf-)?(v\d+\.\d+)", source)
    return f"mlperf-{found.group(1)}" if found else source


# --------------------------------------------------------------------------- prediction
@dataclass(frozen=True)
class Prepared:
    """What an observation's prediction needs that the fitted factors do not change: the
    layout's constants at the catalog's factors, its memory plan, the slots per replica."""

    obs: Observation
    base: Constants
    plan: MemoryPlan
    family: str
    compute: str  # compute precision whose GEMM efficiency applies
    gemm0: float  # the family's GEMM efficiency in ``base``
    bw0: float    # the family's bandwidth efficiency in ``base``
    kv_slots: int  # requests the replica's KV memory holds
    expert_share: float = 0.0  # share of the active matmul FLOPs in routed experts
    moe0: float = 1.0  # the expert-GEMM efficiency in ``base``
    spread0: float = 0.0  # the catalog's prompt-length spread of Poisson benchmarks
    flops_peak: float = 0.0  # dense tensor peak of ``compute``, FLOP/s, before any efficiency
    bw_nominal: float = 0.0  # nominal memory bandwidth x the precision's weight-only factor, B/s


OVERLOAD_FACTOR = 4.0
"""A Poisson run whose requests in flight (Little's law on its measured latencies) exceed the
replica's slots this many times over was a backlog draining (1,000 requests/s against a
capacity of a few), not a steady state: left out."""


def prepare(catalog: Catalog, obs: Observation) -> Prepared | str:
    """The prepared observation, or why it cannot be predicted (it does not fit memory,
    the engine does not run on the GPU)."""
    eff = factors(catalog)
    gpu = catalog.gpus[obs.gpu]
    try:
        engine = engine_factors(catalog, obs.engine, obs.gpu)
    except Exception as exc:  # noqa: BLE001 - InputError: the engine does not run there
        return str(exc)
    plan = memory_plan(catalog, obs.layout, obs.workload)
    if plan.max_concurrency < 1:
        return plan.reason or "does not fit memory"
    if obs.live is not None and obs.live > OVERLOAD_FACTOR * serving_slots(
            engine, plan, obs.workload, eff.serving.kv_decode_fill.value, obs.attention_dp):
        return ("offered rate far above what the replica holds: the benchmark measured a "
                "finite backlog, not a steady state")
    compute = eff.precisions.compute_precision[obs.precision]
    compute = compute if compute in gpu.dense_tflops else "bf16"
    fam = eff.family(gpu.family)
    base = constants(catalog, obs.layout, plan, engine)
    geo = base.geo
    share = (min(geo.expert_params * geo.experts_per_token / geo.experts
                 / geo.matmul_active_params, 1.0) if geo.experts else 0.0)
    return Prepared(obs, base, plan, gpu.family, compute, fam.gemm(compute),
                    fam.mem_bw_efficiency.value, plan.max_concurrency, share,
                    eff.serving.moe_expert_gemm_efficiency.value,
                    eff.serving.prompt_length_cv.value,
                    gpu.dense_tflops[compute] * 1e12,
                    gpu.mem_bw_gbs * 1e9
                    * eff.precisions.weight_only_bw_efficiency[obs.precision].value)


def predict(p: Prepared, engine: EngineFactors, gemm: float | None = None,
            bw: float | None = None, moe: float | None = None,
            spread: float | None = None) -> float | None:
    """The model's value of the observation's metric with the family's GEMM and bandwidth
    efficiencies ``gemm`` / ``bw`` and the expert-GEMM efficiency ``moe`` (None: the
    catalog's), the engine's factors and, for a Poisson benchmark, the prompt-length spread
    ``spread`` of its dataset (None: the catalog's); None when the model says the load
    cannot be carried (overload)."""
    o = p.obs
    c = p.base
    if c.read_scale != engine.tpot_kernel_scale.value:
        c = replace(c, memo={}, read_scale=engine.tpot_kernel_scale.value)
    if gemm is not None or bw is not None or moe is not None:
        # from the raw peaks, not by rescaling ``base``: the same factors give the same
        # prediction to the last bit whatever the catalog's factors were, so that a refit
        # from a refitted catalog takes the same path and lands where the first one did
        share = p.expert_share
        g = p.gemm0 if gemm is None else gemm
        m = p.moe0 if moe is None else moe
        c = replace(c, memo={}, peak_flops=p.flops_peak * g / ((1.0 - share) + share / m),
                    mem_bw=p.bw_nominal * (p.bw0 if bw is None else bw))
    inp, out = o.input_tokens, o.output_tokens
    slots = max(1, serving_slots(engine, p.plan, o.workload, c.decode_fill, o.attention_dp))
    per_replica = (o.concurrency or 1.0) / o.replicas
    if o.load == "server":
        rate = (o.rate or 0.0) / o.replicas
        cv = p.spread0 if spread is None else spread  # prompts of a dataset (module doc)
        lat = (queued(c, engine, rate, o.live, inp, out, spread=cv) if o.live
               else open_loop(c, engine, rate, inp, out, max_live=slots, spread=cv))
    elif o.load == "offline":
        lat = wave(c, engine, slots, inp, out)
    elif o.load == "burst":
        lat = wave(c, engine, per_replica, inp, out, slots=slots)
    elif o.load == "static":  # a static batch runs as given (the benchmark sized it)
        lat = wave(c, engine, per_replica, inp, out)
    else:
        lat = closed_loop(c, engine, per_replica, inp, out, slots=slots)
    if lat is None:
        return None
    if o.metric in ("ttft_ms", "tpot_ms"):
        if o.metric == "ttft_ms" and o.statistic == "mean" and lat.ttft_mean is not None:
            return lat.ttft_mean * 1e3
        return _latency_value(o, lat.ttft, lat.tpot)
    if o.metric == "e2e_s":
        return lat.cycle
    if o.metric == "prefill_tps":
        return inp / lat.ttft[50]
    if o.metric == "decode_tps":
        return 1.0 / lat.tpot[50]
    if lat.makespan > 0.0:  # a batch sent at once: done when its last wave is
        return _throughput_value(o, (lat.live + lat.queued) * o.replicas / lat.makespan)
    return _throughput_value(o, (lat.live + lat.queued) * o.replicas / lat.cycle)


def _latency_value(o: Observation, ttft: dict[int, float], tpot: dict[int, float]) -> float:
    percentile = {"median": 50, "mean": 50, "p90": 90, "p99": 99}[o.statistic]
    series = ttft if o.metric == "ttft_ms" else tpot
    return series[percentile] * 1e3


def _throughput_value(o: Observation, requests_per_s: float) -> float:
    if o.metric == "total_tps":
        return requests_per_s * (o.input_tokens + o.output_tokens)
    tokens = requests_per_s * o.output_tokens
    return tokens / o.gpus if o.metric == "output_tps_gpu" else tokens
