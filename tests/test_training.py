"""Training knobs, fabric behaviour, goodput and the training calibration (issue 15).

Known answers from the mechanism: recompute modes order memory and step time, ZeRO stages
order memory, goodput falls with GPU count, coupled training lands on RDMA fabrics by the
vendor's policy, and plans state their deadline margin.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from solver.analysis.explain import solve_rfq
from solver.physics.calibration import default_csv, training_fit, training_fit_markdown
from solver.physics.goodput import goodput
from solver.physics.layout import Layout, Workload
from solver.physics.performance import estimate, straggler_factor
from solver.rfq.schema import load_rfq

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
SEVENTY_B = Layout("llama-3.1-70b", "h100-sxm", "bf16", tp=8, pp=8, dp=1, gpus_per_node=8,
                   fabric="ib-ndr-400")
PRETRAIN = Workload("pretrain", seq_len=4096)


def _at(catalog, layout, **knobs):
    return estimate(catalog, layout, replace(PRETRAIN, **knobs))


def test_recompute_orders_memory_and_step_time(catalog):
    runs = {mode: _at(catalog, SEVENTY_B, recompute=mode)
            for mode in ("none", "selective", "full")}
    act = {mode: est.memory.activations_gb for mode, est in runs.items()}
    step = {mode: est.predicted.step_time_s for mode, est in runs.items()}
    assert act["none"] > act["selective"] > act["full"]
    assert step["none"] < step["selective"] < step["full"]
    # full recompute re-runs the forward: one extra 2N on top of 6N, about a third more
    assert 1.25 <= step["full"] / step["selective"] <= 1.4
    assert runs["full"].training["recompute"] == "full"


def test_auto_recompute_is_selective_when_it_fits(catalog):
    auto = _at(catalog, SEVENTY_B)
    selective = _at(catalog, SEVENTY_B, recompute="selective")
    assert auto.training["recompute"] == "selective"
    assert auto.predicted.step_time_s == pytest.approx(selective.predicted.step_time_s)


def test_zero_stages_order_memory(catalog):
    layout = Layout("llama-3.1-8b", "h100-sxm", "bf16", tp=1, pp=1, dp=8)
    totals = [_at(catalog, layout, zero=z, recompute="full").memory.total_gb for z in range(4)]
    assert totals[0] > totals[1] > totals[2] > totals[3]
    # ZeRO-1 shards the 12 B/param optimizer state over 8 GPUs: 8B x 12 x 7/8 = 84 GB less
    assert totals[0] - totals[1] == pytest.approx(8.03 * 12 * 7 / 8, rel=0.05)


def test_sequence_parallel_and_context_parallel_cut_activations(catalog):
    layout = Layout("llama-3.1-70b", "h100-sxm", "bf16", tp=4, pp=1, dp=2)
    on = _at(catalog, layout, sequence_parallel=True, recompute="selective")
    off = _at(catalog, layout, sequence_parallel=False, recompute="selective")
    assert on.memory.activations_gb < off.memory.activations_gb
    one = _at(catalog, layout, context_parallel=1, recompute="selective")
    two = _at(catalog, layout, context_parallel=2, recompute="selective")
    assert two.memory.activations_gb < 0.6 * one.memory.activations_gb
    bad = _at(catalog, layout, context_parallel=3)
    assert not bad.fits and "context parallelism" in bad.reason


def test_interleave_shrinks_the_bubble(catalog):
    one = _at(catalog, SEVENTY_B, interleave=1)
    four = _at(catalog, SEVENTY_B, interleave=4)
    assert four.predicted.step_time_s < one.predicted.step_time_s
    assert four.training["interleave"] == 4


def test_tcp_fabric_and_stragglers(catalog):
    gpu_layout = Layout("llama-3.1-70b", "rtx-pro-6000", "bf16", tp=8, pp=1, dp=4,
                        gpus_per_node=8, fabric="25gbe")
    rdma = replace(gpu_layout, fabric="100gbe")
    assert straggler_factor(catalog, gpu_layout) > straggler_factor(catalog, rdma) > 1.0
    assert straggler_factor(catalog, replace(gpu_layout, dp=1)) == 1.0  # one node


def test_goodput_falls_with_gpu_count(catalog):
    runs = []
    for dp in (8, 64, 512, 4096):
        layout = Layout("llama-3.1-8b", "h100-sxm", "bf16", tp=1, pp=1, dp=dp,
                        gpus_per_node=8, fabric="ib-ndr-400")
        runs.append(goodput(catalog, _at(catalog, layout)))
    losses = [g.failure_loss for g in runs]
    assert losses[0] < losses[1] < losses[2] < losses[3]
    assert losses[1] == pytest.approx(8 * losses[0])  # failures scale with GPUs
    # beyond a node the checkpoint write spreads over more nodes; failures then dominate
    assert 1.0 > runs[1].fraction > runs[2].fraction > runs[3].fraction
    # Llama 3's rate: 16,384 GPUs fail about every 3 hours
    rate = catalog.efficiency["goodput"]["failure_rate_per_gpu_hour"]["value"]
    assert 1.0 / (16384 * rate) == pytest.approx(3.1, rel=0.05)


def _solve(catalog, name, **constraints):
    rfq = load_rfq(SCENARIOS / name, catalog)
    if constraints:
        rfq = rfq.model_copy(update={"constraints": rfq.constraints.model_copy(
            update=constraints)})
    return solve_rfq(rfq, catalog).to_json()


@pytest.mark.parametrize("name", ["finetune-70b-full-cluster.yaml", "pretrain-70b-open.yaml"])
def test_coupled_training_on_rdma_with_deadline_margin(catalog, name):
    plan = _solve(catalog, name)
    entry = plan["workloads"][0]
    fabric = catalog.fabrics[plan["cluster"]["fabric"]]
    assert plan["cluster"]["coupled"] and fabric.rdma  # the guide: InfiniBand/RoCE
    training = entry["training"]
    assert training["recompute"] in ("selective", "partial", "full")
    assert 0.9 < training["goodput"] < 1.0
    assert training["deadline_margin_hours"] > 0
    assert training["hours_to_complete"] + training["deadline_margin_hours"] == pytest.approx(
        training["deadline_hours"], abs=0.02)
    notes = " ".join(step["note"] for step in plan["decision_path"])
    assert "coupled_training_fabric: rdma" in notes


def test_rfq_can_lift_the_rdma_policy(catalog):
    plan = _solve(catalog, "finetune-70b-full-cluster.yaml", coupled_training_fabric="any")
    assert plan["status"] == "optimal" and plan["cluster"]["coupled"]
    notes = " ".join(step["note"] for step in plan["decision_path"])
    assert "coupled_training_fabric: rdma" not in notes


def _cli(monkeypatch, capsys, *args):
    from solver.cli import main as cli

    monkeypatch.setattr(sys, "argv", ["procure", *args])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out + captured.err


ESTIMATE = ("estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "8",
            "--kind", "pretrain")


def test_estimate_training_flags(monkeypatch, capsys):
    code, out = _cli(monkeypatch, capsys, *ESTIMATE, "--recompute", "full", "--zero", "fsdp",
                     "--micro-batch", "2", "--global-batch", "64", "--no-sequence-parallel",
                     "--context-parallel", "2", "--json")
    assert code == 0
    training = json.loads(out)["training"]
    assert training["recompute"] == "full" and training["zero"] == 3
    assert training["micro_batch"] == 2 and training["global_batch"] == 64
    assert training["context_parallel"] == 2 and training["sequence_parallel"] is False


@pytest.mark.parametrize(("flag", "value"), [("--recompute", "some"), ("--zero", "4"),
                                             ("--micro-batch", "0"), ("--global-batch", "-1"),
                                             ("--interleave", "0"),
                                             ("--context-parallel", "0")])
def test_estimate_bad_training_flags_exit_2(monkeypatch, capsys, flag, value):
    code, out = _cli(monkeypatch, capsys, *ESTIMATE, flag, value)
    assert code == 2
    assert flag in out and "Traceback" not in out


def test_training_leave_one_source_out_report(catalog):
    fit = training_fit(catalog, default_csv())
    assert len(fit.held_out) >= 15 and set(fit.held_out) == set(fit.fit_check)
    assert len(set(fit.sources.values())) >= 3
    text = training_fit_markdown(fit)
    assert "leave-one-source-out" in text and "| **all** |" in text
    report = (Path(__file__).resolve().parent.parent / "docs" / "calibration.md").read_text()
    assert "## Training throughput: fit-check and leave-one-source-out" in report
