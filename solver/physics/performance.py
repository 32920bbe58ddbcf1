"""Predicted performance of one layout: serving latency/throughput and training speed.

Serving — continuous batching with chunked prefill under load (closed loop at a
concurrency, open loop at a Poisson request rate), TTFT/TPOT at p50/p90/p99 and the
capacities the planner buys against: :mod:`solver.physics.serving` (physics features of one engine
step and the engines' fitted factors; see its docstring).

Training — hardware FLOPs per token: 6 x active (LoRA/QLoRA 4: no weight gradients for
the frozen base) + 2 x active x the share of layers recomputed (block recompute of just
enough layers to fit, :mod:`solver.physics.memory`) + attention; compute time at the family's
training efficiency (MoE: the expert share of the FLOPs at the expert-GEMM efficiency);
plus exposed TP collectives (4 per layer per micro-batch, more with recompute), the
interleaved-1F1B pipeline bubble (pp-1)/(m v) with ``v`` virtual stages, pipeline hops,
MoE all-to-alls over the expert-parallel group, and the DP gradient (and FSDP parameter)
collectives not hidden behind compute. On NVLink, TP runs Megatron-style with sequence
parallelism (norms/dropout split over TP) and comm overlap; elsewhere the work TP does not
split is repeated on every TP rank (the Amdahl part). ``scaling_efficiency`` = ideal
compute time / step time: per-GPU throughput relative to the compute-only single-GPU ideal
on the same GPU — defined even when the model does not fit one GPU. MFU is model FLOPs
against the dense peak of the training precision.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from solver.catalog.data import Catalog, Gpu, content_key
from solver.catalog.perf_factors import EfficiencyFactors, TrainingFactors, factors
from solver.common.errors import InputError, Problem, nearest
from solver.common.memo import Memo
from solver.physics.geometry import Geometry, geometry
from solver.physics.layout import (
    SERVING_KINDS,
    Estimate,
    Layout,
    MemoryBreakdown,
    Prediction,
    Workload,
)
from solver.physics.links import LINKS, Link, all_reduce_s, group_link, p2p_s
from solver.physics.memory import (
    MEMORY_PLANS,
    MemoryPlan,
    _microbatches,
    context_parallel,
    memory_plan,
    sequence_parallel,
)
from solver.physics.serving import engine_runs_on
from solver.physics.serving import prediction as serving_prediction

ZERO_MEMORY = MemoryBreakdown(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
ZERO_PREDICTION = Prediction(tokens_per_s=0.0, tokens_per_s_per_gpu=0.0)


# --------------------------------------------------------------------------- validity
def check_ids(catalog: Catalog, model_id: str, gpu_id: str, fabric_id: str = "none") -> None:
    """Raise :class:`InputError` for unknown model, GPU or fabric ids (with suggestions)."""
    problems = []
    try:
        catalog.model(model_id)
    except KeyError:
        problems.append(Problem("command line", "model", model_id,
                                f"unknown model; nearest: {nearest(model_id, catalog.model_ids()) or catalog.model_ids()}"))
    if gpu_id not in catalog.gpus:
        problems.append(Problem("command line", "gpu", gpu_id,
                                f"unknown GPU; nearest: {nearest(gpu_id, catalog.gpus)}"))
    if fabric_id not in catalog.fabrics:
        problems.append(Problem("command line", "fabric", fabric_id,
                                f"unknown fabric; known: {', '.join(catalog.fabrics)}"))
    if problems:
        raise InputError(problems)


def unsupported_reason(catalog: Catalog, layout: Layout, workload: Workload) -> str:
    """Why a layout cannot run at all ('' when it can): precision/GPU/kind and topology."""
    gpu = catalog.gpus[layout.gpu]
    prec = layout.precision
    if prec not in ("bf16", "fp8", "int8", "int4", "fp4"):
        return f"unknown precision {prec!r}"
    if min(layout.tp, layout.pp, layout.dp, layout.gpus_per_node, layout.ep,
           layout.attention_dp) < 1:
        return "tp, pp, dp, ep, attention_dp and gpus_per_node must be >= 1"
    expert_reason = (expert_parallel_reason(catalog, layout, workload)
                     or attention_heads_reason(catalog, layout))
    if expert_reason:
        return expert_reason
    if prec == "fp4" and "fp4" not in gpu.dense_tflops:
        return f"fp4 (W4A4) needs Blackwell FP4 tensor cores; {gpu.id} has none"
    if workload.kind not in SERVING_KINDS:
        if workload.kind != "qlora" and prec in ("int4", "fp4", "int8"):
            return f"{workload.kind} cannot train {prec} weights (bf16 or fp8 only)"
        if workload.kind != "qlora" and prec == "fp8" and "fp8" not in gpu.dense_tflops:
            return f"fp8 training needs FP8 tensor cores; {gpu.id} has none"
    if workload.kind in SERVING_KINDS and not engine_runs_on(catalog, workload.engine, gpu.id) \
            and workload.engine in factors(catalog).serving.engines:
        engine = factors(catalog).serving.engines[workload.engine]
        return (f"{engine.label or workload.engine} does not run on {gpu.vendor} GPUs; it runs "
                f"on {', '.join(engine.vendors)}")
    if workload.kind not in SERVING_KINDS and layout.dp % max(1, workload.context_parallel):
        return (f"context parallelism {workload.context_parallel} must divide the "
                f"data-parallel GPUs (dp {layout.dp})")
    if layout.nodes_spanned > 1 and catalog.fabrics[layout.fabric].effective_gbs <= 0:
        return (f"the layout spans {layout.nodes_spanned} nodes but fabric "
                f"{layout.fabric!r} connects none")
    return ""


def attention_heads_reason(catalog: Catalog, layout: Layout) -> str:
    """Why ``layout``'s tensor parallelism cannot shard the model's attention ('' when it
    can). Engines and trainers (vLLM, SGLang, TensorRT-LLM, Megatron) give each TP rank whole
    query heads, so ``tp`` divides the attention heads; grouped KV heads are split ``tp`` ways
    when there are at least ``tp`` of them (``tp`` divides them) and replicated otherwise
    (they divide ``tp``). MLA's latent KV is not split by TP. So TP 3 or 6 runs no catalog
    model, and TP 8 does not run Qwen2.5-7B's 28 heads."""
    tp = layout.tp
    if tp == 1:
        return ""
    geo = geometry(catalog.model(layout.model))
    if geo.heads % tp:
        return (f"tp {tp} must divide the {geo.heads} attention heads of {layout.model} "
                "(each TP rank computes whole heads)")
    kv = geo.kv_heads
    if geo.kv_split_by_tp and kv and (kv % tp if tp <= kv else tp % kv):
        return (f"tp {tp} cannot shard the {kv} KV heads of {layout.model} (it must divide "
                "them, or they it, when they are replicated)")
    return ""


