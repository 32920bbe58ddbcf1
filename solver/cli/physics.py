"""`procure fit`, `procure estimate` and `procure calibrate`: the physics on the command line."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from solver.common.console import err, out
from solver.common.errors import InputError, Problem

if TYPE_CHECKING:
    from solver.catalog.data import Catalog
    from solver.physics.calibration import RowResult, Summary, TrainingFit
    from solver.physics.serving_fit import Report

CatalogOpt = Annotated[
    str | None,
    typer.Option("--catalog", help="A catalog directory, or a price overlay over the built-in one."),
]
MEMORY_KEYS = ("weights_gb", "kv_cache_gb", "activations_gb", "optimizer_gb", "gradients_gb",
               "reserve_gb", "total_gb", "capacity_gb", "weights_fraction", "utilization")
PREDICTED_KEYS = ("tokens_per_s", "tokens_per_s_per_gpu", "ttft_ms", "tpot_ms",
                  "qps_capacity", "max_concurrency", "mfu", "scaling_efficiency",
                  "step_time_s", "ttft_ms_p90", "ttft_ms_p99", "tpot_ms_p90", "tpot_ms_p99",
                  "ttft_ms_slo", "tpot_ms_slo")
PERCENTILE_KEYS = frozenset(PREDICTED_KEYS[9:])
PERCENTILES = (50, 90, 95, 99)


def _bad(field: str, value: object, reason: str) -> InputError:
    return InputError([Problem("command line", field, value, reason)])


def _check_choice(field: str, value: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise _bad(field, value, f"must be one of {', '.join(choices)}")
    return value


MAX_MICRO_BATCH = 1024
"""Sequences per micro-batch (``--micro-batch``)."""
MAX_GLOBAL_BATCH = 10_000_000
"""Sequences per optimizer step (``--global-batch``)."""
MAX_INTERLEAVE = 128
"""Virtual pipeline stages per GPU (``--interleave``)."""


def _schema_max(kind: type, field: str) -> float:
    """The largest value the RFQ schema allows for a workload field: a flag takes no more
    than the file does."""
    from solver.analysis.sensitivity import schema_max

    return schema_max(kind, field)


def _within(flag: str, value: float | None, high: float, low: float = 1) -> None:
    """``value`` (None: not given) in ``[low, high]`` and finite, else exit 2 naming
    ``flag``."""
    from solver.common.limits import check_range

    check_range(flag, value, low, high)


def _concurrency(value: str | None) -> int | None:
    from solver.rfq.schema import InferenceWorkload

    if value is None or value.lower() == "max":
        return None
    try:
        number = int(value)
    except ValueError:
        raise _bad("--concurrency", value, "must be a positive integer or 'max'") from None
    _within("--concurrency", number, _schema_max(InferenceWorkload, "concurrency"))
    return number


def _serving_load(kind: str, concurrency: str | None, qps: float | None, engine: str | None,
                  percentile: int) -> dict:
    """The serving-under-load options as Workload fields, checked: ``--qps`` (open loop,
    Poisson arrivals) or ``--concurrency`` (closed loop), not both; ``--percentile`` one of
    PERCENTILES (``--engine`` is checked against the catalog's engines once it is loaded,
    :func:`_engine`). Training kinds take neither qps nor a percentile."""
    if percentile not in PERCENTILES:
        raise _bad("--percentile", percentile,
                   f"must be one of {', '.join(map(str, PERCENTILES))}")
    if qps is not None:
        from solver.common.limits import check_range
        from solver.rfq.schema import InferenceWorkload

        if kind not in ("inference", "batch_inference"):
            raise _bad("--qps", qps, "applies to serving kinds (inference, batch_inference)")
        if not qps > 0 or qps == float("inf"):
            raise _bad("--qps", qps, "must be a finite number > 0 (requests per second)")
        check_range("--qps", qps, 0, _schema_max(InferenceWorkload, "qps"), low_open=True)
        if concurrency is not None:
            raise _bad("--qps", qps, "give --qps (open loop) or --concurrency (closed loop), "
                       "not both")
    return {"concurrency": _concurrency(concurrency), "qps": qps, "engine": engine,
            "percentile": percentile}


def _zero(value: str | None) -> int | None:
    """``--zero``: a ZeRO stage 0..3, or ``fsdp`` (full shard = stage 3)."""
    if value is None:
        return None
    if value.strip().lower() == "fsdp":
        return 3
    if value.strip() in ("0", "1", "2", "3"):
        return int(value)
    raise _bad("--zero", value, "must be 0, 1, 2, 3 or fsdp")


def training_knobs(recompute: str, zero: str | None, micro_batch: int,
                   global_batch: int | None, seq_len: int, sequence_parallel: bool | None,
                   interleave: int | None, context_parallel: int) -> dict:
    """The training knobs of ``procure estimate`` as Workload fields, checked: a bad value
    raises :class:`InputError` naming the flag (exit 2)."""
    from solver.physics.layout import RECOMPUTE_MODES

    _check_choice("--recompute", recompute, RECOMPUTE_MODES)
    if global_batch is not None and global_batch < micro_batch:
        raise _bad("--global-batch", global_batch,
                   f"must be at least the micro-batch ({micro_batch} sequences)")
    return {"recompute": recompute, "zero": _zero(zero), "micro_batch": micro_batch,
            "global_batch_tokens": global_batch * seq_len if global_batch else None,
            "sequence_parallel": sequence_parallel, "interleave": interleave,
            "context_parallel": context_parallel}


def _round(value: object) -> object:
    return round(value, 4) if isinstance(value, float) else value


def estimate_json(est) -> dict:  # noqa: ANN001 - solver.physics.layout.Estimate
    """The contract JSON of one estimate."""
    lay, mem, pred = est.layout, asdict(est.memory), asdict(est.predicted)
    return {
        "model": lay.model, "gpu": lay.gpu, "gpus": lay.gpus, "tp": lay.tp, "pp": lay.pp,
        "dp": lay.dp, "ep": lay.ep, "attention_dp": lay.attention_dp,
        "gpus_per_node": lay.gpus_per_node, "nodes_spanned": lay.nodes_spanned,
        "fabric": lay.fabric, "precision": lay.precision, "kind": est.workload.kind,
        "fits": est.fits, "comfortable": est.comfortable, "reason": est.reason,
        "memory": {k: _round(mem[k]) for k in MEMORY_KEYS},
        "predicted": {k: _round(pred[k]) for k in PREDICTED_KEYS},
        "notes": list(est.predicted.notes),
        "load": {"concurrency": est.workload.concurrency, "qps": est.workload.qps,
                 "engine": est.workload.engine, "percentile": est.workload.percentile},
    } | ({"training": dict(est.training)} if est.training is not None else {})


def _memory_table(title: str, memory: dict) -> None:
    from rich.table import Table

    table = Table(title=title)
    table.add_column("per GPU")
    table.add_column("value", justify="right")
    for key in MEMORY_KEYS:
        value = memory[key]
        shown = f"{value:.1%}" if key in ("weights_fraction", "utilization") else f"{value:.2f}"
        table.add_row(key, shown)
    out.print(table)


def _verdict(data: dict) -> None:
    fits = "[green]fits[/]" if data["fits"] else "[red]does not fit[/]"
    comfy = "comfortably" if data["comfortable"] else "[yellow]not comfortably[/]"
    out.print(f"{fits}, {comfy}" + (f" — {data['reason']}" if data["reason"] else ""))


def _check_context(cat: Catalog, model: str, kind: str, workload_kwargs: dict,
                   context_flag: str | None) -> list[str]:
    """Tokens per request (serving) within the model's context window; a training sequence
    beyond it is estimated with RoPE scaling (the note returned) up to the hard limit of
    solver/catalog/context.py, refused past it."""
    from solver.catalog.context import (
        beyond_context_reason,
        hard_context_limit,
        rope_scaling_note,
    )

    if not cat.has_model(model):
        return []
    entry = cat.model(model)
    limit = entry.max_context
    if kind in ("inference", "batch_inference"):
        tokens = workload_kwargs.get("input_tokens", 0) + workload_kwargs.get("output_tokens", 0)
        flag = context_flag or "--input-tokens + --output-tokens"
        if tokens > limit:
            raise _bad(flag, tokens, f"exceeds {model}'s context window of {limit} tokens")
        return []
    tokens, flag = workload_kwargs.get("seq_len", 0), context_flag or "--seq-len"
    if tokens > hard_context_limit(entry):
        raise _bad(flag, tokens, beyond_context_reason(model, entry, tokens))
    note = rope_scaling_note(model, entry, tokens)
    return [note] if note else []


def _expert_layout(cat: Catalog, model: str, kind: str, gpus: int, tp: int | None,
                   pp: int | None, ep: int | None,
                   attention_dp: bool) -> tuple[int | None, int | None, int | None]:
    """``--ep`` / ``--attention-dp`` checked against the model and the GPUs: (tp, ep,
    attention_dp) for the layout search (None: free). ``--ep N --attention-dp``: attention
    TP ``--tp`` (default 1) on N / tp data-parallel ranks, the experts over all N GPUs;
    ``--ep N`` alone: experts over N GPUs inside the TP group (``--tp``, default N).
    A bad combination raises :class:`InputError` naming the flags (exit 2)."""
    if ep is None:
        if attention_dp:
            raise _bad("--attention-dp", True, "needs --ep N: attention is data-parallel "
                       "over the ranks the experts are sharded on")
        return tp, None, None
    _within("--ep", ep, gpus)
    if kind not in ("inference", "batch_inference"):
        raise _bad("--ep", ep, f"expert parallelism is a serving layout here; --kind {kind} "
                   "spreads a MoE's experts over its data-parallel GPUs")
    entry = cat.model(model)
    if not entry.is_moe:
        raise _bad("--ep", ep, f"{entry.id} is a dense model (no experts to shard)")
    if gpus % ep:
        raise _bad("--ep", ep, f"does not divide --gpus {gpus}")
    experts = entry.experts or 0
    if experts % ep:
        raise _bad("--ep", ep, f"does not divide the {experts} routed experts of {entry.id}")
    if attention_dp:
        tp = tp or 1
        if ep % tp:
            raise _bad("--tp", tp, f"with --attention-dp, --tp must divide --ep {ep} (the "
                       f"EP group is tp x attention-DP ranks)")
        if gpus % (ep * (pp or 1)):
            raise _bad("--gpus", gpus, f"not divisible by --ep {ep} x --pp {pp or 1}")
        return tp, ep, ep // tp
    tp = tp or ep
    if tp % ep:
        raise _bad("--ep", ep, f"without --attention-dp the experts are sharded inside the "
                   f"TP group: --ep must divide --tp {tp}")
    return tp, ep, 1


def _run_estimate(catalog: str | None, model: str, gpu: str, gpus: int, kind: str,
                  precision: str | None,
                  gpus_per_node: int | None, tp: int | None, pp: int | None,
                  fabric: str, workload_kwargs: dict, context_flag: str | None = None,
                  ep: int | None = None, attention_dp: bool = False) -> dict:
    from solver.catalog.data import PRECISIONS
    from solver.catalog.load import load_catalog
    from solver.common.limits import MAX_GPUS, MAX_GPUS_PER_NODE
    from solver.physics.layout import KIND_OF, KINDS, Workload
    from solver.physics.performance import best_layout

    _check_choice("--kind", kind, KINDS)
    if precision is not None:
        _check_choice("--precision", precision, PRECISIONS)
    _within("--gpus", gpus, MAX_GPUS)  # the physics runs in time linear in the GPUs
    # --gpus-per-node: checked against the GPU's largest system once the catalog is read
    for name, value, high in (("--gpus-per-node", gpus_per_node, MAX_GPUS),
                              ("--tp", tp, gpus), ("--pp", pp, gpus)):
        _within(name, value, high)
    if gpus % ((tp or 1) * (pp or 1)):
        raise _bad("--gpus", gpus, f"not divisible by tp x pp = {(tp or 1) * (pp or 1)}")
    cat = load_catalog(catalog)
    per_node = _gpus_per_node(cat, gpu, gpus, gpus_per_node)
    _within("--gpus-per-node", per_node, MAX_GPUS_PER_NODE)
    cat, model, precision, notes = _model_and_precision(cat, model, precision, kind, gpu)
    notes = notes + _check_context(cat, model, kind, workload_kwargs, context_flag)
    _whole_heads(cat, model, gpu, precision, "--tp", tp)
    if "engine" in workload_kwargs:
        workload_kwargs = {**workload_kwargs, "engine": _engine(cat, workload_kwargs["engine"])}
    workload = Workload(kind=KIND_OF[kind], **workload_kwargs)  # kind checked above
    if kind in ("inference", "batch_inference") and gpu in cat.gpus:
        from solver.physics.serving import engine_factors

        engine_factors(cat, workload.engine, gpu)  # an engine off its vendors: exit 2
    ranks: int | None = None
    if ep is not None or attention_dp:
        from solver.physics.performance import check_ids

        check_ids(cat, model, gpu, fabric)
        tp, ep, ranks = _expert_layout(cat, model, kind, gpus, tp, pp, ep, attention_dp)
    est = best_layout(cat, model, gpu, gpus, workload, precision=precision,
                      gpus_per_node=per_node, fabric=fabric, tp=tp, pp=pp, ep=ep,
                      attention_dp=ranks)
    data = estimate_json(est)
    data["notes"] = notes + data["notes"]
    return data


def _whole_heads(cat: Catalog, model: str, gpu: str, precision: str, flag: str,
                 tp: int | None) -> None:
    """A TP degree given on the command line must split the model into whole attention
    heads (:func:`solver.physics.performance.attention_heads_reason`): else exit 2 naming
    ``flag``. A property of the model, like the experts ``--ep`` must divide."""
    if tp is None:
        return
    from solver.physics.layout import Layout
    from solver.physics.performance import attention_heads_reason

    heads = attention_heads_reason(cat, Layout(model=model, gpu=gpu, precision=precision,
                                               tp=tp))
    if heads:
        raise _bad(flag, tp, heads)


def _gpus_per_node(cat: Catalog, gpu: str, gpus: int, gpus_per_node: int | None) -> int:
    """``--gpus-per-node``, checked against the largest system that takes ``gpu`` (its
    NVLink domain: no node of that GPU holds more). Not given: ``--gpus``, at most 8 as
    before, or the largest system's GPUs when it holds more (a 72-GPU NVL72 rack)."""
    largest = cat.largest_node(gpu)
    if gpus_per_node is None:
        return min(gpus, max(8, largest.gpu_slots if largest is not None else 8))
    if largest is not None and gpus_per_node > largest.gpu_slots:
        raise _bad("--gpus-per-node", gpus_per_node,
                   f"larger than any system for {gpu}: the largest, {largest.id}, holds "
                   f"{largest.gpu_slots} GPUs in one NVLink/PCIe domain")
    return gpus_per_node


