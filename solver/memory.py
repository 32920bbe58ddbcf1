"""Memory per GPU of one layout: weights, KV cache, activations, optimizer state, reserve.

All sizes are vendor GB (1e9 bytes) on the fullest GPU of the layout.

Serving (``inference``, ``batch_inference``)
    weights (precision bytes + quantisation scales; embeddings/LM head in 16 bit; MoE: all
    experts resident) split over TP and PP; KV cache = concurrency x (input + output)
    tokens x KV elements per token per GPU x KV bytes x (1 + paging overhead) — engines that
    guarantee no eviction reserve the whole sequence (concurrency is the layout's total,
    shared by its dp replicas; ``max_concurrency`` is per replica); workspace for one step's token budget;
    CUDA context/graphs and NCCL buffers as the runtime reserve. ``concurrency=None`` sizes
    the KV at the largest concurrency that fits (``max_concurrency``).

Training (``pretrain``, ``full_finetune``, ``lora``, ``qlora``)
    full: 16 B/param of model state (weights 2 + grads 2 + fp32 master 4 + Adam 8) over
    TP x PP, sharded over DP by the ZeRO stage of ``efficiency.yaml`` (default 3 = FSDP full
    shard); LoRA: frozen 16-bit base + adapters (rank r on all linear layers) with their own
    16 B/param; QLoRA: NF4 base (~0.516 B/param) + 16-bit embeddings + adapters.
    Activations follow Korthikanti et al.: per token per layer ``h (a_rep + a_tp / tp)``
    bytes, or ``h a_rc`` with full recompute (chosen automatically only when needed to fit),
    times the micro-batch tokens and the layers in flight on the first pipeline stage.

Rules: ``fits`` = total <= usable capacity (``costs.usable_memory_fraction`` x memory);
``comfortable`` for serving = fits and weights <= ``weights_vram_fraction_max`` x memory and
the VRAM left beside the weights >= ``vram_reserve_fraction`` x memory; for training
``comfortable`` = fits.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from solver.catalog import Catalog, Gpu
from solver.geometry import Geometry, geometry
from solver.layout import SERVING_KINDS, Layout, MemoryBreakdown, Workload
from solver.perf_factors import EfficiencyFactors, factors

GB = 1e9


@dataclass(frozen=True)
class MemoryPlan:
    """A memory breakdown plus what the performance model needs from it."""

    breakdown: MemoryBreakdown
    fits: bool
    comfortable: bool
    usable_gb: float
    max_concurrency: int = 0
    kv_bytes_per_token_gpu: float = 0.0
    activation_recompute: bool = False
    reason: str = ""


_CATALOGS: dict[int, Catalog] = {}


def _register(catalog: Catalog) -> int:
    key = id(catalog)
    if _CATALOGS.get(key) is not catalog:
        if len(_CATALOGS) > 32:
            _CATALOGS.clear()
            _plan_cached.cache_clear()
        _CATALOGS[key] = catalog
    return key


def weight_bytes_per_param(eff: EfficiencyFactors, precision: str) -> float:
    """Bytes per body weight at ``precision`` including quantisation scales."""
    p = eff.precisions
    return p.weight_bytes[precision].value + p.scale_bytes_per_param[precision].value


def kv_bytes_per_element(eff: EfficiencyFactors, precision: str) -> float:
    """Bytes per KV element when serving at weight ``precision``."""
    return eff.precisions.kv_bytes[precision].value


def serving_weights_gb(eff: EfficiencyFactors, geo: Geometry, precision: str,
                       tp: int, pp: int) -> float:
    """Serving weights on the fullest GPU, GB."""
    body = geo.stage_layer_params(pp) * weight_bytes_per_param(eff, precision)
    emb_bytes = max(eff.precisions.embedding_bytes.value,
                    eff.precisions.weight_bytes[precision].value)
    emb = geo.stage_embedding_params(pp) * emb_bytes
    return (body + emb) / tp / GB


def _lora_adapter_params(eff: EfficiencyFactors, geo: Geometry, pp: int) -> float:
    return eff.training.lora_rank.value * geo.lora_params_per_layer * geo.stage_layers(pp)


def _serving(catalog: Catalog, gpu: Gpu, eff: EfficiencyFactors, geo: Geometry,
             layout: Layout, workload: Workload) -> MemoryPlan:
    tp, pp = layout.tp, layout.pp
    usable = gpu.memory_gb * catalog.costs.usable_memory_fraction.value
    weights = serving_weights_gb(eff, geo, layout.precision, tp, pp)
    serving = eff.serving
    workspace = (serving.token_budget.value * geo.hidden
                 * serving.workspace_bytes_per_token_hidden.value / tp / GB)
    reserve = serving.runtime_reserve_gb.value + (
        serving.nccl_buffer_gb.value if tp * pp > 1 else 0.0)
    kv_token = (geo.kv_elements_per_token_gpu(tp, pp)
                * kv_bytes_per_element(eff, layout.precision)
                * (1.0 + serving.kv_paging_overhead.value))
    seq_tokens = max(workload.input_tokens + workload.output_tokens, 1)
    per_request_gb = kv_token * seq_tokens / GB
    free = usable - weights - workspace - reserve
    max_conc = int(free // per_request_gb) if free > 0 and per_request_gb > 0 else 0
    # workload.concurrency is the layout's total; each of the dp replicas holds its share
    conc = (-(-workload.concurrency // layout.dp) if workload.concurrency is not None
            else max(max_conc, 0))
    kv = conc * per_request_gb
    total = weights + kv + workspace + reserve
    cap = gpu.memory_gb
    fits = total <= usable + 1e-9 and (max_conc >= 1)
    reason = ""
    if weights + workspace + reserve > usable:
        reason = (f"weights {weights:.1f} GB + runtime {workspace + reserve:.1f} GB exceed the "
                  f"usable {usable:.1f} GB per GPU")
    elif not fits:
        reason = (f"KV cache for {conc} concurrent x {seq_tokens} tokens needs {kv:.1f} GB; "
                  f"only {free:.1f} GB free per GPU (max concurrency {max_conc})")
    costs = catalog.costs
    comfortable = (fits and weights <= costs.weights_vram_fraction_max.value * cap
                   and (cap - weights) >= costs.vram_reserve_fraction.value * cap)
    breakdown = MemoryBreakdown(
        weights_gb=weights, kv_cache_gb=kv, activations_gb=workspace, optimizer_gb=0.0,
        total_gb=total, capacity_gb=cap, weights_fraction=weights / cap,
        utilization=total / cap, gradients_gb=0.0, reserve_gb=reserve)
    return MemoryPlan(breakdown, fits, comfortable, usable, max_conc, kv_token, False, reason)


def _training(catalog: Catalog, gpu: Gpu, eff: EfficiencyFactors, geo: Geometry,
              layout: Layout, workload: Workload) -> MemoryPlan:
    tp, pp, dp = layout.tp, layout.pp, layout.dp
    train = eff.training
    stage = train.zero_stage
    usable = gpu.memory_gb * catalog.costs.usable_memory_fraction.value
    stage_params = (geo.stage_layer_params(pp) + geo.stage_embedding_params(pp)) / tp
    state_bytes = train.model_state_bytes_per_param.value
    kind = workload.kind
    if kind in ("pretrain", "full_finetune"):
        weight_b, grad_b = 2.0, 2.0
        opt_b = max(state_bytes - weight_b - grad_b, 0.0)
        weights = stage_params * weight_b / (dp if stage >= 3 else 1)
        grads = stage_params * grad_b / (dp if stage >= 2 else 1)
        optimizer = stage_params * opt_b / (dp if stage >= 1 else 1)
    else:
        if kind == "qlora":
            body = geo.stage_layer_params(pp) * train.nf4_bytes_per_param.value
            emb = geo.stage_embedding_params(pp) * eff.precisions.embedding_bytes.value
            base = (body + emb) / tp
        else:
            base = stage_params * 2.0
        adapters = _lora_adapter_params(eff, geo, pp) / tp
        shard = dp if stage >= 3 else 1
        weights = base / shard + adapters * 2.0
        grads = adapters * 2.0
        optimizer = adapters * max(state_bytes - 4.0, 0.0)
    weights, grads, optimizer = weights / GB, grads / GB, optimizer / GB
    tokens = workload.micro_batch * workload.seq_len
    h = geo.hidden
    in_flight_layers = geo.stage_layers(pp) * min(pp, _microbatches(eff, layout, workload))
    per_layer_full = h * (train.act_bytes_replicated.value + train.act_bytes_tp_split.value / tp)
    logits = tokens * geo.vocab * train.logits_bytes.value / tp
    gather = 0.0
    if stage >= 3 and dp > 1:  # FSDP: two layers gathered in 16 bit (prefetch)
        gather = 2.0 * 2.0 * geo.layer_params / geo.layers / tp
    reserve = eff.serving.runtime_reserve_gb.value + (
        eff.serving.nccl_buffer_gb.value if layout.gpus > 1 else 0.0)

    def total_with(per_layer: float, extra_layer: float) -> tuple[float, float]:
        act = (tokens * (per_layer * in_flight_layers + extra_layer) + logits + gather) / GB
        return act, weights + grads + optimizer + act + reserve

    act, total = total_with(per_layer_full, 0.0)
    recompute = False
    if total > usable:
        act_rc, total_rc = total_with(h * train.act_bytes_recompute.value, per_layer_full)
        if total_rc < total:
            act, total, recompute = act_rc, total_rc, True
    cap = gpu.memory_gb
    fits = total <= usable + 1e-9
    reason = "" if fits else (
        f"{kind} needs {total:.1f} GB per GPU (weights {weights:.1f}, grads {grads:.1f}, "
        f"optimizer {optimizer:.1f}, activations {act:.1f}) > usable {usable:.1f} GB")
    breakdown = MemoryBreakdown(
        weights_gb=weights, kv_cache_gb=0.0, activations_gb=act, optimizer_gb=optimizer,
        total_gb=total, capacity_gb=cap, weights_fraction=weights / cap,
        utilization=total / cap, gradients_gb=grads, reserve_gb=reserve,
        activation_recompute=recompute)
    return MemoryPlan(breakdown, fits, fits, usable, 0, 0.0, recompute, reason)


def _microbatches(eff: EfficiencyFactors, layout: Layout, workload: Workload) -> int:
    """Micro-batches per optimizer step per DP replica (global batch / dp / micro-batch)."""
    if workload.global_batch_tokens:
        per_replica = workload.global_batch_tokens / layout.dp
        return max(1, round(per_replica / (workload.micro_batch * workload.seq_len)))
    return max(1, int(eff.training.microbatches_per_stage.value * layout.pp))


def microbatches(catalog: Catalog, layout: Layout, workload: Workload) -> int:
    """Micro-batches per optimizer step per DP replica of a training layout."""
    return _microbatches(factors(catalog), layout, workload)


@functools.lru_cache(maxsize=65536)
def _plan_cached(key: int, version: str, layout: Layout, workload: Workload) -> MemoryPlan:
    catalog = _CATALOGS[key]
    eff = factors(catalog)
    gpu = catalog.gpus[layout.gpu]
    geo = geometry(catalog.model(layout.model))
    if workload.kind in SERVING_KINDS:
        return _serving(catalog, gpu, eff, geo, layout, workload)
    return _training(catalog, gpu, eff, geo, layout, workload)


def memory_plan(catalog: Catalog, layout: Layout, workload: Workload) -> MemoryPlan:
    """Memory of a layout with fit rules and the largest concurrency that fits (cached)."""
    return _plan_cached(_register(catalog), catalog.version, layout, workload)


def memory_breakdown(catalog: Catalog, layout: Layout, workload: Workload) -> MemoryBreakdown:
    """Memory per GPU (the fullest one) of ``layout`` running ``workload``, GB."""
    return memory_plan(catalog, layout, workload).breakdown


def fits(catalog: Catalog, layout: Layout, workload: Workload) -> bool:
    """Whether the layout fits usable memory (total <= usable fraction x capacity)."""
    return memory_plan(catalog, layout, workload).fits


def comfortable(catalog: Catalog, layout: Layout, workload: Workload) -> bool:
    """Whether the layout fits and respects the guide's weights/reserve rule."""
    return memory_plan(catalog, layout, workload).comfortable
