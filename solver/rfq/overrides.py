"""Scenario overrides: apply ``--set PATH=VALUE`` / ``--overrides FILE`` to catalog and RFQ.

One scenario language for ``procure solve``, ``pareto`` and ``sensitivity``. Paths:

==========================================  ============================================
``gpu.<id>.<field>``                        any field of a catalog GPU (``price_usd``, ``tdp_w``)
``server.<id>.<field>``                     a server (``price_usd``, ``base_power_w``)
``fabric.<id>.<field>``                     a fabric (``nic_price_usd``, ``switch_port_price_usd``)
``model.<id>.<field>``                      a model architecture field
``costs.<param>`` (or ``costs.<param>.value``)  a cost-model parameter (``electricity_usd_per_kwh``,
                                            ``pue``, ``multinode_overhead_factor``, ...)
``rfq.<field>`` / ``rfq.constraints.<key>``     an RFQ field (``horizon_years``, ``budget_usd``)
``workloads.<name>.<field>``                a field of one workload (``qps``, ``deadline_hours``)
``demand``                                  factor scaling every serving workload's concurrency,
                                            qps (inference) and requests (batch inference)
==========================================  ============================================

``costs.horizon_years`` is the same as ``rfq.horizon_years`` (the RFQ's horizon always wins).
Values are YAML scalars (``9500``, ``0.2``, ``[l40s, l4]``). The file form is a YAML
mapping of the same paths (nested mappings are flattened with dots). Modified catalog
entries and RFQs are re-validated; an unknown path or a bad value raises
:class:`~solver.common.errors.InputError` naming the path and the nearest valid ones. A modified
catalog gets a new ``version`` so that physics caches never serve stale results.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from solver.catalog.data import MAX_CATALOG_NUMBER, Catalog
from solver.catalog.load import ENTRY_KINDS as CATALOG_KINDS
from solver.catalog.load import check_unique_ids
from solver.common.errors import InputError, Problem, nearest, problems_from_pydantic
from solver.common.inputs import (
    check_path,
    guard,
    non_finite,
    parse_yaml,
    parse_yaml_value,
    read_text,
    too_large,
)
from solver.rfq.schema import Rfq, validate_rfq

MAX_OVERRIDES_BYTES = 2_000_000
ENTRY_KINDS = {"gpu": "gpus", "server": "servers", "fabric": "fabrics", "model": "models"}
SKIP_FIELDS = {"id", "source", "as_of", "note", "price_as_of", "price_source", "name"}


def parse_assignment(text: str) -> tuple[str, Any]:
    """Split ``PATH=VALUE`` and parse the value as a YAML scalar or list."""
    if "=" not in text:
        raise InputError([Problem("--set", text, None, "expected PATH=VALUE, e.g. "
                                  "gpu.rtx-pro-6000.price_usd=9500")])
    path, raw = text.split("=", 1)
    value = parse_yaml_value(raw, f"--set {path.strip()}") if raw.strip() else None
    return path.strip(), value


def _flatten(data: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    items: list[tuple[str, Any]] = []
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            items.extend(_flatten(value, path))
        else:
            items.append((path, value))
    return items


def read_overrides_file(path: Path) -> list[tuple[str, Any]]:
    """The (path, value) pairs of a YAML overrides file. One path set twice - by a dotted
    key and by nested keys (``gpu.l4.price_usd`` and ``gpu: {l4: {price_usd: ...}}``) - is
    refused, naming both values: taking either one silently would be a guess."""
    source = str(path)
    check_path(path, source, "--overrides")
    with guard(source):
        data = parse_yaml(read_text(path, source, MAX_OVERRIDES_BYTES), source)
    if data is None:
        return []
    if not isinstance(data, dict):
        raise InputError([Problem(source, "", type(data).__name__,
                                  "an overrides file is a mapping of PATH: VALUE")])
    pairs = _flatten(data)
    seen: dict[str, Any] = {}
    problems = []
    for key, value in pairs:
        if key in seen:
            problems.append(Problem(source, key, value, f"set twice (also to {seen[key]!r}), "
                                    "by a dotted key and by nested keys; keep one"))
        seen.setdefault(key, value)
    if problems:
        raise InputError(problems)
    return pairs


def valid_paths(catalog: Catalog, rfq: Rfq) -> list[str]:
    """Every path an override may name (for error hints and the sensitivity report)."""
    paths = ["demand", "rfq.horizon_years", "rfq.budget_usd", "rfq.objective"]
    paths += [f"rfq.constraints.{key}" for key in type(rfq.constraints).model_fields]
    for prefix, attr in ENTRY_KINDS.items():
        for entry_id, entry in getattr(catalog, attr).items():
            paths += [f"{prefix}.{entry_id}.{name}" for name in type(entry).model_fields
                      if name not in SKIP_FIELDS]
    paths += [f"costs.{name}" for name in type(catalog.costs).model_fields]
    for spec in rfq.workloads:
        paths += [f"workloads.{spec.name}.{name}" for name in type(spec).model_fields
                  if name not in ("name", "kind")]
    return paths


class _Scenario:
    """Mutable working copy of catalog entries and RFQ data while overrides are applied."""

    def __init__(self, catalog: Catalog, rfq: Rfq, source: str):
        self.catalog = catalog
        self.rfq = rfq
        self.source = source
        self.entries: dict[str, dict[str, Any]] = {}  # "gpus/<id>" -> raw data
        self.costs: dict[str, Any] | None = None
        self.rfq_data: dict[str, Any] | None = None
        self.problems: list[Problem] = []
        self.applied: list[str] = []

    def bad(self, path: str, value: Any, reason: str) -> None:
        hint = nearest(path, valid_paths(self.catalog, self.rfq))
        self.problems.append(Problem(self.source, path, value, reason + (
            f"; nearest valid: {', '.join(hint)}" if hint else "")))

    def rfq_dict(self) -> dict[str, Any]:
        if self.rfq_data is None:
            self.rfq_data = self.rfq.model_dump(mode="json", exclude_none=True)
        return self.rfq_data

    def apply(self, path: str, value: Any) -> None:
        parts = path.split(".")
        head = parts[0]
        self.applied.append(f"{path}={value!r}")
        if path == "demand":
            self._demand(path, value)
        elif head in ENTRY_KINDS and len(parts) >= 3:
            self._entry(path, ENTRY_KINDS[head], ".".join(parts[1:-1]), parts[-1], value)
        elif head == "costs" and len(parts) in (2, 3) and (len(parts) == 2 or parts[2] == "value"):
            if parts[1] == "horizon_years":
                self._rfq_field(path, ["horizon_years"], value)
            else:
                self._cost(path, parts[1], value)
        elif head == "rfq" and len(parts) >= 2:
            self._rfq_field(path, parts[1:], value)
        elif head == "workloads" and len(parts) >= 3:
            self._workload(path, ".".join(parts[1:-1]), parts[-1], value)
        else:
            self.bad(path, value, "unknown override path")

    def _entry(self, path: str, attr: str, entry_id: str, name: str, value: Any) -> None:
        table = getattr(self.catalog, attr)
        if entry_id not in table:
            self.bad(path, value, f"no {attr[:-1]} with id {entry_id!r}")
            return
        entry = table[entry_id]
        if name not in type(entry).model_fields or name in SKIP_FIELDS:
            self.bad(path, value, f"{attr[:-1]} has no settable field {name!r}")
            return
        data = self.entries.setdefault(f"{attr}/{entry_id}", entry.model_dump())
        data[name] = value

    def _cost(self, path: str, name: str, value: Any) -> None:
        if name not in type(self.catalog.costs).model_fields:
            self.bad(path, value, f"no cost parameter {name!r}")
            return
        if not _is_number(value):
            self.problems.append(Problem(self.source, path, value, "must be a finite number"))
            return
        if self.costs is None:
            self.costs = self.catalog.costs.model_dump()
        self.costs[name]["value"] = float(value)

    def _rfq_field(self, path: str, keys: list[str], value: Any) -> None:
        data = self.rfq_dict()
        allowed = set(Rfq.model_fields) - {"id", "workloads", "constraints"}
        if keys[0] == "constraints" and len(keys) == 2:
            if keys[1] not in type(self.rfq.constraints).model_fields:
                self.bad(path, value, f"no RFQ constraint {keys[1]!r}")
                return
            data.setdefault("constraints", {})[keys[1]] = value
        elif len(keys) == 1 and keys[0] in allowed:
            data[keys[0]] = value
        else:
            self.bad(path, value, "unknown RFQ field")
            return
        if value is None:
            _drop_none(data)

    def _workload(self, path: str, name: str, field: str, value: Any) -> None:
        data = self.rfq_dict()
        for workload in data["workloads"]:
            if workload["name"] == name:
                spec = next(s for s in self.rfq.workloads if s.name == name)
                if field not in type(spec).model_fields or field in ("name", "kind"):
                    self.bad(path, value, f"a {spec.kind} workload has no field {field!r}")
                    return
                if value is None:
                    workload.pop(field, None)
                else:
                    workload[field] = value
                return
        self.bad(path, value, f"no workload named {name!r}")

    def _demand(self, path: str, value: Any) -> None:
        if not _is_number(value) or float(value) <= 0:
            self.problems.append(Problem(self.source, path, value,
                                         "must be a number > 0 (a demand factor, e.g. 2)"))
            return
        factor = float(value)
        for workload in self.rfq_dict()["workloads"]:
            if workload["kind"] == "inference":
                if workload.get("concurrency") is not None:
                    workload["concurrency"] = max(1, math.ceil(workload["concurrency"] * factor
                                                               - 1e-9))
                if workload.get("qps") is not None:
                    workload["qps"] = workload["qps"] * factor
            elif workload["kind"] == "batch_inference":
                workload["requests"] = max(1, math.ceil(workload["requests"] * factor - 1e-9))

    def result(self) -> tuple[Catalog, Rfq]:
        if self.problems:
            raise InputError(self.problems)
        catalog = self.catalog
        update: dict[str, Any] = {}
        for key, data in self.entries.items():
            attr, entry_id = key.split("/", 1)
            table = dict(update.get(attr) or getattr(catalog, attr))
            model_cls = type(getattr(catalog, attr)[entry_id])
            table[entry_id] = _revalidate(model_cls, data, f"{self.source} ({attr}.{entry_id})")
            update[attr] = table
        if self.costs is not None:
            update["costs"] = _revalidate(type(catalog.costs), self.costs,
                                          f"{self.source} (costs)")
        if update:
            if any(attr in update for attr in CATALOG_KINDS):
                check_unique_ids({kind: [entry.model_dump() for entry in
                                   (update.get(kind) or getattr(catalog, kind)).values()]
                            for kind in CATALOG_KINDS}, self.source)
            digest = hashlib.sha256("\n".join(self.applied).encode()).hexdigest()[:8]
            update["version"] = f"{catalog.version}+{digest}"
            catalog = catalog.model_copy(update=update)
        rfq = self.rfq
        if self.rfq_data is not None:
            rfq = validate_rfq(self.rfq_data, catalog, f"{self.source} (overridden RFQ)")
        return catalog, rfq


def _drop_none(data: dict[str, Any]) -> None:
    for key in [k for k, v in data.items() if v is None]:
        del data[key]
    for value in data.values():
        if isinstance(value, dict):
            _drop_none(value)


def _revalidate(model_cls: type[BaseModel], data: dict[str, Any], source: str) -> Any:
    bad = non_finite(data)
    if bad:
        raise InputError([Problem(source, where, value, "must be a finite number")
                          for where, value in bad])
    try:
        validated = model_cls.model_validate(data)
    except ValidationError as exc:
        raise InputError(problems_from_pydantic(exc, source)) from None
    huge = too_large(validated.model_dump(), MAX_CATALOG_NUMBER)  # '1e30' is text in YAML
    if huge:
        raise InputError([Problem(source, where, value, f"at most {MAX_CATALOG_NUMBER:g} in "
                                  "size (a number the solver cannot scale)")
                          for where, value in huge])
    return validated


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(float(value))


def apply_pairs(catalog: Catalog, rfq: Rfq, pairs: list[tuple[str, Any]],
                source: str = "--set") -> tuple[Catalog, Rfq]:
    """Apply already-parsed ``(path, value)`` overrides (used by sensitivity)."""
    scenario = _Scenario(catalog, rfq, source)
    for path, value in pairs:
        scenario.apply(path, value)
    return scenario.result()


def apply_overrides(catalog: Catalog, rfq: Rfq, sets: list[str] | None,
                    file: Path | None = None) -> tuple[Catalog, Rfq]:
    """Catalog and RFQ with the overrides of ``--overrides FILE`` then ``--set`` applied."""
    if file is not None:
        catalog, rfq = apply_pairs(catalog, rfq, read_overrides_file(Path(file)), str(file))
    if sets:
        catalog, rfq = apply_pairs(catalog, rfq, [parse_assignment(s) for s in sets], "--set")
    return catalog, rfq
