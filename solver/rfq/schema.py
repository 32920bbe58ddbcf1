"""The RFQ (request for quotation) schema and its loaders: YAML, JSON and the CSV batch form.

Validation happens at the edge: :func:`load_rfq` returns a frozen
:class:`Rfq` or raises :class:`~solver.common.errors.InputError` whose problems name the file, the
field path (``workloads[1].deadline_hours``), the value and the reason. Ids are checked
against the catalog passed in the validation context, and an unknown model id lists the
nearest known ids. Only ``yaml.safe_load`` is used.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from solver.catalog.context import beyond_context_reason, hard_context_limit
from solver.catalog.data import (
    Catalog,
    Model,
    model_from_architecture,
    model_from_file,
    model_key,
)
from solver.catalog.hf_config import parse_hf_config
from solver.catalog.perf_factors import factors
from solver.common.errors import (
    InputError,
    Problem,
    nearest,
    problems_from_pydantic,
    short_path,
)
from solver.common.inputs import guard, parse, path_reason, read_text, reject_bool
from solver.rfq.periods import expand_demand_over_time

ID_PATTERN = r"^[A-Za-z0-9._-]+$"
WORKLOAD_KINDS = frozenset({"inference", "batch_inference", "lora", "qlora", "full_finetune",
                            "pretrain"})
MAX_FILE_BYTES = 2_000_000
MAX_CSV_BYTES = 50_000_000
MAX_CSV_CELL_CHARS = 100_000

Precision = Literal["bf16", "fp8", "int8", "int4", "fp4"]
TRAINING_PRECISIONS = {"lora": {"bf16", "fp8"}, "full_finetune": {"bf16", "fp8"},
                       "pretrain": {"bf16", "fp8"}, "qlora": {"int4"}}


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False,
                              str_strip_whitespace=True)


def _catalog(info: ValidationInfo) -> Catalog | None:
    """The catalog in the validation context, with the models this RFQ brings so far
    (inline architectures and config files, :meth:`Catalog.with_models`)."""
    context = info.context if isinstance(info.context, dict) else None
    catalog = context.get("catalog") if context else None
    if catalog is None or context is None:
        return catalog
    return catalog.with_models(context.get("models", {}).values())


def serving_engines(catalog: Catalog) -> tuple[str, list[str]]:
    """(default engine, the engines an RFQ may name) of the catalog: ``efficiency.yaml``
    ``serving.engines`` is the one list of serving engines (an engine is a factor set, not
    a name in the code; a set marked ``planning: false`` serves calibration only)."""
    serving = factors(catalog).serving
    return serving.default_engine, sorted(name for name, engine in serving.engines.items()
                                          if engine.planning)


def _remember(info: ValidationInfo, model: Model) -> None:
    """Keep ``model`` in the validation context so that later checks find it; one name
    cannot stand for two different architectures in one RFQ."""
    if not isinstance(info.context, dict):
        return
    known = info.context.setdefault("models", {})
    other = known.get(model.id)
    if other is not None and model_key(other) != model_key(model):
        raise ValueError(f"model {model.id!r} names two different architectures in this RFQ; "
                         "give each its own model name")
    known[model.id] = model


def _check_ids(values: list[str] | None, known: list[str], what: str) -> list[str] | None:
    if values is None:
        return None
    for value in values:
        if value not in known:
            hint = nearest(value, known)
            raise ValueError(f"unknown {what} id {value!r}"
                             + (f"; nearest known: {', '.join(hint)}" if hint else
                                f"; known: {', '.join(known)}"))
    if len(set(values)) != len(values):
        raise ValueError(f"duplicate {what} ids")
    return values


class Constraints(_Strict):
    """Optional limits on what may be bought."""

    vendor: str | None = Field(
        default=None, description="vendor profile id (procure catalog list); default 'open'")
    gpus: list[str] | None = Field(default=None, min_length=1)
    fabrics: list[str] | None = Field(default=None, min_length=1)
    max_nodes: int | None = Field(default=None, ge=1, le=10_000)
    max_gpus: int | None = Field(default=None, ge=1, le=100_000)
    max_power_kw: float | None = Field(default=None, gt=0, le=1_000_000)
    max_rack_units: int | None = Field(default=None, ge=1, le=1_000_000)
    datacenter_grade_only: bool = Field(
        default=False, description="exclude GPUs not licensed for datacenter use (GeForce)")
    mixed_vendors: bool = Field(
        default=False, description="allow more than one accelerator software stack (CUDA, "
        "ROCm) in one cluster")
    # training (issue 15): overrides the vendor profile's engineering policy
    coupled_training_fabric: Literal["any", "rdma"] | None = Field(
        default=None, description="training jobs that couple nodes: 'rdma' = InfiniBand or "
        "RoCE only, 'any' = Ethernet over TCP allowed too; default the vendor profile's")

    @field_validator("vendor")
    @classmethod
    def _vendor(cls, value: str | None, info: ValidationInfo) -> str | None:
        catalog = _catalog(info)
        if value is not None and catalog is not None:
            _check_ids([value], list(catalog.vendors), "vendor profile")
        return value

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        catalog = _catalog(info)
        return _check_ids(value, list(catalog.gpus), "GPU") if catalog else value

    @field_validator("fabrics")
    @classmethod
    def _fabrics(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        catalog = _catalog(info)
        return _check_ids(value, list(catalog.fabrics), "fabric") if catalog else value


DEFAULT_DEADLINE_HEADROOM = 0.1
"""Share of a job's deadline kept free by default (issue 28): jobs are planned to finish
within (1 - headroom) x deadline at expected goodput, as serving keeps utilisation headroom."""
DEFAULT_CONTINUOUS_LOAD_FACTOR = 0.8
"""Electrical practice: a circuit's continuous load stays at or below 80 % of its rating."""