def expert_parallel_reason(catalog: Catalog, layout: Layout, workload: Workload) -> str:
    """Why ``layout``'s expert parallelism / attention data parallelism cannot run ('' when
    it can): both are serving layouts of MoE models; ``ep`` divides the stage's GPUs
    (``tp x attention_dp``) and the routed experts; attention DP needs EP over its ranks."""
    ep, ranks = layout.ep, layout.attention_dp
    if ep == 1 and ranks == 1:
        return ""
    model = catalog.model(layout.model)
    if workload.kind not in SERVING_KINDS:
        return ("expert parallelism / attention data parallelism are serving layouts "
                f"(training spreads experts over its data-parallel GPUs); {workload.kind} "
                "takes ep = attention_dp = 1")
    if not model.is_moe:
        return f"ep {ep} / attention_dp {ranks}: {model.id} is a dense model (no experts)"
    if ranks > 1 and ep == 1:
        return (f"attention_dp {ranks} needs expert parallelism over its ranks (ep > 1): "
                "the experts are sharded by EP")
    stage = layout.stage_gpus
    if stage % ep:
        return (f"ep {ep} must divide the GPUs of a pipeline stage (tp {layout.tp} x "
                f"attention_dp {ranks} = {stage})")
    experts = model.experts or 0
    if experts % ep:
        return f"ep {ep} must divide the {experts} routed experts of {model.id}"
    return ""


def _compute_precision(eff: EfficiencyFactors, gpu: Gpu, precision: str, kind: str) -> str:
    if kind == "qlora":
        return "bf16"
    compute = eff.precisions.compute_precision[precision]
    return compute if compute in gpu.dense_tflops else "bf16"


# --------------------------------------------------------------------------- training
def gemm_size_factor(eff: EfficiencyFactors, hidden: int) -> float:
    """Share of a family's GEMM efficiency reached at hidden size ``hidden``:
    h / (h + h_half) — larger matrices have more arithmetic intensity per tile."""
    half = eff.training.gemm_half_efficiency_hidden.value
    return hidden / (hidden + half)


