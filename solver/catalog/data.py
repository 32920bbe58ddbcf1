"""The hardware catalog: GPUs, servers, fabrics, models, cost model, vendor profiles.

The catalog is data (``catalog/*.yaml``) with a schema (the frozen pydantic models below).
Every numeric field carries its unit in its name, and every entry carries ``source`` and
``as_of``. :func:`load_catalog` reads the built-in catalog once; ``--catalog DIR`` points
at a user's catalog, which may be a *partial overlay* on top of the built-in one: any of the
built-in files, entries merged by ``id`` field by field, plus an optional ``prices.csv``
(``id,price_usd,as_of,source``) with today's quotes for GPUs, servers or fabrics.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from solver.catalog.architecture import Architecture
from solver.catalog.hf_config import load_hf_config
from solver.catalog.rental_offers import RentalOffer
from solver.common.errors import InputError, Problem, problems_from_pydantic
from solver.common.inputs import path_reason, path_within, reject_bool
from solver.common.memo import Memo

MAX_PRICE_USD = 100_000_000.0
"""The most one catalog item (a GPU, a server, a NIC, a switch port, a cable) may cost:
far above any real price, far below what the MIP can still scale (1e30 made HiGHS fail)."""
MAX_CATALOG_NUMBER = 1e9
"""The largest figure any catalog field or cost parameter may hold (the largest real one is
a 10 M-token context window): a number beyond it is a typo the solver cannot scale."""

Precision = Literal["bf16", "fp8", "int8", "int4", "fp4"]
PRECISIONS: tuple[Precision, ...] = ("bf16", "fp8", "int8", "int4", "fp4")
COMPUTE_PRECISIONS = ("bf16", "fp8", "int8", "fp4")
"""Precisions tensor cores compute in (int4 weights are computed in a wider precision)."""


def one_of(allowed: tuple[str, ...]) -> Callable[[str], str]:
    """A validator: the value is one of ``allowed``."""
    def check(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"unknown precision {value!r}; use one of {', '.join(allowed)}")
        return value
    return check


PrecisionKey = Annotated[str, AfterValidator(one_of(PRECISIONS))]
"""A weight precision as a table key: checked like :data:`Precision`, typed ``str`` so that
a layout's precision (any string the RFQ and CLI checked) looks it up."""
ComputeKey = Annotated[str, AfterValidator(one_of(COMPUTE_PRECISIONS))]
"""A compute precision as a table key (see :data:`PrecisionKey`)."""
FormFactor = Literal["pcie", "sxm", "oam", "superchip"]
PriceType = Literal["msrp", "street", "quote", "derived"]
VENDOR_STACKS = {"nvidia": "cuda", "amd": "rocm"}


