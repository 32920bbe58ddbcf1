"""Reading the catalog: the built-in data folder, a user's overlay (entries merged by id,
``prices.csv``, ``rental.csv``, ``models/*.config.json``), checked before anything uses it
(unique ids, finite numbers, efficiency factors for every GPU family). The records it builds
are those of :mod:`solver.catalog.data`."""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

from pydantic import (
    ValidationError,
)

from solver.catalog.data import (
    MAX_CATALOG_NUMBER,
    MAX_PRICE_USD,
    Catalog,
    architecture_fields,
    slug,
)
from solver.catalog.hf_config import load_hf_config, parse_hf_config
from solver.catalog.perf_factors import factors
from solver.catalog.rental_offers import RENTAL_FILE, load_offers
from solver.common.errors import InputError, Problem, problems_from_pydantic, short
from solver.common.inputs import (
    check_path,
    csv_records,
    guard,
    non_finite,
    parse_yaml,
    path_reason,
    read_csv_rows,
    read_text,
    too_large,
)
from solver.common.memo import Memo
from solver.common.parse_cache import cached_parse
from solver.common.paths import data_dir

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
        text = read_text(path, source, MAX_CATALOG_FILE_BYTES)
        return cached_parse(text, "yaml", lambda: parse_yaml(text, source))


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
    records = csv_records(rows, header, source, MAX_PRICE_ROWS)
    tables = {kind: {entry.get("id"): entry for entry in raw.get(kind) or []}
              for kind in PRICE_KINDS}
    seen: dict[str, int] = {}
    for line, row in records:
        entry_id = row["id"].strip()
        if entry_id in seen:
            raise InputError([Problem(source, f"line {line}.id", entry_id,
                                      f"priced twice (also line {seen[entry_id]})")])
        seen[entry_id] = line
        price = check_price(row["price_usd"], source, f"line {line}.price_usd")
        kind = next((k for k in PRICE_KINDS if entry_id in tables[k]), None)
        if kind is None:
            raise InputError([Problem(source, f"line {line}.id", entry_id,
                                      "no GPU, server or fabric with this id")])
        stamp = (row.get("as_of") or "").strip() or "user quote"
        _set_price(tables[kind][entry_id], kind, price, stamp,
                   (row.get("source") or "").strip() or f"user price overlay {path.name}")


def check_price(value: Any, source: str, where: str) -> float:
    """A price as ``prices.csv`` and the dashboard's Catalog page take it: a number above
    0 and at most :data:`MAX_PRICE_USD` (a free GPU, server or NIC is no price: the plan it
    would give is meaningless), else :class:`InputError` naming ``where``."""
    try:
        price = float(str(value).strip()) if not isinstance(value, int | float) \
            or isinstance(value, bool) else float(value)
    except ValueError:
        raise InputError([Problem(source, where, value, "not a number")]) from None
    if isinstance(value, bool) or not math.isfinite(price):
        raise InputError([Problem(source, where, value, "must be a finite number > 0")])
    if price <= 0:
        raise InputError([Problem(source, where, price, "must be more than 0 USD (a zero "
                                  "or negative price is not a price)")])
    if price > MAX_PRICE_USD:
        raise InputError([Problem(source, where, price, f"at most {MAX_PRICE_USD:,.0f} USD "
                                  "(a number the solver cannot scale)")])
    return price


def _set_price(entry: dict[str, Any], kind: str, price: float, as_of: str,
               source: str) -> None:
    """Set one GPU's, server's or fabric's (NIC) price and its basis: a quote, of
    ``as_of``, read from ``source``."""
    if kind == "fabrics":
        entry.update(nic_price_usd=price, nic_price_type="quote", nic_price_as_of=as_of,
                     nic_price_source=source)
    else:
        entry.update(price_usd=price, price_type="quote", price_as_of=as_of,
                     price_source=source)


ENTERED_SOURCE = "entered {day} on the dashboard's Catalog page"
"""The price source of a price typed on the dashboard (customer words: quote, entered DAY)."""


