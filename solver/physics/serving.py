"""Serving under load: TTFT, TPOT and throughput of one replica at a concurrency or a rate.

Continuous batching with chunked prefill (vLLM, SGLang, TensorRT-LLM). Each engine step on
one pipeline stage processes the decode tokens of the running requests plus a prefill chunk
(at most the engine's ``token_budget`` tokens in all); its time is the sum of per-kernel
rooflines (:func:`stage_step_s`: linear layers, prefill attention, decode attention, TP
all-reduces, the GPU family's launch overhead), each at most the family's achievable share
of the GPU's peak FLOP/s or memory bandwidth. The engine's kernel factor ``k_d`` >= 1
stretches what its kernels do below the compute roofline: reading weights and KV cache, the
collectives and the launch time of every step (TensorRT-LLM, vLLM and SGLang ship different
attention, all-reduce and graph-capture code); compute-bound matmuls run at the family's
GEMM efficiency whatever the engine. From that physics, three *features* of one
replica with ``B`` requests running (prompt ``I``, output ``O`` tokens), in seconds:

    A(B)   a decode step of the B running requests (no prefill)        (per output token)
    S(B)   one prompt's own prefill: its chunks, each sharing a step with the B - 1 decodes
    W(B)   the prefill of the B - 1 other prompts at the full-budget rate

**Work is conserved.** Every request of the B running ones turns over once per cycle, so a
cycle holds one prefill of every prompt and O decode steps::

    cycle(B) = o_p + S + W + O (A + o_d + r B)          (mean TTFT + O x mean TPOT)

Each term is at least the time its FLOPs take at peak (the family's efficiencies are <= 1)
and its bytes at the memory bandwidth, so the throughput ``B O / cycle`` never exceeds the
roofline (``tests/test_serving_roofline.py`` checks it over random models, GPUs, precisions
and loads). The engine's labelled factors (``catalog/efficiency.yaml`` ``serving.engines``,
each confined to a physical range by the catalog schema) only say *where* the others'
prefill lands — before a request's first token or between its output tokens — never that
it is skipped:

    TTFT(u) = o_p + S + W min(1, 2 w u)             TPOT(u) = A + o_d + r B + (W / O) (1 - min(1, 2 w u))

for a request at position ``u`` (uniform on 0..1) of the others' prefill: ``w`` = 0 is a
fully desynchronised engine (every decode step carries its share of the others' chunks),
``w`` = 0.5 synchronised waves (the median request waits for half the others' prefill and
sees the other half between its tokens), 1 a prefill-first scheduler. For every ``u`` the
two shares add up to all of ``W``. ``o_d`` and ``o_p`` are fixed engine times per step and
per request, ``r`` the engine's CPU time per running request per step. Under attention data
parallelism with ``n`` ranks (issue 27) each rank has its own scheduler, so ``r B`` becomes
``r B / n``, and an aggregated step waits for its busiest rank: ``A`` becomes ``s A`` with
``s`` = ``serving.attention_dp_step_factor`` (not in a disaggregated decode pool,
:func:`decode_step_s`).

**Queues.** An engine runs at most ``B_max = min(KV capacity, the engine's
max_running_requests)`` requests at once. A closed loop of C > B_max users (a new request
as soon as one finishes) keeps B_max running; the others wait for a slot, C - B_max
completions at the rate ``X = B_max / cycle``, so TTFT grows by ``(C - B_max) / X`` while TPOT
and throughput stay those of B_max (what NIM's 2 x H100 Llama-3.3-70B table shows from
concurrency 100 to 250).

Open loop (``qps``: Poisson arrivals, what production traffic and MLPerf Server are):
requests arrive out of step, so every decode step carries its share of the others' prefill
(w = 0); the live requests N per replica solve Little's law N = λ (TTFT + O TPOT) (fixed
point: none means the replica is overloaded, which conservation makes certain once λ times
a request's work exceeds one second per second); the prefill is an M/D/1 queue with service
time s (a prompt's share of its chunk steps) and load ρ = λ s; its wait has mean
ρ s / (2 (1 - ρ)) and the tail P(W > t) = ρ exp(-t ρ / W̄). TPOT at percentile p is the TPOT
at N + z_p √N live requests (Poisson count of requests in flight).

Capacity for the planner: ``max_concurrency`` = the largest closed-loop C <= B_max whose
TTFT/TPOT at the workload's SLO percentile meet the SLOs; ``qps_capacity`` = the largest
arrival rate whose open-loop percentiles meet them with N + z_p √N <= B_max.

**Expert parallelism and attention data parallelism** (MoE, issue 27; docs/expert-parallel.md).
A replica of ``attention_dp`` ranks runs in lockstep: every per-token term is per token of the
replica's step on one GPU — linear-layer FLOPs over the stage's ``tp x attention_dp`` GPUs
(the expert share times the labelled ``serving.moe_ep_load_imbalance`` when ``ep > 1``),
attention and KV reads for the rank's own ``1 / attention_dp`` of the tokens, TP all-reduces
of the rank's tokens, and the all-to-all dispatch + combine of :func:`all_to_all_s`; the
token budget and ``max_running_requests`` are per rank, and a prompt's prefill runs on one
rank within its budget while the other ranks prefill theirs.

**Calibration margin.** Each GPU family x engine carries its calibration (rows, error with
whole sources held out; ``serving.calibration`` in efficiency.yaml, written by ``procure
calibrate --write-factors``). Where a family or engine has too few measurements, the
latencies are planned ``margin`` higher (and throughput lower) — :mod:`solver.physics.coverage`
says how much and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from solver.catalog.data import Catalog
from solver.catalog.perf_factors import EngineFactors, factors
from solver.common.errors import InputError, Problem
from solver.physics.coverage import serving_calibration
from solver.physics.geometry import Geometry, geometry
from solver.physics.layout import Layout, Prediction, Workload
from solver.physics.links import Link, all_reduce_s, group_link, p2p_s
from solver.physics.memory import GB, MemoryPlan, serving_weights_gb

PERCENTILES = (50, 90, 95, 99)
_Z = {50: 0.0, 90: 1.2816, 95: 1.6449, 99: 2.3263}
ZERO = Prediction(tokens_per_s=0.0, tokens_per_s_per_gpu=0.0, max_concurrency=0,
                  qps_capacity=0.0)


@dataclass(frozen=True)
class Constants:
    """Per-GPU constants of one serving layout (SI units: bytes, FLOP/s, seconds)."""

    geo: Geometry
    tp: int
    pp: int
    dense_bytes: float
    expert_bytes: float
    kv_bytes_token: float
    flops_per_token: float
    attn_flops_per_ctx: float
    peak_flops: float  # dense tensor peak x the family's GEMM efficiency (<= peak)
    mem_bw: float  # memory bandwidth x the family's bandwidth efficiency (<= bandwidth)
    overhead_s: float
    tp_group_link: Link
    pp_link: Link
    budget: float
    min_chunk: float
    decode_fill: float
    layers: int = 1            # layers on the fullest stage
    comm_fixed_s: float = 0.0  # TP all-reduces of one step: latency part ...
    comm_per_token_s: float = 0.0  # ... and the part per token of the step
    expert_miss: float = 1.0   # 1 - k / E: chance a token skips one expert
    hop_fixed_s: float = 0.0   # pipeline hops of one step: latency part ...
    hop_per_token_s: float = 0.0  # ... and the part per token
    ranks: int = 1             # attention data-parallel ranks of the replica (budget each)
    a2a_fixed_s: float = 0.0   # expert-parallel all-to-alls of one step: latency part ...
    a2a_per_token_s: float = 0.0  # ... and the part per token of the replica's step
    rank_sync: float = 1.0     # aggregated attention DP: the busiest rank over the mean step
    read_scale: float = 1.0    # the engine's k_d on reads, collectives and launch time
    kernel_collectives: bool = True  # TP all-reduces run as the engine's kernels (NVLink)
    memo: dict = field(default_factory=dict, compare=False, hash=False, repr=False)


def _compute_precision(catalog: Catalog, gpu_id: str, precision: str) -> str:
    eff = factors(catalog)
    gpu = catalog.gpus[gpu_id]
    compute = eff.precisions.compute_precision[precision]
    return compute if compute in gpu.dense_tflops else "bf16"


def engine_factors(catalog: Catalog, engine: str, gpu_id: str | None = None) -> EngineFactors:
    """The labelled factor set of a serving engine. An unknown engine, or an engine that
    does not run on ``gpu_id``'s vendor (TensorRT-LLM on AMD), is an :class:`InputError`."""
    engines = factors(catalog).serving.engines
    if engine not in engines:
        raise InputError([Problem("workload", "engine", engine,
                                  f"unknown serving engine; known: {', '.join(sorted(engines))}")])
    found = engines[engine]
    if gpu_id is not None and not engine_runs_on(catalog, engine, gpu_id):
        vendor = catalog.gpus[gpu_id].vendor
        raise InputError([Problem("workload", "engine", engine,
                                  f"{found.label or engine} does not run on {vendor} GPUs "
                                  f"({gpu_id}); it runs on {', '.join(found.vendors)}")])
    return found