class _Entry(BaseModel):
    """Base of every catalog entry: immutable, strict keys, sourced."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    source: str = Field(min_length=3)
    as_of: str = Field(min_length=4, description="date the figures were read, e.g. 2026-08")
    note: str = ""

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        return reject_bool(cls, value, info.field_name)


class Gpu(_Entry):
    """One GPU SKU. Tensor throughput is *dense* (no 2:4 sparsity); a precision missing
    from ``dense_tflops`` is unsupported on the tensor cores (never 0)."""

    name: str
    family: str = Field(description="efficiency class, e.g. blackwell-pcie, hopper-sxm")
    memory_gb: float = Field(gt=0, description="vendor GB (1e9 bytes)")
    mem_bw_gbs: float = Field(gt=0)
    dense_tflops: dict[ComputeKey, float]
    fp32_accumulate_tflops: dict[ComputeKey, float] = Field(
        default_factory=dict, description="dense tensor throughput with FP32 accumulate where "
        "it is below dense_tflops (GeForce cards run BF16/FP16/FP8 with FP32 accumulate at "
        "half rate); training uses it (its GEMMs accumulate in FP32), serving keeps "
        "dense_tflops, the peak its fitted factors were fitted against")
    tdp_w: float = Field(gt=0)
    form_factor: FormFactor
    pcie_gen: int = Field(ge=3, le=6)
    intra_node_link: Literal["pcie", "nvlink", "infinity-fabric"]
    intra_node_gbs: float = Field(
        gt=0, description="practical GPU-to-GPU all-reduce bus bandwidth inside one node, GB/s"
    )
    intra_node_latency_us: float = Field(gt=0)
    price_usd: float = Field(gt=0, le=MAX_PRICE_USD)
    price_as_of: str
    price_source: str = ""
    price_type: PriceType = Field(
        default="quote", description="msrp | street | quote | derived (how price_usd was read)")
    vendor: Literal["nvidia", "amd"] = Field(
        default="nvidia", description="accelerator vendor; its software stack is VENDOR_STACKS")
    datacenter_use: bool = Field(
        default=True, description="licensed and supported for datacenter deployment")
    datacenter_use_source: str = ""
    ecc: bool = Field(default=True, description="ECC on device memory available")
    p2p: bool = Field(
        default=True, description="GPU-to-GPU peer-to-peer on stock drivers (False: TP/PP "
        "traffic is staged through host memory, see efficiency.yaml host_staged_p2p)")
    width_slots: float | None = Field(
        default=None, gt=0, le=8,
        description="PCIe card width in expansion slots (None for SXM/OAM modules)")
    liquid_cooled: bool = Field(default=False, description="needs direct liquid cooling")

    @property
    def stack(self) -> str:
        """The accelerator software stack (cuda, rocm) a node of this GPU runs."""
        return VENDOR_STACKS[self.vendor]

    def training_tflops(self, compute: str) -> float:
        """Dense tensor TFLOPS a training GEMM of this precision runs at: the FP32-accumulate
        rate where the card has a lower one, else ``dense_tflops``."""
        return self.fp32_accumulate_tflops.get(compute, self.dense_tflops[compute])

    @model_validator(mode="after")
    def _positive_throughput(self) -> Gpu:
        for precision, tflops in self.dense_tflops.items():
            if not tflops > 0:
                raise ValueError(f"dense_tflops.{precision} must be > 0 (omit it if unsupported)")
        if "bf16" not in self.dense_tflops:
            raise ValueError("dense_tflops.bf16 is required")
        for precision, tflops in self.fp32_accumulate_tflops.items():
            dense = self.dense_tflops.get(precision)
            if dense is None or not 0 < tflops <= dense:
                raise ValueError(f"fp32_accumulate_tflops.{precision} = {tflops} must be > 0 "
                                 f"and at most dense_tflops.{precision} ({dense})")
        return self


class Server(_Entry):
    """A chassis that GPUs go into, priced without GPUs."""

    name: str
    gpu_slots: int = Field(ge=1, le=72, description="GPUs in one node; a rack-scale "
                           "system (NVL72) is one node whose GPUs share one NVLink domain")
    form_factors: tuple[FormFactor, ...]
    price_usd: float = Field(ge=0, le=MAX_PRICE_USD)
    base_power_w: float = Field(ge=0, description="CPUs, fans, NICs, drives at load, without GPUs")
    rack_units: int = Field(ge=1)
    nic_slots: int = Field(ge=0, description="slots for fabric NICs")
    fabric_nics_per_node: int = Field(
        ge=1, description="fabric NICs fitted when the node joins a fabric"
    )
    max_width_slots: float | None = Field(
        default=None, gt=0, description="widest PCIe card each GPU slot takes at full "
        "population (None: no limit, e.g. SXM/OAM baseboards)")
    max_power_w: float | None = Field(
        default=None, gt=0, description="node power limit, W: PSU capacity with N+1 "
        "redundancy or the vendor's system maximum (GPUs at TDP + base_power_w must fit)")
    liquid_cooled: bool = Field(default=False, description="direct liquid cooling fitted")
    rack_cooling_included: bool = Field(
        default=False, description="a whole-rack system whose price includes the rack's "
        "liquid-cooling manifold and quick disconnects (an NVL72 rack): the site's cooling "
        "line leaves costs.yaml liquid_cooling_in_rack_usd_per_kw out")
    hosts: int = Field(
        default=1, ge=1, description="operating-system hosts in one node, each with an equal "
        "share of its GPUs (an NVL72 rack: 18 compute trays of 4 GPUs); operations and "
        "engineering are paid per host, and a group over more than one host is coupled")
    gpus: tuple[str, ...] | None = Field(
        default=None, description="GPU ids this chassis takes (None: any of its form factors)")
    price_type: PriceType = "quote"
    price_as_of: str | None = Field(
        default=None, description="date of the price basis (None: the entry's as_of)")
    price_source: str = Field(
        default="", description="where the price was read ('': the entry's source; a "
        "price overlay or a price entered on the dashboard sets it)")

    def takes(self, gpu: Gpu) -> bool:
        """Whether this chassis physically takes this GPU (form factor, list, width, cooling)."""
        if gpu.form_factor not in self.form_factors:
            return False
        if self.gpus is not None and gpu.id not in self.gpus:
            return False
        if (self.max_width_slots is not None and gpu.width_slots is not None
                and gpu.width_slots > self.max_width_slots):
            return False
        return self.liquid_cooled or not gpu.liquid_cooled

    def power_fits(self, gpu: Gpu, count: int) -> bool:
        """Whether ``count`` GPUs at TDP plus the base power fit the node's power limit."""
        return self.max_power_w is None or count * gpu.tdp_w + self.base_power_w \
            <= self.max_power_w

    @model_validator(mode="after")
    def _baseboard_power_of_two(self) -> Server:
        # SXM/OAM baseboards come fully populated; the packing argument of solver/optimize/mip.py
        # (and the placement it proves) needs every node size to be a power of two
        slots = self.gpu_slots
        if slots % self.hosts:
            raise ValueError(f"gpu_slots = {slots} is not a multiple of hosts = {self.hosts}")
        if set(self.form_factors) & {"sxm", "oam"} and slots & (slots - 1):
            raise ValueError(f"gpu_slots = {slots}: an SXM/OAM baseboard must hold a power "
                             "of two GPUs (packing proof in solver/optimize/mip.py)")
        return self


