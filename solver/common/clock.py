"""When this ``procure`` process started (issue 31): ``--time-limit`` counts from here, so
the whole run (imports, catalog, RFQ, candidates, MIP, relaxations) stays within it."""

from __future__ import annotations

import time

STARTED_S = time.perf_counter()
"""``time.perf_counter()`` when the CLI was first imported (before its heavy imports)."""


def left_of(limit_s: float | None, floor_s: float = 0.01) -> float | None:
    """Seconds of ``limit_s`` left since :data:`STARTED_S` (at least ``floor_s``: a plan
    search still starts and reports the time-out); None without a limit."""
    if limit_s is None:
        return None
    return max(floor_s, limit_s - (time.perf_counter() - STARTED_S))
