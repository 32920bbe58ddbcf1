"""Serving under load: TTFT and TPOT of one replica at a concurrency or an arrival rate.

Continuous batching with chunked prefill (modelling-notes.md). Each engine step on one
pipeline stage processes the decode tokens of the running requests plus a prefill chunk
(at most ``token_budget`` tokens in all); its time is the sum of per-kernel rooflines
(:func:`stage_step_s`: linear layers, prefill attention, decode attention, TP all-reduces,
the GPU family's launch overhead). From that physics, five *features* of one replica at
``B`` live requests (prompt ``I``, output ``O`` tokens) — all in seconds:

    A(B)   a decode-only step: B decode tokens, no prefill              (per output token)
    P(B)   what the steady-state prefill share adds to a step: B I / O prompt tokens
           spread over the steps of an output                           (interference)
    S(B)   one prompt's own prefill: its chunks, each sharing a step with B - 1 decodes
    W(B)   the prefill of the B - 1 other prompts at the full-budget rate: the longest a
           new request can wait behind them                              (queueing)

and the engine's labelled factors (``catalog/efficiency.yaml`` ``serving.engines``, fitted
on ``serving_latency.csv`` with whole configurations held out — ``procure calibrate
--serving``, docs/calibration.md) turn them into latencies::

    TPOT_50 = k_d A + i P + o_d + r B          TTFT_50 = k_p S + w W + o_p

``k`` scale the kernels (each engine's kernels and CUDA graphs), ``i`` is the share of the
prefill interference a decode step sees, ``o`` the fixed engine time per step / per
request (scheduling, sampling, detokenising), ``r`` the engine's CPU time per live request
per step, ``w`` the wait behind other prompts as a fraction of ``W``. Latencies are linear in
those factors, so each engine's fit is a least-squares problem.

Closed loop (``concurrency`` C: a new request is sent when one finishes — what the serving
benchmarks measure): B = C / dp per replica; requests of equal length stay in waves, a
request's position in its wave is uniform, so the wait at percentile p is ``p/50`` times
the median wait (p90 = 1.8x, p99 = 1.98x) and the interference a decode sees likewise.

Open loop (``qps``: Poisson arrivals, what production traffic and MLPerf Server are): the
live requests N per replica solve Little's law N = λ (TTFT + O TPOT) (fixed point); the
prefill is an M/D/1 queue with service time s = k_p S(N) (the prompt's share of its chunk
steps) and load ρ = λ s; its wait has mean ρ s / (2 (1 - ρ)) and an exponential tail
P(W > t) = ρ exp(-t ρ / W̄) (the standard heavy-traffic approximation). TPOT at percentile
p is the TPOT at N + z_p √N live requests (Poisson count of requests in flight).

Capacity for the planner: ``max_concurrency`` = the largest closed-loop C whose TTFT/TPOT at
the workload's SLO percentile meet the SLOs and whose KV fits memory; ``qps_capacity`` = the
largest arrival rate whose open-loop percentiles meet them (bisection; both grow with load).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from solver.catalog.data import Catalog
from solver.catalog.perf_factors import EngineFactors, factors
from solver.common.errors import InputError, Problem
from solver.physics.geometry import Geometry, geometry
from solver.physics.layout import Layout, Prediction, Workload
from solver.physics.links import all_reduce_s, group_link, p2p_s
from solver.physics.memory import MemoryPlan

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
    peak_flops: float
    mem_bw: float
    overhead_s: float
    ar_bytes_per_token: float
    tp_group_link: object
    pp_link: object
    tp_overlap: float
    budget: float
    min_chunk: float
    decode_fill: float
    layers: int = 1            # layers on the fullest stage
    comm_fixed_s: float = 0.0  # TP all-reduces of one step: latency part ...
    comm_per_token_s: float = 0.0  # ... and the part per token of the step
    expert_miss: float = 1.0   # 1 - k / E: chance a token skips one expert
    hop_fixed_s: float = 0.0   # pipeline hops of one step: latency part ...
    hop_per_token_s: float = 0.0  # ... and the part per token
    memo: dict = field(default_factory=dict, compare=False, hash=False, repr=False)


def _compute_precision(catalog: Catalog, gpu_id: str, precision: str) -> str:
    eff = factors(catalog)
    gpu = catalog.gpus[gpu_id]
    compute = eff.precisions.compute_precision[precision]
    return compute if compute in gpu.dense_tflops else "bf16"


def constants(catalog: Catalog, layout: Layout, plan: MemoryPlan) -> Constants:
    """The physics constants of ``layout`` (one replica) from the catalog."""
    eff = factors(catalog)
    gpu = catalog.gpus[layout.gpu]
    geo = geometry(catalog.model(layout.model))
    fam = eff.family(gpu.family)
    tp, pp = layout.tp, layout.pp
    compute = _compute_precision(catalog, layout.gpu, layout.precision)
    gemm = fam.gemm(compute)
    if geo.experts:  # expert GEMMs (few rows per expert, imbalance) at their own efficiency
        share = min(geo.expert_params * geo.experts_per_token / geo.experts
                    / geo.matmul_active_params, 1.0)
        gemm /= (1.0 - share) + share / eff.serving.moe_expert_gemm_efficiency.value
    weights = plan.breakdown.weights_gb * 1e9
    expert_share = geo.expert_params / geo.params if geo.experts else 0.0
    bw_eff = fam.mem_bw_efficiency.value * eff.precisions.weight_only_bw_efficiency[
        layout.precision].value
    stage_share = geo.stage_layers(pp) / geo.layers
    ovh = (fam.step_overhead_us.value + fam.layer_overhead_us.value * geo.stage_layers(pp)) * 1e-6
    tp_link = group_link(catalog, gpu, layout.fabric, layout.gpus_per_node, tp, layout.server)
    ar_bytes = geo.hidden * eff.serving.activation_bytes.value
    overlap = 1.0 - eff.serving.tp_comm_overlap.value
    per_step = 2.0 * geo.stage_layers(pp) * overlap
    # all_reduce_s is affine in the bytes: split it once into latency and per-token parts
    fixed = per_step * all_reduce_s(tp_link, tp, 1e-30) if tp > 1 else 0.0
    per_token = (per_step * (all_reduce_s(tp_link, tp, ar_bytes * 1e6)
                             - all_reduce_s(tp_link, tp, 1e-30)) / 1e6) if tp > 1 else 0.0
    pp_link = group_link(catalog, gpu, layout.fabric, layout.gpus_per_node, tp * pp,
                         layout.server)
    # p2p_s is affine in the bytes as well
    hop_fixed = (pp - 1) * p2p_s(pp_link, 1e-30) if pp > 1 else 0.0
    hop_token = ((pp - 1) * (p2p_s(pp_link, ar_bytes * 1e6) - p2p_s(pp_link, 1e-30)) / 1e6
                 if pp > 1 else 0.0)
    return Constants(
        geo=geo, tp=tp, pp=pp,
        dense_bytes=weights * (1.0 - expert_share), expert_bytes=weights * expert_share,
        kv_bytes_token=plan.kv_bytes_per_token_gpu,
        flops_per_token=2.0 * geo.matmul_active_params * stage_share / tp,
        attn_flops_per_ctx=geo.attention_flops_per_token(1.0) * stage_share / tp,
        peak_flops=gpu.dense_tflops[compute] * 1e12 * gemm,
        mem_bw=gpu.mem_bw_gbs * 1e9 * bw_eff, overhead_s=ovh,
        ar_bytes_per_token=geo.hidden * eff.serving.activation_bytes.value,
        tp_group_link=tp_link,
        pp_link=pp_link, hop_fixed_s=hop_fixed, hop_per_token_s=hop_token,
        tp_overlap=eff.serving.tp_comm_overlap.value,
        budget=eff.serving.token_budget.value,
        min_chunk=eff.serving.min_prefill_chunk_fraction.value,
        decode_fill=eff.serving.kv_decode_fill.value,
        layers=geo.stage_layers(pp), comm_fixed_s=fixed, comm_per_token_s=per_token,
        expert_miss=(1.0 - geo.experts_per_token / geo.experts) if geo.experts else 1.0,
    )


def engine_factors(catalog: Catalog, engine: str) -> EngineFactors:
    """The labelled factor set of a serving engine; unknown engine -> InputError."""
    engines = factors(catalog).serving.engines
    if engine not in engines:
        raise InputError([Problem("workload", "engine", engine,
                                  f"unknown serving engine; known: {', '.join(sorted(engines))}")])
    return engines[engine]


# --------------------------------------------------------------------------- physics
def stage_step_s(c: Constants, prefill: float, prompt_ctx: float, decode: float,
                 decode_ctx: float) -> float:
    """One engine step on one stage: ``prefill`` prompt tokens (attending ``prompt_ctx``
    on average) plus ``decode`` tokens (attending ``decode_ctx``), seconds.

    Kernels run one after another, so each gets its own roofline: the linear layers
    (compute for all tokens vs reading the weights), prefill attention (compute) and decode
    attention (reading the KV cache), then TP collectives and the fixed overhead."""
    tokens = prefill + decode
    weights = c.dense_bytes
    if c.expert_bytes:  # experts a step of ``tokens`` tokens touches (expected share)
        weights += c.expert_bytes * (1.0 - c.expert_miss ** max(tokens, 0.0))
    gemm = max(tokens * c.flops_per_token / c.peak_flops, weights / c.mem_bw)
    attn_prefill = c.attn_flops_per_ctx * prefill * prompt_ctx / c.peak_flops
    attn_decode = max(c.attn_flops_per_ctx * decode * decode_ctx / c.peak_flops,
                      decode * decode_ctx * c.kv_bytes_token / c.mem_bw)
    comm = c.comm_fixed_s + c.comm_per_token_s * tokens if tokens > 0 else 0.0
    return gemm + attn_prefill + attn_decode + comm + c.overhead_s


def _hops_s(c: Constants, tokens: float) -> float:
    """The pp - 1 stage-to-stage sends of one step's ``tokens`` activations, seconds."""
    if c.pp <= 1 or tokens <= 0:
        return 0.0
    return c.hop_fixed_s + c.hop_per_token_s * tokens


