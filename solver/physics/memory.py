"""Memory per GPU of one layout: weights, KV cache, activations, optimizer state, reserve.

All sizes are vendor GB (1e9 bytes) on the fullest GPU of the layout.

Serving (``inference``, ``batch_inference``)
    weights (precision bytes + quantisation scales; embeddings/LM head in 16 bit; MoE: all
    experts resident) split over TP and PP; with attention data parallelism (issue 27) the
    attention/dense part is replicated on each of the ``attention_dp`` ranks and the routed
    experts are split over all ``tp x attention_dp`` GPUs of the stage (expert parallelism),
    and each rank holds the KV cache of its own requests; KV cache = concurrency x (input + output)
    tokens x KV elements per token per GPU x KV bytes x (1 + paging overhead) (MLA: the
    latent + RoPE key per layer; sliding-window layers at most their window of tokens;
    linear-attention layers a fixed state per request instead) — engines that
    guarantee no eviction reserve the whole sequence (concurrency is the layout's total,
    shared by its dp replicas; ``max_concurrency`` is per replica); workspace for one step's token budget;
    CUDA context/graphs and NCCL buffers as the runtime reserve. ``concurrency=None`` sizes
    the KV at the largest concurrency that fits (``max_concurrency``).

Training (``pretrain``, ``full_finetune``, ``lora``, ``qlora``)
    full: 16 B/param of model state (weights 2 + grads 2 + fp32 master 4 + Adam 8) over
    TP x PP, sharded over DP by the ZeRO stage of ``efficiency.yaml`` (default 3 = FSDP full
    shard); LoRA: frozen base at the training precision (16-bit, or FP8: frozen weights need
    no master copy; embeddings 16-bit) + adapters (rank r on all linear layers) with their own
    16 B/param; QLoRA: NF4 base (~0.516 B/param) + 16-bit embeddings + adapters.
    Activations follow Korthikanti et al.: per token per layer ``h (a_rep + a_tp / tp)``
    bytes (``a_rep`` split by TP too under sequence parallelism, i.e. TP on NVLink), or
    ``h a_rc`` with full recompute, times the micro-batch tokens and the layers in flight on
    the first pipeline stage. When the activations do not fit, the footprint reported is the
    full-recompute one (the minimum the job needs) and ``recompute_fraction`` is the share of
    layers a block-recompute schedule must recompute to fit the GPU (what the step time
    pays). LoRA: the footprint has the base sharded by ZeRO-3; ``base_sharded`` is False
    (the step runs with a replicated base, no per-step gathers) whenever that fits.

Rules: ``fits`` = total <= usable capacity (``costs.usable_memory_fraction`` x memory);
``comfortable`` for serving = fits and weights <= ``weights_vram_fraction_max`` x memory and
the VRAM left beside the weights >= ``vram_reserve_fraction`` x memory; for training
``comfortable`` = fits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from solver.catalog.data import Catalog, Gpu, content_key
from solver.catalog.perf_factors import EfficiencyFactors, TrainingStack, factors
from solver.common.memo import Memo
from solver.physics.geometry import Geometry, geometry
from solver.physics.layout import SERVING_KINDS, Layout, MemoryBreakdown, Workload

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
    recompute_fraction: float = 0.0  # share of in-flight layers recomputed in backward
    base_sharded: bool = True  # training: weights (LoRA: the frozen base) sharded over DP
    recompute: str = "selective"  # training: resolved mode none|selective|partial|full
    zero: int = 3  # training: the ZeRO stage the memory was sized for


MEMORY_PLANS: Memo[MemoryPlan] = Memo(65536)
"""Memory plans kept, keyed by catalog content, layout and workload."""


def weight_bytes_per_param(eff: EfficiencyFactors, precision: str) -> float:
    """Bytes per body weight at ``precision`` including quantisation scales."""
    p = eff.precisions
    return p.weight_bytes[precision].value + p.scale_bytes_per_param[precision].value


def kv_bytes_per_element(eff: EfficiencyFactors, precision: str) -> float:
    """Bytes per KV element when serving at weight ``precision``."""
    return eff.precisions.kv_bytes[precision].value


def serving_weight_parts(eff: EfficiencyFactors, geo: Geometry, precision: str,
                         pp: int) -> tuple[float, float]:
    """Serving weights of the fullest pipeline stage, bytes, split into (routed experts,
    everything else: attention, dense and shared MLPs, router, embeddings).

    Served at the width of the model's own quantised checkpoint (4-bit for an MXFP4/INT4
    checkpoint, 8-bit for FP8), the checkpoint is taken as shipped: its own scale bytes, and
    when it quantises only the routed experts (gpt-oss, Kimi) the rest of each layer stays
    16-bit. Otherwise every body weight is at ``precision`` with the catalog's scales."""
    bits = 8.0 * eff.precisions.weight_bytes[precision].value
    experts = geo.stage_expert_params(pp)
    rest = geo.stage_layer_params(pp) - experts
    if geo.checkpoint_bits and abs(bits - geo.checkpoint_bits) < 0.5:
        quantised = eff.precisions.weight_bytes[precision].value + geo.checkpoint_scale_bytes
        rest_bytes = eff.precisions.embedding_bytes.value if geo.checkpoint_experts_only \
            else quantised
        expert_body, rest_body = experts * quantised, rest * rest_bytes
    else:
        per_param = weight_bytes_per_param(eff, precision)
        expert_body, rest_body = experts * per_param, rest * per_param
    emb_bytes = max(eff.precisions.embedding_bytes.value,
                    eff.precisions.weight_bytes[precision].value)
    emb = geo.stage_embedding_params(pp) * emb_bytes
    return expert_body, rest_body + emb