def engine_runs_on(catalog: Catalog, engine: str, gpu_id: str) -> bool:
    """Whether serving ``engine`` runs on ``gpu_id`` (its vendor is one the engine supports;
    an unknown engine runs nowhere)."""
    found = factors(catalog).serving.engines.get(engine)
    return found is not None and catalog.gpus[gpu_id].vendor in found.vendors


def constants(catalog: Catalog, layout: Layout, plan: MemoryPlan,
              engine: EngineFactors | None = None) -> Constants:
    """The physics constants of ``layout`` (one replica) from the catalog; ``engine``'s token
    budget bounds a step (None: the catalog's default engine)."""
    eff = factors(catalog)
    if engine is None:
        engine = eff.serving.engines[eff.serving.default_engine]
    gpu = catalog.gpus[layout.gpu]
    geo = geometry(catalog.model(layout.model))
    fam = eff.family(gpu.family)
    tp, pp, ranks = layout.tp, layout.pp, layout.attention_dp
    stage_gpus = tp * ranks  # attention-DP ranks x TP: the GPUs the experts are spread over
    compute = _compute_precision(catalog, layout.gpu, layout.precision)
    gemm = fam.gemm(compute)
    share = 0.0
    if geo.experts:  # expert GEMMs (few rows per expert, imbalance) at their own efficiency
        share = min(geo.expert_params * geo.experts_per_token / geo.experts
                    / geo.matmul_active_params, 1.0)
        gemm /= (1.0 - share) + share / eff.serving.moe_expert_gemm_efficiency.value
    imbalance = ep_imbalance(catalog, layout)
    # weights per GPU at the attention TP, split into the routed experts (1 / ranks of it
    # per GPU under attention data parallelism) and the rest (replicated per rank)
    weights = (plan.breakdown.weights_gb * GB if ranks == 1 else
               serving_weights_gb(eff, geo, layout.precision, tp, pp) * GB)
    expert_share = geo.expert_params / geo.params if geo.experts else 0.0
    bw_eff = fam.mem_bw_efficiency.value * eff.precisions.weight_only_bw_efficiency[
        layout.precision].value
    stage_share = geo.stage_layers(pp) / geo.layers
    ovh = (fam.step_overhead_us.value + fam.layer_overhead_us.value * geo.stage_layers(pp)) * 1e-6
    tp_link = group_link(catalog, gpu, layout.fabric, layout.gpus_per_node, tp, layout.server)
    ar_bytes = geo.hidden * eff.serving.activation_bytes.value
    overlap = 1.0 - eff.serving.tp_comm_overlap.value
    per_step = 2.0 * geo.stage_layers(pp) * overlap
    # all_reduce_s is affine in the bytes: split it once into latency and per-token parts;
    # an attention rank all-reduces its own tokens only (1 / ranks of the replica's step)
    fixed = per_step * all_reduce_s(tp_link, tp, 1e-30) if tp > 1 else 0.0
    per_token = (per_step * (all_reduce_s(tp_link, tp, ar_bytes * 1e6)
                             - all_reduce_s(tp_link, tp, 1e-30)) / 1e6 / ranks) if tp > 1 else 0.0
    a2a_fixed, a2a_token = all_to_all_s(catalog, layout, geo, ar_bytes / geo.hidden)
    pp_link = group_link(catalog, gpu, layout.fabric, layout.gpus_per_node, tp * pp,
                         layout.server)
    # p2p_s is affine in the bytes as well
    hop_fixed = (pp - 1) * p2p_s(pp_link, 1e-30) if pp > 1 else 0.0
    hop_token = ((pp - 1) * (p2p_s(pp_link, ar_bytes * 1e6) - p2p_s(pp_link, 1e-30)) / 1e6
                 if pp > 1 else 0.0)
    return Constants(
        geo=geo, tp=tp, pp=pp,
        dense_bytes=weights * (1.0 - expert_share),
        expert_bytes=weights * expert_share / ranks,
        # per token of the replica's step on one GPU: each token's attention and dense
        # layers run on its rank's tp GPUs (1 / ranks of the step's tokens per rank), its
        # routed experts on the stage's GPUs; the busiest GPU of an EP group carries
        # ``imbalance`` x the mean expert work
        kv_bytes_token=plan.kv_bytes_per_token_gpu / ranks,
        flops_per_token=(2.0 * geo.matmul_active_params * stage_share / stage_gpus
                         * ((1.0 - share) + share * imbalance)),
        attn_flops_per_ctx=geo.attention_flops_per_token(1.0) * stage_share / stage_gpus,
        peak_flops=gpu.dense_tflops[compute] * 1e12 * gemm,
        mem_bw=gpu.mem_bw_gbs * 1e9 * bw_eff, overhead_s=ovh,
        tp_group_link=tp_link,
        pp_link=pp_link, hop_fixed_s=hop_fixed, hop_per_token_s=hop_token,
        budget=engine.token_budget.value * ranks, ranks=ranks,
        a2a_fixed_s=a2a_fixed, a2a_per_token_s=a2a_token,
        rank_sync=attention_dp_sync(catalog, layout),
        read_scale=engine.tpot_kernel_scale.value,
        kernel_collectives=not tp_link.crosses_nodes and gpu.intra_node_link != "pcie",
        min_chunk=eff.serving.min_prefill_chunk_fraction.value,
        decode_fill=eff.serving.kv_decode_fill.value,
        layers=geo.stage_layers(pp), comm_fixed_s=fixed, comm_per_token_s=per_token,
        expert_miss=(1.0 - geo.experts_per_token / geo.experts) if geo.experts else 1.0,
    )


