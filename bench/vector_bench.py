"""Would numpy vectorisation speed up the physics? (issue 31, item 1.) Measures, on this
machine, the two things the answer depends on:

1. **Break-even.** The serving step kernel (:func:`solver.physics.serving.stage_step_s`) and
   one whole load probe (:func:`solver.physics.serving.features`), each evaluated at ``n``
   points by the library's scalar code in a loop and by a numpy copy of the same formulas
   (below, kept here for the measurement only), for several ``n``. The copies give the
   same floats to the last digit (checked and printed): numpy's +, -, x, /, sqrt, floor
   and ceil are IEEE operations like Python's.
2. **Fan-outs.** In a cold candidate build of a seeded portfolio (open catalog, no limits,
   every physics memo emptied): how many splits each ranking of a span evaluates (what
   "the estimates of a span's splits computed together" would batch), and how many probes
   each SLO capacity search makes (sequential: each probe's point depends on the last
   answer).

    PYTHONPATH=. python bench/vector_bench.py [--workloads 50] [--seed 2076]

Prints Markdown tables (docs/performance.md quotes them).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import timeit
from collections import Counter
from typing import Any

import numpy as np

from solver.catalog.load import load_catalog
from solver.physics import performance, serving
from solver.physics.layout import Layout, Workload
from solver.physics.memory import memory_plan

SIZES = (1, 4, 10, 20, 55, 256, 1024)


# ----------------------------------------------------------------- numpy copies (bench only)
def stage_step_np(c: serving.Constants, prefill: Any, prompt_ctx: Any, decode: Any,
                  decode_ctx: Any) -> np.ndarray:
    """:func:`serving.stage_step_s` over arrays, the same operations in the same order."""
    tokens = prefill + decode
    weights: Any = c.dense_bytes
    if c.expert_bytes:  # ``**`` per element through Python: numpy's power may use SIMD
        miss = np.array([c.expert_miss ** t for t in np.maximum(tokens, 0.0).tolist()])
        weights = weights + c.expert_bytes * (1.0 - miss)
    gemm = np.maximum(tokens * c.flops_per_token / c.peak_flops, weights / c.mem_bw)
    attn_prefill = c.attn_flops_per_ctx * prefill * prompt_ctx / c.peak_flops
    attn_decode = np.maximum(c.attn_flops_per_ctx * decode * decode_ctx / c.peak_flops,
                             decode * decode_ctx * c.kv_bytes_token / c.mem_bw)
    comm = np.where(tokens > 0, (c.comm_fixed_s + c.comm_per_token_s * tokens
                                 + c.a2a_fixed_s + c.a2a_per_token_s * tokens), 0.0)
    return gemm + attn_prefill + attn_decode + comm + c.overhead_s


def hops_np(c: serving.Constants, tokens: np.ndarray) -> np.ndarray:
    if c.pp <= 1:
        return np.zeros_like(tokens)
    return np.where(tokens > 0, c.hop_fixed_s + c.hop_per_token_s * tokens, 0.0)


def features_np(c: serving.Constants, batch: np.ndarray, inp: int, out: int) -> tuple:
    """:func:`serving.features`' decode, prefill and wait over an array of batches."""
    batch = np.maximum(batch, 1.0)
    ctx = inp + c.decode_fill * out
    per_micro = batch / c.pp
    decode = c.pp * stage_step_np(c, 0.0, inp / 2.0, per_micro, ctx) + hops_np(c, per_micro)
    others = (batch - 1.0) / c.pp
    ranks = c.ranks
    budget = c.budget / ranks
    chunk = np.maximum(budget - others / ranks, budget * c.min_chunk)
    full = np.floor(inp / chunk)
    last = inp - full * chunk
    own = c.pp * (full * stage_step_np(c, ranks * chunk, inp / 2.0, others, ctx)
                  + np.where(last > 0, stage_step_np(c, ranks * last, inp / 2.0, others, ctx),
                             0.0))
    own += hops_np(c, np.minimum(inp, chunk) + others)
    wait = (batch - 1.0) * inp * serving.prefill_rate_s(c, inp, out)
    return decode, own, wait


