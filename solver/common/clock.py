"""When this ``procure`` process started (issue 31): ``--time-limit`` counts from here, so
the whole run (the interpreter's own start, imports, catalog, RFQ, candidates, MIP,
relaxations) stays within it."""

from __future__ import annotations

import os
import time


def process_age_s() -> float:
    """Seconds since this process was started, from the kernel's record of it (Linux
    ``/proc``; 0 where there is none). The interpreter's start-up and the imports before this
    module count too: on a loaded 2-core machine they took 0.1-0.2 s of a 1 s limit."""
    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            # fields after the command name (which may hold spaces) start at field 3;
            # field 22 is the start time in clock ticks after boot
            started_ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as handle:
            uptime_s = float(handle.read().split()[0])
        return max(0.0, uptime_s - started_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


STARTED_S = time.perf_counter() - process_age_s()
"""``time.perf_counter()`` at this process's start: this module is imported first of all by
the CLI, and it takes off the time the process ran before that."""


def left_of(limit_s: float | None, floor_s: float = 0.01) -> float | None:
    """Seconds of ``limit_s`` left since :data:`STARTED_S` (at least ``floor_s``: a plan
    search still starts and reports the time-out); None without a limit."""
    if limit_s is None:
        return None
    return max(floor_s, limit_s - (time.perf_counter() - STARTED_S))