def attention_dp_sync(catalog: Catalog, layout: Layout) -> float:
    """The aggregated attention-DP step factor of ``layout``
    (``serving.attention_dp_step_factor``; 1 without attention data parallelism or where the
    catalog has none): every rank waits for the busiest one at each step's all-to-all."""
    factor = factors(catalog).serving.attention_dp_step_factor
    return factor.value if layout.attention_dp > 1 and factor is not None else 1.0


def ep_imbalance(catalog: Catalog, layout: Layout) -> float:
    """The expert-parallel load imbalance of ``layout``: routed tokens on the busiest GPU of
    an EP group over the mean (``serving.moe_ep_load_imbalance``; 1 without EP)."""
    factor = factors(catalog).serving.moe_ep_load_imbalance
    return factor.value if layout.ep > 1 and factor is not None else 1.0


def all_to_all_bytes(geo: Geometry, tokens: float, ep: int, stage_gpus: int,
                     activation_bytes: float) -> float:
    """Bytes one GPU sends in one expert-parallel dispatch (the combine sends as many back)
    of one MoE layer for a step of ``tokens`` tokens of the replica: every token goes to
    its ``top-k`` experts (``hidden`` activations of ``activation_bytes`` each); the
    ``stage_gpus`` GPUs share the tokens, a token's expert sits on another EP rank with
    chance ``(ep - 1) / ep``, and an expert split over ``stage_gpus / ep`` GPUs (expert TP
    inside EP) receives the token on each of them::

        tokens x k x hidden x bytes x (ep - 1) / ep x (stage_gpus / ep) / stage_gpus
    """
    if ep <= 1 or not geo.experts or tokens <= 0:
        return 0.0
    return (tokens * geo.experts_per_token * geo.hidden * activation_bytes
            * (ep - 1) / ep * (stage_gpus / ep) / stage_gpus)


