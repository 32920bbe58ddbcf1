"""What a buyer must be told about the hardware and the model quality a plan chose.

Three kinds of plan warnings, all read from catalog data:

* **consumer cards** (``Gpu.datacenter_use`` false, e.g. GeForce): the driver licence's
  datacenter clause, ECC, missing GPU peer-to-peer and the consumer warranty — whenever such
  a card is in the plan (``constraints.datacenter_grade_only: true`` excludes them);
* **stale prices**: a chosen GPU or server price, or a rented offer's $/GPU-hour, read more
  than ``costs.price_stale_after_days`` before the solve date;
* **rented jobs' data**: a training job on rented instances buys no storage; where its
  checkpoints and dataset live, and how large they are;
* **quantisation**: every workload not run at bf16 says so, and which policy allowed it.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from solver.catalog.context import rope_scaling_note
from solver.catalog.data import Catalog
from solver.catalog.native_precision import BITS, native_precision
from solver.optimize.costs import CostParams
from solver.optimize.plan_model import Plan
from solver.optimize.storage import training_storage
from solver.physics.layout import TRAINING_KINDS
from solver.rfq.schema import Rfq, TrainingWorkload

_DATE = re.compile(r"^(\d{4})(?:-(\d{1,2}))?(?:-(\d{1,2}))?$")


def parse_as_of(text: str) -> dt.date | None:
    """``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD`` as the earliest date it can mean (a year alone
    is 1 January); anything else (e.g. "user quote") is None."""
    match = _DATE.match(text.strip())
    if not match:
        return None
    year, month, day = (int(g) if g else 1 for g in match.groups())
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


def stale_price_warnings(catalog: Catalog, plan: Plan,
                         today: dt.date | None = None) -> list[str]:
    """One warning per chosen GPU or server whose price is older than the threshold."""
    today = today or dt.date.today()
    limit = catalog.costs.price_stale_after_days.value
    out: list[str] = []
    seen: set[str] = set()
    for node in plan.cluster.nodes:
        gpu = catalog.gpus.get(node.gpu)
        server = catalog.servers.get(node.server)
        items = []
        if gpu is not None:
            items.append(("GPU", gpu.id, gpu.price_usd, gpu.price_as_of, gpu.price_type))
        if server is not None:
            items.append(("server", server.id, server.price_usd,
                          server.price_as_of or server.as_of, server.price_type))
        for what, entry_id, price, as_of, kind in items:
            if entry_id in seen:
                continue
            seen.add(entry_id)
            when = parse_as_of(as_of)
            if when is None:
                continue
            age = (today - when).days
            if age > limit:
                out.append(f"stale price: {what} {entry_id} ${price:,.0f} ({kind}) is dated "
                           f"{as_of}, {age} days before {today.isoformat()} (threshold "
                           f"{limit:g} days): get a current quote (prices.csv overlay)")
    return out + _stale_rental_warnings(plan, today, limit)


def _stale_rental_warnings(plan: Plan, today: dt.date, limit: float) -> list[str]:
    """One warning per rented offer of the plan whose $/GPU-hour is older than the
    threshold purchase prices have (issue 28: a Dec 2024 rate in a Dec 2026 plan)."""
    out: list[str] = []
    seen: set[str] = set()
    for entry in plan.workloads:
        for rent in entry.rental or []:
            when = parse_as_of(rent.as_of)
            if rent.offer in seen or when is None:
                continue
            seen.add(rent.offer)
            age = (today - when).days
            if age > limit:
                out.append(f"stale price: rental offer {rent.offer} "
                           f"${rent.usd_per_gpu_hour:,.2f}/GPU-hour "
                           f"({rent.price_type.replace('_', ' ')}) is dated {rent.as_of}, "
                           f"{age} days before {today.isoformat()} (threshold {limit:g} days): "
                           "get a current rate (a --catalog overlay's rental.csv)")
    return out


def consumer_card_warnings(catalog: Catalog, plan: Plan) -> list[str]:
    """Why a consumer card in the plan is a risk: licence, ECC, P2P, warranty."""
    out: list[str] = []
    used: dict[str, list[str]] = {}
    for entry in plan.workloads:
        for gpu_id in [lay.gpu for lay in entry.layouts] if entry.layouts else [entry.gpu]:
            used.setdefault(gpu_id, [])
            if entry.name not in used[gpu_id]:
                used[gpu_id].append(entry.name)
    for node in plan.cluster.nodes:
        used.setdefault(node.gpu, [])
    links = catalog.efficiency.get("links") or {}
    for gpu_id, names in used.items():
        gpu = catalog.gpus.get(gpu_id)
        if gpu is None or gpu.datacenter_use:
            continue
        licence = gpu.datacenter_use_source.split(" (http")[0]
        risks = [f"licence: not licensed for datacenter deployment ({licence})" if licence
                 else "licence: not licensed for datacenter deployment"]
        risks.append("ECC: none on device memory (bit flips go undetected)" if not gpu.ecc
                     else "ECC: a driver toggle, off by default")
        if not gpu.p2p:
            factor = (links.get("host_staged_bw_factor") or {}).get("value")
            extra = (links.get("host_staged_extra_latency_us") or {}).get("value")
            detail = (f" ({factor:.0%} of the P2P bandwidth, +{extra:g} µs per hop; already in "
                      "the predictions)" if factor is not None and extra is not None else "")
            risks.append("P2P: no GPU peer-to-peer on stock drivers, tensor/pipeline traffic "
                         f"is staged through host memory{detail}")
        risks.append("warranty: the board partner's consumer warranty - confirm it covers "
                     "24x7 server use before buying")
        who = f" for {', '.join(names)}" if names else ""
        out.append(f"consumer card {gpu.id} chosen{who}: " + "; ".join(risks)
                   + ". Set constraints.datacenter_grade_only: true to exclude consumer cards")
    return out


def precision_notes(rfq: Rfq, plan: Plan, catalog: Catalog | None = None) -> list[str]:
    """Every quantisation choice of the plan, with the policy that allowed it. With the
    ``catalog``, a model whose checkpoint ships quantised is described as it is: served in
    its own format (natively or weight-only, no quantisation risk the publisher did not
    take), or up-cast by the RFQ's precision (the memory that costs)."""
    specs = {spec.name: spec for spec in rfq.workloads}
    out: list[str] = []
    for entry in plan.workloads:
        spec = specs.get(entry.name)
        if spec is None:
            continue
        if catalog is not None and spec.kind not in TRAINING_KINDS \
                and catalog.model(spec.model).default_precision not in (None, "bf16"):
            out += _checkpoint_notes(catalog, spec, entry)
            continue
        precisions = sorted({lay.precision for lay in entry.layouts} if entry.layouts
                            else {entry.precision})
        if spec.precisions is not None:
            policy = f"allowed by the RFQ's precisions {list(spec.precisions)}"
        elif spec.precision is not None:
            policy = "pinned by the RFQ's precision"
        elif spec.kind in TRAINING_KINDS:
            policy = f"the {spec.kind} default ({', '.join(spec.allowed_precisions())})"
        else:
            policy = "the default serving policy (bf16, fp8)"
        for precision in precisions:
            if precision == "bf16":
                continue
            out.append(f"{entry.name}: {_what(spec.kind, precision)} - {policy}")
    return out


