"""The hardware catalog: GPUs, servers, fabrics, models, cost model, vendor profiles.

The catalog is data (``catalog/*.yaml``) with a schema (the frozen pydantic models below).
Every numeric field carries its unit in its name, and every entry carries ``source`` and
``as_of``. :func:`load_catalog` reads the built-in catalog once; ``--catalog DIR`` points
at a user's catalog, which may be a *partial overlay* on top of the built-in one: any of the
built-in files, entries merged by ``id`` field by field, plus an optional ``prices.csv``
(``id,price_usd,as_of,source``) with today's quotes for GPUs, servers or fabrics.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import json
import math
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from solver.errors import InputError, Problem, problems_from_pydantic

SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader (10–20 ms for the catalog instead of ~100–400 ms), else PyYAML's."""

Precision = Literal["bf16", "fp8", "int8", "int4", "fp4"]
PRECISIONS: tuple[Precision, ...] = ("bf16", "fp8", "int8", "int4", "fp4")
FormFactor = Literal["pcie", "sxm", "oam", "superchip"]


class _Entry(BaseModel):
    """Base of every catalog entry: immutable, strict keys, sourced."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    source: str = Field(min_length=3)
    as_of: str = Field(min_length=4, description="date the figures were read, e.g. 2026-08")
    note: str = ""


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


class Fabric(_Entry):
    """An inter-node fabric. ``none`` is the absence of one (independent nodes)."""

    name: str
    family: Literal["none", "ethernet", "infiniband"]
    effective_gbs: float = Field(ge=0, description="practical GB/s per NIC, one direction")
    latency_us: float = Field(ge=0)
    nic_price_usd: float = Field(ge=0, description="per NIC")
    switch_port_price_usd: float = Field(ge=0, description="per switch port (switch price / ports)")
    ports_per_switch: int = Field(ge=0)


class Model(_Entry):
    """A model architecture (what memory and FLOPs follow from)."""

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
    weights_vram_fraction_max: Param
    vram_reserve_fraction: Param
    scaling_efficiency_floor: Param
    usable_memory_fraction: Param

    # (lowest, highest, lowest allowed itself) for each parameter's value
    RANGES: ClassVar[dict[str, tuple[float, float, bool]]] = {
        "electricity_usd_per_kwh": (0.0, 10.0, True), "pue": (1.0, 5.0, True),
        "horizon_years": (0.0, 30.0, False), "load_factor": (0.0, 1.0, False),
        "operations_usd_per_node_year": (0.0, 1e7, True),
        "node_engineering_usd_per_year": (0.0, 1e7, True),
        "multinode_overhead_factor": (1.0, 20.0, True), "shared_storage_usd": (0.0, 1e9, True),
        "shared_storage_usd_per_node": (0.0, 1e8, True),
        "rack_unit_usd_per_year": (0.0, 1e6, True),
        "weights_vram_fraction_max": (0.0, 1.0, False), "vram_reserve_fraction": (0.0, 1.0, True),
        "scaling_efficiency_floor": (0.0, 1.0, False), "usable_memory_fraction": (0.0, 1.0, False),
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
        default_factory=dict, description="performance-model factors (solver.perf_factors)"
    )
    version: str = ""

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
        if "none" not in self.fabrics:
            raise ValueError("fabric 'none' must exist")
        return self

    def model(self, model_id: str) -> Model:
        """A model by id or alias."""
        if model_id in self.models:
            return self.models[model_id]
        for model in self.models.values():
            if model_id in model.aliases:
                return model
        raise KeyError(model_id)

    def model_ids(self) -> list[str]:
        """All model ids and aliases."""
        ids = list(self.models)
        for model in self.models.values():
            ids.extend(model.aliases)
        return ids

    def servers_for(self, gpu: Gpu) -> list[Server]:
        """Servers whose slots take this GPU's form factor."""
        return [s for s in self.servers.values() if gpu.form_factor in s.form_factors]


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
    here = Path(__file__).resolve().parent
    for candidate in (here / "procure_catalog", here.parent / "catalog"):
        if (candidate / "gpus.yaml").is_file():
            return candidate
    raise FileNotFoundError("built-in catalog data not found next to the solver package")


def _read_yaml(path: Path) -> Any:
    try:
        with path.open(encoding="utf-8") as handle:
            return yaml.load(handle, Loader=SAFE_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        raise InputError([Problem(str(path), "", None, f"YAML syntax error at {where}: "
                                  f"{getattr(exc, 'problem', exc)}")]) from None
    except OSError as exc:
        raise InputError([Problem(str(path), "", None, f"cannot read: {exc.strerror}")]) from None


def _merge_entries(base: list[dict], overlay: list[dict], path: Path) -> list[dict]:
    """Overlay entries onto base entries by ``id``, field by field; new ids are appended."""
    merged = {entry["id"]: dict(entry) for entry in base}
    for index, entry in enumerate(overlay):
        if not isinstance(entry, dict) or "id" not in entry:
            raise InputError([Problem(str(path), f"[{index}].id", entry, "each entry needs an id")])
        merged.setdefault(entry["id"], {}).update(entry)
    return list(merged.values())


def _apply_prices(raw: dict[str, Any], path: Path) -> None:
    """Apply a ``prices.csv`` overlay (id,price_usd[,as_of,source]) to GPUs/servers/fabrics."""
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for line, row in enumerate(rows, start=2):
        entry_id = (row.get("id") or "").strip()
        try:
            price = float(row.get("price_usd", ""))
        except ValueError:
            raise InputError([Problem(str(path), f"line {line}.price_usd", row.get("price_usd"),
                                      "not a number")]) from None
        if not price >= 0 or price == float("inf"):
            raise InputError([Problem(str(path), f"line {line}.price_usd", price,
                                      "must be a finite number >= 0")])
        for kind in PRICE_KINDS:
            for entry in raw[kind]:
                if entry["id"] == entry_id:
                    key = "nic_price_usd" if kind == "fabrics" else "price_usd"
                    entry[key] = price
                    stamp = row.get("as_of") or "user quote"
                    src = row.get("source") or f"user price overlay {path.name}"
                    if kind == "gpus":
                        entry["price_as_of"], entry["price_source"] = stamp, src
                    break
            else:
                continue
            break
        else:
            raise InputError([Problem(str(path), f"line {line}.id", entry_id,
                                      "no GPU, server or fabric with this id")])


def _load_raw(directory: Path) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    for key, name in FILES.items():
        path = directory / name
        if path.is_file():
            raw[key] = _read_yaml(path)
    return raw


def _build(raw: dict[str, Any], origin: str) -> Catalog:
    data = dict(raw)
    for key in ("gpus", "servers", "fabrics", "models", "vendors"):
        data[key] = {entry["id"]: entry for entry in raw.get(key) or []}
    data.setdefault("efficiency", {})
    blob = json.dumps(raw, sort_keys=True, default=str).encode()
    data["version"] = hashlib.sha256(blob).hexdigest()[:12]
    try:
        return Catalog.model_validate(data)
    except ValidationError as exc:
        raise InputError(problems_from_pydantic(exc, origin, id_keyed=True)) from None


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
                merged.update(value or {})
                raw[key] = merged
            else:
                raw[key] = _merge_entries(raw.get(key) or [], value or [], directory / FILES[key])
        prices = directory / "prices.csv"
        if prices.is_file():
            _apply_prices(raw, prices)
        if not overlay and not prices.is_file():
            raise InputError([Problem(user_dir, "", None,
                                      "no catalog files found (expected any of "
                                      f"{', '.join(FILES.values())} or prices.csv)")])
        origin = str(directory)
    return _build(raw, origin)
