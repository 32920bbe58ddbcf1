"""The plan as typed, frozen records: what :func:`solver.optimize.plan.assemble` builds and
every presenter (terminal, explain, quote, batch export, dashboard) reads.

``plan.model_dump(mode="json")`` is the plan JSON of ``procure solve --json`` (docs/plan.md,
generated from the descriptions below by :func:`plan_markdown`; ``procure schema --plan``
prints the JSON Schema). A field declared with :func:`omitted` is left out of the JSON when
it does not apply (``training`` of a serving workload, ``n_plus_1`` without redundancy, ...),
never written as ``null``; every other field is always there, ``null`` where the docs say so.

Units are in the names (``_usd``, ``_gb``, ``_ms``, ``_kw``, ``_hours``, ``_s``); fractions
are 0..1 (``0.8`` = 80 %). To add a field: declare it on its record with a description
(and :func:`omitted` when it applies only sometimes), set it where the plan is built, and
regenerate docs/plan.md (``python -m solver.optimize.plan_model > docs/plan.md``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["optimal", "feasible", "infeasible", "timeout", "error"]
Kind = Literal["inference", "batch_inference", "lora", "qlora", "full_finetune", "pretrain"]
Sourcing = Literal["owned", "rented", "hybrid"]


def _absent(value: Any) -> bool:
    return value is None


def omitted(description: str) -> Any:
    """A field that is left out of the JSON (not written as null) when it does not apply."""
    return Field(default=None, exclude_if=_absent, description=description)


def _omitted_type(description: str) -> Any:
    """:func:`omitted` for an ``Annotated`` alias: the field's ``= None`` gives the default."""
    return Field(exclude_if=_absent, description=description)


class Record(BaseModel):
    """A frozen part of the plan: unknown keys are refused, nothing changes after build."""

    model_config = ConfigDict(frozen=True, extra="forbid")


# ----------------------------------------------------------------------------- the cluster
class NodeGroup(Record):
    """Identical nodes bought: one GPU model in one server model."""

    gpu: str = Field(description="GPU id (catalog gpus.yaml)")
    server: str = Field(description="server id (catalog servers.yaml)")
    gpus_per_node: int = Field(description="GPUs in each node")
    count: int = Field(description="nodes of this kind bought")


class Frontend(Record):
    """How the nodes bought reach the site's network (front-end Ethernet: data + BMC)."""

    ports: int = Field(description="front-end ports of the nodes bought")
    lan_ports: int = Field(description="free ports of the site's LAN (facility.lan_ports)")
    switches: int = Field(description="front-end switches quoted (0: the nodes join the "
                          "site's LAN)")
    note: str = Field(description="in words: what is quoted and the RFQ field that changes it")


class Cluster(Record):
    """The hardware bought (owned; rented capacity is in ``workloads[].rental``)."""

    nodes: list[NodeGroup] = Field(description="node groups bought")
    total_nodes: int = Field(description="nodes bought, all groups")
    total_gpus: int = Field(description="GPUs bought, all groups")
    fabric: str = Field(description="fabric id coupling nodes ('none': no multi-node fabric)")
    coupled: bool = Field(description="whether a multi-node fabric is bought")
    coupled_nodes: int = Field(description="nodes attached to the fabric")
    power_kw: float = Field(description="full-load power of the nodes bought, kW")
    rack_units: int = Field(description="rack units of the nodes bought")
    frontend: Frontend | None = omitted("nodes bought: their front-end switches or the "
                                        "site's LAN")


# ----------------------------------------------------------------------------- workloads
class Memory(Record):
    """Memory per GPU of the workload's main layout (the fullest GPU), GB = 1e9 bytes."""

    weights_gb: float = Field(description="model weights per GPU, GB")
    kv_cache_gb: float = Field(description="KV cache at the planned load per GPU, GB")
    activations_gb: float = Field(description="activations per GPU, GB")
    optimizer_gb: float = Field(description="optimizer state per GPU, GB (0 for serving)")
    total_gb: float = Field(description="everything in use per GPU incl. reserve, GB")
    capacity_gb: float = Field(description="the GPU's memory, GB")
    weights_fraction: float = Field(description="weights / capacity, 0..1")
    utilization: float = Field(description="total / capacity, 0..1")
    gradients_gb: float = Field(description="gradients per GPU, GB (0 for serving)")
    reserve_gb: float = Field(description="runtime reserve per GPU (CUDA context, "
                              "fragmentation), GB")
    activation_recompute: float = Field(description="share of the layers whose activations "
                                        "are recomputed, 0..1 (training)")


