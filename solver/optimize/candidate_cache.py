"""Candidate layouts kept on disk across runs, keyed by content (issue 31, warm starts).

A first candidate build is most of a cold solve (~110 k physics estimates for 50
workloads). One workload's candidates (and why the others were rejected) depend only on
the catalog's content, the workload, the rest of the RFQ that shapes its candidates (its
constraints, vendor, rental and horizon: the RFQ with only this workload in it), whether
every size is wanted (Pareto) and the code that computes them. An entry is keyed by a hash
of all of these, the code as the bytes of every ``solver`` source file: a changed catalog,
RFQ, price or line of code is a miss and is built again, so a hit is exactly what a build
would give (``bench/candidate_dump.py`` compares whole tables built cold and from here).

Where: ``$PROCURE_CANDIDATE_CACHE`` when set (``off`` or empty turns it off), else the
``candidates`` folder of the parse cache (:func:`solver.common.parse_cache.cache_dir`; off
when that is off). Entries are written atomically; one that cannot be read is built again.
Each entry is a few kB to a few MB; delete the folder to reclaim the space.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Any

from solver import __version__
from solver.catalog.data import Catalog, content_key
from solver.common.parse_cache import cache_dir, load_entry, store_entry
from solver.rfq.schema import AnyWorkload, Rfq, TrainingWorkload

CACHE_ENV = "PROCURE_CANDIDATE_CACHE"
FORMAT = 1
"""Bumped when what is stored changes shape."""
_CODE: list[str] = []


def candidate_cache_dir() -> Path | None:
    """The folder of kept candidate lists, or None when the cache is off."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen is not None:
        chosen = chosen.strip()
        return None if chosen in ("", "off", "0") else Path(chosen)
    parent = cache_dir()
    return None if parent is None else parent / "candidates"


def code_version() -> str:
    """A hash of every ``solver`` source file (computed once per process)."""
    if not _CODE:
        digest = hashlib.sha256(f"{__version__}|{sys.version}".encode())
        root = Path(__file__).resolve().parent.parent
        for path in sorted(root.rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
        _CODE.append(digest.hexdigest())
    return _CODE[0]


def workload_key(catalog: Catalog, rfq: Rfq, spec: AnyWorkload, all_sizes: bool,
                 params: object) -> str:
    """The key of one workload's candidates: code, catalog content, the RFQ with only this
    workload, ``all_sizes`` (for a training job only: a service's candidates are the same
    with or without it, so both tables share its entry) and the cost parameters
    (``params``, by its ``repr``). The RFQ's id and customer name no candidate: RFQs that
    differ only there share entries (a batch of one customer's variants)."""
    alone = rfq.model_copy(update={"id": "rfq", "customer": None, "workloads": [spec]})
    sizes = all_sizes and isinstance(spec, TrainingWorkload)  # read by training spans only
    text = "|".join((str(FORMAT), code_version(), content_key(catalog), str(sizes),
                     repr(params), alone.model_dump_json()))
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def load(key: str) -> Any | None:
    """The entry kept under ``key``, or None (no cache, no entry, an unreadable one)."""
    folder = candidate_cache_dir()
    if folder is None:
        return None
    return load_entry(folder / f"{key}.pickle")


def store(key: str, value: Any) -> None:
    """Keep ``value`` under ``key`` (atomically: a temporary file renamed), or not at all."""
    folder = candidate_cache_dir()
    if folder is None:
        return
    store_entry(folder / f"{key}.pickle", value)
