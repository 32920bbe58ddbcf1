"""Calibration: map published measurements to estimates and score the model.

Each row of a calibration CSV (columns as ``bench/data/calibration.csv``: id, gpu_family,
workload_kind, benchmark_or_task, model, precision, gpu_sku, gpus_per_node, nodes,
total_gpus, parallelism, metric, value, unit, conditions ...) is parsed generically —
model and GPU names are matched to catalog ids, parallelism (TP/PP/CP/instances), batch,
sequence and prompt/output lengths are read from the text — and turned into one
``estimate``. Rows that cannot be mapped say why (not in catalog, value is a range ...).

The score is the absolute percentage error |predicted - measured| / measured, summarised
as the median per category: inference throughput, latency, training throughput, MFU,
memory. Coverage = mapped rows / rows whose GPU and model are in the catalog.
"""

from __future__ import annotations

import copy
import csv
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solver.catalog.data import Catalog, content_key
from solver.catalog.load import load_catalog
from solver.catalog.perf_factors import Factor, factors
from solver.common.memo import Memo
from solver.common.paths import PACKAGE, REPOSITORY
from solver.physics.layout import Estimate, Kind, Layout, Workload
from solver.physics.performance import _compute_precision, best_layout, estimate

CATEGORIES = ("inference throughput", "latency", "training throughput", "MFU", "memory")
TARGETS = {"inference throughput": 0.20, "training throughput": 0.20, "memory": 0.10}
GIB = 2**30

# dataset mean prompt lengths for benchmark rows that state none (assumption, labelled)
# (prompt, output); outputs = tokens/s / samples/s of the MLPerf Offline rows
DATASET_TOKENS = {"llama2-70b": (294, 291), "mixtral": (300, 146), "gptj": (800, 64)}
MLPERF_SERVER_SLO_MS = (2000.0, 200.0)


@dataclass(frozen=True)
class RowResult:
    """One calibration row: what it measured, what the model predicts, the error."""

    id: str
    category: str
    model: str
    gpu: str
    layout: str
    measured: float
    predicted: float | None
    unit: str
    status: str  # ok | unmapped | out-of-catalog
    why: str = ""

    @property
    def error(self) -> float | None:
        """Signed relative error (predicted / measured - 1)."""
        if self.predicted is None or not self.measured:
            return None
        return self.predicted / self.measured - 1.0


def _norm(text: str) -> str:
    text = text.lower().replace("(2)", "-2").replace("_", "-")
    text = re.sub(r"\(moe\)|-instruct|-chat|\bmpt\b", " ", text)
    return re.sub(r"[\s/]+", "-", text.strip())


def match_model(catalog: Catalog, name: str) -> str | None:
    """Catalog model id for a published model name (None when not in the catalog)."""
    text = _norm(name)
    ids = catalog.model_ids()
    for model_id in sorted(ids, key=len, reverse=True):
        if model_id in text:
            return catalog.model(model_id).id
    found = re.search(r"llama-?(\d(?:\.\d)?)?-?(\d+)b", text)
    if found:
        version = found.group(1) or "2"
        for candidate in (f"llama-{version}-{found.group(2)}b",
                          f"llama-{version.split('.')[0]}-{found.group(2)}b"):
            if candidate in ids:
                return catalog.model(candidate).id
    gpt = re.search(r"gpt-?3-?(\d+)b", text)
    if gpt and f"gpt-3-{gpt.group(1)}b" in ids:
        return f"gpt-3-{gpt.group(1)}b"
    return None


_GPU_PATTERNS = (
    (r"gb200", "gb200"), (r"gb300", ""), (r"b200", "b200-sxm"), (r"h200", "h200-sxm"),
    (r"h100-pcie|h100 pcie", "h100-pcie"), (r"h100", "h100-sxm"), (r"a100", "a100-80g-sxm"),
    (r"l40s", "l40s"), (r"\bl40\b", "l40"), (r"\bl4\b", "l4"), (r"rtx-?4090", "rtx-4090"),
    (r"rtx-?5090", "rtx-5090"), (r"pro-?6000", "rtx-pro-6000"), (r"mi300x", "mi300x"),
)