DEFAULT_LAN_PORTS = 4
"""ASSUMPTION: a site's LAN takes one or two new servers (4 ports: data + BMC each), as an
integrator quotes them; a larger purchase brings its own top-of-rack switch."""


class Facility(_Strict):
    """The site the hardware goes into: cooling, power per rack, racks (issue 28)."""

    cooling: Literal["air", "liquid", "any"] = Field(
        default="air", description="cooling the site offers: air = no liquid-cooled system is "
        "bought (the default: direct liquid cooling needs facility work the buyer must "
        "confirm); liquid or any = liquid-cooled systems may be bought, with their cooling "
        "cost in the bill of materials")
    continuous_load_factor: float = Field(
        default=DEFAULT_CONTINUOUS_LOAD_FACTOR, gt=0, le=1, description="full-load power of "
        "the plan <= this x constraints.max_power_kw (and x max_kw_per_rack per rack); 0.8 "
        "is the usual continuous-load rule for electrical circuits")
    max_kw_per_rack: float | None = Field(
        default=None, gt=0, le=1_000, description="power one rack can deliver and cool, kW; "
        "a node must fit one rack's continuous load, and the racks needed are counted")
    racks: int | None = Field(
        default=None, ge=1, le=100_000, description="racks available; with max_kw_per_rack, "
        "the nodes must fit that many racks by power")
    lan_ports: int = Field(
        default=DEFAULT_LAN_PORTS, ge=0, le=100_000, description="free ports of the site's "
        "existing LAN the new nodes may take (each node takes the catalog's "
        "frontend_ports_per_node, 2: data + BMC); a plan within them quotes cables and no "
        "front-end switch, a larger one its own ToR switches for all its nodes; 0: the site "
        "has no free LAN ports (every plan quotes its front-end switch)")

    def power_limit_kw(self, max_power_kw: float | None) -> float | None:
        """The full-load power a plan may draw: continuous_load_factor x the smaller of
        max_power_kw and racks x max_kw_per_rack (None: no limit)."""
        limits = [v for v in (max_power_kw,
                              self.racks * self.max_kw_per_rack
                              if self.racks is not None and self.max_kw_per_rack is not None
                              else None) if v is not None]
        return min(limits) * self.continuous_load_factor if limits else None

    def rack_limit_kw(self) -> float | None:
        """Full-load power one rack may carry (continuous load), kW; None: no limit."""
        if self.max_kw_per_rack is None:
            return None
        return self.max_kw_per_rack * self.continuous_load_factor


SERVING_DEFAULT_PRECISIONS: tuple[Precision, ...] = ("bf16", "fp8")


