"""The disaggregated-serving check (issue 27): measured prefill and decode pools of
disaggregated deployments with wide expert parallelism, predicted with the physics a
disaggregated unit is planned with (:mod:`solver.physics.disagg`), and compared.

The rows (``serving_disaggregated.csv`` beside the other measurement files, its ``.md`` says
where each comes from) measure one pool at a time, the other side given unlimited resources:

* prefill: input tokens/s per GPU of a pool of ``attention_dp`` ranks with EP over all of
  them = prompt tokens per second of :func:`solver.physics.serving.prefill_rate_s` (a step of
  the engine's token budget per rank, or the stated tokens per step) over the pool's GPUs;
* decode: output tokens/s per GPU of a pool running ``batch_per_rank`` requests per rank (or
  as many as its KV memory holds) = the batch over
  :func:`solver.physics.serving.decode_step_s` (no prefill beside it, no attention-DP rank
  wait: :data:`solver.physics.serving.attention_dp_sync` is an aggregated engine's) over the
  pool's GPUs.

Nothing is fitted to these rows, and they are outside both the serving fit and the fit of
``serving.attention_dp_step_factor`` (:mod:`solver.physics.expert_check`): every error here
is held out, source and all. Where a run kept a 16-bit KV cache beside FP8 or FP4 weights
(the catalog assumes an FP8 cache there), the row is predicted with 2 bytes per KV element.
No calibration margin is applied (the margin is a plan's, not the model's).
"""

from __future__ import annotations

import copy
import csv
from dataclasses import dataclass
from pathlib import Path

from solver.catalog.data import Catalog
from solver.catalog.perf_factors import Factor
from solver.common.wording import layout_words
from solver.physics import serving_data
from solver.physics.expert_check import Compared, summary
from solver.physics.layout import Layout, Workload
from solver.physics.memory import memory_plan
from solver.physics.serving import (
    constants,
    decode_step_s,
    engine_factors,
    features,
    prefill_rate_s,
    slots,
)

FILE = "serving_disaggregated.csv"
KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0}
"""Bytes per KV element of a ``kv_cache`` column value."""


@dataclass(frozen=True, kw_only=True)
class PoolRow(Compared):
    """One measured pool and the model's prediction of it (tokens/s per GPU)."""

    id: str
    source: str
    model: str
    gpu: str
    phase: str
    layout: str
    gpus: int
    input_tokens: int
    batch_per_rank: float | None  # decode: requests per rank predicted at


def with_kv_bytes(catalog: Catalog, precision: str, size: float) -> Catalog:
    """``catalog`` with ``size`` bytes per KV element when serving at ``precision``."""
    current = catalog.efficiency["precisions"]["kv_bytes"][precision]["value"]
    if current == size:
        return catalog
    eff = copy.deepcopy(catalog.efficiency)
    eff["precisions"]["kv_bytes"][precision]["value"] = size
    return catalog.model_copy(update={"efficiency": eff})


def _int(text: str) -> int | None:
    return int(float(text)) if text.strip() else None