def all_to_all_s(catalog: Catalog, layout: Layout, geo: Geometry,
                 activation_bytes: float) -> tuple[float, float]:
    """Expert-parallel all-to-alls of one step of ``layout`` on its fullest stage, split
    into (seconds of latency, seconds per token of the replica's step): a dispatch and a
    combine per MoE layer, each one latency hop of the group's link (NVLink inside a node,
    the fabric across nodes) plus the bytes of :func:`all_to_all_bytes` at the link's
    bandwidth, the busiest GPU carrying the imbalance. With attention data parallelism
    only: EP inside a TP group (no attention DP) needs no dispatch (every TP rank holds
    every token) and keeps the TP all-reduces.

    Across nodes the dispatch is hierarchical, as DeepEP's internode kernels (SGLang, vLLM)
    and DeepSeek-V3's own system (arXiv:2412.19437 sec. 3.2.2) run it: a token crosses the
    fabric once to each other node that holds one of its experts, and that node's GPUs
    forward it over NVLink. With the stage's experts spread evenly over ``n`` nodes a
    token's ``k`` experts touch ``(n - 1)(1 - (1 - 1/n)^k)`` other nodes on average; those
    copies leave on this GPU's share of its node's fabric NICs, while every copy (direct or
    forwarded) moves on NVLink; whichever takes longer sets the time."""
    if layout.ep <= 1 or layout.attention_dp <= 1 or not geo.experts:
        return 0.0, 0.0
    gpu = catalog.gpus[layout.gpu]
    stage, per_node = layout.stage_gpus, layout.gpus_per_node
    link = group_link(catalog, gpu, layout.fabric, per_node, stage, layout.server)
    moe_layers = geo.moe_layer_count * geo.stage_layers(layout.pp) / geo.layers
    per_token = all_to_all_bytes(geo, 1.0, layout.ep, stage, activation_bytes)
    fixed = 2.0 * moe_layers * p2p_s(link, 1e-30)
    if link.busbw_gbs <= 0:
        return float("inf"), float("inf")
    seconds = per_token / (link.busbw_gbs * 1e9)
    if stage > per_node:  # across nodes: one copy per other node on the fabric (this
        # GPU's share of its node's NICs), every copy on NVLink, both at once
        nvlink = group_link(catalog, gpu, layout.fabric, per_node, per_node, layout.server)
        nodes = stage / per_node
        remote = (nodes - 1.0) * (1.0 - (1.0 - 1.0 / nodes) ** geo.experts_per_token)
        fabric = remote * geo.hidden * activation_bytes / stage  # per GPU per replica token
        seconds = max(fabric / (link.busbw_gbs / per_node * 1e9),
                      per_token / (nvlink.busbw_gbs * 1e9))
    return fixed, 2.0 * moe_layers * seconds * ep_imbalance(catalog, layout)


# --------------------------------------------------------------------------- physics
def stage_step_s(c: Constants, prefill: float, prompt_ctx: float, decode: float,
                 decode_ctx: float) -> float:
    """One engine step on one stage: ``prefill`` prompt tokens (attending ``prompt_ctx``
    on average) plus ``decode`` tokens (attending ``decode_ctx``), seconds.

    Kernels run one after another, so each gets its own roofline: the linear layers
    (compute for all tokens vs reading the weights), prefill attention (compute) and decode
    attention (reading the KV cache), then TP collectives and the fixed overhead. The
    engine's ``c.read_scale`` (k_d >= 1) stretches the reads, the fixed overhead and, where
    the engine runs them as its own kernels (``c.kernel_collectives``: a TP group on NVLink
    or Infinity Fabric inside one node), the TP all-reduces; never the compute-bound terms,
    collectives bound by a PCIe or network link, nor the expert all-to-alls (which carry
    their own load imbalance, ``serving.moe_ep_load_imbalance``)."""
    tokens = prefill + decode
    weights = c.dense_bytes
    if c.expert_bytes:  # experts a step of ``tokens`` tokens touches (expected share)
        weights += c.expert_bytes * (1.0 - c.expert_miss ** max(tokens, 0.0))
    gemm = max(tokens * c.flops_per_token / c.peak_flops, c.read_scale * weights / c.mem_bw)
    attn_prefill = c.attn_flops_per_ctx * prefill * prompt_ctx / c.peak_flops
    attn_decode = max(c.attn_flops_per_ctx * decode * decode_ctx / c.peak_flops,
                      c.read_scale * decode * decode_ctx * c.kv_bytes_token / c.mem_bw)
    comm = c.comm_fixed_s + c.comm_per_token_s * tokens if tokens > 0 else 0.0
    a2a = c.a2a_fixed_s + c.a2a_per_token_s * tokens if tokens > 0 else 0.0
    comm *= c.read_scale if c.kernel_collectives else 1.0
    return gemm + attn_prefill + attn_decode + a2a + comm + c.read_scale * c.overhead_s


def _hops_s(c: Constants, tokens: float) -> float:
    """The pp - 1 stage-to-stage sends of one step's ``tokens`` activations, seconds."""
    if c.pp <= 1 or tokens <= 0:
        return 0.0
    return c.hop_fixed_s + c.hop_per_token_s * tokens


@dataclass(frozen=True)
class Features:
    """The physics of one replica with ``batch`` requests running (seconds, module doc)."""

    decode: float    # A
    prefill: float   # S
    wait: float      # W
    chunks: int
    chunk: float = 0.0   # prefill tokens a step leaves to a new prompt
    batch: float = 1.0   # running requests
    budget_step: float = 0.0  # a step of a full token budget of prefill
    ranks: int = 1       # attention-DP ranks, each with its own scheduler process
    sync: float = 1.0    # the busiest rank over the mean (aggregated attention DP)


def prefill_rate_s(c: Constants, inp: int, out: int) -> float:
    """Seconds per prompt token of prefill at the full-budget rate: a step of ``budget``
    prompt tokens on every stage, pipelined (one stage time per budget)."""
    key = (inp, out)
    per_token = c.memo.get(key)
    if per_token is None:  # independent of the batch: once per request shape
        ctx = inp + c.decode_fill * out
        per_token = c.memo[key] = (stage_step_s(c, c.budget, inp / 2.0, 0.0, ctx)
                                   + _hops_s(c, c.budget)) / c.budget
    return per_token