class _WorkloadBase(_Strict):
    name: str = Field(pattern=ID_PATTERN, min_length=1, max_length=64)
    model: str = Field(description="a catalog model id or alias, or a path to a Hugging Face "
                       "config.json (relative to the RFQ file)")
    architecture: dict[str, Any] | None = Field(
        default=None, description="an inline Hugging Face config (then model names it)")
    precision: Precision | None = None
    precisions: list[Precision] | None = Field(
        default=None, min_length=1,
        description="precisions the buyer allows (serving default: bf16, fp8; 4-bit and int8 "
        "only when listed here or pinned by `precision`)")
    priority: float = Field(
        default=1.0, gt=0, le=1000, description="weight of this workload's served share under "
        "`objective: max_served` (a workload of priority 2 counts twice)")

    @model_validator(mode="after")
    def _precision_in_allowed(self) -> _WorkloadBase:
        if self.precisions is not None:
            if len(set(self.precisions)) != len(self.precisions):
                raise ValueError("precisions lists a precision twice")
            if self.precision is not None and self.precision not in self.precisions:
                raise ValueError(f"precision {self.precision!r} is not in precisions "
                                 f"{self.precisions}")
        return self

    def allowed_precisions(self) -> tuple[str, ...]:
        """What the buyer allows: ``precisions``, else the pinned ``precision``, else the
        kind's default (serving: bf16 and fp8; training: TRAINING_PRECISIONS)."""
        if self.precisions is not None:
            return tuple(self.precisions)
        if self.precision is not None:
            return (self.precision,)
        if isinstance(self, TrainingWorkload):
            return tuple(p for p in ("bf16", "fp8", "int4")
                         if p in TRAINING_PRECISIONS[self.kind])
        return SERVING_DEFAULT_PRECISIONS

    @model_validator(mode="before")
    @classmethod
    def _inline_architecture(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, dict) and data.get("architecture") is not None:
            arch = data["architecture"]
            if not isinstance(arch, dict):
                raise ValueError("architecture must be a mapping of Hugging Face config fields")
            data = dict(data)
            name = str(data.get("model") or f"{data.get('name', 'workload')}-model")
            model = _inline_model(name, arch)
            _remember(info, model)
            data["model"] = model.id
        return data

    @field_validator("model")
    @classmethod
    def _model(cls, value: str, info: ValidationInfo) -> str:
        catalog = _catalog(info)
        if catalog is None:
            return value
        if value.endswith(".json"):
            context = info.context or {}
            try:
                model = model_from_file(value, context.get("base_dir"),
                                        confine=bool(context.get("confine")))
            except InputError as exc:
                raise ValueError(_config_reason(exc, value)) from None
            _remember(info, model)
            return model.id
        if not catalog.has_model(value):
            _check_ids([value], catalog.model_ids(), "model")
        return value

    _user_model: Model | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _keep_user_model(self, info: ValidationInfo) -> _WorkloadBase:
        """The model an inline architecture or a config file defines, kept with the
        workload (what :meth:`Rfq.user_models` hands to :meth:`Catalog.with_models`)."""
        context = info.context if isinstance(info.context, dict) else {}
        known = context.get("models", {}).get(self.model)
        if known is not None:
            self._user_model = known
        elif self.architecture is not None:
            self._user_model = _inline_model(self.model, self.architecture)
        elif self.model.endswith(".json") and Path(self.model).is_absolute():
            self._user_model = model_from_file(self.model)
        return self

    @property
    def user_model(self) -> Model | None:
        """The model this workload defines itself (inline architecture or config file)."""
        return self._user_model


def _config_reason(exc: InputError, ref: str) -> str:
    """The problems of the model config file ``ref`` as one reason (the file is not named
    again when it is ``ref`` itself, which the message shows as the value)."""
    return "; ".join(("" if p.file == ref and not p.field else
                      f"{short_path(p.file)}: {p.field or 'file'}"
                      + (f" = {p.value!r}" if p.value is not None else "") + ": ") + p.reason
                     for p in exc.problems)


def _inline_model(name: str, arch: dict[str, Any]) -> Model:
    """The model of an inline ``architecture:`` block, named ``name``."""
    try:
        parsed = parse_hf_config(arch, "architecture")
    except InputError as exc:
        raise ValueError("; ".join(f"architecture.{p.field}"
                                   + (f" = {p.value!r}" if p.value is not None else "")
                                   + f": {p.reason}" for p in exc.problems)) from None
    try:
        return model_from_architecture(parsed, name, "inline architecture in the RFQ")
    except InputError as exc:
        raise ValueError(_config_reason(exc, name)) from None


SloPercentile = Literal[50, 90, 95, 99]
Redundancy = Literal["none", "n+1"]