@dataclass(frozen=True)
class Features:
    """The physics of one replica at ``batch`` live requests (seconds, see module doc)."""

    decode: float        # A
    interference: float  # P
    prefill: float       # S
    wait: float          # W
    chunks: int
    chunk: float = 0.0   # prefill tokens a step leaves to a new prompt
    batch: float = 1.0   # live requests


def features(c: Constants, batch: float, inp: int, out: int) -> Features:
    """A, P, S, W of one replica at ``batch`` live requests of ``inp``/``out`` tokens."""
    batch = max(batch, 1.0)
    ctx = inp + c.decode_fill * out
    per_micro = batch / c.pp
    # decode-only step, and the same step with its steady-state share of prefill
    decode = c.pp * stage_step_s(c, 0.0, inp / 2.0, per_micro, ctx) + _hops_s(c, per_micro)
    prefill_tokens = per_micro * inp / out
    tokens = per_micro + prefill_tokens
    subs = max(1.0, tokens / c.budget)
    mixed = c.pp * subs * stage_step_s(c, prefill_tokens / subs, inp / 2.0,
                                       per_micro / subs, ctx) + _hops_s(c, per_micro)
    # a new prompt's own chunks, each beside the other requests' decodes
    others = (batch - 1.0) / c.pp
    chunk = max(c.budget - others, c.budget * c.min_chunk)
    chunks = max(1, math.ceil(inp / chunk))
    size = min(inp, chunk)
    own = (chunks * c.pp * stage_step_s(c, size, inp / 2.0, others, ctx)
           + _hops_s(c, size + others))
    # the other prompts' prefill at the full-budget rate (a step of budget prefill tokens)
    key = (inp, out)
    per_token = c.memo.get(key)
    if per_token is None:  # independent of the batch: once per request shape
        per_token = c.memo[key] = c.pp * stage_step_s(c, c.budget, inp / 2.0, 0.0, ctx) / c.budget
    wait = (batch - 1.0) * inp * per_token
    return Features(decode, max(mixed - decode, 0.0), own, wait, chunks, chunk, batch)


