"""The planner's training-knob search (issue 15): per candidate layout, the fastest ZeRO
stage, micro-batch, sequence parallelism and interleaved schedule that fit, stated in the
estimate's training block. Properties of the search, not hard-coded plans."""

from __future__ import annotations

from dataclasses import replace

import pytest

from solver.optimize.candidates import fastest_training_knobs
from solver.physics.layout import Workload
from solver.physics.performance import best_layout, estimate


def _pcie_lora(catalog, **knobs):
    """Llama 3.1 70B LoRA on one 8 x RTX PRO 6000 PCIe box (TP and PP over PCIe)."""
    return best_layout(catalog, "llama-3.1-70b", "rtx-pro-6000", 8,
                       Workload("lora", seq_len=4096, **knobs), precision="fp8",
                       gpus_per_node=8)


def test_search_never_slower_and_always_fits(catalog):
    est = _pcie_lora(catalog)
    best = fastest_training_knobs(catalog, est)
    assert best.fits
    assert best.predicted.tokens_per_s >= est.predicted.tokens_per_s
    assert best.layout == est.layout  # knobs only: the layout (and its hardware) stays


def test_search_takes_sequence_parallel_for_tp_over_pcie(catalog):
    """Without SP the TP ranks repeat the norms/dropout (the Amdahl part) and hold their
    activations unsplit; SP removes both at the same collective bytes, so where TP runs
    over PCIe (SP off by default there) the search turns it on."""
    est = _pcie_lora(catalog)
    assert est.layout.tp > 1 and est.training["sequence_parallel"] is False
    best = fastest_training_knobs(catalog, est)
    assert best.training["sequence_parallel"] is True
    assert best.memory.activations_gb <= est.memory.activations_gb


def test_interleave_chosen_trades_bubble_for_hops(catalog):
    """The chosen virtual stages are the fastest of those tried: none of the others beats
    it on the same layout and knobs."""
    best = fastest_training_knobs(catalog, _pcie_lora(catalog))
    assert best.layout.pp > 1
    for v in (1, 2, 4, 8):
        other = estimate(catalog, best.layout, replace(best.workload, interleave=v))
        assert other.predicted.tokens_per_s <= best.predicted.tokens_per_s * 1.001 + 1e-9


def test_micro_batch_search_keeps_the_step_tokens(catalog):
    """A larger micro-batch is tried at the same tokens per optimizer step (fewer
    micro-batches), so the search never changes the job's global batch."""
    est = _pcie_lora(catalog)
    best = fastest_training_knobs(catalog, est)
    seq = est.workload.seq_len
    assert best.training["global_batch"] * seq == pytest.approx(
        est.training["global_batch"] * seq)
    assert best.training["micro_batch"] * best.training["microbatches"] == \
        est.training["micro_batch"] * est.training["microbatches"]


def test_knobs_the_workload_sets_are_kept(catalog):
    est = _pcie_lora(catalog, interleave=2, sequence_parallel=False, zero=3)
    best = fastest_training_knobs(catalog, est)
    assert best.training["interleave"] == 2
    assert best.training["sequence_parallel"] is False
    assert best.training["zero"] == 3


def test_spanning_jobs_take_the_fewest_nodes_not_the_next_power_of_two(catalog):
    """The doubling 2, 4, 8 ... plus bisection finds the same node count as trying every
    count in turn (pretrain-70b-open: 7 B200 nodes, not 8), for every node type and fabric."""
    from pathlib import Path

    from solver.optimize.candidates import _JobProbe, build_candidates, node_types
    from solver.optimize.costs import CostParams
    from solver.rfq.schema import load_rfq, validate_rfq

    path = Path(__file__).resolve().parent.parent / "scenarios" / "pretrain-70b-open.yaml"
    data = load_rfq(path, catalog).model_dump(mode="json", exclude_none=True)
    # at the deadline itself (no headroom) the known answer is 7 nodes, not a power of two
    rfq = validate_rfq({**data, "deadline_headroom": 0.0}, catalog, str(path), path.parent)
    spec = rfq.workloads[0]
    table = build_candidates(catalog, rfq)
    chosen = {(c.node_type, c.fabric, c.layout.precision): c.nodes_spanned
              for c in table.candidates[spec.name] if not c.rented}
    assert ("hgx-8gpu/b200-sxmx8", "100gbe", "fp8") in chosen
    assert chosen[("hgx-8gpu/b200-sxmx8", "100gbe", "fp8")] == 7
    types = node_types(catalog, rfq, CostParams.from_catalog(catalog))
    for (key, fabric_id, precision), nodes in list(chosen.items())[:6]:
        if fabric_id == "none":
            continue
        probe = _JobProbe(catalog, spec, types[key], precision)
        fabric = catalog.fabrics[fabric_id]
        every = [m for m in range(2, nodes + 1)
                 if probe.candidate(types[key].gpus * m, fabric) is not None]
        assert every and every[0] == nodes, (key, fabric_id, every, nodes)