def entered_prices(catalog: Catalog, prices: dict[str, float],
                   day: str | None = None) -> Catalog:
    """``catalog`` with prices typed on the dashboard's Catalog page: each checked as
    ``prices.csv`` checks it (:func:`check_price`) and labelled a quote entered on ``day``
    (ISO date, default today): ``price_type: quote``, ``price_as_of: DAY``, source
    ``entered DAY on the dashboard's Catalog page`` (the plan's bill, the quote and the
    export then say "quote, entered DAY", never the catalog's "msrp, 2026-04" or "stale").
    Fabrics take the NIC price. A new catalog ``version`` (physics caches never mix)."""
    import datetime as dt

    if not prices:
        return catalog
    day = day or dt.date.today().isoformat()
    update: dict[str, Any] = {}
    for entry_id, value in sorted(prices.items()):
        price = check_price(value, "Catalog page price", entry_id)
        kind = next((k for k in PRICE_KINDS if entry_id in getattr(catalog, k)), None)
        if kind is None:
            raise InputError([Problem("Catalog page price", entry_id, value,
                                      "no GPU, server or fabric with this id")])
        table = update.setdefault(kind, dict(getattr(catalog, kind)))
        data = table[entry_id].model_dump()
        _set_price(data, kind, price, day, ENTERED_SOURCE.format(day=day))
        try:
            table[entry_id] = type(table[entry_id]).model_validate(data)
        except ValidationError as exc:
            raise InputError(problems_from_pydantic(exc, "Catalog page price")) from None
    digest = hashlib.sha256(json.dumps(sorted(prices.items())).encode()
                            + day.encode()).hexdigest()[:8]
    return catalog.model_copy(update={**update, "version": f"{catalog.version}+{digest}"})


def _present(path: Path) -> bool:
    """Whether a catalog folder has this file: True for a regular file, False when nothing
    is there; anything else there (a dangling or looping link, a pipe, a folder, a device)
    is that file's :class:`InputError`, never silently skipped."""
    if not os.path.lexists(path):
        return False
    check_path(path)
    return True


def overlay_files(user_dir: str | Path | None) -> list[Path]:
    """Every file a catalog overlay folder is read from (present or not): what no output of
    a run may overwrite (:func:`solver.common.outputs.check_output_path`)."""
    if user_dir is None:
        return []
    directory = Path(user_dir)
    names = [*FILES.values(), "prices.csv", RENTAL_FILE]
    found = [directory / name for name in names]
    models = directory / "models"
    if path_reason(models, folder=True) is None:
        found += sorted(models.glob("*.json")) + sorted(models.glob("*/config.json"))
    return found


def _load_raw(directory: Path) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    for key, name in FILES.items():
        path = directory / name
        if _present(path):
            raw[key] = _check_shape(key, _read_yaml(path), path)
    for entry in raw.get("models") or []:  # config paths are relative to their models.yaml
        if isinstance(entry, dict) and isinstance(entry.get("config"), str):
            entry["config"] = os.path.realpath(directory / entry["config"])
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
    """Every number finite and at most :data:`MAX_CATALOG_NUMBER` in size."""
    bad = non_finite(raw)
    if bad:
        raise InputError([Problem(origin, where, value, "must be a finite number")
                          for where, value in bad])
    _check_size(raw, origin)


def _check_size(data: Any, origin: str) -> None:
    """Every number at most :data:`MAX_CATALOG_NUMBER` in size (checked on the raw files and
    again on the validated catalog: YAML reads ``1e30`` as text, which validation turns
    into a number)."""
    huge = too_large(data, MAX_CATALOG_NUMBER)
    if huge:
        raise InputError([Problem(origin, where, value, f"at most {MAX_CATALOG_NUMBER:g} in "
                                  "size (a number the solver cannot scale)")
                          for where, value in huge])


def _model_folder(raw: dict[str, Any], directory: Path) -> int:
    """Add every Hugging Face config in an overlay's ``models/`` folder that no models.yaml
    entry names (``models/<name>.config.json`` or ``models/<name>/config.json``; id = the
    name in lower case). Returns how many were added."""
    folder = directory / "models"
    if not os.path.lexists(folder):
        return 0
    check_path(folder, folder=True)  # a link loop or a file named models: said, not skipped
    models = raw.setdefault("models", [])
    named = {e.get("config") for e in models
             if isinstance(e, dict) and isinstance(e.get("config"), str)}
    ids = {e.get("id") for e in models if isinstance(e, dict)}
    added = 0
    for path in sorted(folder.glob("*.json")) + sorted(folder.glob("*/config.json")):
        resolved = os.path.realpath(path)
        if resolved in named:
            continue
        name = (path.parent.name if path.name == "config.json"
                else path.name.removesuffix(".json").removesuffix(".config"))
        model_id = slug(name)
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
OVERRIDABLE = frozenset({"max_context", "default_precision"})


