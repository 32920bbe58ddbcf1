"""Issue 26: serving predictions conserve work and respect the hardware's ceilings.

Property: over random models x GPUs x precisions x layouts x loads, the predicted serving
throughput never needs more matmul FLOP/s per GPU than the GPU's dense peak, nor more weight
reads per second than its memory bandwidth. Known answers: the issue's H200 example (3,000
prompt tokens, one output token, as many requests as fit) stays below FP8 peak; a closed loop
beyond the engine's slots queues (TTFT grows by exactly the queue's wait, TPOT and throughput
stay); factors outside their physical range are refused when the catalog loads.
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from in_process import procure

from solver.catalog.load import load_catalog
from solver.common.errors import InputError
from solver.physics.geometry import geometry
from solver.physics.layout import Layout, Workload
from solver.physics.memory import memory_plan
from solver.physics.performance import estimate
from solver.physics.serving import closed_loop, constants, engine_factors, slots

CATALOG = load_catalog()
MODELS = ("llama-3.1-8b", "llama-3.1-70b", "qwen3-32b", "mixtral-8x7b", "gpt-oss-120b",
          "qwen3-30b-a3b", "deepseek-v3", "llama-3.1-405b")
GPUS = ("h100-sxm", "h200-sxm", "b200-sxm", "rtx-pro-6000", "l40s", "mi300x", "mi355x",
        "rtx-5090", "a100-80g-sxm")


def _peak_flops(gpu_id: str, precision: str) -> float:
    """Dense tensor peak of the precision the GEMMs run in (weight-only int4 runs bf16)."""
    eff = CATALOG.efficiency["precisions"]["compute_precision"]
    gpu = CATALOG.gpus[gpu_id]
    compute = eff[precision]
    return gpu.dense_tflops.get(compute, gpu.dense_tflops["bf16"]) * 1e12


def _check_roofline(layout: Layout, workload: Workload) -> None:
    est = estimate(CATALOG, layout, workload)
    if not est.fits or est.predicted.tokens_per_s <= 0:
        return
    geo = geometry(CATALOG.model(layout.model))
    out = workload.output_tokens
    requests = est.predicted.tokens_per_s / out  # all replicas
    tokens = requests * (workload.input_tokens + out)
    flops_per_gpu = tokens * 2.0 * geo.matmul_active_params / layout.gpus
    assert flops_per_gpu <= _peak_flops(layout.gpu, layout.precision) * 1.0001, (
        layout, workload, flops_per_gpu / _peak_flops(layout.gpu, layout.precision))
    # every decode step reads the replica's weights once: steps/s x bytes <= bandwidth (dense
    # models: a MoE step reads only the experts its tokens touch)
    if workload.concurrency is not None and not geo.experts:
        running = -(-workload.concurrency // layout.dp)
        steps = est.predicted.tokens_per_s / layout.dp / running
        weight_bytes = est.memory.weights_gb * 1e9
        bandwidth = CATALOG.gpus[layout.gpu].mem_bw_gbs * 1e9
        assert steps * weight_bytes <= bandwidth * 1.0001, (layout, workload)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(MODELS), gpu=st.sampled_from(GPUS),
       precision=st.sampled_from(("bf16", "fp8", "int4", "fp4")),
       tp=st.sampled_from((1, 2, 4, 8)), engine=st.sampled_from(("vllm", "sglang", "trtllm")),
       inp=st.integers(1, 32000), out=st.integers(1, 4000),
       load=st.one_of(st.none(), st.integers(1, 4096)))
def test_throughput_never_exceeds_the_roofline(model, gpu, precision, tp, engine, inp, out,
                                               load):
    if precision == "fp4" and "fp4" not in CATALOG.gpus[gpu].dense_tflops:
        precision = "int4"
    if precision == "fp8" and "fp8" not in CATALOG.gpus[gpu].dense_tflops:
        precision = "bf16"
    if engine == "trtllm" and CATALOG.gpus[gpu].vendor != "nvidia":
        engine = "vllm"
    layout = Layout(model=model, gpu=gpu, precision=precision, tp=tp, gpus_per_node=8)
    kind = "inference" if load is not None else "batch_inference"
    _check_roofline(layout, Workload(kind, input_tokens=inp, output_tokens=out,
                                     concurrency=load, engine=engine))


def test_issue_example_long_prompts_stay_below_fp8_peak():
    """Issue 26: Llama-3.3-70B on one H200 at FP8, 3,000-token prompts, one output token, as
    many requests as fit. The old model credited the GPU with 159 % of its FP8 peak."""
    layout = Layout(model="llama-3.3-70b", gpu="h200-sxm", precision="fp8", tp=1)
    workload = Workload("batch_inference", input_tokens=3000, output_tokens=1)
    est = estimate(CATALOG, layout, workload)
    geo = geometry(CATALOG.model("llama-3.3-70b"))
    prompt_flops = est.predicted.tokens_per_s * 3001 * 2.0 * geo.matmul_active_params
    share = prompt_flops / (CATALOG.gpus["h200-sxm"].dense_tflops["fp8"] * 1e12)
    assert share < 1.0
    # and above what a GEMM-bound prefill of the fitted efficiency would leave unexplained
    gemm = CATALOG.efficiency["families"]["hopper-sxm"]["gemm_efficiency"]["fp8"]["value"]
    assert 0.5 * gemm < share <= gemm


def test_a_closed_loop_beyond_the_engine_slots_queues():
    """NIM's table shape: above the slots TTFT grows by (C - B) x cycle / B, TPOT and the
    throughput stay those of B."""
    layout = Layout(model="llama-3.1-70b", gpu="h100-sxm", precision="fp8", tp=2)
    workload = Workload("inference", input_tokens=5000, output_tokens=500, engine="trtllm")
    plan = memory_plan(CATALOG, layout, workload)
    e = engine_factors(CATALOG, "trtllm")
    c = constants(CATALOG, layout, plan, e)
    running = slots(e, plan, workload, c.decode_fill)
    at = closed_loop(c, e, running, 5000, 500, slots=running)
    far = closed_loop(c, e, running + 150, 5000, 500, slots=running)
    assert far.queued == 150 and at.queued == 0
    assert far.tpot[50] == pytest.approx(at.tpot[50])
    assert far.ttft[50] - at.ttft[50] == pytest.approx(150 * at.cycle / running)
    assert (far.live + far.queued) / far.cycle == pytest.approx(at.live / at.cycle)
    # estimate models it too: fits, with a note saying how long the queue makes TTFT
    est = estimate(CATALOG, layout, Workload("inference", input_tokens=5000,
                                             output_tokens=500, concurrency=running + 150,
                                             engine="trtllm"))
    assert est.fits and est.predicted.ttft_ms > 1000 * at.ttft[50]
    assert any("wait for a slot" in note for note in est.predicted.notes)


@pytest.mark.parametrize(("path", "value"), [
    (("families", "hopper-sxm", "gemm_efficiency", "fp8"), 1.2),
    (("families", "hopper-sxm", "mem_bw_efficiency"), 1.05),
    (("serving", "engines", "vllm", "prefill_wait_share"), 1.5),
    (("serving", "engines", "vllm", "tpot_kernel_scale"), 0.6),
    (("serving", "engines", "sglang", "ttft_overhead_ms"), -1.0),
])
def test_factors_outside_their_physical_range_are_refused(path, value):
    from solver.catalog.perf_factors import factors

    eff = copy.deepcopy(CATALOG.efficiency)
    node = eff
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = dict(node[path[-1]], value=value)
    bad = CATALOG.model_copy(update={"efficiency": eff})
    with pytest.raises(InputError, match="physical range"):
        factors(bad)


def test_tensorrt_llm_is_refused_on_amd_gpus():
    """An engine that does not run on a GPU's vendor gives no layout there (the planner
    skips it with the reason), and `procure estimate` refuses the pair with exit 2."""

    layout = Layout(model="llama-3.1-70b", gpu="mi300x", precision="fp8", tp=1)
    est = estimate(CATALOG, layout, Workload("batch_inference", input_tokens=300,
                                             output_tokens=300, engine="trtllm"))
    assert not est.fits and "does not run on amd" in est.reason
    done = procure("estimate", "--model", "llama-3.1-70b", "--gpu", "mi300x", "--gpus", "8",
                   "--kind", "batch_inference", "--engine", "trtllm", "--input-tokens", "300",
                   "--output-tokens", "300")
    assert done.returncode == 2 and "does not run on amd" in done.stdout + done.stderr


def test_engine_kernel_factor_stretches_reads_not_compute_bound_matmuls():
    """k_d (an engine's ``tpot_kernel_scale``) stretches what its kernels do below the
    compute roofline: a one-token decode step of a 70B model (weights read) grows by k_d on
    the read; a step of a full token budget of prefill (compute-bound matmuls) keeps its
    matmul time, so an engine's k_d never lowers the GEMM efficiency a dense step reaches."""
    from dataclasses import replace

    from solver.physics.serving import stage_step_s

    cat = load_catalog()
    lay = Layout(model="llama-3.3-70b", gpu="h100-sxm", precision="fp8", tp=1, pp=1, dp=1,
                 gpus_per_node=8, fabric="none")
    w = Workload(kind="inference", input_tokens=2048, output_tokens=256, engine="vllm")
    plain = replace(constants(cat, lay, memory_plan(cat, lay, w),
                              engine_factors(cat, "vllm", "h100-sxm")), read_scale=1.0)
    slow = replace(plain, read_scale=1.5, memo={})
    read = plain.dense_bytes / plain.mem_bw
    decode = stage_step_s(plain, 0.0, 0.0, 1.0, 2048.0)
    # memory-bound at TP1 (no collectives): every term of the step grows by k_d
    assert stage_step_s(slow, 0.0, 0.0, 1.0, 2048.0) == pytest.approx(1.5 * decode, rel=1e-9)
    assert read < decode
    tokens = 8192.0
    matmul = tokens * plain.flops_per_token / plain.peak_flops
    assert matmul > 1.5 * read  # compute-bound at this size
    prefill = stage_step_s(plain, tokens, 1024.0, 0.0, 0.0)
    # only the fixed launch time (no collectives at TP1) grows
    assert stage_step_s(slow, tokens, 1024.0, 0.0, 0.0) - prefill == pytest.approx(
        0.5 * plain.overhead_s, rel=1e-9)


def test_fitted_efficiencies_stay_below_what_gpus_sustain():
    """Every serving efficiency the fit wrote into the catalog lies in its fitted range: no
    GEMM above serving_fit.GEMM_HIGH of dense peak (the clock a GPU sustains under matmul
    load is below the boost clock its datasheet peak assumes), no bandwidth above
    EFFICIENCY_HIGH. A refit that lands a factor beyond that fails here."""
    from solver.physics.serving_fit import EFFICIENCY_HIGH, EFFICIENCY_LOW, GEMM_HIGH

    fitted = 0
    for name, fam in CATALOG.efficiency["families"].items():
        for precision, factor in fam["gemm_efficiency"].items():
            if factor.get("source") == "serving_fit":
                fitted += 1
                assert EFFICIENCY_LOW <= factor["value"] <= GEMM_HIGH, (name, precision)
        bandwidth = fam["mem_bw_efficiency"]
        if bandwidth.get("source") == "serving_fit":
            assert EFFICIENCY_LOW <= bandwidth["value"] <= EFFICIENCY_HIGH, name
    assert fitted >= 10  # the check has something to check