def serving_weights_gb(eff: EfficiencyFactors, geo: Geometry, precision: str,
                       tp: int, pp: int, attention_dp: int = 1) -> float:
    """Serving weights on the fullest GPU, GB: attention, dense layers and embeddings split
    over ``tp`` (replicated on each of the ``attention_dp`` ranks), the routed experts over
    every GPU of the stage (``tp * attention_dp``: expert parallelism, expert TP or both
    hold 1 / (tp x attention_dp) of them each). See :func:`serving_weight_parts`."""
    experts, rest = serving_weight_parts(eff, geo, precision, pp)
    return (rest / tp + experts / (tp * attention_dp)) / GB


def sequence_parallel(gpu: Gpu, layout: Layout, workload: Workload | None = None) -> bool:
    """Whether a training layout runs Megatron-style sequence parallelism. The workload's
    ``sequence_parallel`` knob decides when set (it only matters with TP > 1); unset, SP is
    on where TP > 1 runs on an NVLink domain inside one node (the stacks that run TP there
    enable it by default)."""
    if workload is not None and workload.sequence_parallel is not None:
        return bool(workload.sequence_parallel) and layout.tp > 1
    return (layout.tp > 1 and gpu.intra_node_link == "nvlink"
            and layout.tp <= layout.gpus_per_node)


def zero_stage(eff: EfficiencyFactors, workload: Workload) -> int:
    """The ZeRO stage a training workload runs: its ``zero`` knob, else the catalog's
    default (``training.zero_stage``; 3 = FSDP full shard)."""
    return eff.training.zero_stage if workload.zero is None else workload.zero


def context_parallel(layout: Layout, workload: Workload) -> int:
    """GPUs that split each sequence (context parallelism), taken out of the DP dimension."""
    return max(1, workload.context_parallel)


def training_stack(eff: EfficiencyFactors, kind: str) -> TrainingStack | None:
    """The software stack a training kind runs on (``training.stack_pretrain`` /
    ``stack_finetune``; None when the catalog defines no stacks)."""
    train = eff.training
    name = train.stack_pretrain if kind == "pretrain" else train.stack_finetune
    return train.stacks.get(name) if name else None


def largest_matrix_params(geo: Geometry) -> float:
    """Parameters of the largest weight matrix of a layer (a dense MLP projection, an
    expert's projection or the attention query/output projection)."""
    attn = 2.0 * geo.hidden * geo.heads * geo.head_dim + 2.0 * geo.hidden * geo.kv_heads \
        * geo.head_dim
    per_layer = geo.layer_params / max(geo.layers, 1)
    experts = geo.expert_params / max(geo.layers, 1)
    dense_mlp = max(per_layer - experts - attn, 0.0) / 3.0
    expert = experts / max(geo.experts, 1) / 3.0 if geo.experts else 0.0
    return max(geo.hidden * geo.heads * geo.head_dim, dense_mlp, expert)


def _lora_adapter_params(eff: EfficiencyFactors, geo: Geometry, pp: int) -> float:
    return eff.training.lora_rank.value * geo.lora_params_per_layer * geo.stage_layers(pp)