class Predicted(Record):
    """What the workload's layouts deliver at the load the plan puts on them."""

    ttft_ms: float | None = Field(description="time to first token, median at the planned "
                                  "load, ms, in the engine: from the request reaching the "
                                  "server to its first token leaving it, without client, "
                                  "network or benchmark-harness time (serving; null for "
                                  "training)")
    tpot_ms: float | None = Field(description="time per output token, median, ms (serving)")
    qps_capacity: float | None = Field(description="requests/s all replicas sustain "
                                       "(serving; null for training)")
    tokens_per_s: float = Field(description="tokens/s: serving output tokens of all "
                                "replicas; training tokens processed")
    hours_to_complete: float | None = Field(description="hours to finish (batch inference "
                                            "and training; null for online serving)")
    scaling_efficiency: float | None = Field(description="multi-GPU scaling efficiency, 0..1 "
                                             "(training)")
    mfu: float | None = Field(description="model FLOPs utilisation, 0..1 (training)")
    max_concurrency: int | None = Field(description="concurrent requests all replicas hold "
                                        "(serving; null for training)")
    ttft_ms_p90: float | None = omitted("TTFT at p90, ms (online serving only)")
    ttft_ms_p99: float | None = omitted("TTFT at p99, ms (online serving only)")
    tpot_ms_p90: float | None = omitted("TPOT at p90, ms (online serving only)")
    tpot_ms_p99: float | None = omitted("TPOT at p99, ms (online serving only)")


class Demand(Record):
    """The demand the RFQ states for a serving workload (before target utilisation)."""

    concurrency: int | None = Field(description="concurrent requests (null when only a rate "
                                    "is given, and for batch inference)")
    qps: float | None = Field(description="requests/s (batch inference: requests / deadline)")


class Margin(Record):
    """One latency SLO against its prediction at the SLO percentile."""

    slo: Literal["ttft", "tpot"] = Field(description="which latency")
    percentile: int = Field(description="percentile the target holds for (50, 90, 95, 99)")
    target_ms: float = Field(description="the RFQ's target, ms")
    predicted_ms: float | None = Field(description="the worst layout used at its planned "
                                       "load, at the percentile (or median, see basis), ms")
    margin: float | None = Field(description="1 - predicted / target (negative: missed)")
    met: bool = Field(description="predicted <= target")
    basis: str = Field(description="'p90' etc. when the physics gives the percentile, "
                       "'median' when it does not")


class NPlus1(Record):
    """Capacity left with the worst single node (or rented instance) down."""

    worst_node: str = Field(description="the node whose loss leaves the least capacity")
    concurrency_one_node_down: float | None = Field(description="concurrent requests left")
    qps_one_node_down: float | None = Field(description="requests/s left")


class Calibration(Record):
    """How well the serving model is measured for a GPU family on a serving engine, and the
    margin the plan carries where it is not (latencies planned that much higher, throughput
    that much lower)."""

    family: str = Field(description="GPU family (catalog gpus.yaml family)")
    engine: str = Field(description="serving engine the prediction is for")
    rows: int = Field(description="published measurements of this family on this engine "
                      "the serving factors were fitted on")
    sources: int = Field(description="independent sources those measurements come from")
    held_out_error_pct: float | None = Field(
        description="median error on those measurements with each whole source held out, "
        "percent (null: none measured)")
    calibrated: bool = Field(description="enough measurements from at least two sources: "
                             "planned on the prediction as it is")
    margin_applied_pct: float = Field(description="uncertainty margin the plan carries, "
                                      "percent (0 when calibrated)")
    basis: str = Field(description="in words: calibrated, or whose held-out error the margin "
                       "borrows")


class Headroom(Record):
    """What a workload runs at no extra cost on GPUs of the bought nodes that the cheapest
    layouts left idle (solver/optimize/solve.py, `with_headroom`): the plan's capacity
    against the cheapest layouts' and what the workload is sized for."""

    unit: str = Field(description="what the capacities count: 'concurrent requests' or "
                      "'requests/s' (serving), 'hours' (a job: lower is more)")
    capacity: float = Field(description="what the plan's layouts carry (a job: its hours)")
    cheapest_capacity: float = Field(description="what the cheapest plan's layouts would "
                                     "carry on the same nodes (a job: its hours)")
    sized_for: float = Field(description="the planned demand, stated demand / target "
                             "utilization (a job: its deadline less the headroom kept)")
    gpus_added: int = Field(description="GPUs that the cheapest layouts left idle and the "
                            "plan's layouts now run on (a service keeps every replica of the "
                            "cheapest plan and adds; a job may move to a faster layout)")


class Pool(Record):
    """One pool of a disaggregated serving unit (issue 27)."""

    gpus: int = Field(description="GPUs of the pool in one unit")
    replicas: int = Field(description="engines (replicas) the pool runs")
    tp: int = Field(description="tensor-parallel degree of each")
    pp: int = Field(description="pipeline-parallel degree of each")
    ep: int | None = omitted("expert parallelism of each (absent: experts split by TP)")
    attention_dp: int | None = omitted("attention data-parallel ranks of each (absent: 1)")



