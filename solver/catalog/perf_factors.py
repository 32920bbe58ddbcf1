"""Labelled empirical factors of the performance and memory model (``catalog/efficiency.yaml``).

Every number the physics needs that is not a hardware fact or an architecture fact lives
here, each with its value, source and note (never a bare ``* 0.7`` in the code).
Factors come in two groups:

* per GPU *family* (``Gpu.family``): achievable fractions of dense tensor peak (GEMMs in
  serving, training), of memory bandwidth in decode, and fixed per-step / per-layer
  overheads in microseconds;
* global: byte sizes of precisions and quantisation scales, KV paging overhead, runtime
  reserve, activation-memory coefficients, collective overlap, MoE expert efficiency,
  continuous-batching token budget and the training defaults (ZeRO stage, LoRA rank ...).

:func:`factors` validates ``catalog.efficiency`` once per catalog (cached by version).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from solver.catalog.data import Catalog, ComputeKey, PrecisionKey, content_key
from solver.common.errors import InputError, problems_from_pydantic
from solver.common.memo import Memo

ComputePrecision = ComputeKey
WeightPrecision = PrecisionKey


class Factor(BaseModel):
    """One labelled empirical factor: its value, where it comes from, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    value: float
    source: str = Field(min_length=2, description="key of `sources` or free text")
    note: str = ""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FamilyFactors(_Frozen):
    """Factors of one GPU family (the ``family`` field of a catalog GPU)."""

    gemm_efficiency: dict[ComputePrecision, Factor] = Field(
        description="achievable fraction of dense tensor peak for large serving GEMMs "
        "(prefill), by compute precision")
    train_efficiency: dict[ComputePrecision, Factor] = Field(
        description="achievable fraction of dense tensor peak of a training step's "
        "hardware FLOPs (kernels, norms, optimizer included), before parallelism losses")
    mem_bw_efficiency: Factor = Field(description="achievable fraction of memory bandwidth "
                                      "in memory-bound decode")
    step_overhead_us: Factor = Field(description="fixed cost per engine step (scheduler, "
                                     "sampling, launch), µs")
    layer_overhead_us: Factor = Field(description="fixed cost per transformer layer per "
                                      "step (kernel launches, syncs), µs")

    @model_validator(mode="after")
    def _physical(self) -> FamilyFactors:
        """Achievable shares of a peak are shares: a value above 1 would credit the GPU with
        more FLOP/s or bandwidth than it has."""
        for table, name in ((self.gemm_efficiency, "gemm_efficiency"),
                            (self.train_efficiency, "train_efficiency")):
            for precision, factor in table.items():
                _within(f"{name}.{precision}", factor, 0.05, 1.0)
        _within("mem_bw_efficiency", self.mem_bw_efficiency, 0.05, 1.0)
        _within("step_overhead_us", self.step_overhead_us, 0.0, 5000.0)
        _within("layer_overhead_us", self.layer_overhead_us, 0.0, 500.0)
        return self

    def gemm(self, precision: str) -> float:
        """Achievable fraction of dense peak for serving GEMMs at ``precision`` (0..1)."""
        factor = self.gemm_efficiency.get(precision) or self.gemm_efficiency["bf16"]
        return factor.value

    def train(self, precision: str) -> float:
        """Achievable fraction of dense peak for training at ``precision`` (0..1)."""
        factor = self.train_efficiency.get(precision) or self.train_efficiency["bf16"]
        return factor.value


class PrecisionBytes(_Frozen):
    """Bytes per element of each precision (weights, KV) and scale overheads."""

    weight_bytes: dict[WeightPrecision, Factor] = Field(description="bytes per weight")
    scale_bytes_per_param: dict[WeightPrecision, Factor] = Field(
        description="quantisation scales/zeros, bytes per weight")
    kv_bytes: dict[WeightPrecision, Factor] = Field(
        description="bytes per KV element when serving at this weight precision")
    embedding_bytes: Factor = Field(description="bytes per embedding / LM-head weight when "
                                    "the body is quantised (kept in 16 bit)")
    compute_precision: dict[WeightPrecision, ComputePrecision] = Field(
        description="tensor-core precision the GEMMs run in for each weight precision")
    weight_only_bw_efficiency: dict[WeightPrecision, Factor] = Field(
        description="multiplier on memory-bandwidth efficiency for weight-only formats "
        "whose decode kernels dequantise on the fly")