def _serving(catalog: Catalog, gpu: Gpu, eff: EfficiencyFactors, geo: Geometry,
             layout: Layout, workload: Workload) -> MemoryPlan:
    tp, pp, ranks = layout.tp, layout.pp, layout.attention_dp
    usable = gpu.memory_gb * catalog.costs.usable_memory_fraction.value
    weights = serving_weights_gb(eff, geo, layout.precision, tp, pp, ranks)
    serving = eff.serving
    engine = serving.engines.get(workload.engine) or serving.engines[serving.default_engine]
    workspace = (engine.token_budget.value * geo.hidden
                 * serving.workspace_bytes_per_token_hidden.value / tp / GB)
    reserve = serving.runtime_reserve_gb.value + (
        serving.nccl_buffer_gb.value if tp * ranks * pp > 1 else 0.0)
    seq_tokens = max(workload.input_tokens + workload.output_tokens, 1)
    # sliding-window layers cache at most their window; linear-attention layers hold a fixed
    # recurrent state per request instead of a per-token KV cache
    per_request_bytes = (geo.kv_elements_per_sequence_gpu(tp, pp, seq_tokens)
                         * kv_bytes_per_element(eff, layout.precision)
                         * (1.0 + serving.kv_paging_overhead.value)
                         + geo.state_bytes_per_sequence_gpu(tp, pp))
    kv_token = per_request_bytes / seq_tokens  # average over the sequence
    per_request_gb = per_request_bytes / GB
    free = usable - weights - workspace - reserve
    # attention data parallelism: each of the replica's ``ranks`` attention ranks holds the
    # KV cache of its own requests (``max_conc`` counts the replica's, all ranks together)
    per_rank = int(free // per_request_gb) if free > 0 and per_request_gb > 0 else 0
    max_conc = per_rank * ranks
    # workload.concurrency is the layout's total; each of the dp replicas holds its share,
    # each attention rank its share of that
    conc = (-(-workload.concurrency // (layout.dp * ranks)) if workload.concurrency is not None
            else max(per_rank, 0))
    kv = conc * per_request_gb
    total = weights + kv + workspace + reserve
    cap = gpu.memory_gb
    fits = total <= usable + 1e-9 and (max_conc >= 1)
    reason = ""
    if weights + workspace + reserve > usable:
        reason = (f"weights {weights:.1f} GB + runtime {workspace + reserve:.1f} GB exceed the "
                  f"usable {usable:.1f} GB per GPU")
    elif not fits and max_conc < 1:
        reason = (f"one request of {seq_tokens:,} tokens needs {per_request_gb:.1f} GB of KV "
                  f"cache; only {free:.1f} GB free per GPU")
    elif not fits:
        reason = (f"KV cache for {conc} concurrent x {seq_tokens:,} tokens needs {kv:.1f} GB; "
                  f"only {free:.1f} GB free per GPU (max concurrency {per_rank})")
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
    """Memory of a training layout: model states (sharded by the ZeRO stage; LoRA/QLoRA:
    the frozen base and the adapters), activations on the fullest pipeline stage with the
    recompute that fits, the runtime reserve."""
    dp = layout.dp
    stage = zero_stage(eff, workload)
    usable = gpu.memory_gb * catalog.costs.usable_memory_fraction.value
    kind = workload.kind
    stack = training_stack(eff, kind)
    # QLoRA on a stack that keeps its non-quantised weights in fp32: the residual stream
    # (layer inputs, norms) and the LM head's logits are fp32 too
    upcast = stack.qlora_upcast_bytes.value if stack is not None and kind == "qlora" else 2.0
    weights, grads, optimizer, base = _training_states(eff, geo, layout, kind, stage, upcast)
    acts = _Activations.of(gpu, eff, geo, layout, workload, stack, upcast)
    reserve = eff.serving.runtime_reserve_gb.value + (
        eff.serving.nccl_buffer_gb.value if layout.gpus > 1 else 0.0)
    gather_layers = 2.0 * 2.0 * geo.layer_params / geo.layers / layout.tp  # FSDP prefetch
    mode = workload.recompute
    base_sharded = stage >= 3 and dp > 1  # states (LoRA: the frozen base) sharded over DP
    if kind in ("pretrain", "full_finetune"):
        act, total, recompute = acts.fit(mode, (weights + grads + optimizer) / GB + reserve,
                                         gather_layers if base_sharded else 0.0, usable)
    else:
        replicated_state = (weights + grads + optimizer) / GB + reserve
        if base_sharded:
            weights = base / dp + (weights - base)
        act, total, recompute = acts.fit(mode, (weights + grads + optimizer) / GB + reserve,
                                         gather_layers if base_sharded else 0.0, usable)
        if base_sharded:
            # the footprint reported is the sharded minimum; the step runs with the base
            # replicated (no per-step all-gathers of frozen weights, as NeMo/PEFT LoRA do)
            # whenever that fits the GPU
            _, total_rep, recompute_rep = acts.fit(mode, replicated_state, 0.0, usable)
            if total_rep <= usable:
                base_sharded, recompute = False, recompute_rep
    weights, grads, optimizer = weights / GB, grads / GB, optimizer / GB
    cap = gpu.memory_gb
    fits = total <= usable + 1e-9
    reason = "" if fits else (
        f"{kind} needs {total:.1f} GB per GPU (weights {weights:.1f}, grads {grads:.1f}, "
        f"optimizer {optimizer:.1f}, activations {act:.1f}) > usable {usable:.1f} GB")
    breakdown = MemoryBreakdown(
        weights_gb=weights, kv_cache_gb=0.0, activations_gb=act, optimizer_gb=optimizer,
        total_gb=total, capacity_gb=cap, weights_fraction=weights / cap,
        utilization=total / cap, gradients_gb=grads, reserve_gb=reserve,
        activation_recompute=recompute > 0)
    return MemoryPlan(breakdown, fits, fits, usable, 0, 0.0, recompute > 0, reason,
                      recompute_fraction=recompute, base_sharded=base_sharded,
                      recompute=_resolved_recompute(mode, recompute), zero=stage)


def _training_states(eff: EfficiencyFactors, geo: Geometry, layout: Layout, kind: str,
                     stage: int, upcast: float) -> tuple[float, float, float, float]:
    """Bytes per GPU of (weights, gradients, optimizer state, frozen base) before any
    sharding of a LoRA base: full training shards by the ZeRO stage; LoRA/QLoRA hold the
    frozen base (NF4 for QLoRA) plus adapters with their gradients and optimizer state."""
    tp, pp, dp = layout.tp, layout.pp, layout.dp
    train = eff.training
    stage_params = (geo.stage_layer_params(pp) + geo.stage_embedding_params(pp)) / tp
    state_bytes = train.model_state_bytes_per_param.value
    if kind in ("pretrain", "full_finetune"):
        weight_b, grad_b = 2.0, 2.0
        opt_b = max(state_bytes - weight_b - grad_b, 0.0)
        weights = stage_params * weight_b / (dp if stage >= 3 else 1)
        grads = stage_params * grad_b / (dp if stage >= 2 else 1)
        optimizer = stage_params * opt_b / (dp if stage >= 1 else 1)
        base = weights
    else:
        if kind == "qlora":  # stacks that upcast the non-quantised weights (PEFT's
            # prepare_model_for_kbit_training: embeddings, LM head, norms to fp32) hold them
            # at ``qlora_upcast_bytes``
            body = geo.stage_layer_params(pp) * train.nf4_bytes_per_param.value
            emb = geo.stage_embedding_params(pp) * max(eff.precisions.embedding_bytes.value,
                                                       upcast)
            base = (body + emb) / tp
        else:  # a frozen base needs no higher-precision master copy: FP8 LoRA keeps it in
            # FP8 (Transformer Engine fp8 weights), embeddings and LM head in 16 bit
            body = geo.stage_layer_params(pp) * eff.precisions.weight_bytes[
                layout.precision].value
            emb = geo.stage_embedding_params(pp) * eff.precisions.embedding_bytes.value
            base = (body + emb) / tp
        adapters = _lora_adapter_params(eff, geo, pp) / tp
        grads = adapters * 2.0
        optimizer = adapters * max(state_bytes - 4.0, 0.0)
        weights = base + adapters * 2.0
    return weights, grads, optimizer, base


@dataclass(frozen=True)
class _Activations:
    """Activation memory of one training layout (bytes per token and layer, the loss peak,
    buffers), on the fullest pipeline stage."""

    tokens: float  # this GPU's share of a micro-batch (context parallel splits it)
    per_layer_full: float  # bytes per token of a layer that stores its activations
    per_layer_rc: float  # bytes per token of a recomputed layer (its input only)
    per_layer_scores: float  # attention score tensors per token (kept without recompute)
    in_flight_layers: int  # layers with activations alive on the first stage
    last_in_flight: int  # the last stage holds one micro-batch
    logits: float  # the loss peak (LM head + cross-entropy), last stage
    offload: float  # share of stored activations in host memory
    dequant: float  # QLoRA dequantisation buffers
    pp: int

    @classmethod
    def of(cls, gpu: Gpu, eff: EfficiencyFactors, geo: Geometry, layout: Layout,
           workload: Workload, stack: TrainingStack | None, upcast: float) -> _Activations:
        tp, pp = layout.tp, layout.pp
        train = eff.training
        kind = workload.kind
        cp = context_parallel(layout, workload)
        tokens = workload.micro_batch * workload.seq_len / cp  # this GPU's share of a micro-batch
        h = geo.hidden
        in_flight_layers = geo.stage_layers(pp) * min(pp, _microbatches(eff, layout, workload))
        residual = upcast / 2.0  # residual-stream tensors at fp32 where the stack upcasts
        replicated = train.act_bytes_replicated.value * residual
        per_layer_rc = h * train.act_bytes_recompute.value * residual
        if sequence_parallel(gpu, layout, workload):  # SP shards the norm/dropout activations
            replicated /= tp  # and the layer inputs a full recompute keeps (sequence-sharded)
            per_layer_rc /= tp
        # no recompute at all: the attention core keeps its score-sized tensors (softmax, dropout
        # mask and output: Korthikanti's 5 a s / h term per hidden unit), heads split over TP
        per_layer_scores = (train.attention_score_bytes.value * geo.heads * workload.seq_len / tp)
        # eager attention (no flash/SDPA kernel) keeps them in every layer whose activations are
        # stored, including the one being recomputed
        scores_kept = stack.attention_scores_kept.value if stack is not None else 0.0
        per_layer_full = (h * (replicated + train.act_bytes_tp_split.value / tp)
                          + scores_kept * per_layer_scores)
        # LM head + cross-entropy: the stack's peak bytes per logit (bf16 logits, fp32 upcast,
        # log-softmax / gradient; chunked or fused losses hold less), on the last pipeline
        # stage; an fp32 LM head (QLoRA upcast) emits fp32 logits
        if stack is not None:
            ce_bytes = stack.cross_entropy_bytes.value + (upcast - 2.0)
        else:
            ce_bytes = train.logits_bytes.value if train.logits_bytes is not None else 2.0
        logits = tokens * geo.vocab * ce_bytes / tp
        offload = stack.activation_offload.value if stack is not None else 0.0
        # QLoRA dequantises each NF4 matrix to 16 bit for its matmul (forward and backward)
        dequant = 0.0
        if kind == "qlora" and train.qlora_dequant_matrices is not None:
            dequant = (train.qlora_dequant_matrices.value * largest_matrix_params(geo) * 2.0
                       / tp)
        return cls(tokens, per_layer_full, per_layer_rc, per_layer_scores, in_flight_layers,
                   geo.stage_layers(pp), logits, offload, dequant, pp)

    def activations(self, fraction: float, gather: float) -> float:
        """Activation GB with ``fraction`` of the in-flight layers recomputed (those keep
        their input only; one recomputed layer is live at a time) on the fullest stage. The
        loss peak (end of forward, start of backward) and a recomputed layer are not live
        together; offloaded stored activations sit in host memory."""
        per_layer = self.per_layer_full * (1.0 - fraction) + self.per_layer_rc * fraction
        extra = self.tokens * self.per_layer_full if fraction > 0 else 0.0
        stored = self.tokens * per_layer * (1.0 - self.offload)
        first = stored * self.in_flight_layers + extra
        last = stored * self.last_in_flight + max(extra, self.logits)
        if self.pp <= 1:
            first = last
        return (max(first, last) + gather + self.dequant) / GB

    def fit(self, mode: str, state_gb: float, gather: float,
            usable: float) -> tuple[float, float, float]:
        """(activations, total, recompute fraction). ``auto``: no block recompute when it
        fits; else the reported footprint is the full-recompute one (the minimum the job
        needs, as torchtune/FSDP checkpointing reports it) while the step time assumes block
        recompute of just enough layers to fit the GPU (Megatron recompute_num_layers).
        An explicit mode is taken as given (fits or not)."""
        if mode == "none":
            act = (self.activations(0.0, gather)
                   + self.tokens * self.per_layer_scores * self.in_flight_layers / GB)
            return act, state_gb + act, 0.0
        if mode in ("selective", "full"):
            fraction = 1.0 if mode == "full" else 0.0
            act = self.activations(fraction, gather)
            return act, state_gb + act, fraction
        act = self.activations(0.0, gather)
        if state_gb + act <= usable:
            return act, state_gb + act, 0.0
        act_rc = self.activations(1.0, gather)
        if state_gb + act_rc <= usable:
            fraction = min(1.0, (state_gb + act - usable) / max(act - act_rc, 1e-12) + 1e-6)
            return act_rc, state_gb + act_rc, fraction
        if act_rc < act:
            return act_rc, state_gb + act_rc, 1.0
        return act, state_gb + act, 0.0


def _resolved_recompute(mode: str, fraction: float) -> str:
    """The recompute mode a training step runs: an explicit one as given; ``auto`` is
    ``selective`` (flash attention recomputes the attention core) plus block recompute of
    ``fraction`` of the layers: ``partial`` between none and all, ``full`` at all."""
    if mode != "auto":
        return mode
    if fraction <= 0.0:
        return "selective"
    return "full" if fraction >= 1.0 - 1e-6 else "partial"


def _microbatches(eff: EfficiencyFactors, layout: Layout, workload: Workload) -> int:
    """Micro-batches per optimizer step per DP replica (global batch / dp / micro-batch)."""
    if workload.global_batch_tokens:
        # a context-parallel group of cp GPUs works on the same sequences: dp / cp replicas
        replicas = max(1, layout.dp // max(1, workload.context_parallel))
        per_replica = workload.global_batch_tokens / replicas
        return max(1, round(per_replica / (workload.micro_batch * workload.seq_len)))
    return max(1, int(eff.training.microbatches_per_stage.value * layout.pp))


def microbatches(catalog: Catalog, layout: Layout, workload: Workload) -> int:
    """Micro-batches per optimizer step per DP replica of a training layout."""
    return _microbatches(factors(catalog), layout, workload)


def _plan(catalog: Catalog, layout: Layout, workload: Workload) -> MemoryPlan:
    eff = factors(catalog)
    gpu = catalog.gpus[layout.gpu]
    geo = geometry(catalog.model(layout.model))
    if workload.kind in SERVING_KINDS:
        return _serving(catalog, gpu, eff, geo, layout, workload)
    return _training(catalog, gpu, eff, geo, layout, workload)


def memory_plan(catalog: Catalog, layout: Layout, workload: Workload) -> MemoryPlan:
    """Memory of a layout with fit rules and the largest concurrency that fits (cached).

    Memory does not depend on latency SLOs, so they are left out of the cache key: the
    Pareto walk re-estimates the same layouts at many SLO levels. Nor on the fabric or the
    server (``tests/test_candidates_identical.py`` checks the plans are equal).
    """
    if workload.ttft_ms is not None or workload.tpot_ms is not None:
        workload = replace(workload, ttft_ms=None, tpot_ms=None)
    # nor on the fabric or the server chassis (nothing in _plan reads them): one plan
    # serves a span on every fabric the candidate stage tries
    key = (content_key(catalog), layout.model, layout.gpu, layout.precision, layout.tp,
           layout.pp, layout.dp, layout.gpus_per_node, layout.attention_dp, workload)
    return MEMORY_PLANS.get(key, lambda: _plan(catalog, layout, workload))


def memory_breakdown(catalog: Catalog, layout: Layout, workload: Workload) -> MemoryBreakdown:
    """Memory per GPU (the fullest one) of ``layout`` running ``workload``, GB."""
    return memory_plan(catalog, layout, workload).breakdown


def fits(catalog: Catalog, layout: Layout, workload: Workload) -> bool:
    """Whether the layout fits usable memory (total <= usable fraction x capacity)."""
    return memory_plan(catalog, layout, workload).fits


def comfortable(catalog: Catalog, layout: Layout, workload: Workload) -> bool:
    """Whether the layout fits and respects the guide's weights/reserve rule."""
    return memory_plan(catalog, layout, workload).comfortable
