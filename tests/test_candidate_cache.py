"""Issue 31: candidate tables kept on disk across runs, keyed by content.

A build from the cache must be the build without it (every field of every candidate and
estimate, the rejections); any change of catalog, RFQ, cost parameters or code must miss.
Whether a build was served from disk is read off the physics memo (a served build
estimates nothing).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.optimize import candidate_cache
from solver.optimize.candidates import build_candidates, clear_caches
from solver.physics.performance import ESTIMATES
from solver.rfq.schema import TrainingWorkload, load_rfq

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "candidates"
    monkeypatch.setenv(candidate_cache.CACHE_ENV, str(folder))
    return folder


def _same(a, b) -> None:
    assert a.node_types == b.node_types
    assert a.candidates == b.candidates
    assert {k: [c.estimate.training for c in v] for k, v in a.candidates.items()} == {
        k: [c.estimate.training for c in v] for k, v in b.candidates.items()}
    assert a.rejected == b.rejected
    assert a.storage == b.storage


def _cold(catalog, rfq, **kw):
    clear_caches()
    table = build_candidates(catalog, rfq, **kw)
    return table, len(ESTIMATES)


@pytest.mark.parametrize("name", ["hybrid-service-and-job.yaml", "portfolio-lab.yaml"])
def test_a_repeated_build_is_served_from_disk_and_equal(catalog, cache, name, monkeypatch):
    rfq = load_rfq(SCENARIOS / name, catalog)
    first, estimated = _cold(catalog, rfq)
    assert estimated > 0
    assert len(list(cache.glob("*.pickle"))) == len(rfq.workloads)
    second, estimated = _cold(catalog, rfq)
    assert estimated == 0  # nothing recomputed
    _same(first, second)
    # the Pareto build (all sizes) is another entry for a training job; a service's
    # candidates do not depend on it, so its entry is read back
    jobs = [s for s in rfq.workloads if isinstance(s, TrainingWorkload)]
    assert jobs and len(jobs) < len(rfq.workloads)
    third, estimated = _cold(catalog, rfq, all_sizes=True)
    assert len(list(cache.glob("*.pickle"))) == len(rfq.workloads) + len(jobs)
    _same(third, build_candidates(catalog, rfq, all_sizes=True))
    served = rfq.model_copy(update={"workloads": [
        s for s in rfq.workloads if not isinstance(s, TrainingWorkload)]})
    from_disk, estimated = _cold(catalog, served, all_sizes=True)
    assert estimated == 0
    monkeypatch.setenv(candidate_cache.CACHE_ENV, "off")
    _same(from_disk, _cold(catalog, served, all_sizes=True)[0])


def test_a_changed_workload_misses_and_the_others_hit(catalog, cache, monkeypatch):
    rfq = load_rfq(SCENARIOS / "portfolio-lab.yaml", catalog)
    _cold(catalog, rfq)
    first = rfq.workloads[0]
    changed = rfq.model_copy(update={"workloads": [
        first.model_copy(update={"concurrency": (first.concurrency or 1) * 2}),
        *rfq.workloads[1:]]})
    table, estimated = _cold(catalog, changed)
    assert estimated > 0
    assert len(list(cache.glob("*.pickle"))) == len(rfq.workloads) + 1
    monkeypatch.setenv(candidate_cache.CACHE_ENV, "off")
    reference, _ = _cold(catalog, changed)
    _same(table, reference)


def test_catalog_constraints_and_code_are_in_the_key(catalog, cache, monkeypatch):
    rfq = load_rfq(SCENARIOS / "chat-70b-one-node.yaml", catalog)
    spec = rfq.workloads[0]
    base = candidate_cache.workload_key(catalog, rfq, spec, False, "p")
    gpu = next(iter(catalog.gpus.values()))
    dearer = catalog.model_copy(update={"gpus": {
        **catalog.gpus, gpu.id: gpu.model_copy(update={"price_usd": gpu.price_usd + 1})}})
    assert candidate_cache.workload_key(dearer, rfq, spec, False, "p") != base
    other = rfq.model_copy(update={"constraints": rfq.constraints.model_copy(
        update={"max_nodes": 7})})
    assert candidate_cache.workload_key(catalog, other, spec, False, "p") != base
    # all_sizes moves a training job's spans only: a service shares one entry
    assert candidate_cache.workload_key(catalog, rfq, spec, True, "p") == base
    mixed = load_rfq(SCENARIOS / "hybrid-service-and-job.yaml", catalog)
    job = next(s for s in mixed.workloads if isinstance(s, TrainingWorkload))
    assert (candidate_cache.workload_key(catalog, mixed, job, True, "p")
            != candidate_cache.workload_key(catalog, mixed, job, False, "p"))
    assert candidate_cache.workload_key(catalog, rfq, spec, False, "q") != base
    renamed = rfq.model_copy(update={"id": "another-id", "customer": "someone else"})
    assert candidate_cache.workload_key(catalog, renamed, spec, False, "p") == base
    monkeypatch.setattr(candidate_cache, "_CODE", ["another version of the code"])
    assert candidate_cache.workload_key(catalog, rfq, spec, False, "p") != base


def test_a_damaged_entry_is_rebuilt(catalog, cache):
    rfq = load_rfq(SCENARIOS / "chat-70b-one-node.yaml", catalog)
    first, _ = _cold(catalog, rfq)
    for entry in cache.glob("*.pickle"):
        entry.write_bytes(b"not a pickle")
    again, estimated = _cold(catalog, rfq)
    assert estimated > 0
    _same(first, again)


def test_off_writes_nothing(catalog, tmp_path, monkeypatch):
    monkeypatch.setenv(candidate_cache.CACHE_ENV, "off")
    assert candidate_cache.candidate_cache_dir() is None
    monkeypatch.delenv(candidate_cache.CACHE_ENV)
    monkeypatch.setenv("PROCURE_CACHE_DIR", str(tmp_path / "parse"))
    assert candidate_cache.candidate_cache_dir() == tmp_path / "parse" / "candidates"
    monkeypatch.setenv("PROCURE_CACHE_DIR", "")
    assert candidate_cache.candidate_cache_dir() is None


def test_a_build_cut_short_keeps_the_workloads_it_finished(catalog, cache, monkeypatch):
    """Issue 31: each workload is kept as soon as it is built, so a run the time limit
    stops still warms the next one."""
    from solver.optimize import candidates as module
    from solver.optimize.linear import TimeLimitReached

    rfq = load_rfq(SCENARIOS / "portfolio-lab.yaml", catalog)
    real = module._workload_candidates
    calls: list[str] = []

    def second_runs_out(catalog, rfq, spec, *args):
        calls.append(spec.name)
        if len(calls) == 2:
            raise TimeLimitReached("candidates not built within the time limit")
        return real(catalog, rfq, spec, *args)

    monkeypatch.setattr(module, "_workload_candidates", second_runs_out)
    clear_caches()
    with pytest.raises(TimeLimitReached):
        build_candidates(catalog, rfq)
    assert len(list(cache.glob("*.pickle"))) == 1


def test_reading_the_cache_counts_against_the_time_limit(catalog, cache, monkeypatch):
    """On a busy machine reading a large RFQ's tables back takes most of a second: each
    workload's read checks the deadline, so a warm build past it stops, reading nothing more."""
    import time

    from solver.optimize.linear import TimeLimitReached

    rfq = load_rfq(SCENARIOS / "portfolio-lab.yaml", catalog)
    _cold(catalog, rfq)  # warm on disk
    reads = []
    load = candidate_cache.load
    monkeypatch.setattr(candidate_cache, "load", lambda key: reads.append(key) or load(key))
    with pytest.raises(TimeLimitReached, match="candidate cache"):
        build_candidates(catalog, rfq, deadline=time.perf_counter() - 1.0)
    assert reads == []
    assert build_candidates(catalog, rfq, deadline=time.perf_counter() + 600).candidates
    assert len(reads) == len(rfq.workloads)
