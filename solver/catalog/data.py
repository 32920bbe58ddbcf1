"""The hardware catalog: GPUs, servers, fabrics, models, cost model, vendor profiles.

The catalog is data (``catalog/*.yaml``) with a schema (the frozen pydantic models below).
Every numeric field carries its unit in its name, and every entry carries ``source`` and
``as_of``. :func:`load_catalog` reads the built-in catalog once; ``--catalog DIR`` points
at a user's catalog, which may be a *partial overlay* on top of the built-in one: any of the
built-in files, entries merged by ``id`` field by field, plus an optional ``prices.csv``
(``id,price_usd,as_of,source``) with today's quotes for GPUs, servers or fabrics.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from solver.catalog.architecture import Architecture
from solver.catalog.rental_offers import RENTAL_FILE, RentalOffer, load_offers
from solver.common.errors import InputError, Problem, problems_from_pydantic, short
from solver.common.inputs import (
    guard,
    non_finite,
    parse_yaml,
    read_csv_rows,
    read_text,
    reject_bool,
)
from solver.common.paths import data_dir

Precision = Literal["bf16", "fp8", "int8", "int4", "fp4"]
PRECISIONS: tuple[Precision, ...] = ("bf16", "fp8", "int8", "int4", "fp4")
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
    dense_tflops: dict[Literal["bf16", "fp8", "int8", "fp4"], float]
    tdp_w: float = Field(gt=0)
    form_factor: FormFactor
    pcie_gen: int = Field(ge=3, le=6)
    intra_node_link: Literal["pcie", "nvlink", "infinity-fabric"]
    intra_node_gbs: float = Field(
        gt=0, description="practical GPU-to-GPU all-reduce bus bandwidth inside one node, GB/s"
    )
    intra_node_latency_us: float = Field(gt=0)
    price_usd: float = Field(gt=0)
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

    @model_validator(mode="after")
    def _positive_throughput(self) -> Gpu:
        for precision, tflops in self.dense_tflops.items():
            if not tflops > 0:
                raise ValueError(f"dense_tflops.{precision} must be > 0 (omit it if unsupported)")
        if "bf16" not in self.dense_tflops:
            raise ValueError("dense_tflops.bf16 is required")
        return self


class Server(_Entry):
    """A chassis that GPUs go into, priced without GPUs."""

    name: str
    gpu_slots: int = Field(ge=1, le=16)
    form_factors: tuple[FormFactor, ...]
    price_usd: float = Field(ge=0)
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
    gpus: tuple[str, ...] | None = Field(
        default=None, description="GPU ids this chassis takes (None: any of its form factors)")
    price_type: PriceType = "quote"
    price_as_of: str | None = Field(
        default=None, description="date of the price basis (None: the entry's as_of)")

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
    nic_price_usd: float = Field(ge=0, description="per NIC")
    switch_port_price_usd: float = Field(ge=0, description="per switch port (switch price / ports)")
    ports_per_switch: int = Field(ge=0)
    cable_price_usd: float = Field(
        default=0.0, ge=0, description="per link (node-to-leaf or leaf-to-spine): a DAC/AOC "
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

    @model_validator(mode="after")
    def _consistent(self) -> Model:
        if self.active_params_b > self.params_b:
            raise ValueError("active_params_b exceeds params_b")
        if self.attention == "mla" and not self.kv_lora_rank:
            raise ValueError("attention mla needs kv_lora_rank")
        return self

    @property
    def is_moe(self) -> bool:
        return bool(self.experts)


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
    }

    @model_validator(mode="after")
    def _in_range(self) -> CostModel:
        for name, (low, high, low_ok) in self.RANGES.items():
            value = getattr(self, name).value
            if not (math.isfinite(value) and (value >= low if low_ok else value > low)
                    and value <= high):
                bound = "[" if low_ok else "("
                raise ValueError(f"{name}.value = {value} is outside {bound}{low:g}, {high:g}]")
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
        """A model by id or alias (case-insensitive; Hugging Face names are aliases), or
        one registered from a config file (:func:`register_model`, :func:`model_from_file`).
        """
        if model_id in self.models:
            return self.models[model_id]
        for model in self.models.values():
            if model_id in model.aliases:
                return model
        folded = model_id.casefold()
        for model in self.models.values():
            if folded == model.id.casefold() or any(folded == a.casefold()
                                                    for a in model.aliases):
                return model
        if model_id in _REGISTERED:
            return _REGISTERED[model_id]
        if model_id.endswith(".json") and Path(model_id).is_absolute():
            return model_from_file(model_id)  # a config registered in another process
        raise KeyError(model_id)

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


FILES = {
    "gpus": "gpus.yaml",
    "servers": "servers.yaml",
    "fabrics": "fabrics.yaml",
    "models": "models.yaml",
    "vendors": "vendors.yaml",
    "costs": "costs.yaml",
    "efficiency": "efficiency.yaml",
}
PRICE_KINDS = ("gpus", "servers", "fabrics")


def builtin_catalog_dir() -> Path:
    """Where the built-in catalog data lives (installed package data or the source tree)."""
    found = data_dir("procure_catalog", "catalog", "gpus.yaml")
    if found is not None:
        return found
    raise FileNotFoundError("built-in catalog data not found next to the solver package")


MAX_CATALOG_FILE_BYTES = 20_000_000
ENTRY_KINDS = ("gpus", "servers", "fabrics", "models", "vendors")


def _read_yaml(path: Path) -> Any:
    source = str(path)
    with guard(source):
        return parse_yaml(read_text(path, source, MAX_CATALOG_FILE_BYTES), source)


def _check_shape(key: str, value: Any, path: Path) -> Any:
    """A catalog file's top level: a list of entries, or a mapping for costs/efficiency."""
    if value is None:
        return [] if key in ENTRY_KINDS else {}
    if key in ENTRY_KINDS and not isinstance(value, list):
        raise InputError([Problem(str(path), "", type(value).__name__,
                                  f"{path.name} must be a list of entries (- id: ...)")])
    if key not in ENTRY_KINDS and not isinstance(value, dict):
        raise InputError([Problem(str(path), "", type(value).__name__,
                                  f"{path.name} must be a mapping of names to values")])
    return value


