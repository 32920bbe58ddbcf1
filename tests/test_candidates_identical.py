"""Candidates at scale (issue 18 item 3): the speed-ups of the candidate stage change no
candidate.

* The memos of whole rankings (``performance.RANKINGS``) and of the training-knob search
  (``candidates.KNOBS``) hand back what a cold computation gives: a warm build equals a
  build with every physics memo emptied, and a what-if catalog (another figure) never gets
  the base catalog's entries.
* The knob search skips a ZeRO stage or interleave that resolves to what the best so far
  already runs; the reference search (``skip_resolved=False``) tries every value and must
  pick the same estimate, and the premise (a resolved-equal value estimates the same
  figures) is checked directly.

A byte-level comparison against the code before these changes (every scenario, all_sizes,
portfolios of 10 and 50 workloads) was made by hand when they landed (docs/performance.md,
"Candidates at scale").
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from solver.catalog.perf_factors import factors
from solver.optimize.candidates import (
    _fastest_training_knobs,
    build_candidates,
    clear_caches,
)
from solver.optimize.records import physics_workload
from solver.physics.layout import TRAINING_KINDS
from solver.physics.performance import (
    estimate,
    ranked_layouts,
    virtual_stages,
)
from solver.rfq.portfolio import portfolio_rfq
from solver.rfq.schema import load_rfq, validate_rfq

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ("hybrid-service-and-job.yaml", "finetune-70b-full-cluster.yaml",
             "qlora-405b-one-node.yaml", "portfolio-lab.yaml", "small-models-lab.json")


def _same(a, b) -> None:
    assert a.node_types == b.node_types
    assert a.fabrics.keys() == b.fabrics.keys()
    assert a.candidates == b.candidates  # every field of every candidate and estimate,
    assert {k: [c.estimate.training for c in v] for k, v in a.candidates.items()} == {
        k: [c.estimate.training for c in v] for k, v in b.candidates.items()}  # knobs too
    assert a.rejected == b.rejected
    assert a.storage == b.storage


@pytest.mark.parametrize("name", SCENARIOS)
def test_warm_build_equals_cold(catalog, name):
    rfq = load_rfq(ROOT / "scenarios" / name, catalog)
    clear_caches()
    cold = build_candidates(catalog, rfq)
    warm = build_candidates(catalog, rfq)
    _same(cold, warm)
    # the rankings and knob searches were taken from the memo, and a mutated ranking
    # handed out does not change the memo
    ranked = ranked_layouts(catalog, "llama-3.1-8b", "h100-sxm", 8,
                            physics_workload(rfq.workloads[0]), precision="bf16")
    ranked.clear()
    assert ranked_layouts(catalog, "llama-3.1-8b", "h100-sxm", 8,
                          physics_workload(rfq.workloads[0]), precision="bf16")


def test_small_portfolio_warm_equals_cold(catalog):
    data = portfolio_rfq(4, 1, limits=False)  # batch, LoRA, pretraining: ~1 s cold
    rfq = validate_rfq(data, catalog)
    clear_caches()
    cold = build_candidates(catalog, rfq)
    _same(cold, build_candidates(catalog, rfq))


def test_what_if_catalog_gets_its_own_entries(catalog):
    """Memos keyed by catalog content: with the base catalog's rankings and knob searches
    memoised, a copy with slower GPUs builds what it builds cold."""
    rfq = load_rfq(ROOT / "scenarios" / "finetune-70b-full-cluster.yaml", catalog)
    gpus = {key: gpu.model_copy(update={"dense_tflops": {k: v * 0.7 for k, v in
                                                         gpu.dense_tflops.items()}})
            for key, gpu in catalog.gpus.items()}
    slower = catalog.model_copy(update={"gpus": gpus})
    build_candidates(catalog, rfq)
    warm_base = build_candidates(slower, rfq)
    clear_caches()
    _same(warm_base, build_candidates(slower, rfq))


def _base_estimates(catalog):
    """Default-knob training estimates: the splits the scenarios' jobs rank first, and the
    next few of each (pipelined and data-parallel ones among them)."""
    out = []
    for name in ("finetune-70b-full-cluster.yaml", "hybrid-service-and-job.yaml",
                 "one-box-not-two.yaml", "qlora-405b-one-node.yaml"):
        rfq = load_rfq(ROOT / "scenarios" / name, catalog)
        table = build_candidates(catalog, rfq)
        for spec in rfq.workloads:
            if spec.kind not in TRAINING_KINDS:
                continue
            work = physics_workload(spec)
            for cand in table.candidates[spec.name][:6]:
                if cand.rented:
                    continue
                lay = cand.layout
                out += [est for est in ranked_layouts(
                    catalog, lay.model, lay.gpu, lay.gpus, work, precision=lay.precision,
                    gpus_per_node=lay.gpus_per_node, fabric=lay.fabric,
                    server=lay.server)[:6] if est.fits]
    return out


def test_knob_skip_picks_what_the_full_search_picks(catalog):
    bases = _base_estimates(catalog)
    assert any(e.layout.pp > 1 for e in bases) and any(e.layout.dp > 1 for e in bases)
    default = factors(catalog).training.zero_stage
    skipped = 0
    for est in bases:
        assert _fastest_training_knobs(catalog, est) == _fastest_training_knobs(
            catalog, est, skip_resolved=False)
        lay, work = est.layout, est.workload
        # the premise: a value resolving to the one run estimates the same figures
        if lay.dp > 1:
            same = estimate(catalog, lay, replace(work, zero=default))
            assert (same.predicted, same.memory, same.training) == (
                est.predicted, est.memory, est.training)
            skipped += 1
        for v in (1, 2, 8):
            other = replace(work, interleave=v)
            if lay.pp > 1 and virtual_stages(catalog, lay, other) == virtual_stages(
                    catalog, lay, work):
                same = estimate(catalog, lay, other)
                assert (same.predicted, same.memory, same.training) == (
                    est.predicted, est.memory, est.training)
                skipped += 1
    assert skipped


@pytest.mark.parametrize("kind", ["inference", "lora", "pretrain"])
def test_memory_plan_does_not_depend_on_the_fabric_or_the_server(catalog, kind):
    """The memory memo is keyed without fabric and server: the plan computed for one
    fabric/chassis must be what every other one would compute."""
    from solver.physics.layout import Layout, Workload
    from solver.physics.memory import _plan

    work = Workload(kind, seq_len=4096) if kind != "inference" else \
        Workload(kind, input_tokens=2000, output_tokens=400, concurrency=32)
    for tp, pp, dp in ((8, 2, 1), (4, 2, 2), (2, 1, 8)):
        plans = [_plan(catalog, Layout("llama-3.1-70b", "h100-sxm", "bf16", tp=tp, pp=pp,
                                       dp=dp, gpus_per_node=8, fabric=fabric, server=server),
                       work)
                 for fabric in ("none", "100gbe", "ib-ndr-400")
                 for server in (None, *sorted(s for s, v in catalog.servers.items()
                                              if "h100-sxm" in str(v))[:1])]
        assert all(plan == plans[0] for plan in plans[1:])


@pytest.mark.parametrize("name", ["pretrain-70b-open.yaml", "finetune-70b-full-cluster.yaml",
                                  "hybrid-service-and-job.yaml"])
def test_pruned_span_search_equals_the_reference(catalog, name):
    """Sizes whose hours bound exceeds the deadline are not estimated; every training job
    on every node type and precision must get the candidates and rejections the unpruned
    search (``prune=False``) gives, the fastest-hours messages of pretrain-70b-open (no
    span meets its deadline on many node types) included."""
    from solver.optimize.candidates import (
        _JobProbe,
        _training_candidates,
        allowed_entries,
        coupled_training_rdma_only,
        node_types,
    )
    from solver.optimize.costs import CostParams
    from solver.optimize.records import precisions_for

    rfq = load_rfq(ROOT / "scenarios" / name, catalog)
    types = node_types(catalog, rfq, CostParams.from_catalog(catalog, rfq.horizon_years))
    _, _, fabrics = allowed_entries(catalog, rfq)
    rdma_only = coupled_training_rdma_only(catalog, rfq)
    pruned = 0
    for spec in (s for s in rfq.workloads if s.kind in TRAINING_KINDS):
        for node in types.values():
            for precision in precisions_for(spec, catalog.gpus[node.gpu]):
                runs = []
                for prune in (True, False):
                    why: list[str] = []
                    out = _training_candidates(catalog, spec, node, fabrics, precision, why,
                                               False, 64, rdma_only, prune=prune)
                    runs.append((out, [c.estimate.training for c in out], why))
                assert runs[0] == runs[1]
                probe = _JobProbe(catalog, spec, node, precision, prune=True)
                pruned += any(probe.misses_for_sure(node.gpus * n) for n in (1, 2, 4))
    assert pruned


def test_rate_bound_holds_for_every_split_and_knob(catalog):
    """The premise of the pruning: no split, with any knobs, trains faster per GPU than
    :func:`training_rate_bound`, and every split of one size has the goodput
    :func:`job_goodput` gives."""
    from solver.physics.goodput import goodput, job_goodput
    from solver.physics.performance import training_rate_bound

    checked = 0
    for base in _base_estimates(catalog):
        lay, work = base.layout, base.workload
        bound = training_rate_bound(catalog, lay.model, lay.gpu, lay.precision, work)
        assert bound is not None
        variants = [replace(work, zero=z) for z in (0, 1, 2, 3)] + [
            replace(work, micro_batch=2, global_batch_tokens=8 * work.seq_len * lay.dp),
            replace(work, sequence_parallel=True), replace(work, sequence_parallel=False),
            replace(work, interleave=1), replace(work, interleave=8),
            replace(work, recompute="full"), replace(work, recompute="none")]
        for other in (estimate(catalog, lay, w) for w in [work, *variants]):
            if other.fits and other.predicted.tokens_per_s > 0:
                assert other.predicted.tokens_per_s <= bound * lay.gpus
                assert goodput(catalog, other) == job_goodput(
                    catalog, lay.model, work.kind, lay.gpus, lay.nodes_spanned)
                checked += 1
    assert checked > 50