# --------------------------------------------------------------------------- latency
@dataclass(frozen=True)
class Latency:
    """TTFT and TPOT (seconds) at percentiles 50/90/95/99, and live requests per replica."""

    ttft: dict[int, float]
    tpot: dict[int, float]
    live: float


def _share(p: int) -> float:
    """A uniform position in a wave: the p-th percentile is p/50 times the median."""
    return p / 50.0


def tpot_s(e: EngineFactors, f: Features, interference: float = 1.0) -> float:
    """TPOT: the decode step's kernels, the prefill interference (times ``interference``,
    1 = the median), the engine's per-step and per-live-request overheads."""
    return (e.tpot_kernel_scale.value * f.decode
            + e.tpot_prefill_interference.value * f.interference * interference
            + e.tpot_overhead_ms.value * 1e-3 + e.tpot_per_request_us.value * f.batch * 1e-6)


def prefill_s(e: EngineFactors, f: Features) -> float:
    """A prompt's own prefill on the engine: its chunks, each in a step beside the other
    requests' decodes (no waiting, no fixed overhead)."""
    return e.ttft_kernel_scale.value * f.prefill


def _closed_ttft_s(e: EngineFactors, f: Features, p: int) -> float:
    """Closed-loop TTFT at percentile ``p``: own prefill, overhead, the wave wait."""
    return (prefill_s(e, f) + e.ttft_overhead_ms.value * 1e-3
            + e.ttft_wave_fraction.value * f.wait * _share(p))