# The layout fields shared by a workload, each of its layouts and each placed run: one
# definition each (type, absent-when-unused, description).
ExpertParallel = Annotated[int | None, _omitted_type(
    "MoE serving with expert parallelism: the routed experts of each pipeline stage sharded "
    "over this many GPUs (absent: experts split by TP)")]
AttentionDP = Annotated[int | None, _omitted_type(
    "MoE serving with expert parallelism: attention data-parallel ranks per replica (each TP "
    "GPUs with its own requests and KV cache; absent: 1)")]
ServingMode = Annotated[Literal["aggregated", "disaggregated"] | None, _omitted_type(
    "serving: 'aggregated' (each replica prefills and decodes) or 'disaggregated' (each unit a "
    "prefill pool and a decode pool, the prompt's KV cache moved between them; "
    "tp/pp/ep/attention_dp are then the decode pool's and each replica is a unit)")]
PrefillPool = Annotated[Pool | None, _omitted_type("disaggregated: the prefill pool of one unit")]
DecodePool = Annotated[Pool | None, _omitted_type("disaggregated: the decode pool of one unit")]
KvTransferMs = Annotated[float | None, _omitted_type(
    "disaggregated: moving one prompt's KV cache from the prefill to the decode pool, ms")]

class LayoutUse(Record):
    """One of several layouts a workload runs on (when it uses more than one)."""

    gpu: str = Field(description="GPU id")
    precision: str = Field(description="numeric precision (bf16, fp8, int8, int4, fp4)")
    tp: int = Field(description="tensor-parallel degree")
    pp: int = Field(description="pipeline-parallel degree")
    ep: ExpertParallel = None
    attention_dp: AttentionDP = None
    mode: ServingMode = None
    prefill: PrefillPool = None
    decode: DecodePool = None
    kv_transfer_ms: KvTransferMs = None
    replicas: int = Field(description="replicas of this layout")
    gpus_per_node: int = Field(description="GPUs per node of the node type it runs on")
    fabric: str = Field(description="fabric id between its nodes ('none': one node)")
    rented: bool | None = omitted("whether it runs on rented instances")
    calibration: Calibration | None = omitted("serving: the calibration of this layout's "
                                              "GPU family on the engine")


class Rental(Record):
    """Rented instances of one offer used by a workload."""

    offer: str = Field(description="rental offer id (catalog rental.csv)")
    gpu: str = Field(description="GPU id of the offer")
    price_type: str = Field(description="on_demand, reserved_1y or reserved_3y")
    provider_class: str = Field(description="kind of provider (hyperscaler, gpu-cloud, ...)")
    instances: int = Field(description="instances rented")
    gpus_per_instance: int = Field(description="GPUs in one instance")
    fabric: str = Field(description="fabric between instances ('none': one instance)")
    replicas: int = Field(description="serving replicas (or 1 job) on them")
    gpu_hours: float = Field(description="GPU-hours billed over the horizon")
    usd_per_gpu_hour: float = Field(description="price, USD per GPU-hour")
    min_term_hours: float = Field(description="the offer's minimum billed term, hours")
    usd: float = Field(description="rental cost over the horizon, USD")
    runs: int | None = omitted("a recurring job: runs paid (gpu_hours and usd are for all)")
    source: str = Field(description="where the price was read")
    as_of: str = Field(description="when the price was read")


class Training(Record):
    """A training job's knobs as run, expected goodput and deadline margin."""

    recompute: str = Field(description="activation recompute: none, selective or full")
    recompute_fraction: float = Field(description="share of layers with block recompute, 0..1")
    zero: int = Field(description="ZeRO stage (0-3; 3 = FSDP)")
    micro_batch: int = Field(description="sequences per micro-batch")
    global_batch: int = Field(description="sequences per optimizer step")
    microbatches: int = Field(description="micro-batches per step per replica")
    sequence_parallel: bool = Field(description="sequence parallelism on")
    interleave: int = Field(description="virtual pipeline stages per GPU")
    context_parallel: int = Field(description="context-parallel degree")
    goodput: float | None = Field(description="expected share of time doing useful steps "
                                  "(failures, checkpoints), 0..1")
    failures_expected: float | None = Field(description="failures expected during the job")
    checkpoint_blocking_s: float | None = Field(description="seconds each checkpoint blocks "
                                                "training")
    deadline_hours: float = Field(description="the RFQ's deadline, hours")
    hours_to_complete: float | None = Field(description="planned hours at expected goodput")
    deadline_margin_hours: float | None = Field(description="deadline - hours to complete")
    deadline_margin: float | None = Field(description="1 - hours / deadline, 0..1")