def _entries_by_id(entries: list[Any], path: Path) -> dict[str, dict]:
    """Entries keyed by id; an entry without an id, or an id given twice, is an error."""
    by_id: dict[str, dict] = {}
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            raise InputError([Problem(str(path), f"[{index}].id",
                                      entry.get("id") if isinstance(entry, dict) else entry,
                                      "each entry needs an id (a string)")])
        if entry["id"] in by_id:
            raise InputError([Problem(str(path), f"[{index}].id", entry["id"],
                                      "id given twice in this file; give each entry once")])
        by_id[entry["id"]] = entry
    return by_id


def _merge_entries(base: list[dict], overlay: list[dict], path: Path) -> list[dict]:
    """Overlay entries onto base entries by ``id``, field by field; new ids are appended."""
    merged = {entry["id"]: dict(entry) for entry in base}
    for entry_id, entry in _entries_by_id(overlay, path).items():
        merged.setdefault(entry_id, {}).update(entry)
    return list(merged.values())


MAX_PRICE_ROWS = 100_000


def _apply_prices(raw: dict[str, Any], path: Path) -> None:
    """Apply a ``prices.csv`` overlay (id,price_usd[,as_of,source]) to GPUs/servers/fabrics."""
    source = str(path)
    rows = read_csv_rows(path, MAX_CATALOG_FILE_BYTES)
    header = [cell.strip() for cell in rows[0]] if rows else []
    if "id" not in header or "price_usd" not in header:
        raise InputError([Problem(source, "header", short(header) if header else None,
                                  "prices.csv needs a header row id,price_usd[,as_of,source]")])
    if len(rows) > MAX_PRICE_ROWS:
        raise InputError([Problem(source, "", None, f"more than {MAX_PRICE_ROWS:,} rows")])
    tables = {kind: {entry.get("id"): entry for entry in raw.get(kind) or []}
              for kind in PRICE_KINDS}
    seen: dict[str, int] = {}
    for line, cells in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in cells):
            continue
        if len(cells) != len(header):
            raise InputError([Problem(source, f"line {line}", None,
                                      f"{len(cells)} cells where the header has {len(header)}")])
        row = dict(zip(header, cells, strict=True))
        entry_id = row["id"].strip()
        if entry_id in seen:
            raise InputError([Problem(source, f"line {line}.id", entry_id,
                                      f"priced twice (also line {seen[entry_id]})")])
        seen[entry_id] = line
        try:
            price = float(row["price_usd"])
        except ValueError:
            raise InputError([Problem(source, f"line {line}.price_usd", row["price_usd"],
                                      "not a number")]) from None
        if not (math.isfinite(price) and price >= 0):
            raise InputError([Problem(source, f"line {line}.price_usd", price,
                                      "must be a finite number >= 0")])
        kind = next((k for k in PRICE_KINDS if entry_id in tables[k]), None)
        if kind is None:
            raise InputError([Problem(source, f"line {line}.id", entry_id,
                                      "no GPU, server or fabric with this id")])
        entry = tables[kind][entry_id]
        entry["nic_price_usd" if kind == "fabrics" else "price_usd"] = price
        stamp = (row.get("as_of") or "").strip() or "user quote"
        if kind != "fabrics":
            entry["price_type"] = "quote"
            entry["price_as_of"] = stamp
        if kind == "gpus":
            entry["price_source"] = ((row.get("source") or "").strip()
                                     or f"user price overlay {path.name}")


