r"""Finite upper bounds for every integer variable of a :class:`~solver.optimize.linear.LinearModel`.

CP-SAT needs a finite domain for every variable, and every backend branches better on tight
ones. :func:`tighten_bounds` derives them from the model itself, so any block a module adds
(packing, redundancy, switches, ...) is covered without a hand-written bound. Two rules,
applied in rounds until nothing changes:

1. **Feasibility** (always valid). For a row ``Σ a_i y_i (≤|=) b`` and a variable ``v`` with
   ``a_v > 0``: ``v ≤ (b - min Σ_{i≠v} a_i y_i) / a_v``; for ``≥`` rows (and the ``=`` rows)
   the same with the signs flipped. Integer variables round down.

2. **Cost dominance** (keeps at least one optimum). A variable ``v`` with a non-negative
   objective coefficient that appears in no equality row only ever *helps* a row when it
   grows in rows where it "covers" (``≤`` with ``a_v < 0``, ``≥`` with ``a_v > 0``); in
   every other row a smaller ``v`` is looser. In a covering row, once
   ``|a_v| v ≥ max Σ_{i≠v} ±a_i y_i - ±b`` the row holds for every value of the others, so
   any optimum with a larger ``v`` stays feasible, and no dearer, with ``v`` lowered to
   ``need(v) = max over covering rows of ⌈(max activity of the others - b) / |a_v|⌉``.
   That is the demand bound of a node count: ``N[t] ≤ ⌈Σ_c g_c x̄_c / k_t⌉``.

Each round reads the bounds as they stood at its start, so a round is a few numpy operations
over the nonzeros (issue 18: the pure-Python loop cost ~36 ms of each sensitivity solve); the
former loop lives on in ``tests/test_bounds.py`` as the reference both must agree with
exactly.

A variable still unbounded after both rules (there should be none; ``tests/test_mip.py``
checks the shipped scenarios) keeps ``high = None`` and the backend reports it.
"""

from __future__ import annotations

import math
from itertools import chain
from typing import TYPE_CHECKING

from solver.optimize.linear import LinearModel

if TYPE_CHECKING:
    import numpy as np

TOLERANCE = 1e-9
MAX_ROUNDS = 20


def _floor(value: float) -> float:
    return float(math.floor(value + 1e-9 * max(1.0, abs(value)) + 1e-7))


def _ceil(value: float) -> float:
    return float(math.ceil(value - 1e-9 * max(1.0, abs(value)) - 1e-7))