def _training_terms(step: _Step) -> dict[str, float]:
    """Step-time terms of one training layout (seconds per optimizer step per replica)."""
    catalog, layout, w = step.catalog, step.layout, step.w
    t_ideal, model_flops, peak = _ideal_compute_s(step)
    tp, pp = layout.tp, layout.pp
    # TP on an NVLink domain inside one node: Megatron-style stacks overlap its collectives
    nvlink = sequence_parallel(step.gpu, layout)
    # sequence parallelism splits the norms/dropout the TP ranks otherwise repeat; NVLink
    # stacks fuse those elementwise kernels, so there they are a negligible share even
    # without SP; elsewhere (PCIe stacks without SP) they are the Amdahl part
    replicated = 0.0
    if tp > 1:
        replicated = (step.train.tp_replicated_fraction_sp.value
                      if nvlink or sequence_parallel(step.gpu, layout, w)
                      else step.train.tp_replicated_fraction.value)
    t_compute = t_ideal * ((1.0 - replicated) + replicated * tp)
    # interleaved 1F1B: v model chunks per GPU divide the bubble by v
    v = step.v
    bubble = t_compute * (pp - 1) / (step.m * v)
    t_a2a, ep = _moe_all_to_all_s(step)
    t_cp = _context_parallel_s(catalog, layout, w, step.m, step.mb_tokens)
    return {"ideal": t_ideal, "compute": t_compute, "bubble": bubble,
            "tp": _tensor_parallel_s(step, nvlink), "a2a": t_a2a,
            "pp": _pipeline_hops_s(step, v), "dp": _data_parallel_s(step, ep, t_compute),
            "cp": t_cp, "peak": peak, "model_flops": model_flops,
            "tokens": step.replica_tokens * layout.dp / step.cp}


@dataclass(frozen=True)
class _Step:
    """What every term of a training step needs: the catalog's figures for this layout and
    the micro-batching."""

    catalog: Catalog
    layout: Layout
    w: Workload
    plan: MemoryPlan
    eff: EfficiencyFactors
    train: TrainingFactors
    gpu: Gpu
    geo: Geometry
    m: int  # micro-batches per step per replica
    v: int  # virtual pipeline stages (:func:`virtual_stages`)
    cp: int
    mb_tokens: float  # this GPU's share of a micro-batch
    replica_tokens: float  # per replica (a CP group of cp GPUs)

    @classmethod
    def of(cls, catalog: Catalog, layout: Layout, w: Workload, plan: MemoryPlan) -> _Step:
        cp = context_parallel(layout, w)
        eff = factors(catalog)
        geo = geometry(catalog.model(layout.model))
        m = _microbatches(eff, layout, w)
        return cls(catalog, layout, w, plan, eff, eff.training, catalog.gpus[layout.gpu], geo,
                   m, _virtual_stages(eff, geo, layout, w), cp,
                   w.micro_batch * w.seq_len / cp, m * w.micro_batch * w.seq_len)

    def link(self, group: int) -> Link:
        """The link a collective over ``group`` consecutive GPUs of this layout runs on."""
        lay = self.layout
        return group_link(self.catalog, self.gpu, lay.fabric, lay.gpus_per_node, group,
                          lay.server)


def _ideal_compute_s(step: _Step) -> tuple[float, float, float]:
    """(seconds of matmul + attention work at the achieved FLOP rate, model FLOPs per
    token, peak FLOP/s): recomputed forwards, QLoRA dequantisation, MoE expert GEMMs."""
    layout, w, plan = step.layout, step.w, step.plan
    eff = step.eff
    train, gpu, geo = step.train, step.gpu, step.geo
    fam = eff.family(gpu.family)
    recompute = plan.recompute_fraction  # share of layers whose forward is recomputed
    lora = w.kind in ("lora", "qlora")
    compute_prec = _compute_precision(eff, gpu, layout.precision, w.kind)
    am = geo.matmul_active_params
    attn_fwd = geo.attention_flops_per_token(w.seq_len / 2.0)  # causal
    matmul_mult = (4.0 if lora else 6.0) + 2.0 * recompute
    model_flops = (4.0 if lora else 6.0) * am + 3.0 * attn_fwd
    matmul_flops = matmul_mult * am
    if w.kind == "qlora":
        matmul_flops *= train.qlora_dequant_slowdown.value
    # attention core: forward + backward (2x), re-run once more when it is recomputed
    # (selective recompute, flash attention's backward) and with every recomputed layer
    attn_passes = 3.0 + recompute + (
        0.0 if plan.recompute == "none" else train.selective_recompute_attention_passes.value)
    hw_flops = matmul_flops + attn_passes * attn_fwd
    peak = gpu.training_tflops(compute_prec) * 1e12  # FP32 accumulate (GeForce: half rate)
    achieved = peak * fam.train(compute_prec) * gemm_size_factor(eff, geo.hidden)
    if geo.experts:
        # expert GEMMs: load imbalance and per-expert GEMMs of tokens x k / E rows
        expert_flops = 6.0 * geo.expert_params * geo.experts_per_token / geo.experts
        share = min(expert_flops / matmul_flops, 1.0) if matmul_flops else 0.0
        moe = train.moe_expert_gemm_efficiency.value
        achieved /= (1.0 - share) + share / moe
    t_ideal = (step.replica_tokens * hw_flops / (layout.tp * layout.pp * step.cp)
               / achieved)
    return t_ideal, model_flops, peak