class Fabric(_Entry):
    """An inter-node fabric. ``none`` is the absence of one (independent nodes)."""

    name: str
    family: Literal["none", "ethernet", "infiniband"]
    effective_gbs: float = Field(ge=0, description="practical GB/s per NIC, one direction")
    latency_us: float = Field(ge=0)
    nic_price_usd: float = Field(ge=0, le=MAX_PRICE_USD, description="per NIC")
    nic_price_type: PriceType | None = Field(
        default=None, description="how nic_price_usd was read (None: the catalog's default; "
        "a price overlay or a price entered on the dashboard sets quote)")
    nic_price_as_of: str | None = Field(
        default=None, description="date of nic_price_usd (None: the entry's as_of)")
    nic_price_source: str = Field(
        default="", description="where nic_price_usd was read ('': the entry's source)")
    switch_port_price_usd: float = Field(ge=0, le=MAX_PRICE_USD,
                                         description="per switch port (switch price / ports)")
    ports_per_switch: int = Field(ge=0)
    cable_price_usd: float = Field(
        default=0.0, ge=0, le=MAX_PRICE_USD, description="per link (node-to-leaf or leaf-to-spine): a DAC/AOC "
        "cable or a cable plus its pair of optics")
    transport: Literal["rdma", "tcp"] | None = Field(
        default=None, description="how NCCL moves data on it: rdma (InfiniBand verbs, RoCE) "
        "or tcp (sockets); unset = rdma for InfiniBand, tcp for Ethernet")

    @property
    def rdma(self) -> bool:
        """Whether collectives run over RDMA (InfiniBand or RoCE) rather than TCP sockets."""
        if self.transport is not None:
            return self.transport == "rdma"
        return self.family == "infiniband"

    @model_validator(mode="after")
    def _switchable(self) -> Fabric:
        if self.family != "none" and self.ports_per_switch < 2:
            raise ValueError("ports_per_switch must be >= 2 for a fabric with switches")
        return self

    @property
    def switch_price_usd(self) -> float:
        """One switch of this fabric: ``switch_port_price_usd`` x ``ports_per_switch``."""
        return self.switch_port_price_usd * self.ports_per_switch