class _ServingBase(_WorkloadBase):
    input_tokens: int = Field(ge=1, le=2_000_000)
    output_tokens: int = Field(ge=1, le=200_000)
    engine: str | None = Field(
        default=None, pattern=ID_PATTERN, max_length=64,
        description="serving engine whose measured factors the physics uses: one of the "
        "catalog's efficiency.yaml serving.engines; default its serving.default_engine")
    expert_parallel: bool = Field(
        default=True, description="MoE models: the solver may lay a replica out with "
        "expert parallelism and attention data parallelism (experts sharded over the "
        "replica's GPUs, attention replicated per rank with its own KV cache); false keeps "
        "experts split by TP (an engine or deployment without EP)")

    @model_validator(mode="before")
    @classmethod
    def _default_engine(cls, data: Any, info: ValidationInfo) -> Any:
        """No engine named: the catalog's default engine (efficiency.yaml)."""
        catalog = _catalog(info)
        if isinstance(data, dict) and data.get("engine") is None and catalog is not None:
            data = {**data, "engine": serving_engines(catalog)[0]}
        return data

    @field_validator("engine")
    @classmethod
    def _engine(cls, value: str | None, info: ValidationInfo) -> str | None:
        catalog = _catalog(info)
        if value is not None and catalog is not None:
            _check_ids([value], serving_engines(catalog)[1], "serving engine")
        return value

    @model_validator(mode="after")
    def _context(self, info: ValidationInfo) -> _ServingBase:
        catalog = _catalog(info)
        if catalog is not None and catalog.has_model(self.model):
            limit = catalog.model(self.model).max_context
            if self.input_tokens + self.output_tokens > limit:
                raise ValueError(
                    f"input_tokens + output_tokens = {self.input_tokens + self.output_tokens} "
                    f"exceeds {self.model}'s context window of {limit} tokens")
        return self


class DemandPeriod(_Strict):
    """Serving demand during one period (demand over time, solver/optimize/schedule.py)."""

    months: float = Field(gt=0, le=180)
    concurrency: int | None = Field(default=None, ge=1, le=1_000_000)
    qps: float | None = Field(default=None, gt=0, le=10_000_000)

    @model_validator(mode="after")
    def _demand(self) -> DemandPeriod:
        if self.concurrency is None and self.qps is None:
            raise ValueError("a period needs concurrency or qps (or both)")
        return self


class DailyProfile(_Strict):
    """Busy and quiet hours of an online service: full demand for ``peak_hours`` a day,
    ``off_peak_load`` of it the rest of the day."""

    peak_hours: float = Field(gt=0, le=24, description="hours a day at full demand")
    off_peak_load: float = Field(ge=0, le=1, description="share of the demand in the other "
                                 "hours (0.2 = a fifth)")


class InferenceWorkload(_ServingBase):
    """Online serving: concurrent requests and/or request rate within latency SLOs."""

    kind: Literal["inference"]
    concurrency: int | None = Field(default=None, ge=1, le=1_000_000)
    qps: float | None = Field(default=None, gt=0, le=10_000_000)
    ttft_ms: float | None = Field(default=None, gt=0, le=3_600_000)
    tpot_ms: float | None = Field(default=None, gt=0, le=600_000)
    slo_percentile: SloPercentile = Field(
        default=90, description="percentile of requests the TTFT/TPOT targets hold for")
    target_utilization: float = Field(
        default=0.8, ge=0.05, le=1, description="planned load as a share of the capacity "
        "bought (capacity bought = demand / target_utilization; at least 0.05: below, the "
        "capacity bought is more than 20 times the demand)")
    redundancy: Redundancy = Field(
        default="none", description="n+1: the demand is still met with any one node down")
    periods: list[DemandPeriod] | None = Field(
        default=None, min_length=1, max_length=60, description="demand over time, in order "
        "from month 0; concurrency/qps above are then the peak (solver/optimize/schedule.py)")
    growth_per_year: float | None = Field(
        default=None, gt=-0.9, le=10, description="yearly demand growth (0.5 = +50 %) from "
        "the concurrency/qps above; expanded into yearly periods")
    daily_profile: DailyProfile | None = Field(
        default=None, description="busy and quiet hours: GPUs the service leaves idle in its "
        "quiet hours run recurring jobs whose window fits there")
    disaggregated: bool = Field(
        default=False, description="true: the solver may serve it disaggregated, a prefill "
        "pool and a decode pool of the same GPUs, the prompt's KV cache moved between them "
        "(docs/expert-parallel.md; measured pools check that estimate for MoE models with "
        "wide expert parallelism only, and the orchestration is not priced); false "
        "(default): every replica aggregated")

    @model_validator(mode="after")
    def _demand(self) -> InferenceWorkload:
        if self.concurrency is None and self.qps is None:
            raise ValueError("inference needs concurrency or qps (or both)")
        return self


Recurrence = Literal["daily", "weekly", "monthly"]
RUNS_PER_YEAR: dict[str, int] = {"daily": 365, "weekly": 52, "monthly": 12}
HOURS_BETWEEN_RUNS: dict[str, float] = {"daily": 24.0, "weekly": 168.0, "monthly": 730.0}