def _tensor_parallel_s(step: _Step, nvlink: bool) -> float:
    """Tensor-parallel all-reduces (reduce-scatter + all-gather with SP: the same bytes)
    not hidden behind compute."""
    tp, pp = step.layout.tp, step.layout.pp
    if tp <= 1:
        return 0.0
    n_ar = 4.0 + 2.0 * step.plan.recompute_fraction
    per_ar = all_reduce_s(step.link(tp), tp, step.mb_tokens * step.geo.hidden * 2.0)
    overlap = (step.train.tp_comm_overlap_nvlink.value if nvlink
               else step.train.tp_comm_overlap.value)
    return step.m * step.geo.stage_layers(pp) * n_ar * per_ar * (1.0 - overlap)


def _moe_all_to_all_s(step: _Step) -> tuple[float, int]:
    """MoE expert-parallel all-to-all (dispatch + combine, forward and backward) over the
    DP group the experts are spread on: (seconds, the expert-parallel degree)."""
    geo, tp, pp, dp = step.geo, step.layout.tp, step.layout.pp, step.layout.dp
    if not geo.experts or dp <= 1:
        return 0.0, 1
    ep = min(dp, geo.experts)
    # Megatron rank order tp-cp-ep-dp-pp: an EP group is ep consecutive TP groups
    link = step.link(tp * ep)
    a2a_bytes = step.mb_tokens / tp * geo.experts_per_token * geo.hidden * 2.0 * (ep - 1) / ep
    return (step.m * geo.stage_layers(pp) * 4.0 * p2p_s(link, a2a_bytes)
            * (1.0 - step.train.moe_a2a_overlap.value)), ep


def _pipeline_hops_s(step: _Step, v: int) -> float:
    """Pipeline hops: forward activations + backward gradients per micro-batch and chunk."""
    tp, pp = step.layout.tp, step.layout.pp
    if pp <= 1:
        return 0.0
    return 2.0 * step.m * v * p2p_s(step.link(tp * pp),
                                    step.mb_tokens * step.geo.hidden * 2.0 / tp)


def _data_parallel_s(step: _Step, ep: int, t_compute: float) -> float:
    """Data-parallel gradient (and FSDP parameter) collectives not hidden behind backward
    (and, with sharded weights, forward)."""
    layout, geo, train, plan = step.layout, step.geo, step.train, step.plan
    tp, pp, dp = layout.tp, layout.pp, layout.dp
    if dp <= 1:
        return 0.0
    stage_params = (geo.stage_layer_params(pp) + geo.stage_embedding_params(pp)) / tp
    if geo.experts:  # expert weights are sharded over EP, not replicated over DP
        expert = geo.expert_params * geo.stage_layers(pp) / geo.layers / tp
        stage_params -= expert * (1.0 - 1.0 / ep)
    if step.w.kind in ("lora", "qlora"):
        trainable = (train.lora_rank.value * geo.lora_params_per_layer
                     * geo.stage_layers(pp) / tp)
        grad_bytes = trainable * 2.0
    else:
        grad_bytes = stage_params * 2.0
    gather_bytes = stage_params * 2.0 * 2.0 if plan.base_sharded else 0.0
    link = step.link(layout.gpus)
    # a reduce-scatter or all-gather moves half an all-reduce
    t_dp = all_reduce_s(link, dp, grad_bytes) + all_reduce_s(link, dp, gather_bytes) / 2.0
    if link.crosses_nodes:
        local = max(1, min(layout.gpus_per_node, tp * pp))
        t_dp *= local  # the node's NICs carry every model shard's DP traffic
    # gradient reduce-scatters hide behind backward (2/3 of the step); with sharded
    # weights the prefetched all-gathers hide behind forward as well
    window = t_compute if plan.base_sharded else t_compute * 2.0 / 3.0
    return max(0.0, t_dp - train.dp_comm_overlap.value * window)