class Model(_Entry):
    """A model architecture (what memory and FLOPs follow from).

    An entry with ``config`` (a Hugging Face ``config.json``, relative to the catalog file
    that names it) takes every architecture figure from that file; the summary fields below
    are then derived from it (explicit values in the entry win, e.g. ``max_context``)."""

    config: str | None = Field(default=None, description="Hugging Face config.json path "
                               "(or 'inline' when models.yaml gives the config's fields)")
    architecture: Architecture | None = None
    default_precision: Precision | None = Field(
        default=None, description="the checkpoint's own precision (its quantisation)")
    name: str
    params_b: float = Field(gt=0, description="total parameters, billions")
    active_params_b: float = Field(gt=0, description="parameters used per token (MoE < total)")
    layers: int = Field(ge=1)
    hidden_size: int = Field(ge=1)
    heads: int = Field(ge=1)
    kv_heads: int = Field(ge=1)
    head_dim: int = Field(ge=1)
    ffn_size: int = Field(ge=1, description="dense FFN size (MoE: per expert)")
    vocab_size: int = Field(ge=1)
    attention: Literal["mha", "gqa", "mla"]
    kv_lora_rank: int | None = Field(default=None, description="MLA compressed KV latent size")
    qk_rope_head_dim: int | None = Field(default=None, description="MLA decoupled RoPE key size")
    experts: int | None = None
    experts_per_token: int | None = None
    tied_embeddings: bool = False
    max_context: int = Field(ge=1)
    aliases: tuple[str, ...] = ()
    alias_precisions: dict[str, Precision] = Field(
        default_factory=dict, description="alias -> the precision that checkpoint ships at, "
        "where it differs from default_precision (nvidia/...-NVFP4: fp4; a 16-bit alias of "
        "an FP8 entry: bf16); a workload naming the alias is served in that format")

    @model_validator(mode="after")
    def _consistent(self) -> Model:
        if self.active_params_b > self.params_b:
            raise ValueError("active_params_b exceeds params_b")
        unknown = sorted(set(self.alias_precisions) - set(self.aliases))
        if unknown:
            raise ValueError(f"alias_precisions names {unknown[0]!r}, not one of the aliases")
        if self.attention == "mla" and not self.kv_lora_rank:
            raise ValueError("attention mla needs kv_lora_rank")
        return self

    @property
    def is_moe(self) -> bool:
        return bool(self.experts)


def _as_checkpoint(model: Model, alias: str) -> Model:
    """``model`` as the checkpoint ``alias`` names: its ``alias_precisions`` entry as the
    default precision (the same architecture; an NVFP4 alias is served at fp4)."""
    precision = model.alias_precisions.get(alias)
    if precision is None or precision == (model.default_precision or "bf16"):
        return model
    kept = _ALIAS_MODELS.get((id(model), alias))
    if kept is not None and kept[0] is model:  # the same frozen entry: the same copy
        return kept[1]
    copy = model.model_copy(update={"default_precision": None if precision == "bf16"
                                    else precision, "name": f"{model.name} ({alias})"})
    if len(_ALIAS_MODELS) > 256:
        _ALIAS_MODELS.clear()
    _ALIAS_MODELS[(id(model), alias)] = (model, copy)
    return copy


_ALIAS_MODELS: dict[tuple[int, str], tuple[Model, Model]] = {}
"""Checkpoint copies of a model by (entry, alias): the entry kept beside its copy, so a
reused id() never returns another model's copy."""