def tighten_bounds(model: LinearModel) -> int:
    """Tighten ``model``'s variable upper bounds in place; returns how many changed.

    Vectorised over the nonzeros (numpy). A round reads the bounds as they were at its start
    (every variable's candidates use the row ranges of the round's start, as the reference
    does), so one round is a handful of array operations. Row ranges are sums taken with
    :func:`numpy.bincount`, which adds the nonzeros in order, row by row in coefficient
    order: the same floating-point sums as the reference loop, hence the same bounds."""
    import numpy as np  # here, not at import: `procure --version` loads no numpy

    names = list(model.variables)
    n_vars = len(names)
    if not n_vars:
        return 0
    index = {name: i for i, name in enumerate(names)}
    constraints = model.constraints
    n_rows = len(constraints)
    # the nonzeros row by row, each row in its coefficient order (the reference's sum order)
    sizes = np.fromiter(map(len, (c.coeffs for c in constraints)), np.intp, n_rows)
    nnz = int(sizes.sum())
    row = np.repeat(np.arange(n_rows, dtype=np.intp), sizes)
    col = np.fromiter(map(index.__getitem__, chain.from_iterable(c.coeffs for c in constraints)),
                      np.intp, nnz)
    a = np.fromiter(chain.from_iterable(c.coeffs.values() for c in constraints), float, nnz)
    row_sense = np.array([c.sense for c in constraints], dtype=object)
    rhs = np.fromiter((c.rhs for c in constraints), float, n_rows)
    le_row = row_sense == "<="
    ge_row = row_sense == ">="
    eq_row = row_sense == "=="
    b = rhs[row]
    le, ge, eq = le_row[row], ge_row[row], eq_row[row]
    pos, neg = a > 0, a < 0
    lows = np.array([v.low for v in model.variables.values()], dtype=float)
    free = np.array([v.high is None for v in model.variables.values()])
    highs = np.array([0.0 if v.high is None else v.high for v in model.variables.values()],
                     dtype=float)
    integer = np.array([v.integer for v in model.variables.values()])
    in_equality = np.zeros(n_vars, dtype=bool)
    in_equality[col[eq]] = True
    objective = np.array([model.objective.get(name, 0.0) for name in names], dtype=float)
    dominated = ~in_equality & (objective >= 0)
    # which rule each nonzero feeds (fixed: senses and signs do not change)
    feasible_pos = pos & (le | eq)          # v ≤ (b - min others) / a
    feasible_neg = neg & (ge | eq)          # v ≤ (b - max others) / a
    cover_pos = pos & ge & dominated[col]   # need ≥ (b - min others) / a
    cover_neg = neg & le & dominated[col]   # need ≥ (max others - b) / -a
    a_lo = a * lows[col]                    # lows never change
    touched = np.zeros(n_vars, dtype=bool)
    changed = 0
    with np.errstate(all="ignore"):
        for _ in range(MAX_ROUNDS):
            # row ranges over the round's bounds, unbounded contributions counted apart
            unbounded = free[col]
            a_hi = np.where(unbounded, 0.0, a * highs[col])
            low = np.bincount(row, np.where(pos, a_lo, a_hi), n_rows)
            high = np.bincount(row, np.where(pos, a_hi, a_lo), n_rows)
            low_inf = np.bincount(row, ~pos & unbounded, n_rows)
            high_inf = np.bincount(row, pos & unbounded, n_rows)
            # range of the others: a > 0 reads the minimum, a < 0 the maximum
            low_wo = np.where(low_inf[row] == 0, low[row] - a_lo, -math.inf)
            high_wo = np.where(high_inf[row] == 0, high[row] - a_lo, math.inf)
            from_low = (b - low_wo) / a
            candidates = np.where(feasible_pos, from_low,
                                  np.where(feasible_neg, (b - high_wo) / a, math.inf))
            bound = np.full(n_vars, math.inf)
            np.fmin.at(bound, col, candidates)
            needs = np.where(cover_pos, from_low,
                             np.where(cover_neg, (high_wo - b) / -a, -math.inf))
            need = lows.copy()
            np.fmax.at(need, col, needs)
            need[~dominated] = math.inf
            round_need = integer & np.isfinite(need)
            need = np.where(round_need, _ceil_array(need), need)
            bound = np.fmin(bound, need)
            finite = np.isfinite(bound)
            bound = np.where(integer & finite, _floor_array(bound), bound)
            bound = np.where(bound < lows, lows, bound)
            tighter = finite & (free | (bound < highs - TOLERANCE))
            changed_this_round = int(tighter.sum())
            highs = np.where(tighter, bound, highs)
            free = free & ~tighter
            touched |= tighter
            changed += changed_this_round
            if not changed_this_round:
                break
    for i in np.flatnonzero(touched):  # the others keep their bound as given (an int stays one)
        model.variables[names[i]].high = float(highs[i])
    return changed


def _floor_array(values: np.ndarray) -> np.ndarray:
    """:func:`_floor` elementwise (the same operations in the same order)."""
    import numpy as np

    return np.floor(values + 1e-9 * np.maximum(1.0, np.abs(values)) + 1e-7)


def _ceil_array(values: np.ndarray) -> np.ndarray:
    """:func:`_ceil` elementwise."""
    import numpy as np

    return np.ceil(values - 1e-9 * np.maximum(1.0, np.abs(values)) - 1e-7)
