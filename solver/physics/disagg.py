"""Disaggregated prefill/decode serving of one workload (issue 27): ``procure estimate``
and the planner's disaggregated candidates (:mod:`solver.optimize.disaggregated`).

A *prefill pool* of ``P`` GPUs (replicas of ``prefill_tp`` GPUs) runs every prompt's prefill,
nothing else; the prompt's KV cache then moves to a *decode pool* of ``D`` GPUs (its own
layout: TP, EP, attention DP) that runs only decode steps. Closed loop of ``C`` users:

    TTFT = engine TTFT overhead + queue for a prefill replica + prefill + KV transfer
    TPOT = a decode step of the decode replica's ``C / replicas`` requests (no prefill
           interference: the point of disaggregating)

* prefill: a prompt alone on a prefill replica, in chunks of the engine's token budget
  (:func:`solver.physics.serving.features` at one request); a replica serves prompts at the
  full-budget rate, so the prefill pool's load is ``ρ = X x I x rate / replicas``, its wait
  that of an M/D/1 queue (mean ``ρ s / (2 (1 - ρ))``, the percentile as the aggregated open
  loop's :func:`~solver.physics.serving.queued`) — none at ρ >= 1 (overloaded);
* KV transfer: the prompt's KV cache (``I`` tokens x KV bytes per token of the whole model,
  every layer, unsplit) at one latency hop plus the bytes at the link between the pools:
  NVLink when both pools fit one node (``P + D <= gpus_per_node``), else the prefill
  replica's ``prefill_tp`` GPUs' share of their node's fabric NICs;
* the throughput ``X`` solves ``X = C / (TTFT(X) + O x TPOT)`` (the TTFT queue grows with X;
  fixed point by bisection on X).

As in aggregated serving, latencies carry the GPU family x engine's calibration margin
(``(1 + margin)``, none where calibrated or with ``calibration_margin`` off) and are checked
at the workload's SLO percentile. Each pool's memory is checked as in aggregated serving (the
decode pool holds the KV of its requests; the prefill pool of one prompt).

**Capacity** of one disaggregated unit (a prefill pool + a decode pool, what the planner buys
by the unit, :func:`capacity`), mirroring an aggregated replica's: ``max_concurrency`` = the
largest closed loop whose TTFT/TPOT at the SLO percentile meet the SLOs with every request
running (at most the decode replicas' slots: KV memory, the engine's
``max_running_requests``); ``qps_capacity`` = the largest Poisson rate whose TTFT percentile
(M/D/1 prefill queue) and TPOT at ``N + z_p sqrt(N)`` live decode requests meet them within the
slots. Without a TTFT SLO nothing would stop a small prefill pool from queueing prompts for
minutes while the decode pool meets the TPOT, so the prefill pool is then held to
:data:`PREFILL_LOAD_CAP` of its rate (the aggregated engine needs no such cap: there the
others' prefill lands between a request's tokens and its TPOT bounds it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from solver.catalog.data import Catalog, content_key
from solver.catalog.perf_factors import EngineFactors, factors
from solver.common.memo import Memo
from solver.physics.coverage import serving_calibration
from solver.physics.geometry import geometry
from solver.physics.layout import Estimate, Layout, MemoryBreakdown, Prediction, Workload
from solver.physics.links import group_link, p2p_s
from solver.physics.memory import kv_bytes_per_element, memory_plan
from solver.physics.serving import (
    PERCENTILES,
    Constants,
    constants,
    decode_step_s,
    engine_factors,
    features,
    prefill_rate_s,
    queue_wait_s,
    slots,
    z_score,
)

PREFILL_LOAD_CAP = 0.9
"""Without a TTFT SLO, the load a disaggregated unit's capacity puts on its prefill pool at
most (module doc): at 0.9 the mean M/D/1 wait is 4.5 prompt services. An engineering
bound, not fitted; a TTFT SLO replaces it."""


@dataclass(frozen=True)
class Disaggregated:
    """What a disaggregated deployment would do at ``concurrency`` users (times in ms;
    ``ttft_ms`` / ``tpot_ms`` the median, ``*_p90`` / ``*_p99`` the percentiles)."""

    fits: bool
    reason: str
    ttft_ms: float | None
    tpot_ms: float | None
    tokens_per_s: float
    prefill_ms: float
    kv_transfer_ms: float
    kv_transfer_bytes: float
    prefill_queue_ms: float
    prefill_load: float  # ρ of the prefill pool at the throughput reached
    prefill_replicas: int
    decode_replicas: int
    decode_batch: float  # requests per decode replica
    ttft_ms_p90: float | None = None
    ttft_ms_p99: float | None = None
    tpot_ms_p90: float | None = None
    tpot_ms_p99: float | None = None
    margin: float = 0.0  # the calibration margin the latencies carry

    def to_dict(self) -> dict:
        return {k: (round(v, 4) if isinstance(v, float) else v)
                for k, v in self.__dict__.items()}


def kv_transfer_bytes(catalog: Catalog, model: str, precision: str, tokens: int) -> float:
    """Bytes of a prompt's KV cache: ``tokens`` x the model's KV elements per token over every
    layer (unsplit: the whole cache moves) x the KV bytes per element at ``precision``,
    plus the linear-attention state of one sequence."""
    geo = geometry(catalog.model(model))
    per_sequence = geo.kv_elements_per_sequence_gpu(1, 1, tokens)
    return (per_sequence * kv_bytes_per_element(factors(catalog), precision)
            + geo.state_bytes_per_sequence_gpu(1, 1))


def transfer_s(catalog: Catalog, prefill: Layout, decode: Layout, size_bytes: float) -> float:
    """Seconds to move ``size_bytes`` of KV from a prefill replica to a decode replica."""
    gpu = catalog.gpus[prefill.gpu]
    per_node = prefill.gpus_per_node
    both = prefill.gpus + decode.gpus
    link = group_link(catalog, gpu, prefill.fabric, per_node, max(both, 2), prefill.server)
    if not link.crosses_nodes:
        return p2p_s(link, size_bytes)
    share = link.busbw_gbs * min(prefill.replica_gpus, per_node) / per_node
    return p2p_s(replace(link, busbw_gbs=share), size_bytes)


@dataclass(frozen=True)
class _Pools:
    """The constants of one prefill pool + decode pool for a workload (seconds)."""

    e: EngineFactors
    c_decode: Constants
    own: float        # a prompt's prefill alone on its replica
    service: float    # its service time in the prefill queue (full-budget rate)
    transfer: float   # its KV cache to the decode pool
    size: float       # bytes of that KV cache
    margin: float     # calibration margin
    slots: int        # requests one decode replica runs at once
    replicas: int     # prefill replicas
    decoders: int     # decode replicas
    comfortable: bool
    memory: MemoryBreakdown  # the decode pool's (capacity mode)

    @property
    def base(self) -> float:
        """TTFT without queueing, before the margin."""
        return self.e.ttft_overhead_ms.value * 1e-3 + self.own + self.transfer


def _pools(catalog: Catalog, prefill: Layout, decode: Layout, w: Workload) -> _Pools | str:
    """The pools' constants, or why they cannot serve ``w`` (a pool does not fit, the KV
    cannot move)."""
    inp, out = max(w.input_tokens, 1), max(w.output_tokens, 1)
    e = engine_factors(catalog, w.engine, decode.gpu)
    p_plan = memory_plan(catalog, prefill, replace(w, concurrency=prefill.dp))
    if not p_plan.fits:
        return f"prefill pool: {p_plan.reason}"
    d_plan = memory_plan(catalog, decode, replace(w, concurrency=None))
    if not d_plan.fits or d_plan.max_concurrency < 1:
        return f"decode pool: {d_plan.reason or 'no room for a request'}"
    c_p = constants(catalog, prefill, p_plan, e)
    c_d = constants(catalog, decode, d_plan, e)
    size = kv_transfer_bytes(catalog, prefill.model, prefill.precision, inp)
    transfer = transfer_s(catalog, prefill, decode, size)
    if math.isinf(transfer):
        return (f"the pools ({prefill.gpus} + {decode.gpus} GPUs) span nodes of "
                f"{prefill.gpus_per_node} but fabric {prefill.fabric!r} connects none: the "
                "prompt's KV cannot move")
    margin = (serving_calibration(catalog, decode.gpu, w.engine).margin
              if w.calibration_margin else 0.0)
    return _Pools(e=e, c_decode=c_d, own=features(c_p, 1.0, inp, out).prefill,
                  service=inp * prefill_rate_s(c_p, inp, out), transfer=transfer, size=size,
                  margin=margin, slots=slots(e, d_plan, w, c_d.decode_fill, decode.attention_dp),
                  replicas=prefill.dp, decoders=decode.dp,
                  comfortable=p_plan.comfortable and d_plan.comfortable,
                  memory=d_plan.breakdown)


def _tpot_s(pools: _Pools, w: Workload, batch: float) -> float:
    """A decode step of ``batch`` requests on a decode replica, with the margin."""
    f = features(pools.c_decode, batch, max(w.input_tokens, 1), max(w.output_tokens, 1))
    return (1.0 + pools.margin) * decode_step_s(pools.e, f)


def _at(pools: _Pools, w: Workload, users: int) -> Disaggregated:
    """The closed loop of ``users`` on the pools (module doc)."""
    out = max(w.output_tokens, 1)
    per_decode = math.ceil(users / pools.decoders)
    tpot = _tpot_s(pools, w, per_decode)
    scale = 1.0 + pools.margin

    def ttft(rate: float) -> tuple[float, float, float]:
        rho = rate * pools.service / pools.replicas
        if rho >= 1.0:
            return math.inf, rho, math.inf
        wait = rho * pools.service / (2.0 * (1.0 - rho))
        return scale * (pools.base + wait), rho, wait

    lo, hi = 0.0, users / (scale * pools.base + out * tpot)  # the rate without a queue
    for _ in range(60):  # X = C / (TTFT(X) + O TPOT): the left side grows, the right falls
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if mid * (ttft(mid)[0] + out * tpot) <= users else (lo, mid)
    first, rho, wait = ttft(lo)
    at = {p: _ttft_at_s(pools, rho, p) for p in PERCENTILES}
    return Disaggregated(
        fits=True, reason="", ttft_ms=first * 1e3, tpot_ms=tpot * 1e3,
        tokens_per_s=lo * out, prefill_ms=pools.own * 1e3,
        kv_transfer_ms=pools.transfer * 1e3, kv_transfer_bytes=pools.size,
        prefill_queue_ms=wait * 1e3, prefill_load=rho, prefill_replicas=pools.replicas,
        decode_replicas=pools.decoders, decode_batch=per_decode,
        ttft_ms_p90=at[90] * 1e3, ttft_ms_p99=at[99] * 1e3,
        tpot_ms_p90=tpot * 1e3, tpot_ms_p99=tpot * 1e3,  # one batch size: no spread
        margin=pools.margin)


def estimate(catalog: Catalog, prefill: Layout, decode: Layout, w: Workload) -> Disaggregated:
    """The disaggregated deployment ``prefill`` + ``decode`` at ``w.concurrency`` users
    (closed loop; module doc). ``prefill.dp`` / ``decode.dp`` are the pools' replicas."""
    users = int(w.concurrency or 1)
    pools = _pools(catalog, prefill, decode, w)
    size = kv_transfer_bytes(catalog, prefill.model, prefill.precision,
                             max(w.input_tokens, 1))
    if isinstance(pools, str):
        return Disaggregated(False, pools, None, None, 0.0, 0.0, 0.0, size, 0.0, 0.0,
                             prefill.dp, decode.dp, math.ceil(users / decode.dp))
    per_decode = math.ceil(users / decode.dp)
    if per_decode > pools.slots:
        return Disaggregated(False, f"decode pool: {per_decode} requests per replica exceed "
                             f"the {pools.slots} it runs at once (KV memory, the engine's "
                             "max_running_requests)", None, None, 0.0, 0.0, 0.0, size, 0.0,
                             0.0, prefill.dp, decode.dp, per_decode)
    return _at(pools, w, users)