def _engine(cat: Catalog, engine: str | None) -> str:
    """``--engine``: one of the catalog's serving engines (``efficiency.yaml``
    ``serving.engines``), the catalog's default engine when not given."""
    from solver.rfq.schema import serving_engines

    default, engines = serving_engines(cat)
    return _check_choice("--engine", engine or default, engines)


def _model_and_precision(cat: Catalog, model: str, precision: str | None, kind: str,
                         gpu: str) -> tuple[Catalog, str, str, list[str]]:
    """The catalog that knows the model (a config file's model added to it), the model id
    (a catalog id/alias, or a config.json path relative to the working directory) and the
    precision: ``--precision``, else for serving the checkpoint's own
    quantisation (said in a note), else bf16."""
    from solver.catalog.data import resolve_model
    from solver.physics.layout import SERVING_KINDS
    from solver.physics.performance import check_ids

    base = cat
    try:
        cat, model = resolve_model(cat, model, Path.cwd())
    except KeyError:
        check_ids(cat, model, gpu if gpu in cat.gpus else next(iter(cat.gpus)))
    notes: list[str] = []
    entry = cat.model(model)
    if entry.architecture is not None and model not in base.models:  # a user's file: say
        notes.extend(entry.architecture.notes)  # what was assumed or read from it
    if precision is not None:
        return cat, model, precision, notes
    default = entry.default_precision
    if kind not in SERVING_KINDS or default is None:
        return cat, model, "bf16", notes
    chosen = default
    card = cat.gpus.get(gpu)
    if card is not None and default not in card.dense_tflops and default in ("fp4", "fp8"):
        chosen = "int4" if default == "fp4" else "int8"
        notes.append(f"{gpu} has no {default} tensor cores: the {default} checkpoint runs "
                     f"weight-only, modelled as {chosen}")
    notes.append(f"precision {chosen}: the checkpoint's own quantisation ({default}); "
                 "pass --precision to change it")
    return cat, model, chosen, notes