def virtual_stages(catalog: Catalog, layout: Layout, w: Workload) -> int:
    """Model chunks per GPU of the interleaved 1F1B schedule: the ``interleave`` knob, else
    the catalog's default, capped at the layers of a stage (1 without pipelining)."""
    if layout.pp <= 1:
        return 1
    return _virtual_stages(factors(catalog), geometry(catalog.model(layout.model)), layout, w)


def _virtual_stages(eff: EfficiencyFactors, geo: Geometry, layout: Layout, w: Workload) -> int:
    if layout.pp <= 1:
        return 1
    wanted = w.interleave or int(eff.training.pipeline_virtual_stages.value)
    return max(1, min(wanted, geo.stage_layers(layout.pp)))


def _context_parallel_s(catalog: Catalog, layout: Layout, w: Workload, m: int,
                        mb_tokens: float) -> float:
    """Exposed context-parallel traffic per step: every layer passes this GPU's K/V chunk
    around the ring of ``cp`` GPUs (cp - 1 hops) in the forward pass, and K/V plus their
    gradients in the backward pass (3 x the forward bytes), partly behind attention."""
    cp = context_parallel(layout, w)
    if cp <= 1:
        return 0.0
    eff = factors(catalog)
    gpu = catalog.gpus[layout.gpu]
    geo = geometry(catalog.model(layout.model))
    kv_dim = 2.0 * max(geo.kv_heads / layout.tp, 1.0) * geo.head_dim  # K and V, GQA heads
    chunk = mb_tokens * kv_dim * 2.0  # bf16
    link = group_link(catalog, gpu, layout.fabric, layout.gpus_per_node, layout.tp * cp,
                      layout.server)
    per_layer = 3.0 * (cp - 1) * p2p_s(link, chunk)
    return (m * geo.stage_layers(layout.pp) * per_layer
            * (1.0 - eff.training.cp_comm_overlap.value))


def straggler_factor(catalog: Catalog, layout: Layout) -> float:
    """Step-time multiplier for a synchronous job spanning several nodes: each step waits
    for the slowest node; with per-node jitter of coefficient of variation ``cv`` the
    expected maximum of n nodes is about 1 + cv sqrt(2 ln n) (TCP fabrics jitter more)."""
    import math

    nodes = layout.nodes_spanned
    if nodes <= 1:
        return 1.0
    behaviour = factors(catalog).fabric_behaviour
    if behaviour is None or layout.fabric not in catalog.fabrics:
        return 1.0
    fabric = catalog.fabrics[layout.fabric]
    cv = (behaviour.straggler_cv_rdma if fabric.rdma else behaviour.straggler_cv_tcp).value
    return 1.0 + cv * math.sqrt(2.0 * math.log(nodes))


def _training_prediction(step: _Step) -> Prediction:
    catalog, layout, w, plan = step.catalog, step.layout, step.w, step.plan
    t = _training_terms(step)
    step_s = (t["compute"] + t["bubble"] + t["tp"] + t["a2a"] + t["pp"] + t["dp"] + t["cp"])
    step_s *= straggler_factor(catalog, layout)
    tokens_per_s = t["tokens"] / step_s
    per_gpu = tokens_per_s / layout.gpus
    notes: tuple[str, ...] = ()
    if plan.recompute in ("partial", "full") and w.recompute == "auto":
        notes = (f"activation recompute of {plan.recompute_fraction:.0%} of the layers "
                 "(needed to fit)",)
    return Prediction(tokens_per_s=tokens_per_s, tokens_per_s_per_gpu=per_gpu,
                      mfu=t["model_flops"] * per_gpu / t["peak"],
                      scaling_efficiency=t["ideal"] / step_s, step_time_s=step_s, notes=notes)


