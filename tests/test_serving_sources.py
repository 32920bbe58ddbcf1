"""Issue 26: the serving measurements as observations with sources, and what a plan says
about how well its GPU family and engine are calibrated."""

from __future__ import annotations

import copy

import pytest

from solver.catalog.load import load_catalog
from solver.physics import serving_data
from solver.physics.coverage import serving_calibration

CATALOG = load_catalog()


@pytest.fixture(scope="module")
def loaded():
    return serving_data.load_all(CATALOG)


def test_every_file_contributes_and_each_row_keeps_its_source(loaded):
    observations, skipped = loaded
    files = {o.file for o in observations}
    assert files == {"serving_latency.csv", "serving_published.csv", "serving_found.csv",
                     "calibration.csv"}
    vendors = {CATALOG.gpus[o.gpu].vendor for o in observations}
    assert vendors == {"nvidia", "amd"}
    assert all(o.source and o.value > 0 for o in observations)
    # nothing is dropped without a reason
    assert all(s.why for s in skipped)


def test_mlperf_rounds_are_held_out_whole():
    assert serving_data.holdout_group("mlperf-v5.1-dell") == "mlperf-v5.1"
    assert serving_data.holdout_group("mlperf-inf-v4.1") == "mlperf-v4.1"
    assert serving_data.holdout_group("mlperf-v4.1-amd") == "mlperf-v4.1"
    assert serving_data.holdout_group("nim") == "nim"


def test_gpus_that_only_contain_a_catalog_name_are_not_mapped():
    """GH200 contains "H200", an H100 NVL card "H100": neither is the catalog's SXM part."""
    assert serving_data._gpu_id(CATALOG, "NVIDIA GH200 Grace Hopper Superchip 144GB") is None
    assert serving_data._gpu_id(CATALOG, "NVIDIA H100-NVL-94GB") is None
    assert serving_data._gpu_id(CATALOG, "NVIDIA H200-SXM-141GB") == "h200-sxm"
    assert serving_data._gpu_id(CATALOG, "AMD Instinct MI325X 256GB HBM3e") == "mi325x"


def test_a_poisson_row_takes_its_requests_in_flight_from_little(loaded):
    observations, _ = loaded
    server = [o for o in observations if o.load == "server" and o.live is not None]
    assert server
    o = server[0]
    assert o.live > 0 and o.rate > 0


def test_calibrated_family_plans_without_margin_uncalibrated_with_one():
    calibrated = serving_calibration(CATALOG, "h100-sxm", "vllm")
    assert calibrated.rows >= CATALOG.efficiency["serving"].get("calibrated_min_rows", 10)
    assert calibrated.margin_applied_pct == 0.0 and calibrated.calibrated
    consumer = serving_calibration(CATALOG, "rtx-5090", "vllm")  # no measured row
    assert consumer.rows == 0 and consumer.margin_applied_pct >= 15.0
    assert not consumer.calibrated
    as_dict = consumer.to_dict()
    assert set(as_dict) == {"family", "engine", "rows", "sources", "held_out_error_pct",
                            "calibrated", "margin_applied_pct", "basis"}
    assert as_dict["calibrated"] is False and "no published measurements" in as_dict["basis"]


def test_the_margin_is_the_nearest_calibrated_family_error():
    """An AMD family without rows on an engine borrows the error of the calibrated AMD
    family on it (same vendor first), never less than the floor."""
    eff = copy.deepcopy(CATALOG.efficiency)
    eff["serving"]["calibration"] = {
        "cdna3-oam/vllm": {"rows": 400, "sources": 5, "held_out_error_pct": 31.0},
        "cdna4-oam/vllm": {"rows": 400, "sources": 1, "held_out_error_pct": 9.0},
        "hopper-sxm/vllm": {"rows": 900, "sources": 9, "held_out_error_pct": 12.0},
    }
    catalog = CATALOG.model_copy(update={"efficiency": eff})
    # one source is not a calibration, however many rows it has
    borrowed = serving_calibration(catalog, "mi355x", "vllm")
    assert borrowed.margin_applied_pct == 31.0 and "cdna3-oam" in borrowed.basis
    nvidia = serving_calibration(catalog, "rtx-pro-6000", "vllm")
    assert nvidia.margin_applied_pct == max(15.0, 12.0)