def fit(
    model: Annotated[str, typer.Option(
        "--model", help="Model id or alias, or a Hugging Face config.json path.")],
    gpu: Annotated[str, typer.Option("--gpu", help="GPU id.")],
    gpus: Annotated[int, typer.Option("--gpus", help="Number of GPUs.")],
    precision: Annotated[str | None, typer.Option(
        "--precision", help="bf16|fp8|int8|int4|fp4 (default: serving the checkpoint's own "
        "quantisation, else bf16)")] = None,
    kind: Annotated[str, typer.Option("--kind", help="Workload kind.")] = "inference",
    concurrency: Annotated[str | None, typer.Option(
        "--concurrency", help="Concurrent requests (default 1; 'max': as many as fit).")] = None,
    context: Annotated[int, typer.Option("--context", help="Tokens per request (serving) "
                                         "or sequence length (training).")] = 4096,
    gpus_per_node: Annotated[int | None, typer.Option("--gpus-per-node")] = None,
    fabric: Annotated[str, typer.Option("--fabric")] = "none",
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    catalog: CatalogOpt = None,
) -> None:
    """Memory breakdown per GPU and whether the model fits, and fits comfortably."""
    from solver.rfq.schema import InferenceWorkload

    _within("--context", context, _schema_max(InferenceWorkload, "input_tokens"))
    conc = 1 if concurrency is None else _concurrency(concurrency)
    data = _run_estimate(catalog, model, gpu, gpus, kind, precision, gpus_per_node, None, None,
                         fabric, {"input_tokens": context, "output_tokens": 0,
                                  "concurrency": conc, "seq_len": context},
                         context_flag="--context")
    result = {k: data[k] for k in ("model", "gpu", "gpus", "tp", "pp", "dp", "precision", "notes",
                                   "kind", "fits", "comfortable", "reason", "memory")}
    if as_json:
        out.print_json(json.dumps(result))
        return
    _memory_table(f"{data['model']} on {gpus} x {gpu} ({data['precision']}, {kind}, "
                  f"tp{data['tp']} pp{data['pp']} dp{data['dp']})", data["memory"])
    _verdict(data)
    for note in data["notes"]:
        out.print(f"note: {note}")


