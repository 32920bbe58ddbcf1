"""Disaggregated prefill/decode serving of one workload (issue 27; ``procure estimate`` only).

A *prefill pool* of ``P`` GPUs (replicas of ``prefill_tp`` GPUs) runs every prompt's prefill,
nothing else; the prompt's KV cache then moves to a *decode pool* of ``D`` GPUs (its own
layout: TP, EP, attention DP) that runs only decode steps. Closed loop of ``C`` users:

    TTFT = engine TTFT overhead + queue for a prefill replica + prefill + KV transfer
    TPOT = a decode step of the decode replica's ``C / replicas`` requests (no prefill
           interference: the point of disaggregating)

* prefill: a prompt alone on a prefill replica, in chunks of the engine's token budget
  (:func:`solver.physics.serving.features` at one request); a replica serves prompts at the
  full-budget rate, so the prefill pool's load is ``ρ = X x I x rate / replicas``, its wait
  that of an M/D/1 queue (mean ``ρ s / (2 (1 - ρ))``) — none at ρ >= 1 (overloaded);
* KV transfer: the prompt's KV cache (``I`` tokens x KV bytes per token of the whole model,
  every layer, unsplit) at one latency hop plus the bytes at the link between the pools:
  NVLink when both pools fit one node (``P + D <= gpus_per_node``), else the prefill
  replica's ``prefill_tp`` GPUs' share of their node's fabric NICs;
* the throughput ``X`` solves ``X = C / (TTFT(X) + O x TPOT)`` (the TTFT queue grows with X;
  fixed point by bisection on X).

Each pool's memory is checked as in aggregated serving (the decode pool holds the KV of its
requests; the prefill pool of one prompt).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from solver.catalog.data import Catalog
from solver.catalog.perf_factors import factors
from solver.physics.geometry import geometry
from solver.physics.layout import Layout, Workload
from solver.physics.links import group_link, p2p_s
from solver.physics.memory import kv_bytes_per_element, memory_plan
from solver.physics.serving import (
    constants,
    decode_step_s,
    engine_factors,
    features,
    prefill_rate_s,
)


@dataclass(frozen=True)
class Disaggregated:
    """What a disaggregated deployment would do at ``concurrency`` users (times in ms)."""

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


def estimate(catalog: Catalog, prefill: Layout, decode: Layout, w: Workload) -> Disaggregated:
    """The disaggregated deployment ``prefill`` + ``decode`` at ``w.concurrency`` users
    (closed loop; module doc). ``prefill.dp`` / ``decode.dp`` are the pools' replicas."""
    users = int(w.concurrency or 1)
    inp, out = max(w.input_tokens, 1), max(w.output_tokens, 1)
    e = engine_factors(catalog, w.engine, decode.gpu)
    one = replace(w, concurrency=prefill.dp)
    p_plan = memory_plan(catalog, prefill, one)
    per_decode = math.ceil(users / decode.dp)
    d_plan = memory_plan(catalog, decode, replace(w, concurrency=users))
    size = kv_transfer_bytes(catalog, prefill.model, prefill.precision, inp)
    empty = Disaggregated(False, "", None, None, 0.0, 0.0, 0.0, size, 0.0, 0.0, prefill.dp,
                          decode.dp, per_decode)
    if not p_plan.fits:
        return replace(empty, reason=f"prefill pool: {p_plan.reason}")
    if not d_plan.fits:
        return replace(empty, reason=f"decode pool: {d_plan.reason}")
    slots = int(e.max_running_requests.value) * decode.attention_dp
    if per_decode > slots:
        return replace(empty, reason=f"decode pool: {per_decode} requests per replica exceed "
                       f"the {slots} the engine runs at once")
    c_p = constants(catalog, prefill, p_plan, e)
    c_d = constants(catalog, decode, d_plan, e)
    own = features(c_p, 1.0, inp, out).prefill  # one prompt alone, chunk by chunk
    service = inp * prefill_rate_s(c_p, inp, out)  # a prompt's share at the full budget
    transfer = transfer_s(catalog, prefill, decode, size)
    if math.isinf(transfer):
        return replace(empty, reason=f"the pools ({prefill.gpus} + {decode.gpus} GPUs) span "
                       f"nodes of {prefill.gpus_per_node} but fabric {prefill.fabric!r} "
                       "connects none: the prompt's KV cannot move")
    tpot = decode_step_s(e, features(c_d, per_decode, inp, out))
    base = e.ttft_overhead_ms.value * 1e-3 + own + transfer

    def ttft(rate: float) -> tuple[float, float, float]:
        rho = rate * service / prefill.dp
        if rho >= 1.0:
            return math.inf, rho, math.inf
        wait = rho * service / (2.0 * (1.0 - rho))
        return base + wait, rho, wait

    lo, hi = 0.0, users / (base + out * tpot)  # the rate without any prefill queue
    for _ in range(60):  # X = C / (TTFT(X) + O TPOT): the left side grows, the right falls
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if mid * (ttft(mid)[0] + out * tpot) <= users else (lo, mid)
    first, rho, wait = ttft(lo)
    return Disaggregated(
        fits=True, reason="", ttft_ms=first * 1e3, tpot_ms=tpot * 1e3,
        tokens_per_s=lo * out, prefill_ms=own * 1e3, kv_transfer_ms=transfer * 1e3,
        kv_transfer_bytes=size, prefill_queue_ms=wait * 1e3, prefill_load=rho,
        prefill_replicas=prefill.dp, decode_replicas=decode.dp, decode_batch=per_decode)
