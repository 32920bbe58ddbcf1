"""What the serving model knows and does not know about a GPU family x engine.

``procure calibrate --write-factors`` records, per GPU family and serving engine, how many
published measurements the fit used and the median error on them with each whole source
held out (``serving.calibration`` in ``catalog/efficiency.yaml``). A plan on a family x
engine with at least ``calibrated_min_rows`` rows is planned on the prediction as it is;
one with fewer (an AMD family on an engine nobody measured, a consumer card) is planned
with an uncertainty margin: its latencies ``1 + margin`` higher and its throughput that
much lower, where the margin is the held-out error of the nearest calibrated family on that
engine (same vendor first, else the worst calibrated family), never below
``uncalibrated_margin_floor_pct``. Calibrated means at least ``calibrated_min_rows`` rows from
at least two sources. The plan states both (JSON ``workloads[].calibration``).
"""

from __future__ import annotations

from dataclasses import dataclass

from solver.catalog.data import Catalog, content_key
from solver.catalog.perf_factors import CalibrationEntry, factors
from solver.common.memo import Memo


@dataclass(frozen=True)
class ServingCalibration:
    """The calibration behind one serving prediction and the margin it is planned with."""

    family: str
    engine: str
    rows: int
    sources: int
    held_out_error_pct: float | None
    margin_applied_pct: float
    basis: str  # in words: calibrated, or whose error the margin borrows

    @property
    def margin(self) -> float:
        """The margin as a fraction (0.25 = latencies planned 25 % higher)."""
        return self.margin_applied_pct / 100.0

    @property
    def calibrated(self) -> bool:
        return self.margin_applied_pct == 0.0

    def to_dict(self) -> dict[str, object]:
        """The plan JSON's ``workloads[].calibration``."""
        return {"family": self.family, "engine": self.engine, "rows": self.rows,
                "sources": self.sources,
                "held_out_error_pct": (None if self.held_out_error_pct is None
                                       else round(self.held_out_error_pct, 1)),
                "calibrated": self.calibrated,
                "margin_applied_pct": round(self.margin_applied_pct, 1),
                "basis": self.basis}


CALIBRATIONS: Memo[ServingCalibration] = Memo(4096)
"""Calibrations looked up, keyed by catalog content, GPU and engine."""


def serving_calibration(catalog: Catalog, gpu_id: str, engine: str) -> ServingCalibration:
    """The calibration of ``gpu_id``'s family on ``engine`` and the margin a plan carries."""
    return CALIBRATIONS.get((content_key(catalog), gpu_id, engine),
                            lambda: _calibration(catalog, gpu_id, engine))


def _calibration(catalog: Catalog, gpu_id: str, engine: str) -> ServingCalibration:
    serving = factors(catalog).serving
    gpu = catalog.gpus[gpu_id]
    table = serving.calibration
    entry = table.get(f"{gpu.family}/{engine}") or CalibrationEntry(rows=0, sources=0)
    if _calibrated(entry, serving.calibrated_min_rows):
        return ServingCalibration(gpu.family, engine, entry.rows, entry.sources,
                                  entry.held_out_error_pct, 0.0, "calibrated")
    floor = serving.uncalibrated_margin_floor_pct
    vendor_of = {g.family: g.vendor for g in catalog.gpus.values()}
    peers = {name.split("/", 1)[0]: e for name, e in table.items()
             if name.endswith(f"/{engine}") and _calibrated(e, serving.calibrated_min_rows)}
    same_vendor = {fam: e for fam, e in peers.items() if vendor_of.get(fam) == gpu.vendor}
    pool = same_vendor or peers
    if pool:
        nearest, basis_entry = max(pool.items(),
                                   key=lambda kv: (kv[1].rows if same_vendor else
                                                   kv[1].held_out_error_pct or 0.0))
        borrowed = basis_entry.held_out_error_pct or 0.0
        measured = (f"{entry.rows} published measurements" if entry.rows
                    else "no published measurements")
        basis = (f"{measured} of {gpu.family} on {engine}: margin = the held-out error of "
                 f"{nearest} on {engine}")
    else:
        errors = [e.held_out_error_pct or 0.0 for e in table.values()
                  if _calibrated(e, serving.calibrated_min_rows)]
        borrowed = max(errors, default=floor)
        basis = (f"no calibrated family on {engine}: margin = the largest held-out error of "
                 "any calibrated family and engine")
    margin = max(floor, borrowed)
    return ServingCalibration(gpu.family, engine, entry.rows, entry.sources,
                              entry.held_out_error_pct, margin, basis)


def _calibrated(entry: CalibrationEntry, min_rows: int) -> bool:
    """Enough rows from at least two sources: one source alone cannot be held out without
    leaving the family x engine unmeasured."""
    return (entry.rows >= min_rows and entry.sources >= 2
            and entry.held_out_error_pct is not None)