class Recurring(Record):
    """A job that runs again every day, week or month over the horizon."""

    every: Literal["daily", "weekly", "monthly"] = Field(description="how often it runs")
    runs: int = Field(description="runs over the horizon, each costed")
    window_hours: float = Field(description="hours each run must finish in")
    rented_per_run_usd: float | None = Field(description="rental of one run, USD (null: "
                                             "runs on owned GPUs)")
    rented_usd: float | None = Field(description="rental of every run over the horizon, "
                                     "USD (runs × per run; null: owned)")


class Served(Record):
    """Objective max_served: how much of one workload the budget serves."""

    workload: str = Field(description="workload name")
    priority: float = Field(description="its weight in the served share maximised")
    served_fraction: float = Field(description="share of its planned demand served, 0..1 "
                                   "(steps of 0.01; a job: 0 or 1)")
    served: str = Field(description="what is served, in words")


class Deadline(Record):
    """A job's deadline against its planned hours (batch inference and training)."""

    deadline_hours: float = Field(description="the RFQ's deadline, hours")
    headroom: float = Field(description="share of the deadline kept free (RFQ "
                            "deadline_headroom, default 0.1)")
    planned_within_hours: float = Field(description="(1 - headroom) x deadline: the hours "
                                        "the plan must finish within")
    hours_to_complete: float | None = Field(description="planned hours (training: at "
                                            "expected goodput)")
    margin: float | None = Field(description="1 - hours / deadline (at least the headroom "
                                 "when met)")
    met: bool = Field(description="hours to complete <= planned_within_hours")


class Binding(Record):
    """A constraint at its limit and what its next relaxation would save, found by
    re-solving (solver/analysis/binding.py)."""

    constraint: str = Field(description="the RFQ field, e.g. workloads.chat.ttft_ms, "
                            "constraints.max_power_kw, facility.cooling")
    kind: Literal["slo", "deadline", "power", "cooling", "vendor", "precision", "node_limit",
                  "gpu_limit", "rack_units", "racks", "budget", "serving_mode"] = Field(
        description="what sort of constraint (budget: objective max_served only; "
        "serving_mode: a MoE serving workload kept aggregated, disaggregated: false)")
    value: str = Field(description="its value in the RFQ, in words")
    relaxed_to: str = Field(description="the next relaxation that was re-solved, in words")
    relaxed_cost_usd: float = Field(description="the optimum with it relaxed (the RFQ's "
                                    "objective: TCO or capex), USD")
    saving_usd: float = Field(description="what the relaxation saves against this plan, USD")
    relaxed_cluster: str = Field(description="what the relaxed optimum buys, in words")
    served_share: float | None = omitted("objective max_served with demand left unserved: "
                                         "the priority-weighted share served with it "
                                         "relaxed, 0..1 (the plan's own is in served)")
    proven: bool | None = omitted("false when the re-solve stopped at its time limit "
                                  "(15 s) with a cheaper plan in hand: relaxed_cost_usd is "
                                  "that plan's, the relaxed optimum costs at most that, so "
                                  "the relaxation saves at least saving_usd")


class LicensedAlternative(Record):
    """A plan on consumer cards (GeForce: not licensed for datacenter deployment) beside
    the cheapest plan without them: the same RFQ re-solved with only datacenter-licensed
    GPUs (solver/analysis/licence.py). Whether a site counts as a datacenter is the
    buyer's call."""

    consumer_gpus: list[str] = Field(description="the plan's GPUs not licensed for "
                                     "datacenter deployment")
    status: Literal["optimal", "feasible", "infeasible", "timeout", "skipped"] = Field(
        description="the re-solve's status; skipped: not computed (the time limit left too "
        "little time for it, see note)")
    tco_usd: float | None = Field(description="the alternative's TCO, USD (null: no plan)")
    capex_usd: float | None = Field(description="the alternative's capex, USD (null: no "
                                    "plan)")
    extra_usd: float | None = Field(description="what it costs more than this plan in the "
                                    "RFQ's objective (TCO, or capex), USD (null: no plan)")
    cluster: str | None = Field(description="what the alternative buys, in words (null: no "
                                "plan)")
    note: str = Field(description="in words: what was re-solved, or why there is no figure")


class UnitCost(Record):
    """What a serving workload's tokens cost at the planned load over the horizon: the unit
    price buyers compare with cloud APIs (solver/optimize/unit_cost.py)."""

    output_usd: float | None = Field(description="USD per million output tokens (null: no "
                                     "tokens)")
    all_tokens_usd: float | None = Field(description="USD per million tokens, prompt and "
                                         "output together")
    output_tokens_per_s_per_usd_per_hour: float | None = Field(
        description="output tokens per second at the planned load per USD per hour the "
        "workload costs")
    workload_cost_usd: float = Field(description="the workload's share of the TCO: the owned "
                                     "part by the owned GPUs it runs on, plus its rental, USD")
    requests: float = Field(description="requests served over the horizon at the stated "
                            "demand (batch inference: its requests)")
    output_tokens: int = Field(description="output tokens over the horizon")
    basis: str = Field(description="in words: which demand and which cost share")