class _Recurring(_Strict):
    """A job that runs once (the default) or again every day, week or month: each run does
    the whole job (its ``requests`` or ``dataset_tokens``) within ``window_hours``."""

    deadline_hours: float = Field(gt=0, le=100_000)
    deadline_headroom: float | None = Field(
        default=None, ge=0, le=0.9, description="share of the deadline (each run's window) "
        "kept free: planned to finish within (1 - this) x deadline_hours at expected "
        "goodput; default the RFQ's deadline_headroom")
    _rfq_headroom: float = PrivateAttr(default=DEFAULT_DEADLINE_HEADROOM)

    @property
    def headroom(self) -> float:
        """The share of the deadline kept free: the workload's own, else the RFQ's."""
        return self._rfq_headroom if self.deadline_headroom is None else self.deadline_headroom

    @property
    def planned_hours(self) -> float:
        """The hours the plan must finish within (at expected goodput for training):
        (1 - headroom) x deadline_hours."""
        return planned_hours(self.deadline_hours, self.headroom)

    recurrence: Recurrence | None = Field(
        default=None, description="the job runs again every day, week or month over the "
        "horizon; each run is costed (rented per run, or on owned GPUs)")
    window_hours: float | None = Field(
        default=None, gt=0, le=730, description="hours each run of a recurring job must "
        "finish in (its deadline; default deadline_hours)")

    @model_validator(mode="before")
    @classmethod
    def _window_is_deadline(cls, data: Any) -> Any:
        """A recurring job's window is its deadline: ``window_hours`` alone sets
        ``deadline_hours``; both must agree."""
        if isinstance(data, dict) and data.get("window_hours") is not None:
            window = data["window_hours"]
            deadline = data.get("deadline_hours")
            if deadline is None:
                data = {**data, "deadline_hours": window}
            elif deadline != window:
                raise ValueError(f"window_hours {window} and deadline_hours {deadline} differ: "
                                 "a recurring job's window is its deadline (give one)")
        return data

    @model_validator(mode="after")
    def _window_fits(self) -> _Recurring:
        if self.window_hours is not None and self.recurrence is None:
            raise ValueError("window_hours needs a recurrence (daily, weekly or monthly)")
        if self.recurrence is not None:
            gap = HOURS_BETWEEN_RUNS[self.recurrence]
            if self.deadline_hours > gap:
                raise ValueError(f"a {self.recurrence} run must finish before the next one: "
                                 f"window/deadline {self.deadline_hours:g} h > {gap:g} h")
        return self

    def runs(self, horizon_years: float) -> int:
        """How many times the job runs over the horizon (1 when it does not recur)."""
        if self.recurrence is None:
            return 1
        return max(1, int(RUNS_PER_YEAR[self.recurrence] * horizon_years + 1e-9))


class BatchInferenceWorkload(_ServingBase, _Recurring):
    """Offline inference: a number of requests to finish by a deadline (once, or every
    day, week or month)."""

    kind: Literal["batch_inference"]
    requests: int = Field(ge=1, le=10**12)


class TrainingWorkload(_WorkloadBase, _Recurring):
    """One training job (LoRA, QLoRA, full fine-tune or pretraining) with a deadline (run
    once, or every day, week or month)."""

    kind: Literal["lora", "qlora", "full_finetune", "pretrain"]
    dataset_tokens: int = Field(ge=1, le=10**14)
    epochs: float = Field(default=1, gt=0, le=1000)
    seq_len: int = Field(default=4096, ge=16, le=1_000_000, validate_default=True)

    @model_validator(mode="after")
    def _training(self, info: ValidationInfo) -> TrainingWorkload:
        allowed = TRAINING_PRECISIONS[self.kind]
        bad = [p for p in self.precisions or () if p not in allowed]
        if bad:
            raise ValueError(
                f"precisions {bad} are not valid for {self.kind}: use "
                f"{' or '.join(sorted(allowed))}")
        if self.precision is not None and self.precision not in allowed:
            raise ValueError(
                f"precision {self.precision!r} is not valid for {self.kind}: use "
                f"{' or '.join(sorted(allowed))} (4-bit weights are not usable on the training "
                "gradient path; only QLoRA's frozen base is 4-bit)")
        return self

    @field_validator("seq_len")
    @classmethod
    def _seq_len_within_reach(cls, value: int, info: ValidationInfo) -> int:
        """Beyond the model's native context: planned with RoPE scaling and a warning;
        refused only past the hard limit (solver/catalog/context.py), as this field."""
        catalog = _catalog(info)
        model_id = info.data.get("model")
        if catalog is not None and isinstance(model_id, str) and catalog.has_model(model_id):
            model = catalog.model(model_id)
            if value > hard_context_limit(model):
                raise ValueError(beyond_context_reason(model_id, model, value))
        return value