class Param(BaseModel):
    """A labelled cost-model parameter: its value, range, source and note."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    value: float
    low: float | None = None
    high: float | None = None
    source: str
    as_of: str
    note: str = ""

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        return reject_bool(cls, value, info.field_name)

    @field_validator("value", "low", "high")
    @classmethod
    def _scalable(cls, value: float | None) -> float | None:
        if value is not None and abs(value) > MAX_CATALOG_NUMBER:
            raise ValueError(f"at most {MAX_CATALOG_NUMBER:g} in size (a number the "
                             "solver cannot scale)")
        return value


class CostModel(BaseModel):
    """Cost-model parameters and the guide's rules of thumb, each labelled."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    electricity_usd_per_kwh: Param
    pue: Param
    horizon_years: Param
    load_factor: Param = Field(description="average fraction of TDP drawn")
    operations_usd_per_node_year: Param
    node_engineering_usd_per_year: Param
    multinode_overhead_factor: Param
    shared_storage_usd: Param = Field(description="fixed, when any job is coupled")
    shared_storage_usd_per_node: Param
    rack_unit_usd_per_year: Param
    frontend_switch_usd: Param = Field(description="one front-end Ethernet (ToR) switch")
    frontend_ports_per_switch: Param
    frontend_ports_per_node: Param = Field(description="front-end ports every node takes")
    frontend_cable_usd: Param = Field(description="per front-end link (node-ToR, leaf-spine)")
    storage_usd_per_tb: Param = Field(description="usable checkpoint/dataset capacity, per TB")
    storage_usd_per_gbps: Param = Field(description="storage write bandwidth, per GB/s")
    checkpoints_kept: Param
    checkpoint_bytes_per_param: Param = Field(description="trained parameter state in a "
                                              "checkpoint (weights + optimizer), B/param")
    checkpoint_write_seconds: Param = Field(description="time allowed to write one checkpoint")
    dataset_bytes_per_token: Param
    weights_vram_fraction_max: Param
    vram_reserve_fraction: Param
    scaling_efficiency_floor: Param
    usable_memory_fraction: Param
    price_stale_after_days: Param = Field(
        description="a chosen GPU/server price older than this many days is flagged")
    software_licence_usd_per_gpu_year: Param = Field(
        description="per-GPU-year software licence on NVIDIA datacenter GPUs (0 = off)")
    support_contract_fraction_per_year: Param = Field(
        description="hardware support contract per year as a fraction of node capex (0 = off)")
    hardware_price_decline_per_year: Param | None = Field(
        default=None, description="yearly fall in the price of the same hardware, for "
        "purchases later in a phased schedule (solver/optimize/schedule.py); None = 0")
    residual_value_fraction: Param | None = Field(
        default=None, description="resale value of owned hardware as a fraction of its capex, "
        "before the yearly price decline (buy-vs-rent of one-off jobs, docs/rental.md); "
        "None = 0 (no resale)")
    liquid_cooling_usd_per_kw: Param | None = Field(
        default=None, description="capex of a liquid-cooled node's cooling per kW of its "
        "full-load power: its share of a coolant distribution unit (CDU) and the facility "
        "water loop, and the rack manifold and quick disconnects of a chassis server; "
        "None = 0")
    liquid_cooling_in_rack_usd_per_kw: Param | None = Field(
        default=None, description="the part of liquid_cooling_usd_per_kw that is the rack's "
        "own manifold, quick disconnects and hoses; not charged on a whole-rack system whose "
        "price includes them (servers.yaml rack_cooling_included); None = 0")

    # (lowest, highest, lowest allowed itself) for each parameter's value
    RANGES: ClassVar[dict[str, tuple[float, float, bool]]] = {
        "electricity_usd_per_kwh": (0.0, 10.0, True), "pue": (1.0, 5.0, True),
        "horizon_years": (0.0, 30.0, False), "load_factor": (0.0, 1.0, False),
        "operations_usd_per_node_year": (0.0, 1e7, True),
        "node_engineering_usd_per_year": (0.0, 1e7, True),
        "multinode_overhead_factor": (1.0, 20.0, True), "shared_storage_usd": (0.0, 1e9, True),
        "shared_storage_usd_per_node": (0.0, 1e8, True),
        "rack_unit_usd_per_year": (0.0, 1e6, True),
        "frontend_switch_usd": (0.0, 1e7, True), "frontend_ports_per_switch": (2.0, 4096.0, True),
        "frontend_ports_per_node": (0.0, 64.0, True), "frontend_cable_usd": (0.0, 1e5, True),
        "storage_usd_per_tb": (0.0, 1e6, True), "storage_usd_per_gbps": (0.0, 1e7, True),
        "checkpoints_kept": (0.0, 1000.0, True), "checkpoint_bytes_per_param": (0.0, 64.0, True),
        "checkpoint_write_seconds": (0.0, 1e6, False), "dataset_bytes_per_token": (0.0, 64.0, True),
        "weights_vram_fraction_max": (0.0, 1.0, False), "vram_reserve_fraction": (0.0, 1.0, True),
        "scaling_efficiency_floor": (0.0, 1.0, False), "usable_memory_fraction": (0.0, 1.0, False),
        "price_stale_after_days": (0.0, 36500.0, False),
        "software_licence_usd_per_gpu_year": (0.0, 1e6, True),
        "support_contract_fraction_per_year": (0.0, 1.0, True),
        "hardware_price_decline_per_year": (0.0, 0.9, True),
        "residual_value_fraction": (0.0, 1.0, True),
        "liquid_cooling_usd_per_kw": (0.0, 1e6, True),
        "liquid_cooling_in_rack_usd_per_kw": (0.0, 1e6, True),
    }

    @model_validator(mode="after")
    def _in_range(self) -> CostModel:
        for name, (low, high, low_ok) in self.RANGES.items():
            param = getattr(self, name)
            if param is None:  # an optional value the catalog leaves out
                continue
            value = param.value
            if not (math.isfinite(value) and (value >= low if low_ok else value > low)
                    and value <= high):
                bound = "[" if low_ok else "("
                raise ValueError(f"{name}.value = {value} is outside {bound}{low:g}, {high:g}]")
        in_rack, per_kw = self.liquid_cooling_in_rack_usd_per_kw, self.liquid_cooling_usd_per_kw
        if in_rack is not None and in_rack.value > (per_kw.value if per_kw else 0.0):
            raise ValueError(f"liquid_cooling_in_rack_usd_per_kw.value = {in_rack.value} is "
                             "more than liquid_cooling_usd_per_kw, of which it is a part")
        return self