def match_gpu(catalog: Catalog, family: str, sku: str) -> str | None:
    """Catalog GPU id for a published GPU description (None when not in the catalog)."""
    for text in (family.lower(), sku.lower()):
        for pattern, gpu_id in _GPU_PATTERNS:
            if re.search(pattern, text):
                return gpu_id if gpu_id in catalog.gpus else None
    return None


def _precision(text: str, gpu_has_fp8: bool, serving: bool) -> str:
    t = text.lower()
    for key, value in (("fp4", "fp4"), ("fp8", "fp8"), ("q4", "int4"), ("int4", "int4"),
                       ("nf4", "int4"), ("int8", "int8"), ("fp16", "bf16"), ("bf16", "bf16")):
        if key in t:
            return value
    return "fp8" if (gpu_has_fp8 and serving) else "bf16"


def _int(pattern: str, text: str) -> int | None:
    found = re.search(pattern, text, flags=re.IGNORECASE)
    return int(found.group(1)) if found else None


def _first_int(text: str) -> int | None:
    found = re.search(r"\d+", text or "")
    return int(found.group(0)) if found else None


def _category(kind: str, unit: str, metric: str) -> str:
    if kind == "memory":
        return "memory"
    if "mfu" in unit.lower():
        return "MFU"
    if kind in ("inference-latency", "inference-decode", "inference-prefill"):
        return "latency"
    if kind.startswith("inference"):
        return "inference throughput"
    return "training throughput"


def _train_kind(row: dict[str, str]) -> Kind:
    text = (row["workload_kind"] + " " + row["benchmark_or_task"]).lower()
    if "qlora" in text:
        return "qlora"
    if "lora" in text:
        return "lora"
    if "finetune" in text or "fine-tune" in text and "full" in text:
        return "full_finetune"
    return "pretrain"


def map_row(catalog: Catalog, row: dict[str, str]) -> RowResult:
    """Map one calibration row to an estimate and compare."""
    mapped = _map(catalog, row)
    if isinstance(mapped, RowResult):
        return mapped
    est, what, base = mapped
    lay = est.layout
    layout = f"{lay.precision} tp{lay.tp} pp{lay.pp} dp{lay.dp}"
    return RowResult(layout=layout, predicted=what, status="ok",
                     why=est.reason if not est.fits else "", **base)


def row_estimate(catalog: Catalog, row: dict[str, str]) -> Estimate | None:
    """The estimate a calibration row maps to (its layout and workload as the row states
    them), None when the row cannot be mapped."""
    mapped = _map(catalog, row)
    return None if isinstance(mapped, RowResult) else mapped[0]


def _map(catalog: Catalog, row: dict[str, str]) -> RowResult | tuple[Estimate, float, dict]:
    """A row's estimate, predicted value and the RowResult fields, or the RowResult that
    says why it cannot be mapped."""
    rid, kind, unit = row["id"], row["workload_kind"], row["unit"]
    category = _category(kind, unit, row["metric"])
    model_id = match_model(catalog, row["model"])
    gpu_id = match_gpu(catalog, row["gpu_family"], row["gpu_sku"])
    try:
        measured = float(row["value"])
    except ValueError:
        measured = float("nan")
    base: dict[str, Any] = {"id": rid, "category": category, "model": model_id or row["model"],
            "gpu": gpu_id or row["gpu_family"], "measured": measured, "unit": unit}
    if model_id is None or gpu_id is None:
        return RowResult(layout="", predicted=None, status="out-of-catalog",
                         why="model or GPU not in the catalog", **base)
    total = _first_int(row["total_gpus"])
    if measured != measured or total is None or "->" in row["total_gpus"] + row["value"]:
        return RowResult(layout="", predicted=None, status="unmapped",
                         why="value or GPU count is a range/bound", **base)
    text = " ".join(row[k] for k in ("parallelism", "conditions", "notes", "metric", "unit"))
    gpu = catalog.gpus[gpu_id]
    serving = kind.startswith("inference")
    precision = _precision(row["precision"], "fp8" in gpu.dense_tflops, serving)
    if precision == "fp4" and "fp4" not in gpu.dense_tflops:
        precision = "fp8" if "fp8" in gpu.dense_tflops else "bf16"
    gpn = _first_int(row["gpus_per_node"]) or min(total, 4 if "l40s" in gpu_id else 8)
    if gpu.form_factor == "superchip":  # NVL72: one NVLink domain of up to 72 GPUs
        gpn = 72
    gpn = min(gpn, total)
    fabric = "ib-ndr-400" if total > gpn else "none"
    tp = _int(r"\bTP(\d+)", text)
    pp = _int(r"\bPP(\d+)", text)
    if tp is not None and pp is None and _int(r"x ?(\d+) instances", text):
        pp = 1  # "TP2 x4 instances": each instance is TP-only, the rest are replicas
    if not serving:
        catalog = with_training_stack(catalog, training_stack_of(catalog, row))
    try:
        est, what = _estimate_row(catalog, row, kind, category, model_id, gpu_id, precision,
                                  total, gpn, fabric, tp, pp, text)
    except ValueError as exc:
        return RowResult(layout="", predicted=None, status="unmapped", why=str(exc), **base)
    return est, what, base