def planned_hours(deadline_hours: float, headroom: float) -> float:
    """(1 - headroom) x deadline_hours."""
    return deadline_hours * (1.0 - headroom)


ServingWorkload = InferenceWorkload | BatchInferenceWorkload
AnyWorkload = InferenceWorkload | BatchInferenceWorkload | TrainingWorkload
"""One RFQ workload, narrowed by its ``kind`` (a tagged union: ``spec.kind == "inference"``
tells a type checker which fields it has)."""
WorkloadSpec = Annotated[AnyWorkload, Field(discriminator="kind")]


class Rfq(_Strict):
    """A customer's request for quotation: workloads that run at once, and limits."""

    id: str = Field(pattern=ID_PATTERN, min_length=1, max_length=128)
    customer: str | None = Field(default=None, max_length=500)
    horizon_years: float = Field(default=3, gt=0, le=15)
    objective: Literal["tco", "capex", "max_served"] = Field(
        default="tco", description="tco or capex: the cheapest plan that serves everything; "
        "max_served: the plan that serves the largest (priority-weighted) share of demand "
        "within budget_usd, at the lowest TCO among those")
    rental: Literal["allow", "forbid", "only"] = Field(
        default="forbid", description="rented capacity (catalog rental.csv): allow = buy or "
        "rent, whichever is cheaper; forbid = buy only (the default: a first-version RFQ "
        "keeps its plan); only = rent everything")
    budget_usd: float | None = Field(default=None, gt=0, le=1e11)
    deadline_headroom: float = Field(
        default=DEFAULT_DEADLINE_HEADROOM, ge=0, le=0.9, description="share of every job's "
        "deadline (batch inference and training) kept free: jobs are planned to finish "
        "within (1 - this) x deadline_hours at expected goodput; a workload's own "
        "deadline_headroom overrides it")
    constraints: Constraints = Constraints()
    facility: Facility = Facility()
    workloads: list[WorkloadSpec] = Field(min_length=1, max_length=100)

    @model_validator(mode="before")
    @classmethod
    def _demand_over_time(cls, data: Any) -> Any:
        return expand_demand_over_time(data)

    @model_validator(mode="after")
    def _max_served_needs_budget(self) -> Rfq:
        if self.objective == "max_served" and self.budget_usd is None:
            raise ValueError("objective max_served needs budget_usd (the money to serve the "
                             "most demand with)")
        return self

    @model_validator(mode="after")
    def _job_headroom(self) -> Rfq:
        """Each job without its own ``deadline_headroom`` plans with the RFQ's (kept on the
        job, not in its fields: an RFQ dumped and re-read still takes a changed RFQ value)."""
        for workload in self.workloads:
            if isinstance(workload, BatchInferenceWorkload | TrainingWorkload):
                workload._rfq_headroom = self.deadline_headroom
        return self

    def user_models(self) -> tuple[Model, ...]:
        """The models the RFQ defines itself (inline architectures, config files)."""
        return tuple(w.user_model for w in self.workloads if w.user_model is not None)

    def catalog(self, catalog: Catalog) -> Catalog:
        """``catalog`` with this RFQ's own models (:meth:`Catalog.with_models`): the catalog
        every stage that solves or presents this RFQ reads. The same catalog object when the
        RFQ defines no model or it was extended already."""
        return catalog.with_models(self.user_models())

    @field_validator("workloads")
    @classmethod
    def _unique_names(cls, workloads: list[Any]) -> list[Any]:
        seen: set[str] = set()
        for workload in workloads:
            if workload.name in seen:
                raise ValueError(f"workload name {workload.name!r} is used twice")
            seen.add(workload.name)
        return workloads


def validate_rfq(data: Any, catalog: Catalog, source: str = "<rfq>",
                 base_dir: str | Path | None = None, *, confine: bool = False) -> Rfq:
    """Validate already-parsed RFQ data against the schema and the catalog. Model config
    paths are relative to ``base_dir`` (default: the folder of ``source`` when that is a
    file, else the working directory).

    ``confine`` (an RFQ someone uploaded to a server): a model config path must name a file
    inside ``base_dir`` (uploaded with the RFQ; None: no file at all) - never an absolute or
    parent path, and no message shows a server path or whether it exists
    (:func:`solver.catalog.data.model_from_file`)."""
    if base_dir is None and not confine:
        base_dir = Path(source).parent if path_reason(source) is None else Path.cwd()
    if not isinstance(data, dict):
        raise InputError([Problem(source, "", type(data).__name__,
                                  "an RFQ must be a mapping of keys (id, workloads, ...)")])
    _check_kinds(data, source)
    _check_bools(data, source)
    with guard(source, "validate"):
        try:
            return Rfq.model_validate(data, context={"catalog": catalog, "base_dir": base_dir,
                                                     "confine": confine})
        except ValidationError as exc:
            raise InputError(problems_from_pydantic(exc, source, tags=WORKLOAD_KINDS)) from None