def _within(name: str, factor: Factor | None, low: float, high: float) -> None:
    """A factor outside its physical range is a bug, not a calibration: refuse it."""
    if factor is not None and not low <= factor.value <= high:
        raise ValueError(f"{name} = {factor.value:g} is outside its physical range "
                         f"[{low:g}, {high:g}]")


ATTENTION_DP_STEP_BOUNDS = (1.0, 2.0)
"""Where ``serving.attention_dp_step_factor`` may lie: at least the mean step (1); at most
twice it, a rank running a prefill chunk of its engine's budget beside its decodes while the
others decode only (an engineering bound; a fit that wants more is a modelling gap)."""

ENGINE_BOUNDS: dict[str, tuple[float, float]] = {
    "tpot_kernel_scale": (1.0, 3.0),
    "tpot_overhead_ms": (0.0, 10.0),
    "tpot_per_request_us": (0.0, 200.0),
    "prefill_wait_share": (0.0, 1.0),
    "ttft_overhead_ms": (0.0, 500.0),
    "ttft_pipeline_steps": (0.0, 4.0),
}
"""Physical range of each fitted engine factor: kernels cannot run faster than the family's
roofline (k_d >= 1 on reads, collectives and launch time); the others' prefill is never
skipped, only placed (0 <= w <= 1); fixed times are non-negative and bounded by what
measurements at low load show (a TTFT overhead above the lowest measured TTFT would be
contradicted by it; the fit bounds it tighter)."""


class EngineFactors(_Frozen):
    """One serving engine (vLLM, SGLang, TensorRT-LLM): its scheduler limits, and how its
    kernels, scheduler and waiting turn the step physics into TTFT/TPOT
    (solver/physics/serving.py; fitted with ``procure calibrate --write-factors`` across
    measurement sources, each confined to :data:`ENGINE_BOUNDS`)."""

    label: str = ""
    planning: bool = Field(default=True, description="whether an RFQ or procure estimate may "
                           "name it (false: a reference set for calibration only)")
    vendors: tuple[Literal["nvidia", "amd"], ...] = Field(
        default=("nvidia", "amd"), description="GPU vendors the engine runs on")
    token_budget: Factor = Field(description="max tokens per engine step (prefill chunk + "
                                 "decode) at the engine's serving defaults, tokens")
    max_running_requests: Factor = Field(description="most requests the engine runs at "
                                         "once (its default batch limit); more wait for a "
                                         "slot")
    tpot_kernel_scale: Factor = Field(description="k_d: multiplier >= 1 on the time a "
                                      "step's kernels take below the compute roofline "
                                      "(weight and KV reads, collectives, launch time)")
    tpot_overhead_ms: Factor = Field(description="engine time per decode step beyond the "
                                     "kernels: scheduling, sampling, detokenising, ms (o_d)")
    tpot_per_request_us: Factor = Field(description="engine CPU time per running request "
                                        "per decode step, µs (r)")
    prefill_wait_share: Factor = Field(description="where the other requests' prefill lands "
                                       "for the median request: the share before its first "
                                       "token (the rest between its output tokens), 0..1 (w)")
    ttft_overhead_ms: Factor = Field(description="fixed time to first token beyond the "
                                     "kernels: tokenising, scheduling, ms (o_p)")
    ttft_pipeline_steps: Factor = Field(description="engine steps of the running batch between "
                                        "a prompt's last prefill chunk and its first token "
                                        "reaching the client (scheduling, output processing) "
                                        "(s_p)")

    @model_validator(mode="after")
    def _physical(self) -> EngineFactors:
        for name, (low, high) in ENGINE_BOUNDS.items():
            _within(name, getattr(self, name), low, high)
        _within("token_budget", self.token_budget, 64, 1 << 20)
        _within("max_running_requests", self.max_running_requests, 1, 1 << 20)
        return self


class CalibrationEntry(_Frozen):
    """How well one GPU family x engine is calibrated: the measured rows the fit used and
    the median |error| on them with whole sources held out (``procure calibrate``)."""

    rows: int = Field(ge=0)
    sources: int = Field(ge=0, description="measurement sources among the rows")
    held_out_error_pct: float | None = Field(
        default=None, ge=0, description="median |predicted / measured - 1| of the rows, each "
        "predicted by factors fitted without its whole source, %")