def _load_raw(directory: Path) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    for key, name in FILES.items():
        path = directory / name
        if path.is_file():
            raw[key] = _check_shape(key, _read_yaml(path), path)
    for entry in raw.get("models") or []:  # config paths are relative to their models.yaml
        if isinstance(entry, dict) and isinstance(entry.get("config"), str):
            entry["config"] = str((directory / entry["config"]).resolve())
    return raw


def check_unique_ids(raw: dict[str, Any], origin: str) -> None:
    """Ids are unique across GPUs, servers, fabrics, models (with aliases) and vendors, so
    that ``catalog show``, ``prices.csv`` and ``--set`` never pick one of two entries."""
    owner: dict[str, str] = {}
    problems: list[Problem] = []
    for kind in ENTRY_KINDS:
        for entry in raw.get(kind) or []:
            names = [entry.get("id")]
            if kind == "models":
                aliases = entry.get("aliases") or []
                names += list(aliases) if isinstance(aliases, list | tuple) else []
            for name in names:
                if not isinstance(name, str):
                    continue
                what = f"{kind[:-1]} {entry.get('id')}" + (" (alias)" if name != entry.get("id")
                                                           else "")
                if name in owner and owner[name] != what:
                    problems.append(Problem(origin, f"{kind}.{entry.get('id')}", name,
                                            f"id also used by {owner[name]}; ids and model "
                                            "aliases must be unique across the catalog"))
                owner.setdefault(name, what)
    if problems:
        raise InputError(problems)


def _check_finite(raw: dict[str, Any], origin: str) -> None:
    bad = non_finite(raw)
    if bad:
        raise InputError([Problem(origin, where, value, "must be a finite number")
                          for where, value in bad])


def _model_folder(raw: dict[str, Any], directory: Path) -> int:
    """Add every Hugging Face config in an overlay's ``models/`` folder that no models.yaml
    entry names (``models/<name>.config.json`` or ``models/<name>/config.json``; id = the
    name in lower case). Returns how many were added."""
    folder = directory / "models"
    if not folder.is_dir():
        return 0
    models = raw.setdefault("models", [])
    named = {e.get("config") for e in models
             if isinstance(e, dict) and isinstance(e.get("config"), str)}
    ids = {e.get("id") for e in models if isinstance(e, dict)}
    added = 0
    for path in sorted(folder.glob("*.json")) + sorted(folder.glob("*/config.json")):
        resolved = str(path.resolve())
        if resolved in named:
            continue
        name = (path.parent.name if path.name == "config.json"
                else path.name.removesuffix(".json").removesuffix(".config"))
        model_id = _slug(name)
        if model_id in ids:
            raise InputError([Problem(str(path), "", model_id, "a model with this id already "
                                      "exists; name the file differently or add a models.yaml "
                                      "entry with its own id and config")])
        ids.add(model_id)
        models.append({"id": model_id, "name": name, "config": resolved, "as_of": "user file",
                       "source": f"{path} (Hugging Face config.json in the catalog overlay)"})
        added += 1
    return added