# Sources whose throughput column is per GPU although a table header is ambiguous:
# TensorRT-LLM's v0.5-0.6 performance.md labels its H100 table "per GPU" and the A100/L40S
# tables "out tok/s" with the same benchmark (gptSessionBenchmark); the rows' own notes flag
# the ambiguity, and total-throughput readings are 4x below the physics (batch 1280 at TP4
# would mean a 1.9 s TPOT). Read as per GPU.
PER_GPU_SOURCES = ("TensorRT-LLM docs/source/performance.md",)


def _per_gpu_source(row: dict[str, str]) -> bool:
    unit = row["unit"].lower()
    return ("unclear if per gpu" in unit
            and any(src in row.get("source", "") for src in PER_GPU_SOURCES))


def serving_engine(row: dict[str, str]) -> str:
    """The engine factor set a serving row was measured on (efficiency.yaml
    ``serving.engines``): TensorRT(-LLM), vLLM, SGLang; anything else (llama.cpp, kernel
    benchmarks, TensorRT-LLM's in-process gptSessionBenchmark) is the bare ``roofline``."""
    text = f"{row.get('software', '')} {row.get('source', '')}".lower()
    if "gptsessionbenchmark" in f"{text} {row.get('benchmark_or_task', '')}".lower():
        return "roofline"  # TensorRT-LLM's in-process static-batching benchmark: no server
    for key, engine in (("tensorrt", "trtllm"), ("vllm", "vllm"), ("sglang", "sglang")):
        if key in text:
            return engine
    return "roofline"


def _estimate_row(catalog: Catalog, row: dict[str, str], kind: str, category: str,
                  model_id: str, gpu_id: str, precision: str, total: int, gpn: int,
                  fabric: str, tp: int | None, pp: int | None,
                  text: str) -> tuple[Estimate, float]:
    """The estimate of one calibration row and the predicted value in the row's unit."""
    if kind.startswith("inference"):
        return _inference_row(catalog, row, kind, model_id, gpu_id, precision, total, gpn,
                              fabric, tp, pp, text)
    if kind == "memory":
        return _memory_row(catalog, row, model_id, gpu_id, total, gpn, fabric, text)
    return _training_row(catalog, row, model_id, gpu_id, precision, total, gpn, fabric, tp,
                         pp, text)