class ServingFactors(_Frozen):
    """Continuous-batching engine factors."""

    default_engine: str = Field(default="vllm", description="engine when the RFQ names none")
    engines: dict[str, EngineFactors] = Field(default_factory=dict, description="per-engine "
                                              "factor sets (solver/physics/serving.py)")
    calibration: dict[str, CalibrationEntry] = Field(
        default_factory=dict, description="per 'family/engine': rows and held-out error of "
        "the serving calibration (written by procure calibrate --write-factors)")
    calibrated_min_rows: int = Field(default=10, ge=1, description="rows a family x engine "
                                     "needs to be planned without an uncertainty margin")
    uncalibrated_margin_floor_pct: float = Field(
        default=15.0, ge=0, le=100, description="smallest margin a plan on an uncalibrated "
        "family x engine carries, %")

    @model_validator(mode="after")
    def _default_known(self) -> ServingFactors:
        if self.engines and self.default_engine not in self.engines:
            raise ValueError(f"default_engine {self.default_engine!r} is not one of the "
                             f"engines ({', '.join(sorted(self.engines))})")
        return self
    kv_paging_overhead: Factor = Field(description="fraction added to KV bytes for block "
                                       "fragmentation")
    kv_decode_fill: Factor = Field(description="fraction of output tokens an average live "
                                   "request holds in KV (continuous batching)")
    runtime_reserve_gb: Factor = Field(description="CUDA context, CUDA graphs, allocator "
                                       "slack per GPU, GB")
    nccl_buffer_gb: Factor = Field(description="collective buffers per GPU when tp/pp > 1, GB")
    workspace_bytes_per_token_hidden: Factor = Field(
        description="activation workspace per budget token per hidden unit, bytes")
    moe_expert_gemm_efficiency: Factor = Field(description="multiplier on GEMM efficiency "
                                               "for expert GEMMs (imbalance, small GEMMs)")
    tp_comm_overlap: Factor = Field(description="fraction of TP all-reduce time hidden "
                                    "behind compute in serving")
    activation_bytes: Factor = Field(description="bytes per activation element on the wire")
    min_prefill_chunk_fraction: Factor = Field(
        description="smallest share of the token budget left to a new prompt's prefill")
    prompt_length_cv: Factor = Field(
        default=Factor(value=0.0, source="notes", note="prompts of the stated length"),
        description="coefficient of variation of the prompt lengths of dataset-driven "
        "Poisson benchmarks (MLPerf Server): fitted so that their median and p99 TTFT are "
        "read right; RFQ workloads are planned at their stated prompt length")
    moe_ep_load_imbalance: Factor | None = Field(
        default=None, description="expert parallelism: routed tokens on the busiest GPU "
        "of an EP group over the mean (>= 1; multiplies the expert GEMMs and the all-to-all "
        "bytes; None = 1, perfect balance)")

    attention_dp_step_factor: Factor | None = Field(
        default=None, description="aggregated serving with attention data parallelism: a "
        "step's time on the busiest rank over the mean (>= 1; prompts and their prefill "
        "chunks land on one rank at a time and every rank waits at the step's all-to-all); "
        "multiplies the decode kernels of an aggregated attention-DP step, not a "
        "disaggregated decode pool's; None = 1")

    @model_validator(mode="after")
    def _imbalance_physical(self) -> ServingFactors:
        f = self.moe_ep_load_imbalance
        if f is not None and not 1.0 <= f.value <= 4.0:
            raise ValueError("serving.moe_ep_load_imbalance must lie in [1, 4] (the busiest "
                             f"GPU holds at least the mean load), got {f.value}")
        g = self.attention_dp_step_factor
        if g is not None and not 1.0 <= g.value <= ATTENTION_DP_STEP_BOUNDS[1]:
            raise ValueError("serving.attention_dp_step_factor must lie in [1, "
                             f"{ATTENTION_DP_STEP_BOUNDS[1]:g}] (the busiest rank takes at "
                             f"least the mean step), got {g.value}")
        return self