def closed_loop(c: Constants, e: EngineFactors, batch: float, inp: int, out: int) -> Latency:
    """Latency with ``batch`` requests always in flight on this replica (closed loop)."""
    f = features(c, batch, inp, out)
    return Latency(ttft={p: _closed_ttft_s(e, f, p) for p in PERCENTILES},
                   tpot={p: tpot_s(e, f, _share(p)) for p in PERCENTILES},
                   live=max(batch, 1.0))


def _cycle_s(e: EngineFactors, f: Features, out: int) -> float:
    """One request's time in the system without queueing: TTFT + out x TPOT (medians)."""
    return prefill_s(e, f) + e.ttft_overhead_ms.value * 1e-3 + out * tpot_s(e, f)


def open_loop(c: Constants, e: EngineFactors, rate: float, inp: int, out: int,
              max_live: float = math.inf) -> Latency | None:
    """Latency at Poisson arrivals of ``rate`` requests/s on this replica; None when the
    replica cannot keep up (prefill load ρ ≥ 1, the live requests outgrow ``max_live``, or
    Little's law has no fixed point within 0.5 % after 25 steps — treated as overload)."""
    live = 1.0
    for _ in range(25):  # N <- λ T(N): increasing from below, converges when stable
        target = max(1.0, rate * _cycle_s(e, features(c, live, inp, out), out))
        if target > max_live:
            return None
        converged = abs(target - live) <= 5e-3 * live
        live = target
        if converged:
            return queued(c, e, rate, live, inp, out)
    return None


def queued(c: Constants, e: EngineFactors, rate: float, live: float, inp: int,
           out: int) -> Latency | None:
    """Open-loop latency at arrival ``rate`` with ``live`` requests in flight on this
    replica (M/D/1 prefill queue; None when the prefill load reaches 1)."""
    f = features(c, live, inp, out)
    own, service = _prefill_service_s(e, f, inp)
    rho = rate * service
    if rho >= 1.0:
        return None
    ttft, tpot = {}, {}
    for p in PERCENTILES:
        ttft[p] = own + e.ttft_overhead_ms.value * 1e-3 + _queue_wait_s(rho, service, p)
        tpot[p] = tpot_s(e, features(c, live + _Z[p] * math.sqrt(live), inp, out))
    return Latency(ttft=ttft, tpot=tpot, live=live)