def features(c: Constants, batch: float, inp: int, out: int) -> Features:
    """A, S, W of one replica with ``batch`` requests of ``inp``/``out`` tokens running."""
    batch = max(batch, 1.0)
    ctx = inp + c.decode_fill * out
    per_micro = batch / c.pp
    decode = c.pp * stage_step_s(c, 0.0, inp / 2.0, per_micro, ctx) + _hops_s(c, per_micro)
    # a new prompt's own chunks, each beside the other requests' decodes; with attention
    # data parallelism the prompt runs on one rank, within that rank's budget, while the
    # other ranks prefill theirs in the same steps (``ranks`` chunks a step)
    others = (batch - 1.0) / c.pp
    ranks = c.ranks
    budget = c.budget / ranks
    chunk = max(budget - others / ranks, budget * c.min_chunk)
    chunks = max(1, math.ceil(inp / chunk))
    full = math.floor(inp / chunk)  # full chunks, then what is left of the prompt
    last = inp - full * chunk
    own = c.pp * (full * stage_step_s(c, ranks * chunk, inp / 2.0, others, ctx)
                  + (stage_step_s(c, ranks * last, inp / 2.0, others, ctx) if last > 0
                     else 0.0))
    own += _hops_s(c, min(inp, chunk) + others)
    per_token = prefill_rate_s(c, inp, out)
    wait = (batch - 1.0) * inp * per_token
    return Features(decode, own, wait, chunks, chunk, batch, per_token * c.budget, ranks,
                    c.rank_sync)


# --------------------------------------------------------------------------- latency
@dataclass(frozen=True)
class Latency:
    """TTFT and TPOT (seconds) at percentiles 50/90/95/99, the requests running per
    replica (``live``) and those waiting for a slot (``queued``, closed loop), and the mean
    time a request spends in the system (``cycle``: mean TTFT + O x mean TPOT)."""

    ttft: dict[int, float]
    tpot: dict[int, float]
    live: float
    cycle: float
    queued: float = 0.0
    makespan: float = 0.0  # wave: seconds until the last request of the batch is done
    ttft_mean: float | None = None  # open loop: the mean TTFT (percentiles above)


def _wait_share(w: float, u: float) -> float:
    """Share of the others' prefill that lands before the first token of a request at
    position ``u`` (0..1); the rest lands between its output tokens."""
    return min(1.0, 2.0 * w * u)


def _engine_decode_s(e: EngineFactors, f: Features) -> float:
    """A decode step on the engine without the others' prefill: its kernels (with the
    engine's k_d in them, :func:`stage_step_s`), the fixed per-step time and the CPU time per
    running request.

    Under attention data parallelism every rank runs its own scheduler process (SGLang's DP
    attention, TensorRT-LLM's attention DP and vLLM's ``-dp`` each start one per rank), so
    the CPU time is that of one rank's ``batch / ranks`` requests, paid by all ranks at once;
    and in an aggregated engine prompts and their chunks land on one rank at a time, so each
    step waits for the busiest rank: the kernels carry ``f.sync``
    (``serving.attention_dp_step_factor``)."""
    return (f.decode * f.sync + e.tpot_overhead_ms.value * 1e-3
            + e.tpot_per_request_us.value * f.batch / f.ranks * 1e-6)


def decode_step_s(e: EngineFactors, f: Features) -> float:
    """A decode step of ``f.batch`` requests on engine ``e`` with no prefill beside it (a
    disaggregated decode pool), seconds. Its ranks decode only, with the same number of
    requests each (the router balances them), so no rank waits for another: no
    ``attention_dp_step_factor``."""
    return _engine_decode_s(e, replace(f, sync=1.0))


def cycle_s(e: EngineFactors, f: Features, out: int, margin: float = 0.0) -> float:
    """Mean time a request of a batch that starts together spends running (mean TTFT + ``out``
    x mean TPOT), seconds: its own prefill, every other prompt's prefill once, ``out`` engine
    decode steps. The offline-throughput cycle (requests already queued at the engine)."""
    return (1.0 + margin) * (e.ttft_overhead_ms.value * 1e-3 + f.prefill + f.wait
                             + out * _engine_decode_s(e, f))


CLOSED_ARRIVAL_STEPS = 1.0
"""Steps a closed-loop request waits before its prefill starts: it is sent when the previous
one's last token comes out, so it arrives while the next step runs and joins the one after."""
OPEN_ARRIVAL_STEPS = 0.5
"""Steps a Poisson arrival waits for the step in progress to end (half a step on average)."""


def _step_s(e: EngineFactors, f: Features, out: int, between: float) -> float:
    """The mean engine step: the decode step plus the ``between`` share of the others'
    prefill spread over the output tokens, at most one full token budget of prefill."""
    return _engine_decode_s(e, f) + min(f.wait / out * between, f.budget_step)


def _closed_step_s(e: EngineFactors, f: Features, out: int) -> float:
    """The mean engine step of a closed loop (the others' prefill that lands between output
    tokens rides along)."""
    return _step_s(e, f, out, 1.0 - e.prefill_wait_share.value)


def _closed_at(e: EngineFactors, f: Features, out: int, p: int,
               margin: float) -> tuple[float, float]:
    """(TTFT, TPOT) at percentile ``p`` of a closed loop on the engine, seconds."""
    w = e.prefill_wait_share.value
    ttft = (e.ttft_overhead_ms.value * 1e-3 + f.prefill + f.wait * _wait_share(w, p / 100.0)
            + (CLOSED_ARRIVAL_STEPS + e.ttft_pipeline_steps.value) * _closed_step_s(e, f, out))
    tpot = _engine_decode_s(e, f) + f.wait / out * (1.0 - _wait_share(w, 1.0 - p / 100.0))
    return ttft * (1.0 + margin), tpot * (1.0 + margin)