class WorkloadPlan(Record):
    """How one workload of the RFQ runs: its main layout, memory, predictions, sourcing."""

    name: str = Field(description="the RFQ's workload name")
    kind: Kind = Field(description="workload kind")
    model: str = Field(description="model id (or a config file's absolute path)")
    precision: str = Field(description="numeric precision of the main layout")
    gpu: str = Field(description="GPU id of the main layout")
    tp: int = Field(description="tensor-parallel degree")
    pp: int = Field(description="pipeline-parallel degree")
    ep: ExpertParallel = None
    attention_dp: AttentionDP = None
    mode: ServingMode = None
    prefill: PrefillPool = None
    decode: DecodePool = None
    kv_transfer_ms: KvTransferMs = None
    dp: int = Field(description="serving: replicas of the main layout; training: "
                    "data-parallel degree")
    gpus: int = Field(description="GPUs the workload uses, all layouts")
    nodes_spanned: int = Field(description="nodes one replica or job spans")
    gpus_per_node: int = Field(description="GPUs per node of its node type")
    fabric: str = Field(description="fabric between the nodes it spans ('none': one node)")
    memory: Memory = Field(description="memory per GPU of the main layout")
    predicted: Predicted = Field(description="predictions at the planned load")
    training: Training | None = omitted("training jobs: knobs, goodput, deadline margin")
    deadline: Deadline | None = omitted("batch inference and training: the deadline, the "
                                        "headroom kept and the margin")
    demand: Demand | None = omitted("serving: the stated demand")
    utilization: float | None = omitted("serving: stated demand / capacity bought, 0..1 "
                                        "(the larger of concurrency and rate)")
    target_utilization: float | None = omitted("online serving: planned load as a share of "
                                               "capacity, 0..1")
    slo_percentile: int | None = omitted("online serving: percentile of the SLOs")
    engine: str | None = omitted("online serving: serving engine (catalog "
                                 "efficiency.yaml serving.engines)")
    redundancy: str | None = omitted("online serving: none or n+1")
    calibration: Calibration | None = omitted("serving: how well the model is measured for "
                                              "the main layout's GPU family on the engine, "
                                              "and the margin planned with")
    margins: dict[str, Margin] | None = omitted("online serving: each stated SLO "
                                                "(ttft_ms, tpot_ms) against its prediction")
    layouts: list[LayoutUse] | None = omitted("when it runs on more than one layout: each")
    n_plus_1: NPlus1 | None = omitted("redundancy n+1: capacity with the worst node down")
    headroom: Headroom | None = omitted("when the cheapest plan leaves GPUs of the bought "
                                        "nodes idle: what this workload gains on them at no "
                                        "extra cost")
    sourcing: Sourcing | None = omitted("owned, rented or hybrid (every feasible plan)")
    rental: list[Rental] | None = omitted("what it rents, when anything")
    served_fraction: float | None = omitted("objective max_served: share of its planned "
                                            "demand served, 0..1 (a job: 0 or 1)")
    recurrence: Recurring | None = omitted("a recurring job: how often it runs and what "
                                           "each run costs")
    cost_per_million_tokens_usd: UnitCost | None = omitted(
        "serving and batch inference: cost per million tokens at the planned load")


# ----------------------------------------------------------------------------- cost
class Cost(Record):
    """Every cost term over the horizon, USD (TCO terms even for a capex objective).
    ``capex_usd`` = gpus + servers + network + storage; ``tco_usd`` = capex + power +
    operations + multinode overhead + rental."""

    gpus_usd: float = Field(description="GPUs, USD")
    servers_usd: float = Field(description="servers (chassis, CPUs, memory), USD")
    network_usd: float = Field(description="fabric, front-end network, NICs and cables, USD")
    storage_usd: float = Field(description="training datasets and checkpoints, USD")
    capex_usd: float = Field(description="purchase total, USD")
    power_usd: float = Field(description="electricity over the horizon, USD")
    operations_usd: float = Field(description="operations (staff, space, support) over the "
                                  "horizon, USD")
    multinode_overhead_usd: float = Field(description="engineering overhead of coupling "
                                          "nodes, USD")
    rental_usd: float = Field(description="rented capacity over the horizon, USD")
    tco_usd: float = Field(description="total cost of ownership over the horizon, USD")


# ----------------------------------------------------------------------------- placement
class Run(Record):
    """One replica or job (or its share) on a node."""

    workload: str = Field(description="workload name")
    unit: str = Field(description="'replica N' or 'job'")
    group: str = Field(description="the candidate layout and unit index")
    gpus: int = Field(description="GPUs it uses on this node")
    group_gpus: int = Field(description="GPUs of the whole replica or job")
    nodes_spanned: int = Field(description="nodes the replica or job spans")
    fabric: str = Field(description="fabric between those nodes")
    precision: str = Field(description="numeric precision")
    tp: int = Field(description="tensor-parallel degree")
    pp: int = Field(description="pipeline-parallel degree")
    dp: int = Field(description="data-parallel degree")
    ep: ExpertParallel = None
    attention_dp: AttentionDP = None
    mode: ServingMode = None
    prefill: PrefillPool = None
    decode: DecodePool = None


