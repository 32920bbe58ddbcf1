"""Upper limits on the numbers a command line takes: what is sane, and what runs in bounded
time and memory.

Every numeric flag is checked before any work (:func:`check_range`): a value outside its
range, or not a finite number, is an :class:`~solver.common.errors.InputError` naming the
flag, the value and the range (exit 2). Without the limits, ``procure fit --gpus 1e9``
ran in time linear in the GPU count and ``procure batch --workers 1e9`` forked until the
system refused.
"""

from __future__ import annotations

import math
import os

from solver.common.errors import InputError, Problem

MAX_GPUS = 100_000
"""GPUs in one estimate (``--gpus``): an RFQ's ``constraints.max_gpus`` allows no more."""
MAX_GPUS_PER_NODE = 72
"""GPUs in one node (``--gpus-per-node``): the most GPU slots a catalog server may have."""
MAX_TIME_LIMIT_S = 7 * 24 * 3600.0
"""``--time-limit``: one week."""
MAX_PARETO_POINTS = 100
"""``pareto --points``: each point is a solve."""
MIN_WORKERS_ALLOWED = 2
"""``--workers`` may always be 2, even on one core (the same results, only slower)."""


def usable_cores() -> int:
    """The cores this process may use (``taskset`` limits them)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def max_workers() -> int:
    """The most worker processes ``--workers`` may ask for: the usable cores (at least
    :data:`MIN_WORKERS_ALLOWED`); more processes than cores only compete for them."""
    return max(MIN_WORKERS_ALLOWED, usable_cores())


def _bad(flag: str, value: object, reason: str) -> InputError:
    return InputError([Problem("command line", flag, value, reason)])


def check_range(flag: str, value: float | None, low: float, high: float, *,
                low_open: bool = False) -> None:
    """``value`` (None: not given) within ``[low, high]`` (``low_open``: ``(low, high]``)
    and finite, else an :class:`InputError` naming ``flag``."""
    if value is None:
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise _bad(flag, value, "must be a finite number")
    if value > high or value < low or (low_open and value == low):
        bracket = "(" if low_open else "["
        raise _bad(flag, value, f"must be in {bracket}{low:g}, {high:g}]")


def check_workers(value: int | None, flag: str = "--workers") -> None:
    """``--workers``: 1 up to :func:`max_workers` (None: the default, the usable cores)."""
    if value is None:
        return
    limit = max_workers()
    if not 1 <= value <= limit:
        raise _bad(flag, value, f"must be 1 to {limit} (the cores this process may use"
                                + (f", at least {MIN_WORKERS_ALLOWED} allowed"
                                   if limit == MIN_WORKERS_ALLOWED else "") + ")")