def closed_loop(c: Constants, e: EngineFactors, batch: float, inp: int, out: int,
                margin: float = 0.0, slots: float = math.inf) -> Latency:
    """Latency with ``batch`` users in a closed loop on this replica; at most ``slots``
    requests run at once, the others wait for a slot."""
    running = max(1.0, min(batch, slots))
    f = features(c, running, inp, out)
    cycle = cycle_s(e, f, out, margin) + (1.0 + margin) * (
        CLOSED_ARRIVAL_STEPS + e.ttft_pipeline_steps.value) * _closed_step_s(e, f, out)
    queued = max(batch - running, 0.0)
    queue_wait = queued * cycle / running  # (C - B) completions at B / cycle per second
    ttft, tpot = {}, {}
    for p in PERCENTILES:
        ttft[p], tpot[p] = _closed_at(e, f, out, p, margin)
        ttft[p] += queue_wait
    return Latency(ttft=ttft, tpot=tpot, live=running, cycle=cycle + queue_wait,
                   queued=queued)


def wave(c: Constants, e: EngineFactors, batch: float, inp: int, out: int,
         margin: float = 0.0, slots: float = math.inf) -> Latency:
    """Latency of ``batch`` requests sent at once to an idle replica (a static batch, a
    burst): each waits for the prompts ahead of it in the wave, and the prompts behind it land
    between its output tokens. More than ``slots`` requests run in successive waves; the
    batch's throughput is ``batch / makespan``."""
    running = max(1.0, min(batch, slots))
    f = features(c, running, inp, out)
    cycle = cycle_s(e, f, out, margin)
    waves = math.ceil(max(batch, 1.0) / running)
    queue_wait = (waves - 1) / 2.0 * cycle  # mean over the waves
    ttft, tpot = {}, {}
    base = (e.ttft_overhead_ms.value * 1e-3 + f.prefill
            + e.ttft_pipeline_steps.value * _engine_decode_s(e, f))
    for p in PERCENTILES:
        ttft[p] = (1.0 + margin) * (base + f.wait * p / 100.0) + queue_wait
        tpot[p] = (1.0 + margin) * (_engine_decode_s(e, f) + f.wait / out * p / 100.0)
    return Latency(ttft=ttft, tpot=tpot, live=running, cycle=cycle * (waves + 1) / 2.0,
                   queued=max(batch - running, 0.0), makespan=cycle * waves)


def _open_tpot_s(e: EngineFactors, f: Features, out: int) -> float:
    """Open-loop TPOT: requests arrive out of step, so every decode step carries its share
    of the others' prefill (w = 0)."""
    return _engine_decode_s(e, f) + f.wait / out


def _open_wait_s(e: EngineFactors, f: Features, out: int) -> float:
    """Steps a Poisson arrival spends around its prefill: the rest of the step in progress
    and the engine's first-token pipeline."""
    return (OPEN_ARRIVAL_STEPS + e.ttft_pipeline_steps.value) * _step_s(e, f, out, 1.0)


def _open_cycle_s(e: EngineFactors, f: Features, out: int, margin: float) -> float:
    """A request's time in the system under Poisson arrivals without queueing: TTFT +
    out x TPOT (the others' prefill all between its tokens)."""
    return (1.0 + margin) * (e.ttft_overhead_ms.value * 1e-3 + f.prefill
                             + out * _open_tpot_s(e, f, out) + _open_wait_s(e, f, out))


def open_loop(c: Constants, e: EngineFactors, rate: float, inp: int, out: int,
              max_live: float = math.inf, margin: float = 0.0, spread: float = 0.0
              ) -> Latency | None:
    """Latency at Poisson arrivals of ``rate`` requests/s on this replica; None when the
    replica cannot keep up (prefill load ρ ≥ 1, the live requests outgrow ``max_live``, or
    Little's law has no fixed point within 0.5 % after 25 steps — treated as overload)."""
    live = 1.0
    for _ in range(25):  # N <- λ T(N): increasing from below, converges when stable
        target = max(1.0, rate * _open_cycle_s(e, features(c, live, inp, out), out, margin))
        if target > max_live:
            return None
        converged = abs(target - live) <= 5e-3 * live
        live = target
        if converged:
            return queued(c, e, rate, live, inp, out, margin, spread)
    return None


def queued(c: Constants, e: EngineFactors, rate: float, live: float, inp: int,
           out: int, margin: float = 0.0, spread: float = 0.0) -> Latency | None:
    """Open-loop latency at arrival ``rate`` with ``live`` requests in flight on this
    replica (M/D/1 prefill queue; None when the prefill load reaches 1). ``spread``: the
    coefficient of variation of the prompt lengths around ``inp`` (a benchmark dataset's;
    0 = every prompt ``inp`` long): TTFT at percentile p takes that percentile's prompt
    (log-normal lengths) plus that percentile's wait of an M/G/1 queue - the two tails
    added, an upper bound on their sum's percentile."""
    f = features(c, live, inp, out)
    own, service = _prefill_service_s(e, f, inp)
    rho = rate * service
    if rho >= 1.0:
        return None
    fixed = e.ttft_overhead_ms.value * 1e-3 + _open_wait_s(e, f, out)
    ttft, tpot = {}, {}
    for p in PERCENTILES:
        ttft[p] = (1.0 + margin) * (own * prompt_quantile(spread, p) + fixed
                                    + _queue_wait_s(rho, service, p, spread))
        at = features(c, live + _Z[p] * math.sqrt(live), inp, out)
        tpot[p] = (1.0 + margin) * _open_tpot_s(e, at, out)
    mean_wait = rho * service * (1.0 + spread * spread) / (2.0 * (1.0 - rho))
    mean = (1.0 + margin) * (own + fixed + mean_wait)
    return Latency(ttft=ttft, tpot=tpot, live=live, cycle=ttft[50] + out * tpot[50],
                   ttft_mean=mean)