def _prefill_service_s(e: EngineFactors, f: Features, inp: int) -> tuple[float, float]:
    """A prompt's own prefill time and its service time in the prefill queue: its tokens'
    share of the chunk steps it occupies (short prompts share a step's prefill budget)."""
    own = prefill_s(e, f)
    return own, (own * min(1.0, inp / (f.chunks * f.chunk)) if f.chunk > 0 else own)


def _queue_wait_s(rho: float, service: float, p: int) -> float:
    """Wait at percentile ``p`` of an M/D/1 queue at load ``rho``: mean
    rho s / (2 (1 - rho)) with the tail P(W > t) = rho exp(-t rho / mean)."""
    tail = 1.0 - p / 100.0
    if rho <= tail or service <= 0.0:
        return 0.0
    return service / (2.0 * (1.0 - rho)) * math.log(rho / tail)


# --------------------------------------------------------------------------- capacity
def _meets(lat: Latency | None, w: Workload) -> bool:
    if lat is None:
        return False
    p = w.percentile
    if w.tpot_ms is not None and lat.tpot[p] * 1e3 > w.tpot_ms:
        return False
    return not (w.ttft_ms is not None and lat.ttft[p] * 1e3 > w.ttft_ms)


def _closed_meets(c: Constants, e: EngineFactors, batch: float, w: Workload, inp: int,
                  out: int) -> bool:
    """:func:`closed_loop` at ``batch`` meets the SLOs at the workload's percentile (the
    same formulas, that one percentile only: the capacity search's probe)."""
    f = features(c, batch, inp, out)
    if w.tpot_ms is not None and tpot_s(e, f, _share(w.percentile)) * 1e3 > w.tpot_ms:
        return False
    return w.ttft_ms is None or _closed_ttft_s(e, f, w.percentile) * 1e3 <= w.ttft_ms


def max_concurrency(c: Constants, e: EngineFactors, mem_limit: int, w: Workload,
                    inp: int, out: int) -> int:
    """Largest closed-loop concurrency of one replica meeting the SLOs (0 = none)."""
    if mem_limit < 1 or not _closed_meets(c, e, 1, w, inp, out):
        return 0
    if _closed_meets(c, e, mem_limit, w, inp, out):
        return mem_limit
    lo, hi = 1, mem_limit  # lo meets, hi does not; latency grows with concurrency
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _closed_meets(c, e, mid, w, inp, out):
            lo = mid
        else:
            hi = mid
    return lo


def _rate_at(c: Constants, e: EngineFactors, live: float, inp: int, out: int) -> float:
    """The arrival rate that keeps ``live`` requests in flight (Little's law, median
    TTFT without queueing + out x TPOT)."""
    return live / _cycle_s(e, features(c, live, inp, out), out)


def _open_meets(c: Constants, e: EngineFactors, live: float, w: Workload, inp: int,
                out: int, mem_limit: int) -> bool:
    """Do ``live`` requests in flight under Poisson arrivals (at the rate that keeps them
    there) meet the SLOs at the workload's percentile and fit memory? The same formulas as
    :func:`queued`, evaluated at that one percentile only (the capacity search's probe)."""
    p, z = w.percentile, _Z[w.percentile]
    if live + z * math.sqrt(live) > mem_limit:
        return False
    f = features(c, live, inp, out)
    if w.ttft_ms is not None:
        own, service = _prefill_service_s(e, f, inp)
        rho = live / _cycle_s(e, f, out) * service
        if rho >= 1.0:
            return False
        ttft = own + e.ttft_overhead_ms.value * 1e-3 + _queue_wait_s(rho, service, p)
        if ttft * 1e3 > w.ttft_ms:
            return False
    if w.tpot_ms is not None:
        at = f if z == 0.0 else features(c, live + z * math.sqrt(live), inp, out)
        if tpot_s(e, at) * 1e3 > w.tpot_ms:
            return False
    return True