def _inference_row(catalog: Catalog, row: dict[str, str], kind: str, model_id: str,
                   gpu_id: str, precision: str, total: int, gpn: int, fabric: str,
                   tp: int | None, pp: int | None, text: str) -> tuple[Estimate, float]:
    """Serving rows: prompt/output lengths, batch and instances read from the row's text;
    latency, prefill rate or throughput (per GPU when the row says so)."""
    unit = row["unit"].lower()
    bench = row["benchmark_or_task"].lower()
    isl = _int(r"ISL/OSL=(\d+)", text) or _int(r"ISL (\d+)", text) or _int(
        r"input length (\d+)", text)
    osl = _int(r"ISL/OSL=\d+/(\d+)", text) or _int(r"OSL (\d+)", text)
    if kind == "inference-decode":
        isl, osl = 1, _int(r"tg (\d+)", text) or 128
    if kind == "inference-prefill":
        isl, osl = _int(r"pp (\d+)", text) or 512, 1
    samples = re.search(r"samples/s=([\d.]+)", text)
    if osl is None and samples and "token" in unit:
        osl = max(1, round(float(row["value"]) / float(samples.group(1))))
    dataset = next((v for k, v in DATASET_TOKENS.items() if k in bench), None)
    if dataset is not None:
        isl = isl or dataset[0]
        osl = osl or dataset[1]
    if kind == "inference-latency":
        osl = osl or 1
    if isl is None or osl is None:
        raise ValueError("prompt/output lengths not stated")
    batch = _int(r"batch (\d+)", text)
    if kind in ("inference-latency", "inference-decode", "inference-prefill"):
        batch = 1
    instances = _int(r"x ?(\d+) instances", text)
    if kind == "inference-server":
        ttft, tpot = MLPERF_SERVER_SLO_MS
        found = re.search(r"TTFT<=(\d+)ms TPOT<=(\d+)ms", text)
        if found:
            ttft, tpot = float(found.group(1)), float(found.group(2))
        workload = Workload("inference", input_tokens=isl, output_tokens=osl,
                            ttft_ms=ttft, tpot_ms=tpot, engine=serving_engine(row),
                            calibration_margin=False)
    else:
        concurrency = None
        if batch is not None:
            concurrency = batch
        workload = Workload("batch_inference", input_tokens=isl, output_tokens=osl,
                            concurrency=concurrency, engine=serving_engine(row),
                            calibration_margin=False)
    if tp and instances:
        total_layout = tp * (pp or 1) * instances
        if total_layout != total:
            total = total_layout
    est = best_layout(catalog, model_id, gpu_id, total, workload, precision=precision,
                      gpus_per_node=gpn, fabric=fabric, tp=tp, pp=pp)
    p = est.predicted
    if kind in ("inference-latency",):
        return est, p.ttft_ms or 0.0
    if kind == "inference-prefill":
        return est, isl / (p.ttft_ms or 1e9) * 1e3
    if "/gpu" in unit or _per_gpu_source(row):
        return est, p.tokens_per_s_per_gpu
    return est, p.tokens_per_s


def _memory_row(catalog: Catalog, row: dict[str, str], model_id: str, gpu_id: str,
                total: int, gpn: int, fabric: str, text: str) -> tuple[Estimate, float]:
    """Memory rows: the training peak per GPU, without the runtime reserve (a torch peak
    excludes the CUDA context), in GB or GiB as the row states."""
    unit = row["unit"].lower()
    train_kind = _train_kind(row)
    seq = _int(r"seq len (\d+)", text) or 2048
    mb = _int(r"batch size (\d+)", text) or 1
    workload = Workload(train_kind, seq_len=seq, micro_batch=mb,
                        **training_knobs_of(text))
    layout = Layout(model=model_id, gpu=gpu_id, precision="bf16", tp=1, pp=1, dp=total,
                    gpus_per_node=gpn, fabric=fabric)
    est = estimate(catalog, layout, workload)
    peak = est.memory.total_gb - est.memory.reserve_gb  # torch peak excludes context
    return est, peak * 1e9 / GIB if "gib" in unit else peak


def _training_row(catalog: Catalog, row: dict[str, str], model_id: str, gpu_id: str,
                  precision: str, total: int, gpn: int, fabric: str, tp: int | None,
                  pp: int | None, text: str) -> tuple[Estimate, float]:
    """Training rows: sequence, micro- and global batch and knobs read from the text;
    MFU, tokens/s (per GPU) or samples/s."""
    unit = row["unit"].lower()
    train_kind = _train_kind(row)
    seq = (_int(r"seq(?:uence)? len(?:gth)? (\d+)", text) or _int(r"\bseq (\d+)", text)
           or _int(r"packed (?:seq len |to )?(\d+)", text) or _int(r"(\d+)-token", text)
           or 4096)
    # NVIDIA's MLPerf NeMo configs: MINIBS is the samples per replica per step (global batch
    # = MINIBS x DP, as the rows' logged global_batch_size shows); the micro-batch is MBS,
    # 1 in their configs/config_common.sh
    mbs = _int(r"\bMBS ?=?(\d+)", text) or 1
    gbs = _int(r"GBS ?(\d+)", text) or _int(r"global_batch_size[ =](\d+)", text)
    if gbs is None:
        gbs_tokens = None
    elif "gbs" in text.lower() and "samples" not in text.lower() and gbs > 100000:
        gbs_tokens = gbs
    else:
        gbs_tokens = gbs * seq
    workload = Workload(train_kind, seq_len=seq, micro_batch=mbs,
                        global_batch_tokens=gbs_tokens, **training_knobs_of(text))
    train_precision = precision if precision in ("bf16", "fp8") else "bf16"
    est = best_layout(catalog, model_id, gpu_id, total, workload, precision=train_precision,
                      gpus_per_node=gpn, fabric=fabric, tp=tp, pp=pp)
    p = est.predicted
    if "mfu" in unit:
        return est, (p.mfu or 0.0) * 100.0
    if "/gpu" in unit:
        return est, p.tokens_per_s_per_gpu
    if "samples/s" in unit:
        return est, p.tokens_per_s / seq
    return est, p.tokens_per_s