def _check_bools(data: dict, source: str) -> None:
    """``true``/``false`` where a number belongs is an error (pydantic's lax mode reads it
    as 1/0: ``concurrency: true`` would quietly mean one user)."""
    problems: list[Problem] = []

    def check(values: Any, model_cls: Any, path: str) -> None:
        if not isinstance(values, dict):
            return
        for key, value in values.items():
            if isinstance(key, str) and key in model_cls.model_fields:
                try:
                    reject_bool(model_cls, value, key)
                except ValueError as exc:
                    problems.append(Problem(source, f"{path}{key}", value, str(exc)))

    check(data, Rfq, "")
    check(data.get("constraints"), Constraints, "constraints.")
    kinds = {"inference": InferenceWorkload, "batch_inference": BatchInferenceWorkload}
    workloads = data.get("workloads")
    for index, workload in enumerate(workloads if isinstance(workloads, list) else []):
        if isinstance(workload, dict):
            check(workload, kinds.get(str(workload.get("kind")), TrainingWorkload),
                  f"workloads[{index}].")
    if problems:
        raise InputError(problems)


def _check_kinds(data: dict, source: str) -> None:
    """Give an unknown or missing workload kind a clear error instead of a union dump."""
    workloads = data.get("workloads")
    if not isinstance(workloads, list):
        return
    problems = []
    for index, workload in enumerate(workloads):
        if isinstance(workload, dict):
            kind = workload.get("kind")
            valid = sorted(WORKLOAD_KINDS)
            if kind not in valid:
                reason = ("required field missing" if kind is None else
                          f"unknown workload kind; expected one of {', '.join(valid)}")
                problems.append(Problem(source, f"workloads[{index}].kind", kind, reason))
    if problems:
        raise InputError(problems)


def parse_text(text: str, source: str, suffix: str) -> Any:
    """Parse YAML or JSON text, bounded and strict (:mod:`solver.common.inputs`); errors name line
    and column."""
    with guard(source, "parse"):
        return parse(text, source, suffix)


def load_rfq(path: str | Path, catalog: Catalog, *, confine: bool = False) -> Rfq:
    """Load and validate one RFQ file (.yaml, .yml or .json); model config paths are
    relative to its folder (``confine``: and must stay in it, see :func:`validate_rfq`)."""
    path = Path(path)
    source = str(path)
    reason = path_reason(path)
    if reason is not None:  # a link loop, a pipe, a device, /proc, a 6,000-character path
        raise InputError([Problem(source, "", None, reason)])
    if path.suffix.lower() not in (".yaml", ".yml", ".json"):
        raise InputError([Problem(source, "", path.suffix,
                                  "unsupported file type: use .yaml, .yml or .json "
                                  "(CSV batches go to `procure batch`)")])
    with guard(source):
        text = read_text(path, source, MAX_FILE_BYTES)
        data = parse_text(text, source, path.suffix.lower())
        return validate_rfq(data, catalog, source, path.parent, confine=confine)


# --- the CSV batch form -------------------------------------------------------------

RFQ_KEYS = ("id", "customer", "horizon_years", "objective", "budget_usd")
LIST_KEYS = ("constraints.gpus", "constraints.fabrics")


def _cell(value: str) -> Any:
    value = value.strip()
    if value == "":
        return None
    try:
        number = float(value)
    except ValueError:
        return value
    if number.is_integer() and "." not in value and "e" not in value.lower():
        return int(number)
    return number


