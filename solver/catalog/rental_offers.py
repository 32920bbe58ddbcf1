"""Rental offers as catalog data: ``catalog/rental.csv`` and its overlays.

One row is one way to rent GPUs by the hour: an offer id, the catalog GPU, GPUs per instance
(the unit rented), the fabric the offer includes between instances (a fabric id of
``fabrics.yaml``, ``none`` when instances are independent), the price type (``on_demand``,
``reserved_1y``, ``reserved_3y``), USD per GPU-hour, the minimum term in hours (0: billed by
use; a 24-hour capacity block: 24; a one-year reservation: 8760), the provider class
(``hyperscaler`` or ``gpu-cloud``), the public source URL and the date it was read.

A user's ``--catalog DIR`` may hold its own ``rental.csv``: rows with a known ``offer_id``
replace the built-in row, new ids are added (the ``prices.csv`` pattern). Every bad row is
rejected with the file, the line, the field and the reason (exit 2).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from solver.common.errors import InputError, Problem, short
from solver.common.inputs import csv_records, read_csv_rows

RENTAL_FILE = "rental.csv"
PriceType = Literal["on_demand", "reserved_1y", "reserved_3y"]
PRICE_TYPES: tuple[str, ...] = ("on_demand", "reserved_1y", "reserved_3y")
PROVIDER_CLASSES: tuple[str, ...] = ("hyperscaler", "gpu-cloud")
COLUMNS: tuple[str, ...] = ("offer_id", "gpu", "gpus_per_instance", "fabric", "price_type",
                            "usd_per_gpu_hour", "min_term_hours", "provider_class", "source",
                            "as_of")
OPTIONAL_COLUMNS: tuple[str, ...] = ("note",)
MAX_RENTAL_ROWS = 10_000
MAX_RENTAL_BYTES = 5_000_000
MAX_USD_PER_GPU_HOUR = 10_000.0
"""The most a rented GPU-hour may cost (real offers: a few dollars); 1e30 made HiGHS fail."""
MAX_RENTAL_NUMBER = 1e9
"""The largest number any other column may hold (a number the solver cannot scale)."""
INSTANCE_SIZES = (1, 2, 4, 8, 16, 32, 64, 72)  # GPUs per instance the physics can lay out


class RentalOffer(BaseModel):
    """One rentable instance type at one price (module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    gpu: str
    gpus_per_instance: int = Field(ge=1)
    fabric: str
    price_type: PriceType
    usd_per_gpu_hour: float = Field(gt=0, le=MAX_USD_PER_GPU_HOUR)
    min_term_hours: float = Field(ge=0)
    provider_class: Literal["hyperscaler", "gpu-cloud"]
    source: str = Field(min_length=3)
    as_of: str = Field(min_length=4)
    note: str = ""

    @property
    def usd_per_instance_hour(self) -> float:
        return self.usd_per_gpu_hour * self.gpus_per_instance

    def billed_hours(self, hours_used: float) -> float:
        """Hours paid for ``hours_used`` hours of use: at least the minimum term."""
        return max(hours_used, self.min_term_hours)


def read_rows(path: Path) -> list[tuple[int, dict[str, str]]]:
    """The rows of one ``rental.csv`` as (line number, cells by column), header checked."""
    source = str(path)
    rows = read_csv_rows(path, MAX_RENTAL_BYTES)
    header = [cell.strip() for cell in rows[0]] if rows else []
    missing = [c for c in COLUMNS if c not in header]
    unknown = [c for c in header if c not in COLUMNS + OPTIONAL_COLUMNS]
    if missing or unknown:
        what = (f"missing column(s) {', '.join(missing)}" if missing
                else f"unknown column(s) {', '.join(unknown)}")
        raise InputError([Problem(source, "header", short(header) if header else None,
                                  f"{RENTAL_FILE} needs the header {','.join(COLUMNS)}[,note]; "
                                  f"{what}")])
    return [(line, {k: v.strip() for k, v in row.items()})
            for line, row in csv_records(rows, header, source, MAX_RENTAL_ROWS)]


def _number(source: str, line: int, field: str, text: str, *, integer: bool = False,
            positive: bool = False, maximum: float = MAX_RENTAL_NUMBER) -> float:
    where = f"line {line}.{field}"
    try:
        value = float(text)
    except ValueError:
        raise InputError([Problem(source, where, text, "not a number")]) from None
    if not math.isfinite(value) or value < 0 or (positive and value <= 0):
        raise InputError([Problem(source, where, text, "must be a finite number "
                                  + ("> 0" if positive else ">= 0"))])
    if value > maximum:
        raise InputError([Problem(source, where, text, f"at most {maximum:,g} (a number the "
                                  "solver cannot scale)")])
    if integer and not value.is_integer():
        raise InputError([Problem(source, where, text, "must be a whole number")])
    return value


def parse_offer(source: str, line: int, row: dict[str, str], gpus: set[str],
                fabrics: set[str]) -> RentalOffer:
    """One row as a :class:`RentalOffer`, every field checked against the catalog."""
    def bad(field: str, reason: str) -> InputError:
        return InputError([Problem(source, f"line {line}.{field}", row.get(field), reason)])

    offer_id = row["offer_id"]
    if not offer_id or not offer_id[0].isalnum() or offer_id != offer_id.lower() or any(
            not (ch.isalnum() or ch in ".-") for ch in offer_id):
        raise bad("offer_id", "lower-case letters, digits, '.' and '-'")
    if row["gpu"] not in gpus:
        raise bad("gpu", "no GPU with this id in the catalog (procure catalog list)")
    if row["fabric"] not in fabrics:
        raise bad("fabric", f"no fabric with this id; known: {', '.join(sorted(fabrics))}")
    if row["price_type"] not in PRICE_TYPES:
        raise bad("price_type", f"one of {', '.join(PRICE_TYPES)}")
    if row["provider_class"] not in PROVIDER_CLASSES:
        raise bad("provider_class", f"one of {', '.join(PROVIDER_CLASSES)}")
    size = _number(source, line, "gpus_per_instance", row["gpus_per_instance"], integer=True,
                   positive=True)
    if int(size) not in INSTANCE_SIZES:
        raise bad("gpus_per_instance", f"one of {', '.join(map(str, INSTANCE_SIZES))}")
    price = _number(source, line, "usd_per_gpu_hour", row["usd_per_gpu_hour"], positive=True,
                    maximum=MAX_USD_PER_GPU_HOUR)
    term = _number(source, line, "min_term_hours", row["min_term_hours"])
    for field, least in (("source", 3), ("as_of", 4)):
        if len(row[field]) < least:
            raise bad(field, f"required (at least {least} characters)")
    return RentalOffer(id=offer_id, gpu=row["gpu"], gpus_per_instance=int(size),
                       fabric=row["fabric"], price_type=row["price_type"],
                       usd_per_gpu_hour=price, min_term_hours=term,
                       provider_class=row["provider_class"],
                       source=row["source"], as_of=row["as_of"], note=row.get("note", ""))


def load_offers(paths: list[Path], raw: dict[str, Any]) -> dict[str, RentalOffer]:
    """Offers of the built-in ``rental.csv`` with each overlay file on top (by offer id), as
    validated :class:`RentalOffer` objects; GPU and fabric ids are checked against ``raw``
    (the merged catalog entries)."""
    gpus = {str(e.get("id")) for e in raw.get("gpus") or [] if isinstance(e, dict)}
    fabrics = {str(e.get("id")) for e in raw.get("fabrics") or [] if isinstance(e, dict)}
    offers: dict[str, RentalOffer] = {}
    for path in paths:
        seen: dict[str, int] = {}
        for line, row in read_rows(path):
            offer_id = row["offer_id"]
            if offer_id in seen:
                raise InputError([Problem(str(path), f"line {line}.offer_id", offer_id,
                                          f"given twice (also line {seen[offer_id]})")])
            seen[offer_id] = line
            offers[offer_id] = parse_offer(str(path), line, row, gpus, fabrics)
    return offers