def _prefill_service_s(e: EngineFactors, f: Features, inp: int) -> tuple[float, float]:
    """A prompt's own prefill time and its service time in the prefill queue: its tokens'
    share of the chunk steps it occupies (short prompts share a step's prefill budget)."""
    own = f.prefill
    return own, (own * min(1.0, inp / (f.chunks * f.chunk)) if f.chunk > 0 else own)


def _queue_wait_s(rho: float, service: float, p: int, spread: float = 0.0) -> float:
    """Wait at percentile ``p`` of an M/G/1 queue at load ``rho`` whose service times vary
    with coefficient of variation ``spread`` (0: M/D/1): mean
    rho s (1 + spread^2) / (2 (1 - rho)) (Pollaczek-Khinchine) with the tail
    P(W > t) = rho exp(-t rho / mean)."""
    tail = 1.0 - p / 100.0
    if rho <= tail or service <= 0.0:
        return 0.0
    return service * (1.0 + spread * spread) / (2.0 * (1.0 - rho)) * math.log(rho / tail)


def queue_wait_s(rho: float, service: float, p: int) -> float:
    """Wait at percentile ``p`` of an M/D/1 queue at load ``rho`` and service time
    ``service`` (the prefill queue; a disaggregated prefill pool's too), seconds."""
    return _queue_wait_s(rho, service, p)


def z_score(p: int) -> float:
    """The normal quantile of percentile ``p`` (50, 90, 95, 99): live requests at that
    percentile are ``N + z sqrt(N)`` (Poisson count)."""
    return _Z[p]


def prompt_quantile(spread: float, p: int) -> float:
    """Prompt length at percentile ``p`` over the mean, for lengths spread log-normally with
    coefficient of variation ``spread`` (1.0 for prompts of one length)."""
    if spread <= 0.0:
        return 1.0
    sigma2 = math.log1p(spread * spread)
    return math.exp(-0.5 * sigma2 + math.sqrt(sigma2) * _Z[p])


# --------------------------------------------------------------------------- capacity
def _meets(lat: Latency | None, w: Workload) -> bool:
    if lat is None:
        return False
    p = w.percentile
    if w.tpot_ms is not None and lat.tpot[p] * 1e3 > w.tpot_ms:
        return False
    return not (w.ttft_ms is not None and lat.ttft[p] * 1e3 > w.ttft_ms)


def _closed_meets(c: Constants, e: EngineFactors, batch: float, w: Workload, inp: int,
                  out: int, margin: float) -> bool:
    """:func:`closed_loop` at ``batch`` (no queue) meets the SLOs at the workload's
    percentile (the same formulas, that one percentile only: the capacity search's probe)."""
    ttft, tpot = _closed_at(e, features(c, batch, inp, out), out, w.percentile, margin)
    if w.tpot_ms is not None and tpot * 1e3 > w.tpot_ms:
        return False
    return w.ttft_ms is None or ttft * 1e3 <= w.ttft_ms


def max_concurrency(c: Constants, e: EngineFactors, slots: int, w: Workload,
                    inp: int, out: int, margin: float = 0.0) -> int:
    """Largest closed-loop concurrency of one replica meeting the SLOs with every request
    running (at most ``slots``; 0 = none)."""
    if slots < 1 or not _closed_meets(c, e, 1, w, inp, out, margin):
        return 0
    if _closed_meets(c, e, slots, w, inp, out, margin):
        return slots
    lo, hi = 1, slots  # lo meets, hi does not; latency grows with concurrency
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _closed_meets(c, e, mid, w, inp, out, margin):
            lo = mid
        else:
            hi = mid
    return lo


def _rate_at(c: Constants, e: EngineFactors, live: float, inp: int, out: int,
             margin: float) -> float:
    """The arrival rate that keeps ``live`` requests in flight (Little's law, median
    TTFT without queueing + out x TPOT)."""
    return live / _open_cycle_s(e, features(c, live, inp, out), out, margin)


def _open_meets(c: Constants, e: EngineFactors, live: float, w: Workload, inp: int,
                out: int, slots: int, margin: float) -> bool:
    """Do ``live`` requests in flight under Poisson arrivals (at the rate that keeps them
    there) meet the SLOs at the workload's percentile and fit the engine's slots? The same
    formulas as :func:`queued`, evaluated at that one percentile only."""
    p, z = w.percentile, _Z[w.percentile]
    if live + z * math.sqrt(live) > slots:
        return False
    f = features(c, live, inp, out)
    if w.ttft_ms is not None:
        own, service = _prefill_service_s(e, f, inp)
        rho = live / _open_cycle_s(e, f, out, margin) * service
        if rho >= 1.0:
            return False
        ttft = (1.0 + margin) * (own + e.ttft_overhead_ms.value * 1e-3
                                 + _open_wait_s(e, f, out)
                                 + _queue_wait_s(rho, service, p))
        if ttft * 1e3 > w.ttft_ms:
            return False
    if w.tpot_ms is not None:
        at = f if z == 0.0 else features(c, live + z * math.sqrt(live), inp, out)
        if (1.0 + margin) * _open_tpot_s(e, at, out) * 1e3 > w.tpot_ms:
            return False
    return True