class Placement(Record):
    """One bought node and what runs on it."""

    node: str = Field(description="node name (node-1, node-2, ...)")
    type: str = Field(description="node type (server/GPU x count)")
    server: str = Field(description="server id")
    gpu: str = Field(description="GPU id")
    gpus: int = Field(description="GPUs in the node")
    free_gpus: int = Field(description="GPUs nothing runs on")
    runs: list[Run] = Field(description="replicas and jobs on it")


# ----------------------------------------------------------------------------- bill
class BomLine(Record):
    """A line of the bill of materials (bought items or rented GPU-hours)."""

    sku: str = Field(description="catalog id or item name")
    description: str = Field(description="what it is")
    quantity: int | float = Field(description="units (rented: GPU-hours)")
    unit_price_usd: float = Field(description="price per unit, USD")
    price_type: str = Field(description="msrp, street, quote, derived, or a rental price type")
    as_of: str = Field(description="when the price was read")
    source: str = Field(description="where the price was read")
    line_total_usd: float = Field(description="quantity x unit price, USD")
    category: str = Field(description="the cost term it adds to (a key of cost)")


class OpexLine(Record):
    """A yearly running cost."""

    item: str = Field(description="item name")
    description: str = Field(description="what it is and how it is computed")
    quantity: int | float = Field(description="units per year (kWh, nodes, ...)")
    unit: str = Field(description="the unit of quantity")
    unit_usd_per_year: float = Field(description="USD per unit per year")
    usd_per_year: float = Field(description="USD per year")
    source: str = Field(description="where the figure was read")
    category: str = Field(description="the cost term it adds to (a key of cost)")
    usd_over_horizon: float = Field(description="USD over the horizon")


class Opex(Record):
    """Running costs per year."""

    lines: list[OpexLine] = Field(description="running costs")
    total_usd: float = Field(description="running cost per year, USD")


class RentalBill(Record):
    """Rented capacity on the bill: not capex, part of the TCO."""

    lines: list[BomLine] = Field(description="rented GPU-hours per offer and workload")
    total_usd: float = Field(description="rental over the horizon, USD")


class BillOfMaterials(Record):
    """What the buyer receives, recomputed from the plan: its totals match ``cost``."""

    lines: list[BomLine] = Field(description="bought items")
    capex_usd: float = Field(description="sum of the lines, USD")
    opex_per_year: Opex = Field(description="yearly running costs")
    rental: RentalBill = Field(description="rented GPU-hours")
    horizon_years: float = Field(description="the RFQ's horizon, years")
    tco_usd: float = Field(description="capex + opex over the horizon + rental, USD")


class SlotRun(Record):
    """One workload in one slot of the day."""

    workload: str = Field(description="workload name")
    owned_gpus: int = Field(description="owned GPUs it uses in the slot")
    rented_gpus: int = Field(description="rented GPUs it uses in the slot")
    demand_share: float = Field(description="share of its demand it serves in the slot "
                                "(a service's off-peak load in quiet hours; 1 otherwise)")


class Slot(Record):
    """A slot of the day (busy or quiet hours) and what runs in it."""

    slot: Literal["busy", "quiet"] = Field(description="busy: the longest peak of the "
                                           "services with a daily_profile; quiet: the rest")
    hours: float = Field(description="hours a day")
    runs: list[SlotRun] = Field(description="what runs in the slot")
    idle_gpus: int = Field(description="owned GPUs left idle in the slot")
    placement: list[Placement] | None = omitted("quiet hours: what runs on each bought node "
                                                "(the busy hours' is the plan's placement)")


# ----------------------------------------------------------------------------- schedule
class ScheduleRun(Record):
    """What a workload runs on in one period (one period: sourcing and GPUs; phased:
    owned and rented GPUs)."""

    sourcing: Sourcing | None = omitted("one period: owned, rented or hybrid")
    gpus: int | None = omitted("one period: GPUs it uses")
    owned_gpus: int | None = omitted("phased: owned GPUs it uses in the period")
    rented_gpus: int | None = omitted("phased: rented GPUs it uses in the period")


class ScheduleLine(Record):
    """One purchase of a phased period."""

    item: str = Field(description="node type or front-end item")
    description: str = Field(description="what it is")
    qty: int = Field(description="units bought")
    unit_usd: float = Field(description="price per unit at the period's declined price, USD")
    total_usd: float = Field(description="qty x unit, USD")