def training_rate_bound(catalog: Catalog, model_id: str, gpu_id: str, precision: str,
                        w: Workload) -> float | None:
    """An upper bound on the training tokens/s *per GPU* of any split of any job size of
    ``w`` at ``precision`` on ``gpu_id``, whatever its knobs (ZeRO stage, micro-batch, SP,
    interleave) and recompute: None when the catalog's factors do not allow the proof.

    Why it bounds :func:`_training_prediction`: tokens/s = tokens / (step x straggler) and
    ``tokens / t_ideal`` = gpus x achieved / hardware FLOPs per token (the replica tokens,
    TP, PP and CP cancel). The step is ``t_compute`` plus terms that are never negative
    (bubble, TP, all-to-all, hops, CP: each a non-negative time x ``1 - overlap``; DP:
    ``max(0, ...)``) and ``t_compute`` = ``t_ideal`` x ((1 - r) + r tp) >= ``t_ideal`` for
    r >= 0; the straggler factor is 1 + cv x ... >= 1. ``t_ideal`` is smallest with no
    recompute (the fewest matmul FLOPs and attention passes) and with the MoE expert share
    at whichever end of its range divides ``achieved`` least. So tokens/s <= gpus x this.
    The conditions checked below are what that argument needs of the factors (what-if
    catalogs may set any value)."""
    eff = factors(catalog)
    train = eff.training
    behaviour = eff.fabric_behaviour
    overlaps = (train.tp_comm_overlap, train.tp_comm_overlap_nvlink, train.moe_a2a_overlap,
                train.cp_comm_overlap)
    if (any(f.value >= 1.0 for f in overlaps)
            or min(train.tp_replicated_fraction.value,
                   train.tp_replicated_fraction_sp.value) < 0.0
            or (behaviour is not None and min(behaviour.straggler_cv_tcp.value,
                                              behaviour.straggler_cv_rdma.value,
                                              behaviour.tcp_extra_latency_us.value) < 0.0)
            or (eff.links is not None and eff.links.host_staged_extra_latency_us.value < 0.0)
            or train.qlora_dequant_slowdown.value <= 0.0
            or train.moe_expert_gemm_efficiency.value <= 0.0):
        return None
    gpu = catalog.gpus[gpu_id]
    geo = geometry(catalog.model(model_id))
    lora = w.kind in ("lora", "qlora")
    compute_prec = _compute_precision(eff, gpu, precision, w.kind)
    slowdown = train.qlora_dequant_slowdown.value if w.kind == "qlora" else 1.0
    matmul_least = (4.0 if lora else 6.0) * geo.matmul_active_params * slowdown
    matmul_most = (6.0 if lora else 8.0) * geo.matmul_active_params * slowdown  # all recomputed
    passes_least = 3.0 + min(0.0, train.selective_recompute_attention_passes.value)
    hw_flops = matmul_least + passes_least * geo.attention_flops_per_token(w.seq_len / 2.0)
    if matmul_least <= 0.0:
        return None
    fam = eff.family(gpu.family)
    achieved = (gpu.training_tflops(compute_prec) * 1e12 * fam.train(compute_prec)
                * gemm_size_factor(eff, geo.hidden))
    if geo.experts:
        expert_flops = 6.0 * geo.expert_params * geo.experts_per_token / geo.experts
        moe = train.moe_expert_gemm_efficiency.value
        achieved /= min((1.0 - share) + share / moe for share in (
            min(expert_flops / matmul_least, 1.0), min(expert_flops / matmul_most, 1.0)))
    if achieved <= 0.0 or hw_flops <= 0.0:
        return None
    return achieved / hw_flops


# --------------------------------------------------------------------------- public API
ESTIMATE_CACHE_SIZE = 1 << 19
"""Estimates kept (LRU). A 100-workload portfolio on the open catalog evaluates ~66 k
layouts (issue 18: 65,925 misses overflowed the former 65,536); 524,288 holds the largest
RFQ the schema allows several times over, so repeated solves (sensitivity, Pareto, batch
workers) stay warm. An entry is a few hundred bytes of frozen dataclasses."""


ESTIMATES: Memo[Estimate] = Memo(ESTIMATE_CACHE_SIZE)
RANKINGS: Memo[tuple[Estimate, ...]] = Memo(1 << 16)
"""Every split of one (model, GPU, count, workload, precision, node, fabric) query, ranked
(:func:`ranked_layouts`): the candidate stage asks the same query for every workload of a
portfolio that shares a model and physics workload, and again on every warm solve. Keyed
like :data:`ESTIMATES` (catalog content, resolved ids), so it holds what they would give."""