def _expand_configs(entries: list[dict[str, Any]], origin: str) -> list[dict[str, Any]]:
    """Fill the architecture fields of entries that name a ``config`` (only ``max_context``
    and ``default_precision`` may be given beside it; the rest follow from the file)."""
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
        catalog = Catalog.model_validate(data)
    except ValidationError as exc:
        raise InputError(problems_from_pydantic(exc, origin, id_keyed=True)) from None
    _check_size(catalog.model_dump(include={"gpus", "servers", "fabrics", "models", "costs",
                                            "rental"}), origin)
    return catalog


def check_catalog(catalog: Catalog) -> None:
    """Everything a solve checks later, checked now: the efficiency factors parse and every
    GPU's family has factors. Raises :class:`InputError`."""
    efficiency = factors(catalog)
    missing = [Problem("efficiency.yaml", f"families.{gpu.family}", gpu.id,
                       f"GPU {gpu.id} has family {gpu.family!r} with no efficiency factors; "
                       f"known: {', '.join(sorted(efficiency.families))}")
               for gpu in catalog.gpus.values() if gpu.family not in efficiency.families]
    if missing:
        raise InputError(missing)


CATALOGS: Memo[Catalog] = Memo(8)
"""Catalogs loaded, keyed by the overlay folder and the content of every catalog file read
(a file changed on disk gives a new catalog, not the one loaded before)."""

CATALOG_SUFFIXES = (".yaml", ".yml", ".csv", ".json")


def files_key(*directories: Path) -> str:
    """A hash of the catalog files in ``directories`` (and their ``models/`` folders): name
    and bytes of each (a file over the size cap by its size and time stamp: it is refused
    when read)."""
    digest = hashlib.sha256()
    for directory in directories:
        for folder in (directory, directory / "models"):
            try:  # a 6,000-character path or a link loop is refused when loaded, not here
                listing = sorted(folder.iterdir()) if folder.is_dir() else []
            except OSError:
                digest.update(b"unlistable")
                continue
            for path in listing:
                if path.suffix not in CATALOG_SUFFIXES or not path.is_file():
                    continue
                digest.update(str(path).encode() + b"\0")
                try:
                    stat = path.stat()
                    digest.update(path.read_bytes() if stat.st_size <= MAX_CATALOG_FILE_BYTES
                                  else f"{stat.st_size}:{stat.st_mtime_ns}".encode())
                except OSError:
                    digest.update(b"unreadable")
    return digest.hexdigest()


def load_catalog(user_dir: str | None = None) -> Catalog:
    """Load the built-in catalog, with ``user_dir`` overlaid on top when given (memoised by
    the files' content, :data:`CATALOGS`).

    Raises :class:`InputError` naming file, field and reason when the data are invalid.
    """
    folders = [builtin_catalog_dir()] + ([Path(user_dir)] if user_dir is not None else [])
    return CATALOGS.get((user_dir, files_key(*folders)), lambda: _load_catalog(user_dir))


def _load_catalog(user_dir: str | None) -> Catalog:
    builtin = builtin_catalog_dir()
    raw = _load_raw(builtin)
    origin = str(builtin)
    if user_dir is not None:
        directory = Path(user_dir)
        reason = path_reason(directory, folder=True)
        if reason is not None:  # a link loop, a 6,000-character path, a file
            raise InputError([Problem(user_dir, "--catalog", None, "catalog directory not found"
                                      if reason == "folder not found" else reason)])
        overlay = _load_raw(directory)
        for key, value in overlay.items():
            if key in ("costs", "efficiency"):
                merged = dict(raw.get(key) or {})
                merged.update(value)
                raw[key] = merged
            else:
                raw[key] = _merge_entries(raw.get(key) or [], value, directory / FILES[key])
        prices = directory / "prices.csv"
        has_prices = _present(prices)
        if has_prices:
            _apply_prices(raw, prices)
        added = _model_folder(raw, directory)
        rental = directory / RENTAL_FILE  # rental offers: built-in rows, then the overlay's
        has_rental = _present(rental)
        raw["rental"] = load_offers(_rental_files(builtin) + ([rental] if has_rental
                                                              else []), raw)
        if not overlay and not has_prices and not added and not has_rental:
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