def _ttft_at_s(pools: _Pools, rho: float, p: int) -> float:
    return (1.0 + pools.margin) * (pools.base + queue_wait_s(rho, pools.service, p))


def _closed_meets(pools: _Pools, w: Workload, users: int) -> bool:
    found = _at(pools, w, users)
    if w.tpot_ms is not None and (found.tpot_ms or math.inf) > w.tpot_ms:
        return False
    if w.ttft_ms is None:
        return found.prefill_load <= PREFILL_LOAD_CAP
    return _ttft_at_s(pools, found.prefill_load, w.percentile) * 1e3 <= w.ttft_ms


def capacity(pools: _Pools, w: Workload) -> tuple[int, float]:
    """(max_concurrency, qps_capacity) of one unit (module doc); (0, 0.0) when a lone
    request misses the SLOs."""
    most = pools.slots * pools.decoders
    if most < 1 or not _closed_meets(pools, w, 1):
        return 0, 0.0
    if _closed_meets(pools, w, most):
        users = most
    else:
        lo, hi = 1, most  # lo meets, hi does not: TPOT and the prefill queue grow with users
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if _closed_meets(pools, w, mid) else (lo, mid)
        users = lo
    return users, _qps_capacity(pools, w)


def _qps_capacity(pools: _Pools, w: Workload) -> float:
    """The largest Poisson rate the unit sustains: the prefill pool's (TTFT at the
    percentile, or :data:`PREFILL_LOAD_CAP`) and the decode pool's (TPOT at ``N + z sqrt(N)``
    live requests within the slots, ``N = λ O TPOT`` per replica), the smaller."""
    out = max(w.output_tokens, 1)
    full = pools.replicas / pools.service  # prompts/s at ρ = 1
    if w.ttft_ms is None:
        prefill = PREFILL_LOAD_CAP * full
    elif _ttft_at_s(pools, 0.0, w.percentile) * 1e3 > w.ttft_ms:
        return 0.0
    else:
        lo, hi = 0.0, full
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            ok = _ttft_at_s(pools, mid / full, w.percentile) * 1e3 <= w.ttft_ms
            lo, hi = (mid, hi) if ok else (lo, mid)
        prefill = lo
    z = z_score(w.percentile)

    def decode_meets(live: float) -> bool:
        high = live + z * math.sqrt(live)
        return high <= pools.slots and (w.tpot_ms is None
                                        or _tpot_s(pools, w, high) * 1e3 <= w.tpot_ms)

    if not decode_meets(1.0):
        return 0.0
    lo, hi = 1.0, float(pools.slots) + 1.0
    while hi > 1.01 * lo:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if decode_meets(mid) else (lo, mid)
    decode = pools.decoders * lo / (out * _tpot_s(pools, w, lo))
    return min(prefill, decode)