def clear_caches() -> None:
    """Empty the physics memos (estimates, rankings, memory plans, links): cold timings."""
    for memo in (ESTIMATES, RANKINGS, MEMORY_PLANS, LINKS):
        memo.clear()


def _estimate(catalog: Catalog, layout: Layout, workload: Workload) -> Estimate:
    reason = unsupported_reason(catalog, layout, workload)
    if reason:
        return Estimate(layout, workload, False, False, ZERO_MEMORY, ZERO_PREDICTION, reason)
    plan = memory_plan(catalog, layout, workload)
    if workload.kind in SERVING_KINDS:
        if not plan.fits and plan.max_concurrency >= 1 and workload.concurrency is not None:
            # more users than the KV cache holds: the engine runs what fits and the others
            # wait for a slot (serving.py models the queue); memory is that of a full engine
            plan = memory_plan(catalog, layout, replace(workload, concurrency=None))
        pred = serving_prediction(catalog, layout, workload, plan)
        reason = plan.reason
        if plan.fits and pred.max_concurrency == 0 and (workload.ttft_ms or workload.tpot_ms):
            reason = "no concurrency meets the TTFT/TPOT SLOs"
    else:
        step = _Step.of(catalog, layout, workload, plan)
        pred = _training_prediction(step)
        return Estimate(layout, workload, plan.fits, plan.comfortable, plan.breakdown, pred,
                        plan.reason, _settings(step))
    return Estimate(layout, workload, plan.fits, plan.comfortable, plan.breakdown, pred, reason)


def training_settings(catalog: Catalog, layout: Layout, w: Workload,
                      plan: MemoryPlan) -> dict:
    """The training knobs a layout runs with, resolved (what ``auto`` and the catalog
    defaults came to): what ``estimate --json`` and the plan's workload entry state."""
    return _settings(_Step.of(catalog, layout, w, plan))