def estimate(
    model: Annotated[str, typer.Option(
        "--model", help="Model id or alias, or a Hugging Face config.json path.")],
    gpu: Annotated[str, typer.Option("--gpu", help="GPU id.")],
    gpus: Annotated[int, typer.Option("--gpus", help="Number of GPUs.")],
    kind: Annotated[str, typer.Option("--kind", help="Workload kind.")],
    gpus_per_node: Annotated[int | None, typer.Option("--gpus-per-node")] = None,
    tp: Annotated[int | None, typer.Option("--tp", help="Tensor parallel (default: best).")] = None,
    pp: Annotated[int | None, typer.Option("--pp", help="Pipeline parallel (default: best).")] = None,
    prefill_gpus: Annotated[int | None, typer.Option(
        "--prefill-gpus", help="Disaggregated serving (with --prefill-tp and --decode-gpus; "
        "--gpus = prefill + decode GPUs): GPUs of the prefill pool. TTFT = prefill + the "
        "prompt's KV transfer to the decode pool (NVLink inside a node, else --fabric); "
        "TPOT from the decode pool, laid out by --tp/--ep/--attention-dp. Needs "
        "--concurrency N.")] = None,
    prefill_tp: Annotated[int | None, typer.Option(
        "--prefill-tp", help="Disaggregated serving: tensor parallel of each prefill "
        "replica (must divide --prefill-gpus).")] = None,
    decode_gpus: Annotated[int | None, typer.Option(
        "--decode-gpus", help="Disaggregated serving: GPUs of the decode pool.")] = None,
    ep: Annotated[int | None, typer.Option(
        "--ep", help="Serving a MoE model: expert parallelism, the routed experts sharded "
        "over N GPUs (all-to-all dispatch/combine of the routed tokens). Alone: inside the "
        "TP group (--tp defaults to N); with --attention-dp: over N / tp attention ranks. "
        "Must divide --gpus and the model's experts. Default: TP only (or the best layout "
        "when --tp is not given either).")] = None,
    attention_dp: Annotated[bool, typer.Option(
        "--attention-dp", help="With --ep: attention data-parallel, each rank of --tp GPUs "
        "(default 1) with its own requests and KV cache, the experts sharded by EP "
        "(TensorRT-LLM DEP, SGLang --enable-dp-attention, vLLM -dp with EP).")] = False,
    precision: Annotated[str | None, typer.Option(
        "--precision", help="bf16|fp8|int8|int4|fp4 (default: serving the checkpoint's own "
        "quantisation, else bf16)")] = None,
    input_tokens: Annotated[int, typer.Option("--input-tokens")] = 2000,
    output_tokens: Annotated[int, typer.Option("--output-tokens")] = 400,
    concurrency: Annotated[str | None, typer.Option(
        "--concurrency", help="Concurrent requests, or 'max' (throughput mode).")] = None,
    seq_len: Annotated[int, typer.Option("--seq-len")] = 4096,
    micro_batch: Annotated[int, typer.Option(
        "--micro-batch", help="Training: sequences per micro-batch per replica.")] = 1,
    global_batch: Annotated[int | None, typer.Option(
        "--global-batch", help="Training: sequences per optimizer step, all replicas "
        "(default: the catalog's micro-batches per pipeline stage).")] = None,
    recompute: Annotated[str, typer.Option(
        "--recompute", help="Training: activation recompute none|selective|full, or auto "
        "(selective plus just enough block recompute to fit).")] = "auto",
    sequence_parallel: Annotated[bool | None, typer.Option(
        "--sequence-parallel/--no-sequence-parallel", help="Training: Megatron sequence "
        "parallelism (default: on where TP runs on NVLink).")] = None,
    zero: Annotated[str | None, typer.Option(
        "--zero", help="Training: ZeRO stage 0|1|2|3 or fsdp (= 3); default the "
        "catalog's (3).")] = None,
    interleave: Annotated[int | None, typer.Option(
        "--interleave", help="Training: virtual pipeline stages per GPU (interleaved "
        "1F1B; default the catalog's).")] = None,
    context_parallel: Annotated[int, typer.Option(
        "--context-parallel", help="Training: GPUs that split each sequence (taken from "
        "the data-parallel GPUs).")] = 1,
    ttft_ms: Annotated[float | None, typer.Option("--ttft-ms", help="TTFT SLO, ms.")] = None,
    tpot_ms: Annotated[float | None, typer.Option("--tpot-ms", help="TPOT SLO, ms.")] = None,
    qps: Annotated[float | None, typer.Option(
        "--qps", help="Requests per second, Poisson arrivals (open loop; instead of "
        "--concurrency).")] = None,
    engine: Annotated[str | None, typer.Option(
        "--engine", help="Serving engine: one of the catalog's efficiency.yaml "
        "serving.engines; default its serving.default_engine.")]
    = None,
    percentile: Annotated[int, typer.Option(
        "--percentile", help="Percentile the SLOs are checked at: 50, 90, 95 or 99.")] = 90,
    fabric: Annotated[str, typer.Option("--fabric")] = "none",
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    catalog: CatalogOpt = None,
) -> None:
    """What one layout would do: memory and predicted performance (no solving)."""
    request = _estimate_request(kind, input_tokens, output_tokens, seq_len, micro_batch,
                                global_batch, recompute, sequence_parallel, zero, interleave,
                                context_parallel, ttft_ms, tpot_ms, concurrency, qps, engine,
                                percentile)
    pools = (prefill_gpus, prefill_tp, decode_gpus)
    if any(v is not None for v in pools):
        data = _run_disaggregated(catalog, model, gpu, gpus, kind, precision, gpus_per_node,
                                  tp, pp, fabric, request, ep, attention_dp, pools)
        _print_disaggregated(data, gpus, gpu, as_json)
        return
    data = _run_estimate(catalog, model, gpu, gpus, kind, precision, gpus_per_node, tp, pp,
                         fabric, request, ep=ep, attention_dp=attention_dp)
    _print_estimate(data, gpus, gpu, kind, percentile, as_json)