class VendorProfile(_Entry):
    """What one vendor builds: the GPUs, servers and fabrics it can quote."""

    name: str
    gpus: tuple[str, ...] | Literal["*"]
    servers: tuple[str, ...] | Literal["*"]
    fabrics: tuple[str, ...] | Literal["*"]
    coupled_training_fabric: Literal["any", "rdma"] = Field(
        default="any", description="engineering policy: training jobs that couple nodes "
        "run on an RDMA fabric (InfiniBand, RoCE) only; an RFQ may override it")

    def allows(self, kind: Literal["gpus", "servers", "fabrics"], entry_id: str) -> bool:
        allowed = getattr(self, kind)
        return allowed == "*" or entry_id in allowed


class Catalog(BaseModel):
    """The whole catalog, cross-checked."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    gpus: dict[str, Gpu]
    servers: dict[str, Server]
    fabrics: dict[str, Fabric]
    models: dict[str, Model]
    vendors: dict[str, VendorProfile]
    costs: CostModel
    efficiency: dict[str, Any] = Field(
        default_factory=dict, description="performance-model factors (solver.catalog.perf_factors)"
    )
    version: str = ""
    rental: dict[str, RentalOffer] = Field(
        default_factory=dict, description="rental offers by id (rental.csv, solver.catalog.rental_offers)")

    @model_validator(mode="after")
    def _cross_references(self) -> Catalog:
        for vendor in self.vendors.values():
            for kind, table in (("gpus", self.gpus), ("servers", self.servers),
                                ("fabrics", self.fabrics)):
                allowed = getattr(vendor, kind)
                if allowed != "*":
                    missing = [i for i in allowed if i not in table]
                    if missing:
                        raise ValueError(f"vendor {vendor.id}: unknown {kind} {missing}")
        for server in self.servers.values():
            missing = [g for g in server.gpus or () if g not in self.gpus]
            if missing:
                raise ValueError(f"server {server.id}: unknown gpus {missing}")
        if "none" not in self.fabrics:
            raise ValueError("fabric 'none' must exist")
        return self

    def model(self, model_id: str) -> Model:
        """A model by id or alias (case-insensitive; Hugging Face names are aliases).

        Models given as a config file or an inline architecture are part of the catalog's
        content: :meth:`with_models` adds them, so that every cache keyed by
        :func:`content_key` tells two models of the same name apart."""
        if model_id in self.models:
            return self.models[model_id]
        folded = model_id.casefold()
        for model in self.models.values():
            if model_id in model.aliases:
                return _as_checkpoint(model, model_id)
        for model in self.models.values():
            if folded == model.id.casefold():
                return model
            alias = next((a for a in model.aliases if folded == a.casefold()), None)
            if alias is not None:
                return _as_checkpoint(model, alias)
        raise KeyError(model_id)

    def with_models(self, models: Iterable[Model]) -> Catalog:
        """This catalog with ``models`` added (a model replaces the entry of its id): a
        different catalog, with a different :func:`content_key`, unless every model is
        already in it. The same inputs give the same catalog object (memoised by content),
        so the caches keyed by its content key are found again."""
        added = tuple(models)
        if all(self.models.get(m.id) is m for m in added):
            return self
        key = (content_key(self), tuple((m.id, model_key(m)) for m in added))
        return WITH_MODELS.get(key, lambda: self.model_copy(
            update={"models": {**self.models, **{m.id: m for m in added}}}))

    def has_model(self, model_id: str) -> bool:
        """Whether :meth:`model` finds ``model_id``."""
        try:
            self.model(model_id)
        except (KeyError, InputError):
            return False
        return True

    def model_ids(self) -> list[str]:
        """All model ids and aliases."""
        ids = list(self.models)
        for model in self.models.values():
            ids.extend(model.aliases)
        return ids

    def servers_for(self, gpu: Gpu) -> list[Server]:
        """Servers that physically take this GPU (form factor, GPU list, slot width, cooling)."""
        return [s for s in self.servers.values() if s.takes(gpu)]

    def largest_node(self, gpu_id: str) -> Server | None:
        """The system with the most GPU slots that takes this GPU - its largest node, one
        NVLink (or PCIe) domain: 8 for an HGX baseboard, 72 for an NVL72 rack. None when
        no server takes it (or the GPU is unknown)."""
        gpu = self.gpus.get(gpu_id)
        options = self.servers_for(gpu) if gpu is not None else []
        return max(options, key=lambda s: (s.gpu_slots, s.id)) if options else None


def architecture_fields(arch: Architecture) -> dict[str, Any]:
    """The summary fields of a :class:`Model` that follow from ``arch``."""
    moe = arch.experts > 0
    return {
        "architecture": arch,
        "params_b": round((arch.total_params() + arch.vision_params) / 1e9, 4),
        "active_params_b": round(arch.active_params() / 1e9, 4),
        "layers": arch.layers, "hidden_size": arch.hidden, "heads": arch.heads,
        "kv_heads": arch.kv_heads,
        "head_dim": arch.v_head_dim if arch.attention == "mla" else arch.head_dim,
        "ffn_size": arch.expert_ffn if moe else arch.dense_ffn, "vocab_size": arch.vocab,
        "attention": arch.attention, "kv_lora_rank": arch.kv_lora_rank or None,
        "qk_rope_head_dim": arch.qk_rope_head_dim or None,
        "experts": arch.experts or None, "experts_per_token": arch.experts_per_token or None,
        "tied_embeddings": arch.tied_embeddings, "max_context": arch.max_context,
        "default_precision": arch.default_precision,
    }


_KEYS: dict[int, tuple[Catalog, str]] = {}
_LAST_KEY: list[tuple[Catalog, str] | None] = [None]  # the entry of _KEYS used last


def content_key(catalog: Catalog) -> str:
    """A key for caches derived from ``catalog``: a hash of its whole content.

    Neither ``id(catalog)`` (reused once a catalog is freed) nor ``version`` (unchanged by
    ``model_copy(update=...)``) identifies the figures, so physics caches key by content.
    The hash is computed once per catalog object (the identity map holds the object, so its
    id cannot be reused while the entry lives).
    """
    last = _LAST_KEY[0]
    if last is not None and last[0] is catalog:  # memo keys ask ~5 times per estimate
        return last[1]
    known = _KEYS.get(id(catalog))
    if known is not None and known[0] is catalog:
        _LAST_KEY[0] = known
        return known[1]
    key = hashlib.sha256(catalog.model_dump_json().encode()).hexdigest()[:20]
    if len(_KEYS) > 256:
        _KEYS.clear()
    _KEYS[id(catalog)] = _LAST_KEY[0] = (catalog, key)
    return key


WITH_MODELS: Memo[Catalog] = Memo(64)
"""Catalogs extended by :meth:`Catalog.with_models`, keyed by the base catalog's content and
the added models' content."""