def _predict(catalog: Catalog, row: dict[str, str]) -> tuple[float | None, float | None, str]:
    """(tokens/s per GPU, decode requests per rank, why not predicted)."""
    precision = row["precision"].strip()
    kv = row["kv_cache"].strip()
    cat = with_kv_bytes(catalog, precision, KV_BYTES[kv]) if kv else catalog
    ranks = int(row["attention_dp"])
    layout = Layout(model=catalog.model(row["model"]).id, gpu=row["gpu"], precision=precision,
                    tp=int(row["tp"]), ep=int(row["ep"]), attention_dp=ranks,
                    gpus_per_node=int(row["gpus_per_node"]), fabric=row["fabric"],
                    server=row["server"] or None)
    inp, out = int(row["isl"]), int(row["osl"])
    engine = engine_factors(cat, row["engine"], layout.gpu)
    per_step = _int(row["tokens_per_step_rank"])
    if per_step:
        engine = engine.model_copy(update={"token_budget": Factor(
            value=per_step, source="measurement", note="tokens per step the run stated")})
    prefill = row["phase"] == "prefill"
    w = Workload(kind="inference", input_tokens=inp, output_tokens=out, engine=row["engine"],
                 calibration_margin=False, concurrency=ranks if prefill else None)
    plan = memory_plan(cat, layout, w)
    if not plan.fits or plan.max_concurrency < 1:
        return None, None, f"does not fit the GPUs' memory: {plan.reason}"
    c = constants(cat, layout, plan, engine)
    gpus = layout.tp * ranks * layout.pp
    if prefill:
        return 1.0 / prefill_rate_s(c, inp, out) / gpus, None, ""
    stated = _int(row["batch_per_rank"])
    batch = (stated * ranks if stated
             else slots(engine, plan, w, c.decode_fill, ranks))
    step = decode_step_s(engine, features(c, batch, inp, out))
    return batch / step / gpus, batch / ranks, ""


def rows(catalog: Catalog, folder: Path | None = None) -> list[PoolRow]:
    """Every row of the file with its prediction (None and the reason where the model cannot
    predict it)."""
    path = (folder or serving_data.data_dir()) / FILE
    with path.open(newline="", encoding="utf-8") as handle:
        found = list(csv.DictReader(handle))
    out = []
    for row in found:
        predicted, batch, why = _predict(catalog, row)
        ranks = int(row["attention_dp"])
        out.append(PoolRow(
            id=row["id"], source=row["source_url"], model=row["model"], gpu=row["gpu"],
            phase=row["phase"],
            layout=layout_words(int(row["tp"]), 1, int(row["ep"]), ranks),
            gpus=int(row["gpus"]), input_tokens=int(row["isl"]), batch_per_rank=batch,
            measured=float(row["value"]), predicted=predicted, why=why))
    return out


def markdown(catalog: Catalog, folder: Path | None = None) -> str:
    """The section of docs/calibration.md: every row, then the summary by phase."""
    found = rows(catalog, folder)
    lines = ["## Disaggregated pools with wide expert parallelism (held out, issue 27)", "",
             "Prefill and decode pools of disaggregated DeepSeek-V3/R1 deployments "
             "(SGLang team posts, 2025-05 to 2025-09; bench/data/serving_disaggregated.md), "
             "each pool measured alone, predicted with the physics a disaggregated unit is "
             "planned with. Nothing is fitted to them, and neither their source nor these "
             "GPU counts (EP 32 to 72) are in any fit: every error is held out. Error = "
             "predicted / measured - 1. Details: docs/expert-parallel.md.", "",
             "| row | GPU | pool | layout | GPUs | prompt tokens | decode requests per GPU "
             "| measured tokens/s per GPU | predicted | error |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in found:
        batch = f"{r.batch_per_rank:,.0f}" if r.batch_per_rank is not None else "-"
        pred = f"{r.predicted:,.0f}" if r.predicted is not None else "-"
        err = f"{r.error_pct:+.1f}%" if r.error_pct is not None else r.why.split(":")[0]
        lines.append(f"| {r.id} | {r.gpu} | {r.phase} | {r.layout} | {r.gpus} | "
                     f"{r.input_tokens:,} | {batch} | {r.measured:,.0f} | {pred} | {err} |")
    lines += ["", "| pool | rows | predicted | median abs error | mean signed error | "
              "geomean predicted / measured |", "|---|---|---|---|---|---|"]
    for phase in ("prefill", "decode"):
        s = summary([r for r in found if r.phase == phase])
        if s["predicted"]:
            lines.append(f"| {phase} | {s['rows']} | {s['predicted']} | "
                         f"{s['median_abs_error_pct']:.1f}% | "
                         f"{s['mean_signed_error_pct']:+.1f}% | {s['geomean_ratio']:.2f} |")
    return "\n".join(lines) + "\n"