# A training row's software stack (efficiency.yaml ``training.stacks``), read from its
# own software / source text: the loss and attention implementation set its memory peak.
STACK_WORDS = (("torchtune", "torchtune"), ("peft", "hf_peft"), ("transformers", "hf_peft"),
               ("trl", "hf_peft"), ("nemo", "megatron"), ("megatron", "megatron"),
               ("mlperf", "megatron"), ("mlcommons", "megatron"))

STACK_CATALOGS: Memo[Catalog] = Memo(64)
"""Catalog variants with every training kind on one stack, keyed by content and stack."""


def training_stack_of(catalog: Catalog, row: dict[str, str]) -> str | None:
    """The training stack a row ran on (a key of ``training.stacks``), None = the
    catalog's default for its kind."""
    text = " ".join(row.get(k, "") for k in ("software", "source", "notes")).lower()
    stacks = factors(catalog).training.stacks
    for word, stack in STACK_WORDS:
        if re.search(rf"\b{word}\b", text) and stack in stacks:
            return stack
    return None


def with_training_stack(catalog: Catalog, stack: str | None) -> Catalog:
    """``catalog`` with every training kind on ``stack`` (cached per catalog content)."""
    if stack is None:
        return catalog
    train = factors(catalog).training
    if train.stack_pretrain == stack and train.stack_finetune == stack:
        return catalog
    return STACK_CATALOGS.get((content_key(catalog), stack),
                              lambda: _on_stack(catalog, stack))


def _on_stack(catalog: Catalog, stack: str) -> Catalog:
    eff = copy.deepcopy(catalog.efficiency)
    eff["training"]["stack_pretrain"] = eff["training"]["stack_finetune"] = stack
    return catalog.model_copy(update={"efficiency": eff})


def training_knobs_of(text: str) -> dict:
    """The training knobs a row states (Workload fields): context parallelism ``CPn``,
    virtual pipeline stages ``VPn`` / ``interleaved(VP)=n``, sequence parallelism ``SP``,
    FSDP (ZeRO-3) and the recompute mode ("full"/"selective" recompute, "activation
    checkpointing True/False"). What a row does not state stays automatic."""
    knobs: dict = {"context_parallel": _int(r"\bCP(\d+)", text) or 1}
    vp = _int(r"\bVP\)?=?(\d+)", text)
    if vp:
        knobs["interleave"] = vp
    if re.search(r"\bSP\b", text):
        knobs["sequence_parallel"] = True
    if re.search(r"FSDP(?: FULL_SHARD|=1)", text):
        knobs["zero"] = 3
    lowered = text.lower()
    if "selective" in lowered and "recompute" in lowered:
        knobs["recompute"] = "selective"
    elif re.search(r"full (activation )?recompute|(activation|gradient) checkpointing "
                   r"(true|on|enabled)", lowered):
        knobs["recompute"] = "full"
    elif re.search(r"(activation|gradient) checkpointing (false|off|disabled)|no (activation|"
                   r"gradient) checkpointing", lowered):
        knobs["recompute"] = "selective"
    return knobs


def run(catalog: Catalog, csv_path: Path) -> list[RowResult]:
    """Map every row of a calibration CSV."""
    with csv_path.open(encoding="utf-8", newline="") as handle:
        return [map_row(catalog, row) for row in csv.DictReader(handle)]


@dataclass(frozen=True)
class Summary:
    """Median absolute percentage error per category and coverage."""

    medians: dict[str, float]
    counts: dict[str, int]
    coverage: float
    in_catalog: int
    mapped: int