# fields of a catalog Model that a parsed architecture determines
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


OVERRIDABLE = frozenset({"max_context", "default_precision"})


def _expand_configs(entries: list[dict[str, Any]], origin: str) -> list[dict[str, Any]]:
    """Fill the architecture fields of entries that name a ``config`` (only ``max_context``
    and ``default_precision`` may be given beside it; the rest follow from the file)."""
    from solver.catalog.hf_config import load_hf_config, parse_hf_config

    out = []
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("config"), str | dict) \
                and "architecture" not in entry:
            if isinstance(entry["config"], dict):  # the config's fields inline in models.yaml
                arch = parse_hf_config(entry["config"], f"{origin} models.{entry.get('id')}"
                                                        ".config")
                entry = {**entry, "config": "inline"}
            else:
                arch = load_hf_config(entry["config"])
            derived = architecture_fields(arch)
            clash = sorted(k for k in entry if k in derived and k not in OVERRIDABLE)
            if clash:
                raise InputError([Problem(origin, f"models.{entry.get('id')}.{clash[0]}",
                                          entry[clash[0]], "follows from the config file "
                                          f"{entry['config']}; remove it from the entry")])
            entry = {**derived, **entry}
        out.append(entry)
    return out


def _build(raw: dict[str, Any], origin: str) -> Catalog:
    _check_finite(raw, origin)
    check_unique_ids(raw, origin)
    raw = dict(raw)
    raw["models"] = _expand_configs(raw.get("models") or [], origin)
    data = dict(raw)
    for key in ENTRY_KINDS:
        data[key] = {entry["id"]: entry for entry in raw.get(key) or []}
    data.setdefault("efficiency", {})
    blob = json.dumps(raw, sort_keys=True, default=str).encode()
    data["version"] = hashlib.sha256(blob).hexdigest()[:12]
    try:
        return Catalog.model_validate(data)
    except ValidationError as exc:
        raise InputError(problems_from_pydantic(exc, origin, id_keyed=True)) from None


_KEYS: dict[int, tuple[Catalog, str]] = {}


def content_key(catalog: Catalog) -> str:
    """A key for caches derived from ``catalog``: a hash of its whole content.

    Neither ``id(catalog)`` (reused once a catalog is freed) nor ``version`` (unchanged by
    ``model_copy(update=...)``) identifies the figures, so physics caches key by content.
    The hash is computed once per catalog object (the identity map holds the object, so its
    id cannot be reused while the entry lives).
    """
    known = _KEYS.get(id(catalog))
    if known is not None and known[0] is catalog:
        return known[1]
    key = hashlib.sha256(catalog.model_dump_json().encode()).hexdigest()[:20]
    if len(_KEYS) > 256:
        _KEYS.clear()
    _KEYS[id(catalog)] = (catalog, key)
    return key


def check_catalog(catalog: Catalog) -> None:
    """Everything a solve checks later, checked now: the efficiency factors parse and every
    GPU's family has factors. Raises :class:`InputError`."""
    from solver.catalog.perf_factors import factors

    efficiency = factors(catalog)
    missing = [Problem("efficiency.yaml", f"families.{gpu.family}", gpu.id,
                       f"GPU {gpu.id} has family {gpu.family!r} with no efficiency factors; "
                       f"known: {', '.join(sorted(efficiency.families))}")
               for gpu in catalog.gpus.values() if gpu.family not in efficiency.families]
    if missing:
        raise InputError(missing)