class Period(Record):
    """One purchase period (one period at month 0 unless demand changes over time)."""

    start_month: float = Field(description="months from the start")
    months: float = Field(description="length, months")
    nodes_bought: int = Field(description="nodes bought at its start")
    gpus_bought: int = Field(description="GPUs bought at its start")
    node_types_bought: dict[str, int] | None = omitted("phased: nodes bought per node type")
    capex_usd: float = Field(description="purchases at its start, USD")
    rental_usd: float = Field(description="rental during it, USD")
    lines: list[ScheduleLine] | None = omitted("phased: what is bought, line by line")
    runs: dict[str, ScheduleRun] = Field(description="per workload name: what it runs on")


class Phasing(Record):
    """A phased purchase against buying everything at month 0."""

    tco_usd: float = Field(description="phased TCO, USD")
    buy_all_now_tco_usd: float | None = Field(description="TCO buying all at month 0, USD")
    hardware_price_decline_per_year: float = Field(description="yearly price decline, 0..1")
    saving_usd: float | None = omitted("buy-all-now minus phased TCO, USD")


# ----------------------------------------------------------------------------- explanations
class DecisionStep(Record):
    """One step of the buying guide's decision path for a workload."""

    workload: str = Field(description="workload name")
    step: int = Field(description="step number along the guide")
    question: str = Field(description="the guide's question")
    answer: bool = Field(description="its answer for this workload")
    note: str = Field(description="why, with the figures")
    reference: str | None = omitted("the guide's own answer, when it differs")


class BuyVsRent(Record):
    """One workload alone: owning against renting."""

    workload: str = Field(description="workload name")
    chosen: Sourcing | None = Field(description="what the plan chose")
    owned_usd: float | None = Field(description="cheapest owned-alone cost, USD (null: none)")
    rented_usd: float | None = Field(description="cheapest rented-alone cost, USD (null: none)")
    rent_offer: str | None = omitted("the cheapest rental offer")
    rent_usd_per_hour: float | None = omitted("its cost per hour of use, USD")
    hours_used: float | None = omitted("hours of use over the horizon")
    breakeven_hours: float | None = omitted("hours of use above which owning wins")
    breakeven_utilization: float | None = omitted("the same as a share of the horizon, 0..1")
    owned_capex_usd: float | None = omitted("owned-alone purchase, USD")
    owned_running_usd_per_month: float | None = omitted("owned-alone running cost, USD/month")
    breakeven_months: float | None = omitted("months of continuous use to break even")
    residual_value_fraction: float | None = omitted("one-off job: resale value share, 0..1")
    residual_value_usd: float | None = omitted("one-off job: resale value after the job, USD")
    owned_resold_usd: float | None = omitted("one-off job: buy, run, resell, USD")
    why: str = Field(description="why the chosen one won, in words")


class WorkloadRelaxation(Record):
    """What one workload could achieve alone with its targets relaxed."""

    deadline_hours: float | None = omitted("the deadline that could be met, hours")
    max_nodes: int | None = omitted("nodes the fastest layout spans")
    tpot_ms: float | None = omitted("best TPOT achievable, ms")
    ttft_ms: float | None = omitted("best TTFT achievable, ms")
    gpus_that_fit: list[str] | None = omitted("GPUs of the whole catalog that run it")


class Infeasibility(Record):
    """Why no plan was found, and the nearest feasible relaxation."""

    reasons: list[str] = Field(description="what binds, in words")
    closest: dict[str, int | float | WorkloadRelaxation] = Field(
        description="per limit path (budget_usd, constraints.max_nodes, ...): the value that "
        "would suffice; per workload name: what it could achieve alone")
    to_fix: str = Field(description="what to change, in words")
    closest_clusters: dict[str, Cluster] | None = omitted(
        "per limit path: the cluster the relaxed limit buys")
    budget_buys: list[Served] | None = omitted(
        "when the budget binds: what it buys at most (objective max_served on the same RFQ)")