def summarise(results: list[RowResult]) -> Summary:
    """Median |error| per category over mapped rows, and coverage."""
    medians, counts = {}, {}
    for category in CATEGORIES:
        errors = [abs(r.error) for r in results
                  if r.category == category and r.status == "ok" and r.error is not None]
        counts[category] = len(errors)
        if errors:
            medians[category] = statistics.median(errors)
    in_catalog = sum(1 for r in results if r.status != "out-of-catalog")
    mapped = sum(1 for r in results if r.status == "ok")
    return Summary(medians, counts, mapped / in_catalog if in_catalog else 0.0, in_catalog,
                   mapped)


def report_markdown(results: list[RowResult], summary: Summary, catalog_version: str) -> str:
    """The calibration report (docs/calibration.md)."""
    lines = ["# Calibration against published measurements", "",
             "Generated by `procure calibrate` (or `python bench/calibrate.py`) from "
             f"`bench/data/calibration.csv`, catalog version `{catalog_version}`. "
             "Error = predicted / measured - 1; medians of |error|.", "",
             "| category | rows | median abs error | target |", "|---|---|---|---|"]
    for category in CATEGORIES:
        median = summary.medians.get(category)
        target = TARGETS.get(category)
        lines.append(f"| {category} | {summary.counts[category]} | "
                     f"{'-' if median is None else f'{median:.1%}'} | "
                     f"{'-' if target is None else f'<= {target:.0%}'} |")
    lines += ["", f"Coverage: {summary.mapped} of {summary.in_catalog} rows whose GPU and "
              f"model are in the catalog ({summary.coverage:.0%}).", ""]
    lines += _method_lines(catalog_version)
    lines += ["## Rows", "",
              "| row | category | model | GPU | layout | measured | predicted | error | note |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        pred = "" if r.predicted is None else f"{r.predicted:.4g}"
        err = "" if r.error is None else f"{r.error:+.0%}"
        note = r.why if r.status == "ok" else f"{r.status}: {r.why}"
        lines.append(f"| {r.id} | {r.category} | {r.model} | {r.gpu} | {r.layout} | "
                     f"{r.measured:.4g} {r.unit} | {pred} | {err} | {note} |")
    return "\n".join(lines) + "\n"


METHOD = """## What is modelled, what is fitted

Physics (no free parameter per row): serving steps are a sum of per-kernel rooflines
(linear layers: compute vs weight reads; prefill attention: compute; decode attention: KV
reads) plus TP collectives and fixed per-step/per-layer overheads, with prefill chunks
mixed into every decode step under the token budget; MoE FLOPs on active parameters with
the expert share at an expert-GEMM efficiency. Training adds the interleaved-1F1B bubble
(pp-1)/(m v), sequence parallelism and TP comm overlap on NVLink, block recompute of just
the layers needed to fit, MoE all-to-all over the expert-parallel group (expert weights
sharded over EP, not replicated over DP), and FSDP gathers hidden behind forward and
backward.

Training also counts the attention core's recompute pass (selective recompute / flash
attention backward), context-parallel K/V ring traffic, and the wait for the slowest node of
a multi-node job (straggler term).

Training memory (memory rows, and the block recompute a throughput row needs to fit) adds
the training stack's peaks (efficiency.yaml `training.stacks`, docs/training.md): the
LM-head / cross-entropy tensor (tokens x vocab x bytes per logit), QLoRA's fp32 upcast of
non-quantised weights and its dequantisation buffers, eager-attention scores, activation
offload; no memory factor is fitted.

Mapping rules (calibration.py, from each row's own text): "TPn x k instances" is TP-only
(pp 1) replicas; training rows pass their stated knobs to the estimate (context
parallelism CPn, virtual stages VPn, SP, FSDP, the recompute mode) and run on the stack
their software/source names (torchtune; NeMo, Megatron and MLPerf as megatron; PEFT,
transformers, TRL as hf_peft; else the catalog's default); TensorRT-LLM's v0.5-0.6
performance.md throughput columns are per GPU (its H100 table says so; the A100/L40S
header is ambiguous and the rows flag it).

Fitted factors (`source: cal` in catalog/efficiency.yaml), one value per GPU family and
precision, never per row:
"""


def _method_lines(catalog_version: str) -> list[str]:
    """The modelling summary and the table of fitted (``cal``) factors."""
    lines = [METHOD]
    try:
        catalog = load_catalog()
    except Exception:  # noqa: BLE001 - the report must not fail on a user catalog
        return lines
    if catalog.version != catalog_version:
        return [*lines, "(factors of a user catalog; see its efficiency.yaml)", ""]
    eff = factors(catalog)
    fitted: list[tuple[str, Factor]] = []

    def walk(prefix: str, node: object) -> None:
        if isinstance(node, Factor):
            if node.source == "cal":
                fitted.append((prefix, node))
        elif isinstance(node, dict):
            for key, value in node.items():
                walk(f"{prefix}.{key}", value)
        elif hasattr(node, "model_fields"):
            for key in type(node).model_fields:
                walk(f"{prefix}.{key}" if prefix else key, getattr(node, key))

    walk("", eff)
    lines += ["| factor | value | fitted on |", "|---|---|---|"]
    lines += [f"| {name} | {f.value:g} | {f.note} |" for name, f in fitted]
    return [*lines, ""]


def default_csv() -> Path:
    """The calibration set: the repository's ``bench/data`` or, installed, the package copy."""
    repo = REPOSITORY / "bench" / "data" / "calibration.csv"
    if repo.is_file():
        return repo
    return PACKAGE / "procure_bench_data" / "calibration.csv"


# --------------------------------------------------------------------------- training fit
TRAIN_FIT_ROUNDS = 3  # multiplicative refits; throughput is close to linear in efficiency


@dataclass(frozen=True)
class TrainingFit:
    """Training throughput: the fitted ``train_efficiency`` per (GPU family, precision),
    the in-sample fit-check errors and the leave-one-source-out errors, per row."""

    values: dict[tuple[str, str], float]
    fit_check: dict[str, float]  # row id -> signed error, every row in the fit
    held_out: dict[str, float]  # row id -> signed error, its source left out of the fit
    sources: dict[str, str]  # row id -> source (the csv's ``source`` column)


def _training_rows(catalog: Catalog, rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """Rows that map to a training-throughput estimate on this catalog."""
    return [row for row in rows if _category(row["workload_kind"], row["unit"], row["metric"])
            == "training throughput" and map_row(catalog, row).status == "ok"]


def _fit_group(catalog: Catalog, row: dict[str, str]) -> tuple[str, str]:
    """The fitted factor a training row informs: (GPU family, compute precision)."""
    gpu = catalog.gpus[match_gpu(catalog, row["gpu_family"], row["gpu_sku"]) or ""]
    precision = _precision(row["precision"], "fp8" in gpu.dense_tflops, False)
    precision = precision if precision in ("bf16", "fp8") else "bf16"
    return gpu.family, _compute_precision(factors(catalog), gpu, precision, _train_kind(row))


def _with_train_efficiency(catalog: Catalog, values: dict[tuple[str, str], float]) -> Catalog:
    """The catalog with ``train_efficiency`` replaced for the given (family, precision)."""
    import copy

    eff = copy.deepcopy(catalog.efficiency)
    for (family, precision), value in values.items():
        factor = eff["families"][family]["train_efficiency"].setdefault(
            precision, {"source": "cal", "note": "fitted"})
        factor["value"] = round(value, 4)
    return catalog.model_copy(update={"efficiency": eff})


def fit_train_efficiency(catalog: Catalog, rows: list[dict[str, str]],
                         prior: dict[tuple[str, str], float] | None = None
                         ) -> dict[tuple[str, str], float]:
    """Fit ``train_efficiency`` per (family, precision) on ``rows``: repeated multiplicative
    steps by the median measured / predicted ratio of each group's rows (median: one odd
    row does not pull the factor). Groups start from ``prior`` (default: the catalog)."""
    eff = factors(catalog)
    groups: dict[tuple[str, str], list[dict[str, str]]] = {}
    for row in rows:
        groups.setdefault(_fit_group(catalog, row), []).append(row)
    values = {key: (prior or {}).get(key, eff.family(key[0]).train(key[1])) for key in groups}
    for _ in range(TRAIN_FIT_ROUNDS):
        trial = _with_train_efficiency(catalog, values)
        for key, members in groups.items():
            ratios = []
            for row in members:
                result = map_row(trial, row)
                if result.predicted:
                    ratios.append(result.measured / result.predicted)
            if ratios:
                values[key] = min(0.95, values[key] * statistics.median(ratios))
    return values


def _cross_family_prior(values: dict[tuple[str, str], float], key: tuple[str, str],
                        fallback: float) -> float:
    """A held-out family's starting value: the median of the fitted families at the same
    precision (never the value fitted on the held-out rows themselves)."""
    same = [v for (family, precision), v in values.items() if precision == key[1]]
    return statistics.median(same) if same else fallback


def training_fit(catalog: Catalog, csv_path: Path) -> TrainingFit:
    """Fit the training efficiencies on every training row (fit-check) and once per source
    with that source left out (validation: each row predicted by factors fitted without
    its own source; a GPU family seen only in that source starts from the other families'
    median at its precision)."""
    with csv_path.open(encoding="utf-8", newline="") as handle:
        rows = _training_rows(catalog, list(csv.DictReader(handle)))
    sources = {row["id"]: row["source"] for row in rows}
    values = fit_train_efficiency(catalog, rows)
    fitted = _with_train_efficiency(catalog, values)
    fit_check = {row["id"]: map_row(fitted, row).error for row in rows}
    held_out: dict[str, float | None] = {}
    eff = factors(catalog)
    for source in sorted(set(sources.values())):
        train = [row for row in rows if row["source"] != source]
        test = [row for row in rows if row["source"] == source]
        train_values = fit_train_efficiency(catalog, train)
        values_out = dict(train_values)
        for row in test:
            key = _fit_group(catalog, row)
            if key not in values_out:
                values_out[key] = _cross_family_prior(train_values, key,
                                                      eff.family(key[0]).train(key[1]))
        trial = _with_train_efficiency(catalog, values_out)
        for row in test:
            held_out[row["id"]] = map_row(trial, row).error
    return TrainingFit(values, {k: v for k, v in fit_check.items() if v is not None},
                       {k: v for k, v in held_out.items() if v is not None}, sources)


def training_fit_markdown(fit: TrainingFit, before: dict[str, float] | None = None) -> str:
    """The report section: fitted values, fit-check vs leave-one-source-out errors."""
    def med(errors: list[float]) -> str:
        return f"{statistics.median([abs(e) for e in errors]):.1%}" if errors else "-"

    lines = ["## Training throughput: fit-check and leave-one-source-out", "",
             "The training efficiencies (`families.*.train_efficiency`, `source: cal`) are "
             "fitted on the training-throughput rows of calibration.csv only: the median "
             "measured / predicted ratio of each GPU family and precision, applied three "
             "times. *Fit-check* predicts every row with factors fitted on all rows "
             "(in-sample: how well one factor per family explains the rows). *Leave one "
             "source out* refits without each source (the csv's `source` column) and predicts "
             "that source's rows (out-of-sample; a family seen only in the held-out source "
             "starts from the other families' median at its precision). The step-time "
             "mechanism (recomputed FLOPs, attention passes, SP/TP/CP/PP/DP collectives, "
             "bubble, stragglers) has no per-row term.", "",
             "| fitted factor | value |", "|---|---|"]
    lines += [f"| families.{family}.train_efficiency.{precision} | {value:.3f} |"
              for (family, precision), value in sorted(fit.values.items())]
    lines += ["", "| source | rows | fit-check median abs error | held-out median abs "
              "error |", "|---|---|---|---|"]
    by_source: dict[str, list[str]] = {}
    for rid, source in fit.sources.items():
        by_source.setdefault(source, []).append(rid)
    for source, ids in sorted(by_source.items()):
        lines.append(f"| {source[:70]} | {len(ids)} | "
                     f"{med([fit.fit_check[i] for i in ids if i in fit.fit_check])} | "
                     f"{med([fit.held_out[i] for i in ids if i in fit.held_out])} |")
    lines.append(f"| **all** | {len(fit.sources)} | {med(list(fit.fit_check.values()))} | "
                 f"{med(list(fit.held_out.values()))} |")
    lines += ["", "| row | fit-check error | held-out error |"
              + (" before this fit |" if before else ""),
              "|---|---|---|" + ("---|" if before else "")]
    for rid in fit.sources:
        extra = f" {before[rid]:+.0%} |" if before and rid in before else (
            " |" if before else "")
        check = fit.fit_check.get(rid)
        held = fit.held_out.get(rid)
        lines.append(f"| {rid} | {'' if check is None else f'{check:+.0%}'} | "
                     f"{'' if held is None else f'{held:+.0%}'} |{extra}")
    return "\n".join(lines) + "\n"
