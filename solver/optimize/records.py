"""What the candidate stage hands the MIP: node types, candidate layouts and the table of
both for one RFQ, plus the two questions every candidate builder asks of a workload (its
physics view, the precisions it may use). Owned candidates (:mod:`solver.optimize.candidates`)
and rented ones (:mod:`solver.optimize.rental`) are both built from these records."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from solver.catalog.data import Fabric, Gpu, Model
from solver.catalog.native_precision import native_precision
from solver.optimize.costs import CostParams, NodeCost
from solver.optimize.storage import TrainingStorage
from solver.physics.layout import TRAINING_KINDS, Estimate, Layout, Workload
from solver.rfq.schema import AnyWorkload, ServingWorkload

POWERS_OF_TWO = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def in_node_sizes(node_gpus: int) -> tuple[int, ...]:
    """The group sizes (GPUs of one replica or job) offered inside one node of
    ``node_gpus`` GPUs: the powers of two that divide it, and the whole node.

    Each size divides every larger one, which is what the exact packing argument of
    :mod:`solver.optimize.mip` needs: for a power-of-two node these are all the powers of
    two up to it; a 72-GPU rack (NVL72) offers 1, 2, 4, 8 and 72."""
    sizes = [n for n in POWERS_OF_TWO if n <= node_gpus and node_gpus % n == 0]
    if sizes[-1] != node_gpus:
        sizes.append(node_gpus)
    return tuple(sizes)


SERVING_PRECISIONS = ("bf16", "fp8", "int8", "int4", "fp4")


@dataclass(frozen=True)
class NodeType:
    """One buyable node: a server populated with ``gpus`` GPUs of one SKU."""

    server: str
    gpu: str
    gpus: int
    cost: NodeCost
    fabric_nics: int = 1  # fabric NICs fitted when the node joins a fabric (ports it takes)
    stack: str = "cuda"
    hosts: int = 1  # operating-system hosts in one node (Server.hosts: NVL72 = 18)

    @property
    def key(self) -> str:
        return f"{self.server}/{self.gpu}x{self.gpus}"


@dataclass(frozen=True)
class Candidate:
    """One way to run (a replica of) one workload, with what the MIP needs to know."""

    workload: str
    kind: str
    node_type: str
    layout: Layout
    estimate: Estimate
    gpus: int
    nodes_spanned: int
    fabric: str
    network_usd: float
    concurrency_capacity: float = 0.0
    qps_capacity: float = 0.0
    hours_to_complete: float | None = None
    name: str = field(default="")
    # rented capacity (solver/optimize/rental.py): the offer, what one unit costs over its billed
    # hours, and how many replicas of ``layout`` one unit (whole instances) runs
    rental: Any = None
    rental_usd: float = 0.0
    replicas_per_unit: int = 1
    runs: int = 1  # a recurring job's rental is paid for every run (rental_usd covers all)
    # disaggregated serving (solver/optimize/disaggregated.py): the prefill pool of the unit
    # (``layout`` is then the decode pool: ``layout.dp`` decode replicas); None = aggregated
    prefill: Layout | None = None

    @property
    def disaggregated(self) -> bool:
        return self.prefill is not None

    @property
    def rented(self) -> bool:
        return self.rental is not None

    @property
    def spanning(self) -> bool:
        """Spans bought nodes over a bought fabric (rented instances never do: the offer
        includes its interconnect)."""
        return self.nodes_spanned > 1 and self.rental is None

    @property
    def is_job(self) -> bool:
        return self.kind in TRAINING_KINDS


@dataclass(frozen=True)
class CandidateTable:
    """Node types, fabrics and every workload's candidates for one RFQ."""

    node_types: dict[str, NodeType]
    fabrics: dict[str, Fabric]
    candidates: dict[str, list[Candidate]]
    params: CostParams
    rejected: dict[str, list[str]]
    storage: dict[str, TrainingStorage] = field(default_factory=dict)  # training jobs