def test_a_margin_derates_the_prediction():
    """The margin plans latencies that much higher and throughput that much lower."""
    from solver.physics.layout import Layout, Workload
    from solver.physics.performance import estimate

    eff = copy.deepcopy(CATALOG.efficiency)
    layout = Layout(model="llama-3.1-8b", gpu="h100-sxm", precision="fp8", tp=1)
    workload = Workload("inference", input_tokens=1000, output_tokens=200, concurrency=16)
    before = estimate(CATALOG, layout, workload).predicted
    eff["serving"]["calibration"] = {}
    eff["serving"]["uncalibrated_margin_floor_pct"] = 25.0
    catalog = CATALOG.model_copy(update={"efficiency": eff})
    after = estimate(catalog, layout, workload).predicted
    assert after.ttft_ms == pytest.approx(before.ttft_ms * 1.25, rel=0.02)
    assert after.tpot_ms == pytest.approx(before.tpot_ms * 1.25, rel=1e-6)
    assert after.tokens_per_s == pytest.approx(before.tokens_per_s / 1.25, rel=0.02)


def test_each_published_row_knows_when_its_software_ran(loaded):
    """The era table of docs/calibration.md splits the held-out error by the software's date:
    the date comes from each source's own date text, in the forms the files use."""
    from solver.physics.serving_fit import era_of

    assert serving_data.released_of("MLPerf Inference v6.0 (results commit 2026-03-26)") \
        == "2026-03"
    assert serving_data.released_of("TRT-LLM v0.7a, Dec 2023") == "2023-12"
    assert serving_data.released_of("TRT-LLM v0.5.0, late 2023") == "2023"
    assert serving_data.released_of("TensorRT-LLM 1.2.0 docs") is None
    observations, _ = loaded
    by_id = {o.id: o for o in observations}
    assert era_of(by_id["mlperf-v4.1-amd-0006"]) == "older"  # results commit 2024-08-28
    eras = {era_of(o) for o in observations if o.file == "serving_found.csv"}
    assert eras == {"current", "older", "undated"}
    # a bare year in the cut-off's own year cannot be placed on either side
    bare = [o for o in observations if o.released == "2025"]
    assert bare and all(era_of(o) == "undated" for o in bare)


def test_a_row_whose_run_time_precision_is_not_stated_is_left_out(loaded):
    """MLPerf v4.1 partner rows list FP16 weights that the submitter quantised: the precision
    of the run is not stated, and served at BF16 they would credit Hopper's BF16 peak with
    the run's work. They are skipped with that reason, never fitted at a guessed precision."""
    import csv

    observations, skipped = loaded
    fitted = {o.id for o in observations if o.file == "serving_found.csv"}
    unstated = [s for s in skipped if "run-time precision not stated" in s.why]
    assert {s.source.rsplit("-", 1)[0] for s in unstated} >= {"mlperf-v4.1"}
    assert not fitted & {s.id for s in unstated}
    # every row whose notes say so is among them, and only those
    from solver.physics.calibration import default_csv

    path = default_csv().parent / "serving_found.csv"
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    said = {r["id"] for r in rows if not r["precision"].strip()
            and serving_data._UNSTATED_PRECISION.search(r["notes"])}
    assert said and not fitted & said
    assert {s.id for s in unstated} <= said
    # a blank precision without such a note is the checkpoint's own: still fitted
    blank = {r["id"] for r in rows if not r["precision"].strip()} - said
    assert any(i.split(":")[0] in blank for i in fitted)


def _row(**cells: str) -> dict[str, str]:
    """A serving_found.csv row: an H200 running Llama-3.1-70B at FP8 on TensorRT-LLM, TP 8,
    closed loop of 64 users, system output tokens/s; ``cells`` override."""
    row = dict(id="t-0001", source_url="https://example.org", source_date="2025-06",
               model="meta-llama/Llama-3.1-70B-Instruct", gpu="NVIDIA H200-SXM-141GB",
               num_gpus="8", tp="8", pp="", ep="", precision="fp8", engine="trtllm",
               isl="1024", osl="1024", concurrency="64", request_rate="",
               metric="throughput", value="5000", unit="output tok/s (system)", notes="",
               source="t")
    row.update(cells)
    return row


def _read(row: dict[str, str], expert_parallel: bool = False):
    return serving_data._published(CATALOG, row, row["id"], "t", "serving_found.csv", {},
                                   expert_parallel)