# ----------------------------------------------------------------------------- the plan
class Plan(Record):
    """The answer to an RFQ: what to buy, how each workload runs, what it costs."""

    rfq: str = Field(description="the RFQ's id")
    status: Status = Field(description="optimal, feasible (time limit: see gap), infeasible, "
                           "timeout (no plan within the time limit) or error")
    solver: str = Field(description="MIP backend (highs, cbc, cpsat)")
    gap: float | None = Field(description="relative optimality gap (0 when optimal)")
    solve_seconds: float | None = Field(description="seconds the MIP took")
    objective: Literal["tco", "capex", "max_served"] = Field(
        description="what was optimised: tco or capex minimised, or max_served (the "
        "largest served share within the budget, then the lowest TCO)")
    cluster: Cluster = Field(description="the hardware bought")
    workloads: list[WorkloadPlan] = Field(description="how each workload runs")
    cost: Cost | None = Field(description="cost terms (null without a plan)")
    placement: list[Placement] = Field(description="one entry per bought node")
    bill_of_materials: BillOfMaterials | None = Field(description="the bill (null without a "
                                                      "plan)")
    decision_path: list[DecisionStep] = Field(default_factory=list,
                                              description="the buying guide's path")
    warnings: list[str] = Field(default_factory=list, description="warnings, in words")
    infeasibility: Infeasibility | None = Field(default=None, description="why no plan (null "
                                                "when there is one)")
    binding: list[Binding] | None = Field(
        default=None, description="each binding constraint with the saving of its next "
        "relaxation, largest first ([] when nothing binds; null when not computed: an "
        "infeasible plan, or a library/batch solve without binding=True)")
    licensed_alternative: LicensedAlternative | None = omitted(
        "a plan with consumer (GeForce) cards, from procure solve, explain, quote and the "
        "dashboard: the cheapest plan on datacenter-licensed GPUs and its extra cost")
    phasing: Phasing | None = omitted("demand over time: phased against buy-all-now")
    schedule: list[Period] = Field(default_factory=list, description="purchases over time "
                                   "(one period at month 0 unless phased; empty without a plan)")
    buy_vs_rent: list[BuyVsRent] | None = omitted("per workload: owning against renting "
                                                  "(explained feasible plans)")
    served: list[Served] | None = omitted("objective max_served: each workload's share "
                                          "served within the budget")
    timetable: list[Slot] | None = omitted("a service with a daily_profile: what runs in "
                                           "the busy and the quiet hours (recurring jobs "
                                           "whose window fits run in the quiet hours)")

    @property
    def feasible(self) -> bool:
        """Whether there is a plan (optimal, or feasible within the time limit)."""
        return self.status in ("optimal", "feasible")

    def to_json(self) -> dict[str, Any]:
        """The plan JSON (docs/plan.md)."""
        return self.model_dump(mode="json")


def plan_schema() -> dict[str, Any]:
    """The JSON Schema of the plan JSON (what ``procure schema --plan`` prints)."""
    return Plan.model_json_schema(mode="serialization")


def plan_markdown() -> str:
    """docs/plan.md: every record of the plan with each field's type, presence and meaning."""
    lines = ["# The plan JSON",
             "",
             "What `procure solve --json` prints, `procure batch` stores and every presenter "
             "reads: the",
             "typed records of `solver/optimize/plan_model.py`, dumped as JSON. "
             "`procure schema --plan` prints",
             "the JSON Schema. Units are in the field names (`_usd` US dollars, `_gb` 1e9 "
             "bytes, `_ms`",
             "milliseconds, `_s` seconds, `_kw` kilowatts, `_hours`, `months`); fractions are "
             "0..1. A field",
             "present *when it applies* is left out otherwise (never written as `null`); "
             "every other",
             "field is always present, `null` only where its type says so. This file is "
             "generated from",
             "the records (`python -m solver.optimize.plan_model > docs/plan.md`); a test "
             "keeps it in step.",
             ""]
    seen: set[str] = set()
    order: list[type[BaseModel]] = []

    def visit(model: type[BaseModel]) -> None:
        if model.__name__ in seen:
            return
        seen.add(model.__name__)
        order.append(model)
        for field in model.model_fields.values():
            for inner in _records_in(field.annotation):
                visit(inner)

    visit(Plan)
    for model in order:
        doc = " ".join((model.__doc__ or "").split())
        lines += [f"## {model.__name__}", ""] + ([doc, ""] if doc else [])
        lines += ["| field | type | present | meaning |", "|---|---|---|---|"]
        for name, field in model.model_fields.items():
            omittable = field.exclude_if is not None
            shown = _type_name(field.annotation, drop_null=omittable).replace("|", "\\|")
            presence = "when it applies" if omittable else "always"
            lines.append(f"| `{name}` | {shown} | {presence} | {field.description or ''} |")
        lines.append("")
    return "\n".join(lines)


def _records_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in getattr(annotation, "__args__", ()) or ():
        found.extend(_records_in(arg))
    return found


def _type_name(annotation: Any, drop_null: bool = False) -> str:
    if isinstance(annotation, type):
        return annotation.__name__ if issubclass(annotation, BaseModel) else {
            "str": "string", "int": "integer", "float": "number", "bool": "boolean",
            "NoneType": "null"}.get(annotation.__name__, annotation.__name__)
    origin = getattr(annotation, "__origin__", None)
    args: tuple[Any, ...] = getattr(annotation, "__args__", ()) or ()
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"map of {_type_name(args[0])} to {_type_name(args[1])}"
    if args and origin is Literal:
        return " or ".join(repr(a) for a in args)
    if args:
        return " | ".join(_type_name(a) for a in args if not (drop_null and a is type(None)))
    return str(annotation)


if __name__ == "__main__":
    print(plan_markdown(), end="")
