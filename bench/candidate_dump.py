"""A canonical dump of every scenario's candidate tables, hashed (issue 31): every field of
every candidate and its estimate (floats by ``repr``, i.e. to the last digit), the node
types, fabrics, rejections and storage, for each shipped scenario (also with ``all_sizes``,
the Pareto build) and three seeded portfolios. A change that must not move the physics
(vectorising it, caching candidate tables) leaves every hash unchanged.

    python bench/candidate_dump.py                 # one hash per table and the total
    python bench/candidate_dump.py --write d.json  # the whole canonical dump, to diff
    python bench/candidate_dump.py --check bench/candidate_dump.json  # against main's hashes
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from solver.catalog.data import Catalog
from solver.catalog.load import load_catalog
from solver.optimize.candidates import build_candidates, clear_caches
from solver.optimize.records import CandidateTable
from solver.rfq.portfolio import portfolio_rfq
from solver.rfq.schema import Rfq, load_rfq, validate_rfq

ROOT = Path(__file__).resolve().parent.parent
PORTFOLIOS = ((10, 1), (25, 2), (50, 3))  # (workloads, seed), open catalog, no limits


def canonical(value: Any) -> Any:
    """``value`` as JSON-ready data whose text is the same exactly when the values are:
    floats by ``repr`` (every digit), dataclasses by field, dicts with sorted keys; the
    repository's folder in a string (models from a ``config.json`` path) as
    ``<repository>``, so that two checkouts compare."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):  # a config.json model's id is its path: not the checkout's
        return value.replace(str(ROOT), "<repository>")
    if isinstance(value, bool | int) or value is None:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"__type__": type(value).__name__,
                **{f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    if hasattr(value, "model_dump"):  # pydantic records (rental offers)
        return canonical(value.model_dump())
    return repr(value)


def table_data(table: CandidateTable) -> dict[str, Any]:
    return canonical({"node_types": table.node_types, "fabrics": table.fabrics,
                      "candidates": table.candidates, "rejected": table.rejected,
                      "storage": table.storage, "params": table.params})


def cases(catalog: Catalog) -> list[tuple[str, Rfq, bool]]:
    """(name, RFQ, all_sizes) of every table dumped."""
    out: list[tuple[str, Rfq, bool]] = []
    for path in sorted((ROOT / "scenarios").iterdir()):
        if path.suffix not in (".yaml", ".json"):
            continue
        rfq = load_rfq(path, catalog)
        out.append((path.name, rfq, False))
        out.append((f"{path.name} all_sizes", rfq, True))
    for n, seed in PORTFOLIOS:
        out.append((f"portfolio {n} seed {seed}",
                    validate_rfq(portfolio_rfq(n, seed, limits=False), catalog), False))
    return out


def dump(catalog: Catalog) -> dict[str, Any]:
    """Every case's canonical table, each built cold (physics memos emptied)."""
    out = {}
    for name, rfq, all_sizes in cases(catalog):
        clear_caches()
        out[name] = table_data(build_candidates(catalog, rfq, all_sizes=all_sizes))
    return out


def digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="write the whole dump (JSON) here")
    parser.add_argument("--check", type=Path, help="compare with hashes written by --hashes (bench/candidate_dump.json)")
    parser.add_argument("--hashes", type=Path, help="write the per-case hashes here")
    args = parser.parse_args()
    data = dump(load_catalog())
    hashes = {name: digest(table) for name, table in data.items()}
    hashes["total"] = digest(data)
    for name, value in hashes.items():
        print(f"{name:44s} {value[:16]}")
    if args.write:
        args.write.write_text(json.dumps(data, sort_keys=True, indent=1))
    if args.hashes:
        args.hashes.write_text(json.dumps(hashes, indent=1, sort_keys=True) + "\n")
    if args.check:
        want = json.loads(args.check.read_text())
        moved = sorted(k for k in want.keys() | hashes.keys() if want.get(k) != hashes.get(k))
        if moved:
            print("CHANGED: " + ", ".join(moved), file=sys.stderr)
            return 1
        print("unchanged: every table hashes as before")
    return 0


if __name__ == "__main__":
    sys.exit(main())