def _best_us(fn: Any, number: int = 200) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def break_even(catalog: Any) -> list[str]:
    rows = ["| kernel | model | n points | scalar loop µs | numpy µs | numpy speed-up | same floats |",
            "|---|---|---:|---:|---:|---:|---|"]
    work = Workload(kind="inference", input_tokens=2000, output_tokens=400, tpot_ms=50)
    for model, tp in (("llama-3.1-70b", 4), ("mixtral-8x7b", 2)):
        layout = Layout(model=model, gpu="h100-sxm", precision="fp8", tp=tp, pp=1, dp=1,
                        gpus_per_node=8, fabric="none")
        plan = memory_plan(catalog, layout, work)
        engine = serving.engine_factors(catalog, work.engine, layout.gpu)
        c = serving.constants(catalog, layout, plan, engine)
        for n in SIZES:
            xs = [1.0 + 3.0 * i for i in range(n)]
            arr = np.array(xs)
            scalar_step = [serving.stage_step_s(c, 0.0, 1000.0, x, 2200.0) for x in xs]
            same = scalar_step == stage_step_np(c, 0.0, 1000.0, arr, 2200.0).tolist()
            ts = _best_us(lambda c=c, xs=xs: [serving.stage_step_s(c, 0.0, 1000.0, x, 2200.0)
                                              for x in xs])
            tv = _best_us(lambda c=c, arr=arr: stage_step_np(c, 0.0, 1000.0, arr, 2200.0))
            rows.append(f"| stage step | {model} | {n} | {ts:.1f} | {tv:.1f} | {ts / tv:.2f}x "
                        f"| {'yes' if same else 'NO'} |")
        for n in SIZES:
            xs = [1.0 + 3.0 * i for i in range(n)]
            arr = np.array(xs)
            scalar = [serving.features(c, x, 2000, 400) for x in xs]
            vec = features_np(c, arr, 2000, 400)
            same = ([f.decode for f in scalar] == vec[0].tolist()
                    and [f.prefill for f in scalar] == vec[1].tolist()
                    and [f.wait for f in scalar] == vec[2].tolist())
            ts = _best_us(lambda c=c, xs=xs: [serving.features(c, x, 2000, 400) for x in xs],
                          100)
            tv = _best_us(lambda c=c, arr=arr: features_np(c, arr, 2000, 400), 100)
            rows.append(f"| load probe (features) | {model} | {n} | {ts:.1f} | {tv:.1f} | "
                        f"{ts / tv:.2f}x | {'yes' if same else 'NO'} |")
    return rows


# ----------------------------------------------------------------------------- fan-outs
def fan_outs(catalog: Any, workloads: int, seed: int) -> list[str]:
    from solver.optimize.candidates import build_candidates, clear_caches
    from solver.rfq.portfolio import portfolio_rfq
    from solver.rfq.schema import validate_rfq

    rfq = validate_rfq(portfolio_rfq(workloads, seed, limits=False), catalog)
    splits: list[int] = []
    training_splits: list[int] = []
    probes: list[int] = []
    calls: Counter[str] = Counter()
    ranked, open_meets, closed_meets = (performance._ranked, serving._open_meets,
                                        serving._closed_meets)
    qps_capacity, max_concurrency = serving.qps_capacity, serving.max_concurrency

    def counting_ranked(*args: Any, **kwargs: Any) -> Any:
        found = ranked(*args, **kwargs)
        splits.append(len(found))
        if found[0].workload.kind not in performance.SERVING_KINDS:
            training_splits.append(len(found))
        return found

    def counted(name: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    def search(fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            before = calls["open"] + calls["closed"]
            found = fn(*args, **kwargs)
            probes.append(calls["open"] + calls["closed"] - before)
            return found
        return wrapper

    performance._ranked = counting_ranked
    serving._open_meets = counted("open", open_meets)
    serving._closed_meets = counted("closed", closed_meets)
    serving.qps_capacity = search(qps_capacity)
    serving.max_concurrency = search(max_concurrency)
    try:
        clear_caches()
        start = time.process_time()
        build_candidates(catalog, rfq)
        cpu = time.process_time() - start
    finally:
        performance._ranked = ranked
        serving._open_meets, serving._closed_meets = open_meets, closed_meets
        serving.qps_capacity, serving.max_concurrency = qps_capacity, max_concurrency

    def describe(values: list[int]) -> str:
        ordered = sorted(values)
        p90 = ordered[int(0.9 * (len(ordered) - 1))]
        at_least_20 = sum(v for v in values if v >= 20) / max(1, sum(values))
        return (f"{len(values):,} | {statistics.median(values):g} | {p90} | {max(values)} | "
                f"{sum(values):,} | {at_least_20:.0%}")

    return [f"Cold build of the {workloads}-workload portfolio (seed {seed}): {cpu:.2f} s CPU "
            "(counting wrappers included).", "",
            "| fan-out | calls | median | p90 | max | points in all | share of points in calls of >= 20 |",
            "|---|---:|---:|---:|---:|---:|---:|",
            f"| splits per ranking (all) | {describe(splits)} |",
            f"| splits per ranking (training) | {describe(training_splits)} |",
            f"| probes per SLO capacity search (sequential) | {describe(probes)} |"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=50)
    parser.add_argument("--seed", type=int, default=2076)
    args = parser.parse_args()
    os.environ.setdefault("PROCURE_CANDIDATE_CACHE", "off")
    catalog = load_catalog()
    print("\n".join(break_even(catalog)))
    print()
    print("\n".join(fan_outs(catalog, args.workloads, args.seed)))
    print(f"\nload average {os.getloadavg()[0]:.1f}; numpy {np.__version__}; "
          f"{os.cpu_count()} cores")


if __name__ == "__main__":
    main()
