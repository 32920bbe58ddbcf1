"""Issue 27: disaggregated prefill/decode in ``procure estimate`` (the physics of
:mod:`solver.physics.disagg`; the planner does not choose it).

* the prompt's KV that moves, by hand, and its transfer time on NVLink and the fabric;
* TTFT is the sum of its parts; the throughput obeys Little's law over the closed loop;
* the decode pool's TPOT has no prefill in it: never above the same layout's aggregated TPOT;
* ``--prefill-gpus/--prefill-tp/--decode-gpus`` documented, bad combinations exit 2 naming
  the flags.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from solver.catalog.load import load_catalog
from solver.physics import disagg
from solver.physics.layout import Layout, Workload
from solver.physics.links import group_link, p2p_s
from solver.physics.performance import estimate
from solver.physics.serving import engine_factors

MODEL = "llama-3.1-70b"  # 80 layers, 8 KV heads of 128
CHAT = Workload(kind="inference", input_tokens=2000, output_tokens=400, concurrency=64)


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(None)


def _lay(tp: int, dp: int, fabric: str = "none", **kw) -> Layout:
    return Layout(model=MODEL, gpu="h100-sxm", precision="fp8", tp=tp, dp=dp,
                  gpus_per_node=8, fabric=fabric, **kw)


def test_kv_transfer_bytes_by_hand(catalog):
    # 2,000 tokens x 80 layers x (K and V) x 8 heads x 128 x 1 byte (FP8 KV)
    assert disagg.kv_transfer_bytes(catalog, MODEL, "fp8", 2000) == 2000 * 80 * 2 * 8 * 128
    assert disagg.kv_transfer_bytes(catalog, MODEL, "bf16", 1000) == 1000 * 80 * 2 * 8 * 128 * 2


def test_transfer_on_nvlink_inside_a_node_and_the_fabric_across(catalog):
    size = 327_680_000.0
    gpu = catalog.gpus["h100-sxm"]
    inside = disagg.transfer_s(catalog, _lay(4, 1), _lay(4, 1), size)
    nvlink = group_link(catalog, gpu, "none", 8, 8)
    assert inside == pytest.approx(p2p_s(nvlink, size))
    across = disagg.transfer_s(catalog, _lay(8, 1, "ib-ndr-400"), _lay(8, 1, "ib-ndr-400"), size)
    fabric = group_link(catalog, gpu, "ib-ndr-400", 8, 16)
    assert fabric.crosses_nodes
    assert across == pytest.approx(fabric.latency_us * 1e-6 + size / (fabric.busbw_gbs * 1e9))
    # a TP-2 prefill replica has 2 of its node's 8 NICs' share: 4x the bandwidth time
    narrow = disagg.transfer_s(catalog, _lay(2, 4, "ib-ndr-400"), _lay(8, 1, "ib-ndr-400"), size)
    assert narrow == pytest.approx(fabric.latency_us * 1e-6
                                   + size / (fabric.busbw_gbs * 2 / 8 * 1e9))


def test_ttft_adds_up_and_littles_law_holds(catalog):
    found = disagg.estimate(catalog, _lay(4, 1), _lay(4, 1), CHAT)
    assert found.fits, found.reason
    e = engine_factors(catalog, CHAT.engine, "h100-sxm")
    assert found.ttft_ms == pytest.approx(e.ttft_overhead_ms.value + found.prefill_ms
                                          + found.prefill_queue_ms + found.kv_transfer_ms)
    cycle_s = (found.ttft_ms + CHAT.output_tokens * found.tpot_ms) / 1e3
    assert found.tokens_per_s / CHAT.output_tokens * cycle_s == pytest.approx(64, rel=1e-3)
    assert 0 < found.prefill_load < 1 and found.decode_batch == 64
    # a second prefill replica: less queueing for a prefill replica, lower TTFT
    one = disagg.estimate(catalog, _lay(2, 1), _lay(4, 1), CHAT)
    two = disagg.estimate(catalog, _lay(2, 2), _lay(4, 1), CHAT)
    assert two.prefill_queue_ms < one.prefill_queue_ms and two.ttft_ms < one.ttft_ms
    assert two.prefill_ms == pytest.approx(one.prefill_ms)  # the same replica, its prompt
    # pools over two nodes with no fabric: the KV cannot move, said so
    apart = disagg.estimate(catalog, _lay(4, 2), _lay(4, 1), CHAT)
    assert not apart.fits and "connects none" in apart.reason


def test_decode_pool_tpot_has_no_prefill_in_it(catalog):
    for users in (8, 64, 200):
        w = replace(CHAT, concurrency=users)
        pooled = disagg.estimate(catalog, _lay(4, 1), _lay(4, 1), w)
        together = estimate(catalog, _lay(4, 1), w).predicted
        assert pooled.tpot_ms <= together.tpot_ms


def test_a_pool_that_does_not_fit_says_which(catalog):
    tiny = Layout(model=MODEL, gpu="h100-sxm", precision="bf16", tp=1, dp=1, gpus_per_node=8)
    found = disagg.estimate(catalog, tiny, _lay(4, 1), CHAT)
    assert not found.fits and found.reason.startswith("prefill pool:")


ESTIMATE = ["estimate", "--model", MODEL, "--gpu", "h100-sxm", "--kind", "inference",
            "--precision", "fp8", "--input-tokens", "2000", "--output-tokens", "400"]


@pytest.mark.parametrize(("args", "flag", "words"), [
    (["--gpus", "8", "--prefill-gpus", "4", "--decode-gpus", "4", "--concurrency", "64"],
     "--prefill-tp", "together"),
    (["--gpus", "8", "--prefill-gpus", "4", "--prefill-tp", "3", "--decode-gpus", "4",
      "--concurrency", "64"], "--prefill-tp", "does not divide --prefill-gpus 4"),
    (["--gpus", "8", "--prefill-gpus", "4", "--prefill-tp", "4", "--decode-gpus", "2",
      "--concurrency", "64"], "--gpus", "--prefill-gpus + --decode-gpus = 6"),
    (["--gpus", "8", "--prefill-gpus", "4", "--prefill-tp", "4", "--decode-gpus", "4"],
     "--concurrency", "closed loop"),
    (["--gpus", "16", "--prefill-gpus", "8", "--prefill-tp", "8", "--decode-gpus", "8",
      "--concurrency", "64"], "--fabric", "span nodes"),
    (["--gpus", "8", "--prefill-gpus", "6", "--prefill-tp", "6", "--decode-gpus", "2",
      "--concurrency", "64"], "--prefill-tp", "must divide the"),  # whole heads per rank
    (["--gpus", "8", "--prefill-gpus", "2", "--prefill-tp", "2", "--decode-gpus", "6",
      "--tp", "3", "--concurrency", "64"], "--tp", "must divide the"),
])
def test_bad_disaggregated_flags_exit_2_naming_them(cli, args, flag, words):
    code, out, err = cli(*ESTIMATE, *args)
    assert code == 2, out + err
    assert flag in err and words in err and "Traceback" not in err


def test_estimate_disaggregated_json(cli):
    helptext = cli("estimate", "--help")[1]
    assert all(f in helptext for f in ("--prefill-gpus", "--prefill-tp", "--decode-gpus"))
    code, out, err = cli(*ESTIMATE, "--gpus", "8", "--prefill-gpus", "4", "--prefill-tp", "2",
                         "--decode-gpus", "4", "--tp", "4", "--concurrency", "64", "--json")
    assert code == 0, out + err
    data = json.loads(out)
    assert data["mode"] == "disaggregated" and data["fits"]
    assert data["prefill"] == {"gpus": 4, "tp": 2, "replicas": 2}
    assert data["decode"]["tp"] == 4 and data["decode"]["replicas"] == 1
    assert data["predicted"]["kv_transfer_bytes"] == 2000 * 80 * 2 * 8 * 128


# --------------------------------------------------------------------- the planner (issue 27)
R1_RACK = Path(__file__).resolve().parent.parent / "scenarios" / "deepseek-r1-rack.yaml"


def test_a_unit_at_a_load_is_the_estimate_of_the_same_pools(catalog):
    """Known answer: the planner's unit at N users = ``disagg.estimate`` of the same pools
    at N users (latencies, throughput), and its capacity is where a limit binds."""
    prefill, decode = _lay(4, 1), _lay(4, 1)
    work = replace(CHAT, tpot_ms=25.0)
    unit, found = disagg.unit_estimate(catalog, prefill, decode, work)
    pooled = disagg.estimate(catalog, prefill, decode, work)
    assert found is not None and unit.fits
    assert unit.predicted.ttft_ms == pytest.approx(pooled.ttft_ms)
    assert unit.predicted.tpot_ms == pytest.approx(pooled.tpot_ms)
    assert unit.predicted.tokens_per_s == pytest.approx(pooled.tokens_per_s)
    most = unit.predicted.max_concurrency
    assert most and most > 1
    at_most = disagg.estimate(catalog, prefill, decode, replace(work, concurrency=most))
    over = disagg.estimate(catalog, prefill, decode, replace(work, concurrency=most + 1))
    # the capacity is where the TPOT SLO or (no TTFT SLO) the prefill pool's load cap binds
    assert at_most.tpot_ms <= 25.0 and at_most.prefill_load <= disagg.PREFILL_LOAD_CAP
    assert over.tpot_ms > 25.0 or over.prefill_load > disagg.PREFILL_LOAD_CAP


def test_planner_candidates_match_procure_estimate(catalog, cli):
    """A disaggregated candidate of the rack scenario: GPUs = P + D, and its TTFT/TPOT at
    a load equal ``procure estimate --prefill-gpus P --prefill-tp T --decode-gpus D``."""
    from solver.optimize.candidates import build_candidates
    from solver.rfq.schema import load_rfq

    rfq = load_rfq(R1_RACK, catalog)
    table = build_candidates(catalog, rfq)
    units = [c for c in table.candidates["r1"] if c.disaggregated]
    assert units
    cand = next(c for c in units if c.nodes_spanned == 1 and c.gpus == 72)
    assert cand.prefill is not None
    assert cand.gpus == cand.prefill.gpus + cand.layout.gpus
    users = 2048
    unit, _ = disagg.unit_estimate(catalog, cand.prefill, cand.layout,
                                   replace(cand.estimate.workload, concurrency=users))
    lay = cand.layout
    code, out, err = cli(
        "estimate", "--model", "deepseek-r1", "--gpu", "gb200", "--kind", "inference",
        "--precision", lay.precision, "--input-tokens", "2000", "--output-tokens", "1000",
        "--gpus", str(cand.gpus), "--gpus-per-node", "72",
        "--prefill-gpus", str(cand.prefill.gpus), "--prefill-tp", str(cand.prefill.tp),
        "--decode-gpus", str(lay.gpus), "--tp", str(lay.tp), "--ep", str(lay.ep),
        "--attention-dp", "--concurrency", str(users), "--json")
    assert code == 0, out + err
    data = json.loads(out)
    assert data["decode"]["replicas"] == lay.dp
    assert data["predicted"]["ttft_ms"] == pytest.approx(unit.predicted.ttft_ms, rel=1e-3)
    assert data["predicted"]["tpot_ms"] == pytest.approx(unit.predicted.tpot_ms, rel=1e-3)
    # disaggregated: false removes them; the aggregated candidates stay
    off = rfq.model_copy(update={"workloads": [
        rfq.workloads[0].model_copy(update={"disaggregated": False})]})
    kept = build_candidates(catalog, off).candidates["r1"]
    assert kept and not any(c.disaggregated for c in kept)
    # and so does leaving the field out: disaggregation is opt-in (no measurement checks it)
    default = rfq.model_copy(update={"workloads": [
        rfq.workloads[0].model_copy(update={"disaggregated": type(rfq.workloads[0])
                                            .model_fields["disaggregated"].default})]})
    assert default.workloads[0].disaggregated is False
    assert not any(c.disaggregated for c in build_candidates(catalog, default).candidates["r1"])