def qps_capacity(c: Constants, e: EngineFactors, slots: int, w: Workload,
                 inp: int, out: int, margin: float = 0.0) -> float:
    """Largest Poisson arrival rate of one replica with the SLOs met at the workload's
    percentile and its live requests (at that percentile) within the engine's slots.

    Searched over the live requests N rather than the rate: the rate that keeps N in flight
    is explicit (:func:`_rate_at`), so each probe needs no fixed point; the search halves
    the ratio hi/lo (N spans 1 to thousands) until it is within 1 %."""
    if slots < 1:
        return 0.0
    if not _open_meets(c, e, 1.0, w, inp, out, slots, margin):
        # one request in flight already misses: at most a light load (TTFT queueing) fits;
        # none at all when a lone request misses (its TPOT or TTFT cannot improve)
        if not _meets(queued(c, e, 1e-9, 1.0, inp, out, margin), w):
            return 0.0
        lo, hi = 0.0, _rate_at(c, e, 1.0, inp, out, margin)
        for _ in range(12):  # to 0.03 % of the one-request rate
            mid = 0.5 * (lo + hi)
            lo, hi = ((mid, hi) if _meets(queued(c, e, mid, 1.0, inp, out, margin), w)
                      else (lo, mid))
        return lo
    lo, hi = 1.0, float(slots) + 1.0  # lo meets, hi does not (slots)
    while hi > 1.01 * lo:
        mid = math.sqrt(lo * hi)
        lo, hi = ((mid, hi) if _open_meets(c, e, mid, w, inp, out, slots, margin)
                  else (lo, mid))
    return _rate_at(c, e, lo, inp, out, margin)


def slots(e: EngineFactors, plan: MemoryPlan, w: Workload, fill: float,
          ranks: int = 1) -> int:
    """Requests one replica runs at once: what its KV memory holds at the average request's
    occupancy (paged KV grows with the output, so a running request holds its prompt and
    on average ``kv_decode_fill`` of its output; the memory plan reserves whole sequences),
    at most the engine's ``max_running_requests``."""
    inp, out = max(w.input_tokens, 1), max(w.output_tokens, 1)
    held = int(plan.max_concurrency * (inp + out) / (inp + min(fill, 1.0) * out))
    return min(held, int(e.max_running_requests.value) * ranks)  # per attention rank


def prediction(catalog: Catalog, layout: Layout, w: Workload, plan: MemoryPlan) -> Prediction:
    """Serving prediction of ``layout``: latencies at the stated load (closed loop at
    ``w.concurrency``, else open loop at ``w.qps``, else at capacity: the SLO-bound
    concurrency, or every slot in throughput mode) and capacities."""
    e = engine_factors(catalog, w.engine, layout.gpu)
    if plan.max_concurrency < 1:
        return ZERO
    c = constants(catalog, layout, plan, e)
    running = slots(e, plan, w, c.decode_fill, layout.attention_dp)
    margin = (serving_calibration(catalog, layout.gpu, w.engine).margin
              if w.calibration_margin else 0.0)
    inp, out = max(w.input_tokens, 1), max(w.output_tokens, 1)
    slo = w.ttft_ms is not None or w.tpot_ms is not None
    max_conc = max_concurrency(c, e, running, w, inp, out, margin)
    if slo and max_conc == 0:
        return ZERO
    if slo:
        qps = layout.dp * qps_capacity(c, e, running, w, inp, out, margin)
    else:
        full = closed_loop(c, e, max_conc, inp, out, margin)
        qps = layout.dp * full.live / full.cycle
    notes: tuple[str, ...] = ()
    lat: Latency | None
    if w.concurrency is not None:
        users = -(-w.concurrency // layout.dp)
        lat = closed_loop(c, e, users, inp, out, margin, slots=running)
        if lat.queued > 0:
            wait_s = lat.ttft[50] - closed_loop(c, e, running, inp, out, margin).ttft[50]
            notes = (f"{w.concurrency} users exceed the {running * layout.dp} requests the "
                     f"engine runs at once ({_slot_limit(e, plan, layout.attention_dp)}); "
                     f"{lat.queued * layout.dp:,.0f} wait for a slot, adding "
                     f"{wait_s:,.1f} s to TTFT",)
        tokens = (lat.live + lat.queued) * layout.dp * out / lat.cycle
    elif w.qps is not None:
        lat = open_loop(c, e, w.qps / layout.dp, inp, out, max_live=running, margin=margin)
        if lat is None:
            return replace(ZERO, qps_capacity=qps, max_concurrency=max_conc * layout.dp,
                           notes=(f"{w.qps:g} requests/s overload this layout (it sustains "
                                  f"{qps:.3g}/s within the SLOs)",))
        tokens = w.qps * out
    else:
        lat = closed_loop(c, e, max_conc, inp, out, margin)
        tokens = lat.live * layout.dp * out / lat.cycle
    p = w.percentile
    return Prediction(
        tokens_per_s=tokens, tokens_per_s_per_gpu=tokens / layout.gpus,
        ttft_ms=lat.ttft[50] * 1e3, tpot_ms=lat.tpot[50] * 1e3, qps_capacity=qps,
        max_concurrency=max_conc * layout.dp, notes=notes,
        ttft_ms_p90=lat.ttft[90] * 1e3, ttft_ms_p99=lat.ttft[99] * 1e3,
        tpot_ms_p90=lat.tpot[90] * 1e3, tpot_ms_p99=lat.tpot[99] * 1e3,
        ttft_ms_slo=lat.ttft[p] * 1e3, tpot_ms_slo=lat.tpot[p] * 1e3)


def _slot_limit(e: EngineFactors, plan: MemoryPlan, ranks: int = 1) -> str:
    """What limits the requests a replica runs at once, in words."""
    engine_cap = int(e.max_running_requests.value) * ranks
    if plan.max_concurrency <= engine_cap:
        return f"KV memory holds {plan.max_concurrency} per replica"
    return f"the engine runs at most {engine_cap} per replica"