def _settings(step: _Step) -> dict:
    layout, w, plan, cp, m = step.layout, step.w, step.plan, step.cp, step.m
    replicas = max(1, layout.dp // cp)
    return {"recompute": plan.recompute,
            "recompute_fraction": round(plan.recompute_fraction, 3),
            "zero": plan.zero, "micro_batch": w.micro_batch,
            "global_batch": m * w.micro_batch * replicas,
            "microbatches": m,
            "sequence_parallel": sequence_parallel(step.gpu, layout, w),
            "interleave": step.v,
            "context_parallel": cp}


def estimate(catalog: Catalog, layout: Layout, workload: Workload) -> Estimate:
    """Memory and predicted performance of ``layout`` running ``workload`` (cached).

    Never raises for known ids: an impossible layout comes back with ``fits=False`` and a
    ``reason``. Unknown model/GPU/fabric ids raise :class:`InputError`.
    """
    if (layout.gpu not in catalog.gpus or layout.fabric not in catalog.fabrics
            or layout.model not in catalog.models):
        if layout.model in catalog.model_ids() and layout.gpu in catalog.gpus \
                and layout.fabric in catalog.fabrics:
            layout = replace(layout, model=catalog.model(layout.model).id)
        else:
            check_ids(catalog, layout.model, layout.gpu, layout.fabric)
    return ESTIMATES.get((content_key(catalog), layout, workload),
                         lambda: _estimate(catalog, layout, workload))


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _score(est: Estimate) -> tuple:
    p = est.predicted
    serving = est.workload.kind in SERVING_KINDS
    slo = est.workload.ttft_ms is not None or est.workload.tpot_ms is not None
    if serving and slo and est.workload.concurrency is None:
        value = p.qps_capacity or 0.0
    else:
        value = p.tokens_per_s
    return (est.fits and not (serving and slo and not p.max_concurrency), est.comfortable,
            value, -est.layout.pp, -est.layout.tp)


def best_layout(catalog: Catalog, model_id: str, gpu_id: str, gpus: int, workload: Workload,
                *, precision: str, gpus_per_node: int = 8, fabric: str = "none",
                tp: int | None = None, pp: int | None = None,
                dp: int | None = None, server: str | None = None,
                ep: int | None = None, attention_dp: int | None = None) -> Estimate:
    """The best TP x PP x DP split of ``gpus`` GPUs (TP/PP/DP free unless given).

    ``server`` is the node type's chassis (its fabric NICs bound inter-node collectives);
    None = the smallest catalog server that holds ``gpus_per_node``.
    Best = fits, then comfortable, then throughput (QPS capacity under SLOs for serving
    with SLOs, tokens/s otherwise), then fewer pipeline stages and smaller TP.
    """
    return ranked_layouts(catalog, model_id, gpu_id, gpus, workload, precision=precision,
                          gpus_per_node=gpus_per_node, fabric=fabric, tp=tp, pp=pp, dp=dp,
                          server=server, ep=ep, attention_dp=attention_dp)[0]


def ranked_layouts(catalog: Catalog, model_id: str, gpu_id: str, gpus: int,
                   workload: Workload, *, precision: str, gpus_per_node: int = 8,
                   fabric: str = "none", tp: int | None = None, pp: int | None = None,
                   dp: int | None = None, server: str | None = None,
                   ep: int | None = None, attention_dp: int | None = None) -> list[Estimate]:
    """Every TP x PP x DP split of ``gpus`` GPUs, best first (:func:`best_layout`'s order;
    equal scores keep the enumeration order). MoE serving also tries attention data
    parallelism with expert parallelism over each stage (:func:`expert_splits`);
    ``ep`` / ``attention_dp`` pin them (``ep`` alone: EP inside the TP group)."""
    check_ids(catalog, model_id, gpu_id, fabric)
    if gpus < 1:
        raise InputError([Problem("command line", "gpus", gpus, "must be >= 1")])
    model = catalog.model(model_id).id
    key = (content_key(catalog), model, gpu_id, gpus, workload, precision, gpus_per_node,
           fabric, tp, pp, dp, server, ep, attention_dp)
    return list(RANKINGS.get(key, lambda: _ranked(catalog, model, gpu_id, gpus, workload,
                                                  precision, gpus_per_node, fabric, tp, pp,
                                                  dp, server, ep, attention_dp)))


def expert_splits(catalog: Catalog, model: str, workload: Workload, tp: int, rest: int,
                  ep: int | None, attention_dp: int | None,
                  pp: int = 1) -> list[tuple[int, int]]:
    """(ep, attention_dp) pairs to try for ``tp`` GPUs of attention with ``rest`` GPUs per
    TP group left for attention ranks x replicas. Pinned values are taken as given
    (``ep`` without ``attention_dp``: EP inside the TP group, ``ep`` alone with
    ``attention_dp`` 1). Free: the plain layout (1, 1) and, for MoE serving without
    pipeline stages (``pp`` 1: how EP is deployed; pinned values may add stages), every
    attention-DP degree ``a`` dividing ``rest`` with EP over the whole stage (``ep = tp x a``)
    where that divides the experts."""
    if ep is not None or attention_dp is not None:
        return [(ep or 1, attention_dp or 1)]
    pairs = [(1, 1)]
    found = catalog.model(model)
    if (workload.kind not in SERVING_KINDS or not found.is_moe or not workload.expert_parallel
            or pp > 1):
        return pairs
    experts = found.experts or 0
    pairs += [(tp * a, a) for a in _divisors(rest) if a > 1 and experts % (tp * a) == 0]
    return pairs


def _ranked(catalog: Catalog, model: str, gpu_id: str, gpus: int, workload: Workload,
            precision: str, gpus_per_node: int, fabric: str, tp: int | None, pp: int | None,
            dp: int | None, server: str | None, ep: int | None = None,
            attention_dp: int | None = None) -> tuple[Estimate, ...]:
    found: list[Estimate] = []
    for t in ([tp] if tp else _divisors(gpus)):
        for p in ([pp] if pp else _divisors(gpus // t if gpus % t == 0 else 0)):
            if gpus % (t * p):
                continue
            for e, a in expert_splits(catalog, model, workload, t, gpus // (t * p), ep,
                                      attention_dp, p):
                if gpus % (t * a * p) or (dp is not None and t * a * p * dp != gpus):
                    continue
                layout = Layout(model=model, gpu=gpu_id, precision=precision, tp=t, pp=p,
                                dp=gpus // (t * a * p), gpus_per_node=gpus_per_node,
                                fabric=fabric, server=server, ep=e, attention_dp=a)
                found.append(estimate(catalog, layout, workload))
    if not found:
        raise InputError([Problem("command line", "gpus", gpus,
                                  f"not divisible into tp={tp} x pp={pp}"
                                  + (f" x attention_dp={attention_dp}" if attention_dp
                                     else ""))])
    ranked = sorted(enumerate(found), key=lambda item: (_score(item[1]), -item[0]),
                    reverse=True)
    return tuple(est for _, est in ranked)