class TrainingStack(_Frozen):
    """Memory behaviour of one training software stack (issue 15): how its loss, attention
    and QLoRA implementation hold tensors at the step's peak."""

    cross_entropy_bytes: Factor = Field(description="peak bytes per token per vocab entry "
                                        "of the LM-head logits and cross-entropy (split by TP)")
    attention_scores_kept: Factor = Field(description="1 when attention materialises its "
                                          "score tensors (eager attention), 0 for flash/SDPA")
    qlora_upcast_bytes: Factor = Field(description="QLoRA: bytes per element of the "
                                       "non-quantised weights (embeddings, LM head, norms) "
                                       "and hence of the residual stream")
    activation_offload: Factor = Field(description="share of the stored layer activations "
                                       "(checkpointed layer inputs) held in host memory")


class TrainingFactors(_Frozen):
    """Training memory and step-time factors."""

    zero_stage: int = Field(ge=0, le=3, description="default optimizer sharding over DP")
    zero_stage_note: str = ""
    model_state_bytes_per_param: Factor = Field(description="bf16 weights 2 + grads 2 + fp32 "
                                                "master 4 + Adam 8")
    act_bytes_replicated: Factor = Field(description="activation bytes per token per layer "
                                         "per hidden unit not split by TP")
    act_bytes_tp_split: Factor = Field(description="activation bytes per token per layer per "
                                       "hidden unit split by TP")
    act_bytes_recompute: Factor = Field(description="bytes per token per layer per hidden "
                                        "unit kept with full recompute (layer inputs)")
    logits_bytes: Factor | None = Field(default=None, description="legacy: bytes per token "
                                        "per vocab entry for logits and their gradient (split "
                                        "by TP) when no training stack is defined")
    lora_rank: Factor = Field(description="default LoRA rank (all linear layers)")
    nf4_bytes_per_param: Factor = Field(description="QLoRA NF4 base incl. double-quantised "
                                        "constants, bytes per weight")
    qlora_dequant_slowdown: Factor = Field(description="multiplier on matmul time for "
                                           "dequantising NF4 weights")
    tp_comm_overlap: Factor = Field(description="fraction of TP all-reduce time hidden behind "
                                    "compute in training")
    gemm_half_efficiency_hidden: Factor = Field(
        description="hidden size at which training GEMMs reach half the family efficiency")
    tp_replicated_fraction: Factor = Field(description="share of single-GPU step time in "
                                           "work every TP rank repeats (Amdahl serial part)")
    dp_comm_overlap: Factor = Field(description="fraction of backward time that can hide "
                                    "gradient collectives")
    microbatches_per_stage: Factor = Field(description="default micro-batches per pipeline "
                                           "stage when the global batch is not given")
    moe_expert_gemm_efficiency: Factor = Field(description="efficiency of the expert GEMMs "
                                               "relative to dense GEMMs in training")
    tp_comm_overlap_nvlink: Factor = Field(description="fraction of TP collective time hidden "
                                           "behind compute when TP runs on NVLink")
    tp_replicated_fraction_sp: Factor = Field(description="Amdahl part of TP on NVLink stacks "
                                              "with sequence parallelism")
    pipeline_virtual_stages: Factor = Field(description="model chunks per GPU of the "
                                            "interleaved 1F1B schedule (bubble / v)")
    moe_a2a_overlap: Factor = Field(description="fraction of MoE all-to-all time hidden "
                                    "behind compute")
    attention_score_bytes: Factor = Field(description="bytes per attention score element "
                                          "kept without any recompute (softmax, dropout "
                                          "mask and output: the 5 a s / h term)")
    selective_recompute_attention_passes: Factor = Field(
        description="extra attention-core forward passes per step when the attention core "
        "is recomputed (selective recompute / flash attention backward)")
    cp_comm_overlap: Factor = Field(description="fraction of the context-parallel K/V ring "
                                    "exchange hidden behind the attention blocks")
    stacks: dict[str, TrainingStack] = Field(default_factory=dict, description="training "
                                             "software stacks by name (memory behaviour)")
    stack_pretrain: str = Field(default="", description="stack pretraining runs on")
    stack_finetune: str = Field(default="", description="stack fine-tuning (full, LoRA, "
                                "QLoRA) runs on")
    qlora_dequant_matrices: Factor | None = Field(default=None, description="QLoRA: "
                                                  "dequantised 16-bit copies of the largest "
                                                  "weight matrix live at once")

    @model_validator(mode="after")
    def _stacks_known(self) -> TrainingFactors:
        for key in ("stack_pretrain", "stack_finetune"):
            name = getattr(self, key)
            if name and name not in self.stacks:
                raise ValueError(f"training.{key}: unknown stack {name!r} (known: "
                                 f"{', '.join(sorted(self.stacks)) or 'none'})")
        return self