def _set(target: dict, dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    target[keys[-1]] = value


def iter_csv_rfqs(path: str | Path, catalog: Catalog, *, confine: bool = False
                  ) -> Iterator[tuple[str, Rfq | InputError]]:
    """Yield ``(rfq_id, Rfq or InputError)`` for each RFQ in a CSV batch (rows grouped by id).

    RFQ-level columns (``id``, ``customer``, ``constraints.*``, ...) must agree across the
    rows of one RFQ; errors name the CSV row numbers (header = row 1). Model config paths
    are relative to the CSV's folder (``confine``: and must stay in it, see
    :func:`validate_rfq`).
    """
    path = Path(path)
    source = str(path)
    with guard(source):
        groups, bad_rows = _csv_groups(read_text(path, source, MAX_CSV_BYTES), source)
    for row_number in bad_rows:
        yield (f"row-{row_number}", InputError([Problem(source, f"row {row_number}.id", None,
                                                        "required field missing")]))
    for rfq_id, rows in groups.items():
        try:
            with guard(source, "validate"):
                result: Rfq | InputError = _rfq_from_rows(rfq_id, rows, source, catalog,
                                                          confine)
        except InputError as exc:
            result = exc
        yield rfq_id, result


def _csv_groups(text: str, source: str
                ) -> tuple[dict[str, list[tuple[int, dict[str, str]]]], list[int]]:
    """The rows of a CSV batch grouped by RFQ id, and the rows without an id."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [cell.strip() for cell in next(reader, [])]
        if "id" not in header:
            raise InputError([Problem(source, "header", header or None,
                                      "the CSV needs a header row with an 'id' column")])
        repeated = sorted({cell for cell in header if header.count(cell) > 1})
        if repeated or "" in header:
            raise InputError([Problem(source, "header", repeated or header,
                                      "every column needs its own, non-empty name")])
        groups: dict[str, list[tuple[int, dict[str, str]]]] = {}
        bad_rows: list[int] = []
        for cells in reader:
            row_number = reader.line_num
            if not any(cell.strip() for cell in cells):
                continue
            if len(cells) > len(header):
                raise InputError([Problem(source, f"row {row_number}", None,
                                          "more cells than header columns")])
            long = [c for c, cell in zip(header, cells, strict=False)
                    if len(cell) > MAX_CSV_CELL_CHARS]
            if long:
                raise InputError([Problem(source, f"row {row_number}.{long[0]}", None,
                                          f"cell longer than {MAX_CSV_CELL_CHARS:,} characters")])
            row = dict(zip(header, [*cells, *[""] * (len(header) - len(cells))], strict=True))
            rfq_id = row["id"].strip()
            if not rfq_id:
                bad_rows.append(row_number)
                continue
            groups.setdefault(rfq_id, []).append((row_number, row))
    except csv.Error as exc:
        raise InputError([Problem(source, f"row {reader.line_num}", None,
                                  f"CSV error: {exc}")]) from None
    return groups, bad_rows


def _rfq_from_rows(rfq_id: str, rows: list[tuple[int, dict[str, str]]], source: str,
                   catalog: Catalog, confine: bool = False) -> Rfq | InputError:
    data: dict[str, Any] = {}
    workloads: list[dict[str, Any]] = []
    row_numbers = [number for number, _ in rows]
    first_row = rows[0][1]
    for column, raw in first_row.items():
        is_rfq_key = column in RFQ_KEYS or column.startswith("constraints.")
        if not is_rfq_key:
            continue
        for number, row in rows[1:]:
            if (row.get(column) or "").strip() != (raw or "").strip():
                return InputError([Problem(source, f"row {number}.{column}", row.get(column),
                                           f"differs from row {row_numbers[0]} "
                                           f"({raw!r}) of the same RFQ {rfq_id!r}")])
        value = _cell(raw or "")
        if value is None:
            continue
        if column in LIST_KEYS:
            value = [part.strip() for part in str(value).replace("|", ";").split(";")
                     if part.strip()]
        elif column in ("id", "customer"):
            value = (raw or "").strip()
        _set(data, column, value)
    for _, row in rows:
        workload: dict[str, Any] = {}
        for column, raw in row.items():
            if column in RFQ_KEYS or column.startswith("constraints."):
                continue
            value = _cell(raw or "")
            if value is not None:
                if column in ("name", "model"):
                    value = (raw or "").strip()
                elif column == "precisions":
                    value = [part.strip() for part in str(value).replace("|", ";").split(";")
                             if part.strip()]
                _set(workload, column, value)
        workloads.append(workload)
    data["workloads"] = workloads
    try:
        return validate_rfq(data, catalog, source, Path(source).parent, confine=confine)
    except InputError as exc:
        problems = exc.problems
    located = []
    for problem in problems:
        field = problem.field
        if field.startswith("workloads["):
            index = int(field[len("workloads["):field.index("]")])
            field = f"row {row_numbers[index]} ({field})"
        else:
            field = f"rows {', '.join(map(str, row_numbers))} ({field})"
        located.append(Problem(source, field, problem.value, problem.reason))
    return InputError(located)