def _run_disaggregated(catalog: str | None, model: str, gpu: str, gpus: int, kind: str,
                       precision: str | None, gpus_per_node: int | None, tp: int | None,
                       pp: int | None, fabric: str, request: dict, ep: int | None,
                       attention_dp: bool,
                       pools: tuple[int | None, int | None, int | None]) -> dict:
    """``procure estimate --prefill-gpus P --prefill-tp T --decode-gpus D``: the flags
    checked (exit 2 naming them), the decode pool's best layout of D GPUs (``--tp``,
    ``--ep``, ``--attention-dp`` pin it) and :func:`solver.physics.disagg.estimate`."""
    from solver.catalog.load import load_catalog
    from solver.common.limits import MAX_GPUS_PER_NODE
    from solver.physics import disagg
    from solver.physics.layout import Layout, Workload
    from solver.physics.performance import best_layout, check_ids

    names = ("--prefill-gpus", "--prefill-tp", "--decode-gpus")
    missing = [name for name, value in zip(names, pools, strict=True) if value is None]
    if missing:
        raise _bad(missing[0], None, "disaggregated serving needs --prefill-gpus, "
                   "--prefill-tp and --decode-gpus together")
    p_gpus, p_tp, d_gpus = (int(v or 0) for v in pools)
    if kind != "inference":
        raise _bad("--prefill-gpus", p_gpus, f"disaggregated serving is online inference; "
                   f"--kind {kind} is not")
    if request.get("concurrency") is None or request.get("qps") is not None:
        raise _bad("--concurrency", request.get("concurrency"), "disaggregated serving is "
                   "estimated at a closed loop of N users: give --concurrency N (not max, "
                   "not --qps)")
    _within("--prefill-gpus", p_gpus, gpus)
    _within("--decode-gpus", d_gpus, gpus)
    _within("--prefill-tp", p_tp, p_gpus)
    if p_gpus % p_tp:
        raise _bad("--prefill-tp", p_tp, f"does not divide --prefill-gpus {p_gpus}")
    if p_gpus + d_gpus != gpus:
        raise _bad("--gpus", gpus, f"must be --prefill-gpus + --decode-gpus = "
                   f"{p_gpus + d_gpus}")
    cat = load_catalog(catalog)
    check_ids(cat, model, gpu, fabric)
    per_node = _gpus_per_node(cat, gpu, gpus, gpus_per_node)
    _within("--gpus-per-node", per_node, MAX_GPUS_PER_NODE)
    if p_tp > per_node:
        raise _bad("--prefill-tp", p_tp, f"larger than a node ({per_node} GPUs)")
    if gpus > per_node and cat.fabrics[fabric].effective_gbs <= 0:
        raise _bad("--fabric", fabric, f"the two pools ({gpus} GPUs) span nodes of "
                   f"{per_node}: the prompt's KV moves over a fabric; name one")
    cat, model, precision, notes = _model_and_precision(cat, model, precision, kind, gpu)
    notes = notes + _check_context(cat, model, kind, request, None)
    _whole_heads(cat, model, gpu, precision, "--prefill-tp", p_tp)
    _whole_heads(cat, model, gpu, precision, "--tp", tp)
    if "engine" in request:
        request = {**request, "engine": _engine(cat, request["engine"])}
    workload = Workload(kind="inference", **request)
    ranks: int | None = None
    if ep is not None or attention_dp:
        tp, ep, ranks = _expert_layout(cat, model, kind, d_gpus, tp, pp, ep, attention_dp)
    for name, value in (("--tp", tp), ("--pp", pp)):
        if value is not None and d_gpus % value:
            raise _bad(name, value, f"does not divide --decode-gpus {d_gpus}")
    decode = best_layout(cat, model, gpu, d_gpus, workload, precision=precision,
                         gpus_per_node=per_node, fabric=fabric if d_gpus > per_node
                         else "none", tp=tp, pp=pp, ep=ep, attention_dp=ranks).layout
    prefill = Layout(model=cat.model(model).id, gpu=gpu, precision=precision, tp=p_tp,
                     dp=p_gpus // p_tp, gpus_per_node=per_node, fabric=fabric)
    found = disagg.estimate(cat, prefill, decode, workload)
    return {"mode": "disaggregated", "model": prefill.model, "gpu": gpu, "gpus": gpus,
            "precision": precision, "kind": kind, "fits": found.fits, "reason": found.reason,
            "prefill": {"gpus": p_gpus, "tp": p_tp, "replicas": prefill.dp},
            "decode": {"gpus": d_gpus, "tp": decode.tp, "pp": decode.pp, "ep": decode.ep,
                       "attention_dp": decode.attention_dp, "replicas": decode.dp},
            "gpus_per_node": per_node, "fabric": fabric,
            "predicted": found.to_dict(), "notes": notes,
            "load": {"concurrency": workload.concurrency, "engine": workload.engine}}


def _print_disaggregated(data: dict, gpus: int, gpu: str, as_json: bool) -> None:
    """A disaggregated estimate as JSON, or as one table and the verdict."""
    from rich.table import Table

    from solver.common.wording import layout_words

    if as_json:
        out.print_json(json.dumps(data))
        return
    pre, dec, pred = data["prefill"], data["decode"], data["predicted"]
    table = Table(title=f"{data['model']} on {gpus} x {gpu} ({data['precision']}, "
                  f"disaggregated: prefill {pre['gpus']} GPUs as {pre['replicas']} x TP"
                  f"{pre['tp']}, decode {dec['gpus']} GPUs as {dec['replicas']} x "
                  f"{layout_words(dec['tp'], dec['pp'], dec['ep'], dec['attention_dp'])}, "
                  f"{data['load']['concurrency']} users)")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key in ("ttft_ms", "prefill_ms", "prefill_queue_ms", "kv_transfer_ms",
                "kv_transfer_bytes", "prefill_load", "tpot_ms", "decode_batch",
                "tokens_per_s"):
        value = pred.get(key)
        table.add_row(key, "-" if value is None else f"{value:,.2f}")
    out.print(table)
    _verdict({"fits": data["fits"], "comfortable": data["fits"], "reason": data["reason"]})
    for note in data["notes"]:
        out.print(f"note: {note}")


def _estimate_request(kind: str, input_tokens: int, output_tokens: int, seq_len: int,
                      micro_batch: int, global_batch: int | None, recompute: str,
                      sequence_parallel: bool | None, zero: str | None,
                      interleave: int | None, context_parallel: int, ttft_ms: float | None,
                      tpot_ms: float | None, concurrency: str | None, qps: float | None,
                      engine: str | None, percentile: int) -> dict:
    """``procure estimate``'s workload options as Workload fields, checked in order (sizes,
    training knobs, SLOs, serving load): a bad value raises :class:`InputError` naming the
    flag (exit 2)."""
    from solver.common.limits import MAX_GPUS, check_range
    from solver.rfq.schema import InferenceWorkload, TrainingWorkload

    for name, value, high in (
            ("--input-tokens", input_tokens, _schema_max(InferenceWorkload, "input_tokens")),
            ("--output-tokens", output_tokens, _schema_max(InferenceWorkload, "output_tokens")),
            ("--seq-len", seq_len, _schema_max(TrainingWorkload, "seq_len")),
            ("--micro-batch", micro_batch, MAX_MICRO_BATCH),
            ("--global-batch", global_batch, MAX_GLOBAL_BATCH),
            ("--interleave", interleave, MAX_INTERLEAVE),
            ("--context-parallel", context_parallel, MAX_GPUS)):
        _within(name, value, high)
    knobs = training_knobs(recompute, zero, micro_batch, global_batch, seq_len,
                           sequence_parallel, interleave, context_parallel)
    for name, slo in (("--ttft-ms", ttft_ms), ("--tpot-ms", tpot_ms)):
        if slo is not None and not slo > 0:
            raise _bad(name, slo, "must be > 0")
        check_range(name, slo, 0, _schema_max(InferenceWorkload, name[2:].replace("-", "_")),
                    low_open=True)
    return {"input_tokens": input_tokens, "output_tokens": output_tokens,
            "seq_len": seq_len, "ttft_ms": ttft_ms, "tpot_ms": tpot_ms,
            **_serving_load(kind, concurrency, qps, engine, percentile),
            **knobs}


def _print_estimate(data: dict, gpus: int, gpu: str, kind: str, percentile: int,
                    as_json: bool) -> None:
    """The estimate as JSON, or as tables: memory, predicted, latency percentiles, then the
    training knobs, the verdict and the notes."""
    if as_json:
        out.print_json(json.dumps(data))
        return
    expert = (f" ep{data['ep']} attention-dp{data['attention_dp']}"
              if data.get("ep", 1) > 1 else "")
    _memory_table(f"{data['model']} on {gpus} x {gpu} ({data['precision']}, {kind}, "
                  f"tp{data['tp']}{expert} pp{data['pp']} dp{data['dp']}, fabric "
                  f"{data['fabric']})", data["memory"])
    _predicted_table(data["predicted"])
    _latency_table(data["predicted"], percentile)
    if "training" in data:
        out.print("training: " + ", ".join(f"{k} {v}" for k, v in data["training"].items()),
                  highlight=False)
    _verdict(data)
    for note in data["notes"]:
        out.print(f"note: {note}")


def _predicted_table(predicted: dict) -> None:
    """The predicted metrics that are known, percentiles aside (their own table)."""
    from rich.table import Table

    table = Table(title="predicted")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in predicted.items():
        if value is not None and key not in PERCENTILE_KEYS:
            table.add_row(key, f"{value:,.4g}" if isinstance(value, float) else str(value))
    out.print(table)


def _latency_table(predicted: dict, percentile: int) -> None:
    """TTFT and TPOT at p50 (the typical value), p90, p99 and the SLO percentile, when the
    physics gives percentiles (nothing is printed otherwise)."""
    from rich.table import Table

    if all(predicted.get(k) is None for k in PERCENTILE_KEYS):
        return
    table = Table(title="latency percentiles (ms)")
    columns = [("p50", ""), ("p90", "_p90"), ("p99", "_p99"), (f"p{percentile} (SLO)", "_slo")]
    table.add_column("metric")
    for label, _ in columns:
        table.add_column(label, justify="right")
    for metric in ("ttft_ms", "tpot_ms"):
        cells = [predicted.get(metric + suffix) for _, suffix in columns]
        table.add_row(metric.removesuffix("_ms").upper(),
                      *("-" if v is None else f"{v:,.4g}" for v in cells))
    out.print(table)


def calibrate(
    csv_path: Annotated[Path | None, typer.Option("--csv", help="Calibration CSV (default: "
                                                  "bench/data/calibration.csv).")] = None,
    report: Annotated[Path | None, typer.Option(
        "--report", help="Write the markdown report here (default docs/calibration.md).")] = None,
    no_report: Annotated[bool, typer.Option("--no-report", help="Do not write a report.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    write_factors: Annotated[bool, typer.Option(
        "--write-factors", help="Refit the serving factors (family efficiencies, engines) "
        "across every measurement source and write them and the calibration table into "
        "catalog/efficiency.yaml (a clone only).")] = False,
    held_out: Annotated[bool, typer.Option(
        "--held-out/--no-held-out", help="Refit the serving model once per source group to "
        "report errors with whole sources held out (minutes).")] = True,
    catalog: CatalogOpt = None,
) -> None:
    """Predicted vs measured for every calibration row; median errors by kind; coverage;
    serving throughput and latency across sources, each source group held out."""
    from solver.catalog.load import load_catalog
    from solver.physics.calibration import run, summarise, training_fit

    path = _calibration_csv(csv_path)
    cat, serving = _serving_fit(load_catalog(catalog), catalog, path, write_factors, held_out)
    results = run(cat, path)
    summary = summarise(results)
    train_fit = training_fit(cat, path)
    if not no_report:
        _write_calibration_report(report, results, summary, cat, train_fit, serving)
    if as_json:
        _print_calibration_json(results, summary, train_fit, serving, cat)
        return
    _print_calibration(path, results, summary, train_fit, serving, cat)


def _repo() -> Path:
    """The repository root, when this runs from a clone."""
    return Path(__file__).resolve().parents[2]


def _calibration_csv(csv_path: Path | None) -> Path:
    """``--csv``, else the clone's bench/data/calibration.csv; an error when it is missing."""
    from solver.common.inputs import path_reason
    from solver.physics.calibration import default_csv

    path = csv_path or default_csv()
    reason = path_reason(path)
    if reason is not None:
        raise _bad("--csv", str(path), reason + (
            "" if csv_path else "; this installation ships no calibration data: pass --csv "
            "with bench/data/calibration.csv from a clone of the repository"))
    return path


def _serving_fit(cat: Catalog, catalog: str | None, path: Path, write_factors: bool,
                 held_out: bool) -> tuple[Catalog, Report | None]:
    """Fit the serving model on every measurement file next to the calibration CSV (None
    when there is no serving data); with ``--write-factors`` write the fit into the clone's
    catalog/efficiency.yaml and reload the catalog. Returns (catalog, serving fit)."""
    from solver.catalog.load import load_catalog
    from solver.physics import serving_fit

    if not (path.parent / "serving_latency.csv").is_file():
        return cat, None
    # progress on stderr: stdout carries the report (with --json, only the JSON)
    err.print(f"serving: fitting across the measurement sources in {path.parent.name}/"
              + (" and holding out each source group (minutes) ..." if held_out else " ..."),
              highlight=False)
    serving = serving_fit.run(cat, path.parent, held_out=held_out,
                              progress=lambda group, place, count: err.print(
                                  f"  held out ({place} of {count}): {group}",
                                  highlight=False))
    if write_factors:
        target_yaml = _repo() / "catalog" / "efficiency.yaml"
        if not target_yaml.is_file():
            raise _bad("--write-factors", str(target_yaml), "not a clone of the "
                       "repository: no catalog/efficiency.yaml to write")
        serving_fit.write_factors(cat, serving, target_yaml)
        cat = load_catalog(catalog)  # memoised by content: the new file is read
        err.print(f"wrote the serving factors and calibration table to {target_yaml}")
    return cat, serving


def _write_calibration_report(report: Path | None, results: list[RowResult],
                              summary: Summary, cat: Catalog, train_fit: TrainingFit,
                              serving: Report | None) -> None:
    """The markdown report: ``--report``, else in a clone the repository's
    docs/calibration.md, installed calibration.md in the current folder."""
    from solver.physics import serving_fit
    from solver.physics.calibration import report_markdown, training_fit_markdown

    repo = _repo()
    target = report or (repo / "docs" / "calibration.md" if (repo / "pyproject.toml")
                        .is_file() else Path("calibration.md"))
    target.parent.mkdir(parents=True, exist_ok=True)
    text = report_markdown(results, summary, cat.version)
    text += "\n" + training_fit_markdown(train_fit)
    if serving is not None:
        from solver.physics import disagg_check, expert_check

        text += "\n" + serving_fit.report_markdown(cat, serving)
        text += "\n" + expert_check.markdown(cat)
        text += "\n" + disagg_check.markdown(cat)
    target.write_text(text, encoding="utf-8")


def _print_calibration_json(results: list[RowResult], summary: Summary,
                            train_fit: TrainingFit, serving: Report | None,
                            cat: Catalog) -> None:
    """``calibrate --json``: medians, counts, coverage, the training fit and every row; the
    serving fit (its factors, the errors by vendor and metric, and every measurement with
    its fit-check and held-out prediction) when there is serving data."""
    data = {
        "medians": summary.medians, "counts": summary.counts, "coverage": summary.coverage,
        "training_fit": {
            "values": {f"{f}.{p}": v for (f, p), v in train_fit.values.items()},
            "fit_check": train_fit.fit_check, "held_out": train_fit.held_out},
        "rows": [{"id": r.id, "category": r.category, "measured": r.measured,
                  "predicted": r.predicted, "error": r.error, "status": r.status,
                  "why": r.why} for r in results]}
    if serving is not None:
        data["serving"] = _serving_json(serving, cat)
    out.print_json(json.dumps(data))


def _serving_json(serving: Report, cat: Catalog) -> dict:
    """The serving fit as data: ``held_out`` is empty (and the errors are fit checks) with
    ``--no-held-out``."""
    from solver.physics import serving_fit

    kind, errors = _serving_errors(serving, cat)
    return {
        "factors": serving.fit.values,
        "errors_are": kind,
        "errors": [{"vendor": vendor, "metric": metric, "rows": int(e["n"]),
                    "median_abs_error": e["abs"], "median_signed_error": e["signed"]}
                   for (vendor, metric), e in errors.items()],
        "rows": [{"id": o.id, "source": o.source, "vendor": serving_fit.vendor_of(cat, o),
                  "gpu": o.gpu, "engine": o.engine, "model": o.model,
                  "metric": o.metric, "statistic": o.statistic, "measured": o.value,
                  "fit_check": serving.fit.predicted.get(o.id),
                  "held_out": serving.held_out.get(o.id)}
                 for o in serving.observations if o.id in serving.fit.predicted],
        "unpredictable": [{"id": o.id, "source": o.source, "why": why}
                          for o, why in serving.unpredictable]}


def _print_calibration(path: Path, results: list[RowResult], summary: Summary,
                       train_fit: TrainingFit, serving: Report | None, cat: Catalog) -> None:
    """The rows as a table, then median errors, coverage, the training fit and the serving
    model's errors with whole sources held out."""
    from rich.table import Table


    table = Table(title=f"calibration ({path.name})")
    for column in ("row", "category", "model", "gpu", "layout", "measured", "predicted",
                   "error"):
        table.add_column(column)
    for r in results:
        table.add_row(r.id, r.category, r.model, r.gpu, r.layout, f"{r.measured:.4g}",
                      "" if r.predicted is None else f"{r.predicted:.4g}",
                      r.status if r.error is None else f"{r.error:+.0%}")
    out.print(table)
    for category, median in summary.medians.items():
        out.print(f"{category}: median |error| {median:.1%} over {summary.counts[category]} rows")
    out.print(f"coverage {summary.mapped}/{summary.in_catalog} = {summary.coverage:.0%}")
    if train_fit.held_out:
        import statistics

        check = statistics.median(abs(e) for e in train_fit.fit_check.values())
        held = statistics.median(abs(e) for e in train_fit.held_out.values())
        out.print(f"training throughput: fit-check |error| {check:.1%}, leave-one-source-out "
                  f"{held:.1%} over {len(train_fit.held_out)} rows")
    if serving is not None:
        kind, errors = _serving_errors(serving, cat)
        if kind == "fit check":
            kind = "fit check (in-sample)"
        for (vendor, metric), e in errors.items():
            out.print(f"serving {vendor} {metric}, {kind}: median |error| {e['abs']:.1%} "
                      f"(signed {e['signed']:+.1%}) over {int(e['n'])} rows")


def _serving_errors(serving: Report, cat: Catalog) -> tuple[str, dict[tuple, dict[str, float]]]:
    """The serving errors by (vendor, metric): held out when the report has held-out
    predictions (``"held out"``), else the in-sample fit (``"fit check"``)."""
    from solver.physics import serving_fit

    predictions = serving.held_out or serving.fit.predicted
    return ("held out" if serving.held_out else "fit check",
            serving_fit.table(cat, serving, lambda o: (serving_fit.vendor_of(cat, o),
                                                       serving_fit.metric_class(o)),
                              predictions))


def register(app: typer.Typer) -> None:
    """Add `fit`, `estimate` and `calibrate` to the `procure` app."""
    app.command("fit")(fit)
    app.command("estimate")(estimate)
    app.command("calibrate")(calibrate)
