"""One candidate layout and what the estimate stage predicts for it.

These plain, frozen records are the interface between the physics (``solver.physics.memory``,
``solver.physics.performance``) and the optimiser (``solver.optimize.candidates``, ``solver.optimize.mip``): the
MIP reads only these numbers, never the physics.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

Kind = Literal["inference", "batch_inference", "lora", "qlora", "full_finetune", "pretrain"]
RECOMPUTE_MODES: tuple[str, ...] = ("auto", "none", "selective", "full")
KINDS: tuple[Kind, ...] = (
    "inference", "batch_inference", "lora", "qlora", "full_finetune", "pretrain",
)
KIND_OF: dict[str, Kind] = {kind: kind for kind in KINDS}
"""A kind's name (a string checked against KINDS) -> the :data:`Kind` it names."""
TRAINING_KINDS: tuple[Kind, ...] = ("lora", "qlora", "full_finetune", "pretrain")
SERVING_KINDS: tuple[Kind, ...] = ("inference", "batch_inference")


@dataclass(frozen=True)
class Layout:
    """How one job (a training run) or one serving replica is laid out.

    ``gpus = tp * attention_dp * pp * dp``; ``gpus_per_node`` is how many GPUs each node of the layout
    holds (so the job spans ``ceil(gpus / gpus_per_node)`` nodes), and ``fabric`` is the
    inter-node fabric id (``none`` when it stays inside one node). ``server`` is the node
    type's chassis id (its fabric NICs per node bound inter-node collectives); None = the
    smallest catalog server that holds ``gpus_per_node`` (``procure estimate``).

    MoE serving (issue 27): ``ep`` shards the routed experts of each pipeline stage over
    ``ep`` GPUs (expert parallelism; the stage's ``tp * attention_dp`` GPUs hold the
    experts, each expert split ``tp * attention_dp / ep`` ways), and ``attention_dp``
    replicates attention (and the dense layers) over that many ranks of ``tp`` GPUs, each
    rank with its own requests and KV cache; a replica is ``tp * attention_dp * pp`` GPUs
    and ``dp`` counts replicas. ``ep = 1, attention_dp = 1`` is the plain TP layout.
    """

    model: str
    gpu: str
    precision: str
    tp: int = 1
    pp: int = 1
    dp: int = 1
    gpus_per_node: int = 8
    fabric: str = "none"
    server: str | None = None
    ep: int = 1
    attention_dp: int = 1

    @property
    def gpus(self) -> int:
        return self.tp * self.attention_dp * self.pp * self.dp

    @property
    def replica_gpus(self) -> int:
        """GPUs of one replica (one engine): ``tp * attention_dp * pp``."""
        return self.tp * self.attention_dp * self.pp

    @property
    def stage_gpus(self) -> int:
        """GPUs of one pipeline stage of a replica, over which the experts are sharded."""
        return self.tp * self.attention_dp

    @property
    def nodes_spanned(self) -> int:
        return -(-self.gpus // self.gpus_per_node)


def expert_tag(layout: Layout) -> str:
    """``ep8adp8`` for a layout with expert parallelism ('' without): part of a
    candidate's name, so layouts that differ only there stay apart."""
    if layout.ep == 1 and layout.attention_dp == 1:
        return ""
    return f"ep{layout.ep}adp{layout.attention_dp}"


@dataclass(frozen=True)
class Workload:
    """What a layout is asked to do (the physics-facing view of an RFQ workload).

    Token lengths in tokens; SLOs in milliseconds (None = no SLO); ``concurrency`` None
    means throughput mode (the largest batch that fits memory). Serving under load:
    ``concurrency`` is a closed loop (that many requests always in flight, a new one sent
    when one finishes), ``qps`` an open loop (Poisson arrivals at that rate, all replicas
    together); ``engine`` names the serving engine's factor set (catalog efficiency.yaml)
    and ``percentile`` the percentile (50, 90, 95, 99) the SLOs are checked at.

    Training knobs (issue 15; the defaults reproduce the planner's automatic choice):
    ``recompute`` is ``auto`` (block recompute of just enough layers to fit, on top of the
    attention-core recompute flash attention does), ``none`` (every activation stored,
    attention scores included), ``selective`` (attention core recomputed, Korthikanti) or
    ``full`` (layer inputs only, one extra forward); ``sequence_parallel`` None = on where TP
    runs on NVLink; ``zero`` None = the catalog's stage (0..3, 3 = FSDP full shard);
    ``interleave`` None = the catalog's virtual pipeline stages; ``context_parallel`` splits
    each sequence over that many GPUs of the data-parallel dimension (``dp`` must be a
    multiple). ``global_batch_tokens`` None = the catalog's micro-batches per stage.
    ``calibration_margin`` False predicts serving without the uncertainty margin of an
    uncalibrated GPU family or engine (comparisons with measurements do).
    ``expert_parallel`` False keeps MoE serving layouts to TP x PP (no expert-parallel /
    attention-DP candidates; the RFQ's ``expert_parallel: false``).
    """

    kind: Kind
    input_tokens: int = 2000
    output_tokens: int = 400
    concurrency: int | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    seq_len: int = 4096
    micro_batch: int = 1
    global_batch_tokens: int | None = None
    qps: float | None = None
    engine: str = "vllm"
    percentile: int = 90
    recompute: str = "auto"
    sequence_parallel: bool | None = None
    zero: int | None = None
    interleave: int | None = None
    context_parallel: int = 1
    calibration_margin: bool = True  # serving: plan with the family x engine's margin
    expert_parallel: bool = True  # MoE serving: candidates with EP x attention DP


@dataclass(frozen=True)
class MemoryBreakdown:
    """Memory per GPU (the fullest one), GB = 1e9 bytes."""

    weights_gb: float
    kv_cache_gb: float
    activations_gb: float
    optimizer_gb: float
    total_gb: float
    capacity_gb: float
    weights_fraction: float
    utilization: float
    gradients_gb: float = 0.0
    reserve_gb: float = 0.0
    activation_recompute: bool = False


@dataclass(frozen=True)
class Prediction:
    """Predicted performance of one layout.

    Inference: ``tokens_per_s`` is output tokens/s of this layout at the evaluated
    load, ``qps_capacity`` requests/s (Poisson arrivals) it sustains with the SLOs met at
    the workload's percentile, and ``max_concurrency`` the largest closed-loop concurrency
    that meets them and fits memory. ``ttft_ms`` / ``tpot_ms`` are the typical (median)
    values at the evaluated load, ``*_p90`` / ``*_p99`` the percentiles and ``*_slo`` the
    value at the workload's SLO percentile (what the SLO is checked against).
    Training: ``tokens_per_s`` is training tokens/s of the whole job.
    """

    tokens_per_s: float
    tokens_per_s_per_gpu: float
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    qps_capacity: float | None = None
    max_concurrency: int | None = None
    mfu: float | None = None
    scaling_efficiency: float | None = None
    step_time_s: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    ttft_ms_p90: float | None = None
    ttft_ms_p99: float | None = None
    tpot_ms_p90: float | None = None
    tpot_ms_p99: float | None = None
    ttft_ms_slo: float | None = None
    tpot_ms_slo: float | None = None


@dataclass(frozen=True)
class Estimate:
    """A layout with its memory and performance prediction."""

    layout: Layout
    workload: Workload
    fits: bool
    comfortable: bool
    memory: MemoryBreakdown
    predicted: Prediction
    reason: str = ""
    training: dict | None = field(default=None, compare=False)  # resolved training knobs

    def to_dict(self) -> dict:
        return {"layout": asdict(self.layout), "workload": asdict(self.workload),
                "fits": self.fits, "comfortable": self.comfortable,
                "memory": asdict(self.memory), "predicted": asdict(self.predicted),
                "reason": self.reason, "training": self.training}