def qps_capacity(c: Constants, e: EngineFactors, mem_limit: int, w: Workload,
                 inp: int, out: int) -> float:
    """Largest Poisson arrival rate of one replica with the SLOs met at the workload's
    percentile and its live requests (at that percentile) in memory.

    Searched over the live requests N rather than the rate: the rate that keeps N in flight
    is explicit (:func:`_rate_at`), so each probe needs no fixed point; the search halves
    the ratio hi/lo (N spans 1 to thousands) until it is within 1 %."""
    if mem_limit < 1:
        return 0.0
    if not _open_meets(c, e, 1.0, w, inp, out, mem_limit):
        # one request in flight already misses: at most a light load (TTFT queueing) fits;
        # none at all when a lone request misses (its TPOT or TTFT cannot improve)
        if not _meets(queued(c, e, 1e-9, 1.0, inp, out), w):
            return 0.0
        lo, hi = 0.0, _rate_at(c, e, 1.0, inp, out)
        for _ in range(12):  # to 0.03 % of the one-request rate
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if _meets(queued(c, e, mid, 1.0, inp, out), w) else (lo, mid)
        return lo
    lo, hi = 1.0, float(mem_limit) + 1.0  # lo meets, hi does not (memory)
    while hi > 1.01 * lo:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if _open_meets(c, e, mid, w, inp, out, mem_limit) else (lo, mid)
    return _rate_at(c, e, lo, inp, out)


def prediction(catalog: Catalog, layout: Layout, w: Workload, plan: MemoryPlan) -> Prediction:
    """Serving prediction of ``layout``: latencies at the stated load (closed loop at
    ``w.concurrency``, else open loop at ``w.qps``, else at capacity) and capacities."""
    if plan.max_concurrency < 1:
        return ZERO
    c = constants(catalog, layout, plan)
    e = engine_factors(catalog, w.engine)
    inp, out = max(w.input_tokens, 1), max(w.output_tokens, 1)
    slo = w.ttft_ms is not None or w.tpot_ms is not None
    mem = plan.max_concurrency
    max_conc = max_concurrency(c, e, mem, w, inp, out)
    if slo and max_conc == 0:
        return ZERO
    if slo:
        qps = layout.dp * qps_capacity(c, e, mem, w, inp, out)
    else:
        full = closed_loop(c, e, max_conc, inp, out)
        qps = layout.dp * max_conc / (full.ttft[50] + out * full.tpot[50])
    notes: tuple[str, ...] = ()
    lat: Latency | None
    if w.concurrency is not None:
        batch = -(-w.concurrency // layout.dp)
        lat = closed_loop(c, e, batch, inp, out)
        if batch > mem:
            notes = (f"concurrency {w.concurrency} exceeds the {mem * layout.dp} that fit "
                     "memory; figures assume it did",)
    elif w.qps is not None:
        lat = open_loop(c, e, w.qps / layout.dp, inp, out)
        if lat is None:
            return replace(ZERO, qps_capacity=qps, max_concurrency=max_conc * layout.dp,
                           notes=(f"{w.qps:g} requests/s overload this layout (it sustains "
                                  f"{qps:.3g}/s within the SLOs)",))
    else:
        lat = closed_loop(c, e, max_conc, inp, out)
    # Little's law: each live request delivers ``out`` tokens per TTFT + out x TPOT
    tokens = lat.live * layout.dp * out / (lat.ttft[50] + out * lat.tpot[50])
    p = w.percentile
    return Prediction(
        tokens_per_s=tokens, tokens_per_s_per_gpu=tokens / layout.gpus,
        ttft_ms=lat.ttft[50] * 1e3, tpot_ms=lat.tpot[50] * 1e3, qps_capacity=qps,
        max_concurrency=max_conc * layout.dp, notes=notes,
        ttft_ms_p90=lat.ttft[90] * 1e3, ttft_ms_p99=lat.ttft[99] * 1e3,
        tpot_ms_p90=lat.tpot[90] * 1e3, tpot_ms_p99=lat.tpot[99] * 1e3,
        ttft_ms_slo=lat.ttft[p] * 1e3, tpot_ms_slo=lat.tpot[p] * 1e3)