@functools.lru_cache(maxsize=8)
def load_catalog(user_dir: str | None = None) -> Catalog:
    """Load the built-in catalog, with ``user_dir`` overlaid on top when given.

    Raises :class:`InputError` naming file, field and reason when the data are invalid.
    """
    builtin = builtin_catalog_dir()
    raw = _load_raw(builtin)
    origin = str(builtin)
    if user_dir is not None:
        directory = Path(user_dir)
        if not directory.is_dir():
            raise InputError([Problem(user_dir, "", None, "catalog directory not found")])
        overlay = _load_raw(directory)
        for key, value in overlay.items():
            if key in ("costs", "efficiency"):
                merged = dict(raw.get(key) or {})
                merged.update(value)
                raw[key] = merged
            else:
                raw[key] = _merge_entries(raw.get(key) or [], value, directory / FILES[key])
        prices = directory / "prices.csv"
        if prices.is_file():
            _apply_prices(raw, prices)
        added = _model_folder(raw, directory)
        rental = directory / RENTAL_FILE  # rental offers: built-in rows, then the overlay's
        raw["rental"] = load_offers(_rental_files(builtin) + ([rental] if rental.is_file()
                                                              else []), raw)
        if not overlay and not prices.is_file() and not added and not rental.is_file():
            raise InputError([Problem(user_dir, "", None,
                                      "no catalog files found (expected any of "
                                      f"{', '.join(FILES.values())}, prices.csv, "
                                      f"{RENTAL_FILE} or "
                                      "models/*.config.json)")])
        origin = str(directory)
        with guard(origin, "build the catalog"):
            catalog = _build(raw, origin)
            check_catalog(catalog)
        return catalog
    raw["rental"] = load_offers(_rental_files(builtin), raw)
    return _build(raw, origin)


def _rental_files(directory: Path) -> list[Path]:
    """The built-in ``rental.csv`` when the catalog ships one (solver/catalog/rental_offers.py)."""
    path = directory / RENTAL_FILE
    return [path] if path.is_file() else []


# --------------------------------------------------------------------------- models from files
_REGISTERED: dict[str, Model] = {}


def register_model(model: Model) -> str:
    """Make ``model`` findable by :meth:`Catalog.model` under its id in this process (models
    given as a config file or an inline architecture). Returns the id."""
    _REGISTERED[model.id] = model
    return model.id


def model_from_architecture(arch: Architecture, model_id: str, source: str,
                            name: str | None = None) -> Model:
    """A catalog :class:`Model` for a parsed architecture."""
    fields = architecture_fields(arch)
    note = "; ".join(arch.notes)
    try:
        return Model(id=_slug(model_id), name=name or model_id, source=source,
                     as_of="user file", note=note, **fields)
    except ValidationError as exc:
        raise InputError(problems_from_pydantic(exc, source)) from None


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9.\-]+", "-", text.casefold()).strip("-.")
    return slug or "model"


@functools.lru_cache(maxsize=64)
def _model_from_file(path: str, mtime_ns: int) -> Model:
    from solver.catalog.hf_config import load_hf_config

    arch = load_hf_config(path)
    return model_from_architecture(arch, path, f"{path} (Hugging Face config.json)",
                                   name=Path(path).name)


def model_from_file(path: str | Path, base: str | Path | None = None) -> Model:
    """The model of a Hugging Face ``config.json`` (``path`` relative to ``base``), registered
    under its absolute path so that layouts and plans can name it."""
    p = Path(path)
    if not p.is_absolute():
        p = Path(base or ".") / p
    p = p.resolve()
    if not p.is_file():
        raise InputError([Problem(str(path), "", None,
                                  f"model config file not found (looked at {p})")])
    model = _model_from_file(str(p), p.stat().st_mtime_ns)
    model = model.model_copy(update={"id": str(p)})
    _REGISTERED[str(p)] = model
    return model


def resolve_model(catalog: Catalog, ref: str, base: str | Path | None = None) -> str:
    """The id under which :meth:`Catalog.model` finds ``ref``: a catalog id or alias
    (case-insensitive) as is, or a path to a ``config.json`` (relative to ``base``, the RFQ
    file's folder or the working directory), parsed and registered under its absolute path.
    Raises :class:`InputError` for a bad file; ``KeyError`` for an unknown id."""
    if catalog.has_model(ref) and not ref.endswith(".json"):
        return catalog.model(ref).id
    if ref.endswith(".json"):
        return model_from_file(ref, base).id
    raise KeyError(ref)