def _checkpoint_notes(catalog: Catalog, spec: Any, entry: Any) -> list[str]:
    """The precision notes of a serving workload whose model ships a quantised checkpoint:
    one per (GPU, precision) used."""
    model = catalog.model(spec.model)
    used = sorted({(lay.gpu, lay.precision) for lay in entry.layouts} if entry.layouts
                  else {(entry.gpu, entry.precision)})
    out: list[str] = []
    for gpu_id, precision in used:
        native = native_precision(model, catalog.gpus[gpu_id])
        if native is None:
            continue
        pinned = spec.precision is not None or spec.precisions is not None
        if precision == native.served:
            why = "pinned by the RFQ's precision" if pinned else \
                "the default for a quantised checkpoint (set precision to change it)"
            out.append(f"{entry.name}: served at {precision} on {gpu_id}: {native.how}; no "
                       f"quantisation beyond the {spec.model} checkpoint as published - {why}")
        elif BITS[precision] > BITS[native.checkpoint]:
            factor = BITS[precision] / BITS[native.checkpoint]
            out.append(f"{entry.name}: served at {precision} on {gpu_id}: the RFQ's precision "
                       f"up-casts the checkpoint's {native.checkpoint.upper()} weights "
                       f"({factor:g}x the weight memory, no quality gained); drop precision "
                       f"to serve the checkpoint's own format")
        else:
            policy = (f"allowed by the RFQ's precisions {list(spec.precisions)}"
                      if spec.precisions is not None else "pinned by the RFQ's precision")
            out.append(f"{entry.name}: served at {precision} on {gpu_id}: the checkpoint's "
                       f"{native.checkpoint.upper()} weights quantised further - "
                       f"{_what(spec.kind, precision)} - {policy}")
    return out