def model_key(model: Model) -> str:
    """A hash of a model's whole content (two models of one name differ by it)."""
    return hashlib.sha256(model.model_dump_json().encode()).hexdigest()[:20]


def model_from_architecture(arch: Architecture, model_id: str, source: str,
                            name: str | None = None) -> Model:
    """A catalog :class:`Model` for a parsed architecture."""
    fields = architecture_fields(arch)
    note = "; ".join(arch.notes)
    try:
        return Model(id=slug(model_id), name=name or model_id, source=source,
                     as_of="user file", note=note, **fields)
    except ValidationError as exc:
        raise InputError(problems_from_pydantic(exc, source)) from None


def slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9.\-]+", "-", text.casefold()).strip("-.")
    return slug or "model"


MODEL_FILES: Memo[Model] = Memo(64)
"""Models parsed from ``config.json`` files, keyed by path, the name messages give it and
the file's bytes."""

UPLOAD_REFUSED = ("a model config file is accepted here only when it was uploaded together "
                  "with the RFQ (in a zip, named relative to the RFQ, without '..'); "
                  "otherwise name a catalog model id or give the architecture inline")
"""The one message for a model path an upload may not name (:func:`model_from_file`
``confine``): the same whether or not such a file exists on the server."""


def model_from_file(path: str | Path, base: str | Path | None = None, *,
                    confine: bool = False) -> Model:
    """The model of a Hugging Face ``config.json`` (``path`` relative to ``base``), with its
    absolute path as its id so that layouts and plans can name it. Add it to a catalog with
    :meth:`Catalog.with_models`.

    ``confine`` (an uploaded RFQ): the file must be one uploaded with it, inside ``base``
    (none when ``base`` is None); an absolute or parent path is refused without looking at
    the server's files, and no message shows a server path
    (:func:`solver.common.inputs.path_within`)."""
    ref = str(path)
    if confine:
        real = path_within(ref, base, UPLOAD_REFUSED)
        label = ref
    else:
        joined = Path(path) if Path(path).is_absolute() else Path(base or ".") / path
        reason = path_reason(joined)
        if reason is not None:
            where = f" (looked at {joined})" if reason == "file not found" else ""
            raise InputError([Problem(ref, "", None, f"model config: {reason}{where}")])
        real = os.path.realpath(joined)
        label = real
    try:
        digest = hashlib.sha256(Path(real).read_bytes()).hexdigest()
    except OSError as exc:
        raise InputError([Problem(label, "", None,
                                  f"cannot read the model config file: {exc.strerror}")]) from None
    try:
        return MODEL_FILES.get((real, label, digest), lambda: _model_from_file(real, label))
    except InputError as exc:
        if not confine:
            raise
        raise InputError([Problem(ref if p.file == real else p.file, p.field, p.value,
                                  p.reason) for p in exc.problems]) from None


def _model_from_file(path: str, label: str) -> Model:
    arch = load_hf_config(path)
    model = model_from_architecture(arch, path, f"{label} (Hugging Face config.json)",
                                    name=Path(label).name)
    return model.model_copy(update={"id": path})


def resolve_model(catalog: Catalog, ref: str, base: str | Path | None = None
                  ) -> tuple[Catalog, str]:
    """The catalog that knows ``ref`` and the id under which :meth:`Catalog.model` finds it:
    a catalog id or alias (case-insensitive) in ``catalog`` itself, or a path to a
    ``config.json`` (relative to ``base``, the RFQ file's folder or the working directory),
    parsed and added (:meth:`Catalog.with_models`). Raises :class:`InputError` for a bad
    file; ``KeyError`` for an unknown id."""
    if catalog.has_model(ref) and not ref.endswith(".json"):
        return catalog, catalog.model(ref).id
    if ref.endswith(".json"):
        model = model_from_file(ref, base)
        return catalog.with_models([model]), model.id
    raise KeyError(ref)
