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

A variable still unbounded after both rules (there should be none; ``tests/test_mip.py``
checks the shipped scenarios) keeps ``high = None`` and the backend reports it.
"""

from __future__ import annotations

import math

from solver.optimize.linear import LinearModel

TOLERANCE = 1e-9
MAX_ROUNDS = 20


def _floor(value: float) -> float:
    return float(math.floor(value + 1e-9 * max(1.0, abs(value)) + 1e-7))


def _ceil(value: float) -> float:
    return float(math.ceil(value - 1e-9 * max(1.0, abs(value)) - 1e-7))


class _Row:
    """One row's activity range over the current bounds: a finite part plus a count of
    unbounded contributions, so the range without one variable is O(1)."""

    __slots__ = ("coeffs", "sense", "rhs", "low", "low_inf", "high", "high_inf")

    def __init__(self, coeffs: dict[str, float], sense: str, rhs: float) -> None:
        self.coeffs, self.sense, self.rhs = coeffs, sense, rhs
        self.low = self.high = 0.0
        self.low_inf = self.high_inf = 0

    def refresh(self, lows: dict[str, float], highs: dict[str, float | None]) -> None:
        self.low = self.high = 0.0
        self.low_inf = self.high_inf = 0
        for name, a in self.coeffs.items():
            lo, hi = lows[name], highs[name]
            if a > 0:
                self.low += a * lo
                if hi is None:
                    self.high_inf += 1
                else:
                    self.high += a * hi
            else:
                self.high += a * lo
                if hi is None:
                    self.low_inf += 1
                else:
                    self.low += a * hi

    def without(self, name: str, a: float, lows: dict[str, float],
                highs: dict[str, float | None]) -> tuple[float, float]:
        """(min, max) activity of the row without ``name`` (``a`` its coefficient)."""
        lo, hi = lows[name], highs[name]
        if a > 0:
            low = self.low - a * lo if self.low_inf == 0 else -math.inf
            if hi is None:
                high = self.high if self.high_inf == 1 else math.inf
            else:
                high = self.high - a * hi if self.high_inf == 0 else math.inf
        else:
            high = self.high - a * lo if self.high_inf == 0 else math.inf
            if hi is None:
                low = self.low if self.low_inf == 1 else -math.inf
            else:
                low = self.low - a * hi if self.low_inf == 0 else -math.inf
        return low, high


def tighten_bounds(model: LinearModel) -> int:
    """Tighten ``model``'s variable upper bounds in place; returns how many changed."""
    lows = {n: v.low for n, v in model.variables.items()}
    highs: dict[str, float | None] = {n: v.high for n, v in model.variables.items()}
    rows = [_Row(c.coeffs, c.sense, c.rhs) for c in model.constraints]
    columns: dict[str, list[tuple[_Row, float]]] = {n: [] for n in model.variables}
    for row in rows:
        for name, a in row.coeffs.items():
            columns[name].append((row, a))
    in_equality = {n for row in rows if row.sense == "==" for n in row.coeffs}
    changed = 0
    for _ in range(MAX_ROUNDS):
        for row in rows:
            row.refresh(lows, highs)
        changed_this_round = 0
        for name, var in model.variables.items():
            bound = math.inf
            dominated = name not in in_equality and model.objective.get(name, 0.0) >= 0
            need = lows[name] if dominated else math.inf
            for row, a in columns[name]:
                low, high = row.without(name, a, lows, highs)
                if row.sense in ("<=", "==") and a > 0:
                    bound = min(bound, (row.rhs - low) / a)
                if row.sense in (">=", "==") and a < 0:
                    bound = min(bound, (row.rhs - high) / a)
                if dominated and row.sense == "<=" and a < 0:
                    need = max(need, (high - row.rhs) / -a)
                if dominated and row.sense == ">=" and a > 0:
                    need = max(need, (row.rhs - low) / a)
            if var.integer and math.isfinite(need):
                need = _ceil(need)
            bound = min(bound, need)
            if not math.isfinite(bound):
                continue
            if var.integer:
                bound = _floor(bound)
            bound = max(bound, lows[name])
            current = highs[name]
            if current is None or bound < current - TOLERANCE:
                highs[name] = bound
                changed_this_round += 1
        changed += changed_this_round
        if not changed_this_round:
            break
    for name, var in model.variables.items():
        var.high = highs[name]
    return changed