def physics_workload(spec: AnyWorkload) -> Workload:
    """The physics-facing view of one RFQ workload (capacity mode for serving).

    Serving passes the engine (whose factors the physics uses; a validated RFQ names one,
    the catalog's default when it gave none) and, for online inference, the percentile the
    SLOs are checked at; batch inference has no latency SLO (percentile 50)."""
    if spec.kind == "inference":
        return _engine(spec, Workload(kind=spec.kind, input_tokens=spec.input_tokens,
                                      output_tokens=spec.output_tokens, concurrency=None,
                                      ttft_ms=spec.ttft_ms, tpot_ms=spec.tpot_ms,
                                      percentile=spec.slo_percentile))
    if spec.kind == "batch_inference":
        return _engine(spec, Workload(kind=spec.kind, input_tokens=spec.input_tokens,
                                      output_tokens=spec.output_tokens, concurrency=None,
                                      percentile=50))
    return Workload(kind=spec.kind, seq_len=spec.seq_len)


def _engine(spec: ServingWorkload, work: Workload) -> Workload:
    """``work`` with the RFQ's engine, when it names one (else the physics' default), and
    whether expert-parallel layouts may be tried."""
    if not spec.expert_parallel:
        work = replace(work, expert_parallel=False)
    return replace(work, engine=spec.engine) if spec.engine else work


def precisions_for(spec: AnyWorkload, gpu: Gpu, model: Model | None = None) -> list[str]:
    """Precisions the solver may choose for this workload on this GPU: what the GPU runs,
    narrowed to what the buyer allows (``allowed_precisions``: serving defaults to bf16 and
    fp8 - int8 and 4-bit weights only when the RFQ lists them; QLoRA keeps its int4 base).
    A serving workload that names no precision of a ``model`` whose checkpoint ships
    quantised runs that format (:func:`~solver.catalog.native_precision.native_precision`:
    natively, weight-only, or up-cast where the GPU has no path, stated)."""
    kind = spec.kind
    if kind not in TRAINING_KINDS and model is not None and spec.precision is None \
            and spec.precisions is None:
        native = native_precision(model, gpu)
        if native is not None:
            return [native.served]
    if kind == "qlora":
        options = ["int4"]
    elif kind in TRAINING_KINDS:
        options = ["bf16"] + (["fp8"] if "fp8" in gpu.dense_tflops else [])
    else:
        options = [p for p in SERVING_PRECISIONS
                   if p in ("bf16", "int4") or p in gpu.dense_tflops]
    allowed = spec.allowed_precisions()
    return [p for p in options if p in allowed]


def request_seconds(est: Estimate) -> float:
    """How long one request takes on this replica at its operating batch: prefill (TTFT)
    plus its own output tokens decoded one after another (output_tokens x TPOT), seconds."""
    pred = est.predicted
    return ((pred.ttft_ms or 0.0) + est.workload.output_tokens * (pred.tpot_ms or 0.0)) / 1e3


def batch_request_too_slow(spec: AnyWorkload, est: Estimate) -> str | None:
    """Why a batch-inference replica cannot meet the deadline even for one request (None if
    it can): however many replicas run in parallel, each request still decodes its own
    output tokens one after another."""
    if spec.kind != "batch_inference":
        return None
    deadline_s = spec.planned_hours * 3600.0
    need = request_seconds(est)
    if need <= deadline_s:
        return None
    return (f"one request takes {need:,.3g} s (prefill + {spec.output_tokens} output tokens "
            f"x TPOT {est.predicted.tpot_ms or 0:.3g} ms), more than the planned "
            f"{deadline_s:.3g} s ((1 - deadline_headroom {spec.headroom:g}) x the deadline)")


def usable_serving(est: Estimate) -> bool:
    return est.fits and est.comfortable and (est.predicted.max_concurrency or 0) > 0 \
        and (est.predicted.qps_capacity or 0) > 0
