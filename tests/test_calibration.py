"""Calibration against published measurements (issue 3 targets).

The medians over calibration.csv are fit checks: the ``source: cal`` factors of
catalog/efficiency.yaml were fitted on these same rows. Validation - rows predicted by
factors fitted without them - is the leave-one-source-out test below (and, for serving
latency, tests/test_serving_load.py::test_held_out_serving_errors)."""

from __future__ import annotations

import pytest

from solver.physics.calibration import default_csv, match_gpu, match_model, run, summarise


@pytest.fixture(scope="module")
def summary(catalog):
    return summarise(run(catalog, default_csv()))


def test_name_matching(catalog):
    assert match_model(catalog, "Llama-3.3-70B-Instruct") == "llama-3.1-70b"
    assert match_model(catalog, "LLaMA(2) 70B") == "llama-2-70b"
    assert match_model(catalog, "GPT-3 175B") == "gpt-3-175b"
    assert match_model(catalog, "MPT-7b") is None
    assert match_gpu(catalog, "H100-SXM", "") == "h100-sxm"
    assert match_gpu(catalog, "RTX-PRO-6000-Blackwell", "") == "rtx-pro-6000"
    assert match_gpu(catalog, "GB300", "") is None


def test_coverage(summary):
    assert summary.coverage >= 0.80


def test_fit_check_memory_median(summary):
    """Fit check: the training stacks' loss and offload factors are sourced, but torchtune's
    ``activation_offload`` was inferred from TTUNE-02 (docs/training.md), two of the three
    mapped memory rows are torchtune's, so the median is near a fitted row's error."""
    assert summary.counts["memory"] == 3
    assert summary.medians["memory"] <= 0.10


@pytest.mark.parametrize("category", ["inference throughput", "training throughput"])
def test_fit_check_throughput_medians(summary, category):
    """Fit check: the families' ``gemm_efficiency`` / ``mem_bw_efficiency`` (inference) and
    ``train_efficiency`` (training, ``procure calibrate`` training fit) were fitted on these
    rows, among some 6,900 serving measurements that weigh as much. The limits sit near the
    achieved medians (inference 12.1 % since the prompt-length spread of Poisson benchmarks
    joined the fit - its MLPerf Offline rows went from 8.5 to 6.3 %, TensorRT-LLM's 8B
    rows from -23 to -28 % -; training 6.0 %). A fit check, not validation."""
    assert summary.medians[category] <= {"inference throughput": 0.13,
                                         "training throughput": 0.07}[category]


def test_validation_training_throughput_leave_one_source_out(catalog):
    """Validation: every training row predicted by ``train_efficiency`` refitted without
    its own source (solver.physics.calibration.training_fit). Achieved: median |error| ~6.7 %,
    worst ~54 % (MLT40-03, the only ada-pcie training row); limits just above."""
    import statistics

    from solver.physics.calibration import training_fit

    fit = training_fit(catalog, default_csv())
    errors = [abs(e) for e in fit.held_out.values()]
    assert len(errors) >= 20
    assert statistics.median(errors) <= 0.09
    assert max(errors) <= 0.60
    # out of sample is no better than in sample (else the fit check would be the wrong test)
    assert statistics.median(errors) >= statistics.median(abs(e)
                                                          for e in fit.fit_check.values())


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "TTUNE-01 (torchtune full fine-tune of 8B on one RTX 4090, 18.9 GiB) is predicted at "
    "~122 GB: the single-device low-memory optimizer recipe is not modelled (16 B/param "
    "Adam state), nor its optimizer step fused into the backward pass."))
def test_validation_memory_rows_no_factor_was_fitted_to(catalog):
    results = [r for r in run(catalog, default_csv())
               if r.category == "memory" and r.status == "ok"
               and r.id not in ("TTUNE-02", "TTUNE-03")]
    assert results
    assert all(abs(r.error) <= 0.25 for r in results), [(r.id, r.error) for r in results]


def test_minibs_is_the_per_replica_batch_not_the_micro_batch(catalog, monkeypatch):
    """NVIDIA's MLPerf NeMo configs: MINIBS = samples per replica per step (global batch =
    MINIBS x DP); the micro-batch is MBS (1 in their config_common.sh). A row stating only
    MINIBS runs micro-batch 1; one stating MBS runs that."""
    import csv

    import solver.physics.calibration as calibration

    seen = []
    real = calibration.best_layout

    def spy(*args, **kwargs):
        seen.append(args[4])
        return real(*args, **kwargs)

    monkeypatch.setattr(calibration, "best_layout", spy)
    with default_csv().open(encoding="utf-8", newline="") as handle:
        row = next(r for r in csv.DictReader(handle) if r["id"] == "MLT40-01")
    assert "MINIBS=4" in row["parallelism"]
    calibration.map_row(catalog, row)
    assert seen[-1].micro_batch == 1
    assert seen[-1].global_batch_tokens == 8 * 8192  # the logged global batch, 4 x DP 2
    calibration.map_row(catalog, {**row, "parallelism": "TP4 PP1 CP1 SP, MBS=2"})
    assert seen[-1].micro_batch == 2


def test_calibrate_json_is_only_json_and_carries_the_serving_fit(tmp_path):
    """`procure calibrate --json` printed its serving progress on stdout, before the JSON,
    and left the serving fit out of it. Now stdout is one JSON document with the serving
    factors, the errors by vendor and metric, and each measurement's fit-check and held-out
    predictions; the progress (each source group held out, counted) goes to stderr. On a
    small slice of the data (three source groups): the whole fit takes minutes."""
    import json

    from in_process import procure

    data = default_csv().parent
    for name, lines in (("calibration.csv", 15), ("serving_latency.csv", 25),
                        ("serving_published.csv", 15)):
        text = (data / name).read_text(encoding="utf-8").splitlines()[:lines]
        (tmp_path / name).write_text("\n".join(text) + "\n", encoding="utf-8")
    args = ("calibrate", "--csv", str(tmp_path / "calibration.csv"), "--json", "--no-report")
    done = procure(*args)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert "serving: fitting" in done.stderr and "held out (1 of 3)" in done.stderr
    fitted = result["serving"]
    assert fitted["errors_are"] == "held out" and fitted["factors"]
    rows = fitted["rows"]
    assert len({r["source"] for r in rows}) == 3
    assert rows and all(r["measured"] > 0 and r["fit_check"] is not None for r in rows)
    held = [r for r in rows if r["held_out"] is not None]
    assert held and sum(e["rows"] for e in fitted["errors"]) == len(held)
    for e in fitted["errors"]:
        assert abs(e["median_signed_error"]) <= e["median_abs_error"] + 1e-12
    in_sample = json.loads(procure(*args, "--no-held-out").stdout)["serving"]
    assert in_sample["errors_are"] == "fit check"
    assert all(r["held_out"] is None for r in in_sample["rows"])