UNITS: Memo[tuple[Estimate, Disaggregated | None]] = Memo(1 << 14)
""":func:`unit_estimate` per (catalog content, pools, workload)."""


def unit_estimate(catalog: Catalog, prefill: Layout, decode: Layout,
                  w: Workload) -> tuple[Estimate, Disaggregated | None]:
    """One disaggregated unit as the planner sees it (memoised): an :class:`Estimate` of the
    decode layout whose prediction is the unit's (its capacities, and its latencies at
    ``w.concurrency`` users, else at its ``max_concurrency``; ``gpus`` per GPU over both
    pools), and the unit's :class:`Disaggregated` at that load (None when it cannot serve).
    ``fits`` False with the reason when a pool does not fit or the KV cannot move."""
    key = (content_key(catalog), prefill, decode, w)
    return UNITS.get(key, lambda: _unit_estimate(catalog, prefill, decode, w))


def _unit_estimate(catalog: Catalog, prefill: Layout, decode: Layout,
                   w: Workload) -> tuple[Estimate, Disaggregated | None]:
    pools = _pools(catalog, prefill, decode, w)
    zero = Prediction(tokens_per_s=0.0, tokens_per_s_per_gpu=0.0, max_concurrency=0,
                      qps_capacity=0.0)
    if isinstance(pools, str):
        empty = MemoryBreakdown(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        return Estimate(decode, w, False, False, empty, zero, reason=pools), None
    users, qps = capacity(pools, w)
    load = int(w.concurrency) if w.concurrency else max(users, 1)
    load = min(load, pools.slots * pools.decoders)
    found = _at(pools, w, load)
    memory = memory_plan(catalog, decode, replace(w, concurrency=load)).breakdown
    p = w.percentile
    slo_ttft = (found.ttft_ms if p == 50 else
                _ttft_at_s(pools, found.prefill_load, p) * 1e3)
    gpus = prefill.gpus + decode.gpus
    predicted = Prediction(
        tokens_per_s=found.tokens_per_s, tokens_per_s_per_gpu=found.tokens_per_s / gpus,
        ttft_ms=found.ttft_ms, tpot_ms=found.tpot_ms, qps_capacity=qps,
        max_concurrency=users, ttft_ms_p90=found.ttft_ms_p90, ttft_ms_p99=found.ttft_ms_p99,
        tpot_ms_p90=found.tpot_ms_p90, tpot_ms_p99=found.tpot_ms_p99,
        ttft_ms_slo=slo_ttft, tpot_ms_slo=found.tpot_ms)
    return (Estimate(decode, w, True, pools.comfortable, memory, predicted), found)