def _what(kind: str, precision: str) -> str:
    if kind == "qlora":
        return ("QLoRA: frozen base weights quantised to 4-bit (NF4), adapters trained in "
                "bf16")
    if kind in TRAINING_KINDS:
        return (f"trained with {precision.upper()} matrix multiplies (mixed precision; "
                "master weights and optimizer state stay in higher precision)")
    quality = {"fp8": "8-bit float weights, usually within noise of bf16",
               "int8": "8-bit integer weights",
               "int4": "4-bit integer weights: a measurable quality loss on some tasks",
               "fp4": "4-bit float weights: a measurable quality loss on some tasks"}
    return (f"served at {precision}: {quality.get(precision, precision)}; validate the "
            "quantised model on your own evaluations")


def calibration_warnings(plan: Plan) -> list[str]:
    """Serving workloads planned on a GPU family x engine the serving model has too few
    published measurements of: the margin they carry, and that a benchmark should confirm
    it (one warning per workload, naming every uncalibrated layout)."""
    out = []
    for w in plan.workloads:
        cals = [w.calibration] + [u.calibration for u in w.layouts or []]
        seen: dict[tuple[str, str], float] = {}
        for cal in cals:
            if cal is not None and not cal.calibrated:
                seen[(cal.family, cal.engine)] = cal.margin_applied_pct
        for (family, engine), margin in seen.items():
            out.append(f"{w.name}: the serving model has no calibration for {family} GPUs on "
                       f"{engine} (too few published measurements); latencies are planned "
                       f"{margin:.0f} % higher and throughput {margin:.0f} % lower than "
                       "predicted - benchmark the model on this GPU before relying on the "
                       "margin")
    return out


def realism_warnings(catalog: Catalog, rfq: Rfq, plan: Plan,
                     today: dt.date | None = None) -> list[str]:
    """Consumer-card risks, stale prices, quantisation choices and uncalibrated serving
    physics of a plan."""
    return (consumer_card_warnings(catalog, plan) + stale_price_warnings(catalog, plan, today)
            + precision_notes(rfq, plan, catalog) + calibration_warnings(plan)
            + rented_job_storage_notes(catalog, rfq, plan) + context_notes(catalog, rfq, plan))


def context_notes(catalog: Catalog, rfq: Rfq, plan: Plan) -> list[str]:
    """A training job planned at a seq_len beyond its model's native context (RoPE scaling,
    solver/catalog/context.py) says so."""
    planned = {entry.name for entry in plan.workloads}
    out: list[str] = []
    for spec in rfq.workloads:
        if isinstance(spec, TrainingWorkload) and spec.name in planned:
            note = rope_scaling_note(spec.model, catalog.model(spec.model), spec.seq_len)
            if note:
                out.append(f"{spec.name}: {note}")
    return out


def rented_job_storage_notes(catalog: Catalog, rfq: Rfq, plan: Plan) -> list[str]:
    """A training job run on rented instances buys no storage (the bill has no storage line
    for it): where its checkpoints and dataset stay, and their size."""
    params = CostParams.from_catalog(catalog, rfq.horizon_years)
    specs = {spec.name: spec for spec in rfq.workloads}
    out: list[str] = []
    for entry in plan.workloads:
        spec = specs.get(entry.name)
        if entry.sourcing != "rented" or not isinstance(spec, TrainingWorkload):
            continue
        tb = training_storage(catalog, params, spec).capacity_tb
        out.append(f"{entry.name}: runs on rented instances, so no storage is bought: its "
                   f"checkpoints and dataset ({tb:,.2f} TB) stay on the instances' own disks "
                   "(local NVMe in the hourly price of most GPU clouds; a provider that bills "
                   "volumes charges about $0.07-0.20 per GB-month on top); copy the final "
                   "checkpoint off before the rental ends")
    return out