class FabricBehaviour(_Frozen):
    """How collectives behave on a real inter-node fabric (coupled training): NCCL over
    plain TCP sockets vs RDMA, and the synchronous step's wait for the slowest node."""

    tcp_line_rate_fraction: Factor = Field(description="share of the fabric's effective "
                                           "bandwidth NCCL reaches over TCP sockets")
    tcp_extra_latency_us: Factor = Field(description="latency TCP sockets add per hop "
                                         "(kernel stack, interrupts), µs")
    straggler_cv_tcp: Factor = Field(description="coefficient of variation of a node's "
                                     "step time on a TCP fabric (jitter, retransmits)")
    straggler_cv_rdma: Factor = Field(description="coefficient of variation of a node's "
                                      "step time on an RDMA fabric")


class GoodputFactors(_Frozen):
    """Failures, checkpoints and restarts of long training jobs (deadline planning)."""

    failure_rate_per_gpu_hour: Factor = Field(description="unexpected job interruptions "
                                              "per GPU-hour")
    checkpoint_interval_hours: Factor = Field(description="hours between checkpoints")
    restart_hours: Factor = Field(description="hours from a failure to training again "
                                  "(detect, reschedule, reload the checkpoint)")
    checkpoint_write_gbs_per_node: Factor = Field(description="checkpoint write bandwidth "
                                                  "per node to shared storage, GB/s")
    checkpoint_blocking_fraction: Factor = Field(description="share of a checkpoint write "
                                                 "the training step waits for (async "
                                                 "checkpoints copy to host, then write)")


class LinkFactors(_Frozen):
    """Intra-node links without GPU peer-to-peer (``Gpu.p2p`` false, e.g. GeForce): NCCL
    stages every TP/PP transfer through pinned host memory."""

    host_staged_bw_factor: Factor = Field(description="host-staged GPU-to-GPU bandwidth as a "
                                          "fraction of the same link with P2P")
    host_staged_extra_latency_us: Factor = Field(description="latency a host-staged copy adds "
                                                 "to the P2P link latency, µs")


class EfficiencyFactors(_Frozen):
    """The whole of ``catalog/efficiency.yaml``."""

    as_of: str
    sources: dict[str, str] = Field(default_factory=dict)
    families: dict[str, FamilyFactors]
    precisions: PrecisionBytes
    serving: ServingFactors
    training: TrainingFactors
    links: LinkFactors | None = None
    fabric_behaviour: FabricBehaviour | None = None
    goodput: GoodputFactors | None = None

    @model_validator(mode="after")
    def _labels_resolve(self) -> EfficiencyFactors:
        for name, fam in self.families.items():
            if "bf16" not in fam.gemm_efficiency or "bf16" not in fam.train_efficiency:
                raise ValueError(f"families.{name}: bf16 gemm/train efficiency is required")
        return self

    def family(self, name: str) -> FamilyFactors:
        """Factors of a GPU family; raises KeyError naming the known families."""
        try:
            return self.families[name]
        except KeyError:
            raise KeyError(f"no efficiency factors for GPU family {name!r} "
                           f"(known: {', '.join(sorted(self.families))})") from None


FACTORS: Memo[EfficiencyFactors] = Memo(32)
"""Validated factors, keyed by the catalog's content."""
_LAST: list = [None, None]
"""The catalog :func:`factors` answered last and its factors: the same object holds the same
content (what :func:`content_key` relies on too), so its cache entry is found without a key."""


def factors(catalog: Catalog) -> EfficiencyFactors:
    """The validated efficiency factors of ``catalog`` (cached per catalog content).

    Raises :class:`InputError` naming the field when ``efficiency.yaml`` is invalid.
    """
    last_catalog, last_factors = _LAST
    if catalog is last_catalog:  # the physics asks ~3 times per estimate, same catalog
        return last_factors
    cached = FACTORS.get(content_key(catalog), lambda: _validated(catalog))
    _LAST[:] = [catalog, cached]
    return cached


def _validated(catalog: Catalog) -> EfficiencyFactors:
    try:
        return EfficiencyFactors.model_validate(catalog.efficiency)
    except ValidationError as exc:
        raise InputError(problems_from_pydantic(exc, "efficiency.yaml")) from None