def test_rows_the_model_cannot_express_are_skipped_with_their_reason():
    """trtllm-bench prints a system and a per-user output rate; a run with multi-token
    prediction emits several tokens a step. Neither is the system throughput of plain
    decoding, so neither is fitted (both were, as system throughput, before: a per-user
    rate of 11 tokens/s at 1,024 users read as the whole system's)."""
    plain = _read(_row())
    assert isinstance(plain, serving_data.Observation) and plain.metric == "output_tps"
    per_user = _read(_row(unit="output tok/s per user"))
    assert isinstance(per_user, serving_data.Skipped) and "per-user" in per_user.why
    mtp = _read(_row(notes="trtllm-bench, batch 1, MTP 3 layers (speculative decoding)"))
    assert isinstance(mtp, serving_data.Skipped) and "speculative" in mtp.why
    eagle = _read(_row(notes="Eagle-3 draft heads"))
    assert isinstance(eagle, serving_data.Skipped)
    # no row of the shipped files is fitted with such a unit or note
    observations, skipped = serving_data.load_all(CATALOG)
    reasons = {s.id: s.why for s in skipped}
    for rid in ("trtllm-blog-dsr1-best-perf-0008", "trtllm-blog-dsr1-best-perf-0014"):
        assert "per-user" in reasons[rid]
    for rid in ("trtllm-blog-dsr1-best-perf-0001", "trtllm-blog-dsr1-best-perf-0010"):
        assert "speculative" in reasons[rid]
    assert not [o for o in observations if o.id.startswith("trtllm-blog-dsr1-best-perf")]


def test_attention_dp_on_is_a_dep_row_for_the_expert_parallel_check():
    """TensorRT-LLM's 'attention DP on' with EP 8 is attention data parallelism 8: out of the
    serving fit, into the expert-parallel check as attention TP 1 on 8 ranks."""
    row = _row(model="deepseek-ai/DeepSeek-R1", ep="8",
               notes="trtllm-bench throughput, attention DP on, max_batch_size 384")
    left = _read(row)
    assert isinstance(left, serving_data.Skipped) and "expert-parallel check" in left.why
    dep = _read(row, expert_parallel=True)
    assert isinstance(dep, serving_data.Observation)
    assert (dep.tp, dep.attention_dp, dep.ep) == (1, 8, 8)
    off = _row(model="deepseek-ai/DeepSeek-R1", notes="attention DP off")
    assert isinstance(_read(off), serving_data.Observation)


def test_a_static_batch_is_read_as_one_batch_not_a_closed_loop():
    """A concurrency cell that is the size of one batch sent at once (vLLM's latency
    benchmark, TensorRT-LLM's session benchmark) is a static batch: every prompt prefills
    at the start, where a closed loop staggers them."""
    closed = _read(_row())
    static = _read(_row(notes="'Latency Measurements' table, row Batch Size 64"))
    session = _read(_row(notes="out_tps = output_seqlen*batch_size/total_latency/tp"))
    assert closed.load == "closed"
    assert static.load == session.load == "static" and static.concurrency == 64.0
    e2e_closed = serving_data.predict(serving_data.prepare(CATALOG, closed), _trtllm())
    e2e_static = serving_data.predict(serving_data.prepare(CATALOG, static), _trtllm())
    assert e2e_closed != e2e_static


def _trtllm():
    from solver.physics.serving import engine_factors

    return engine_factors(CATALOG, "trtllm")


def test_a_blank_weight_precision_is_the_checkpoints_own():
    """A cell that names only the KV cache's dtype states no weight precision: the row runs
    at the checkpoint's own, the catalog model's default (gpt-oss ships MXFP4 experts: 4-bit
    weight-only on Hopper, which has no FP4 tensor cores; FP4 on Blackwell), BF16 where the
    model has none. Read as BF16, gpt-oss-20b's weights were 3x what the H100 streams."""
    gpt = _row(model="openai/gpt-oss-20b", gpu="NVIDIA H100-SXM-80GB", num_gpus="1", tp="1",
               precision="kv-cache fp8", engine="vllm")
    hopper = _read(gpt)
    assert isinstance(hopper, serving_data.Observation) and hopper.precision == "int4"
    blackwell = _read(dict(gpt, gpu="NVIDIA B200-SXM-180GB"))
    assert blackwell.precision == "fp4"
    llama = _read(_row(precision=""))
    assert llama.precision == "bf16"
    assert _read(_row(precision="fp8")).precision == "fp8"  # stated: as stated
    weights = serving_data.prepare(CATALOG, hopper).plan.breakdown.weights_gb
    assert weights < 20.91 * 2 / 2  # under half the 16-bit weights of its 20.9B parameters
