"""Vectorised bound tightening (issue 18: repeated solves): :func:`tighten_bounds` gives
exactly the bounds, and the count of changes, of the former pure-Python loop
(``_tighten_bounds_reference``) on the models the solver builds (every shipped scenario,
seeded portfolios, the random instances of tests/test_mip.py) and on random small models
with ≤, ≥ and = rows, negative coefficients, negative lower bounds, continuous and
unbounded variables."""

from __future__ import annotations

import copy
import math
import random
from pathlib import Path

import pytest
from test_mip import random_instance

import solver.optimize.mip as mip
from solver.optimize.bounds import MAX_ROUNDS, TOLERANCE, _ceil, _floor, tighten_bounds
from solver.optimize.candidates import build_candidates
from solver.optimize.linear import Constraint, LinearModel
from solver.rfq.portfolio import portfolio_rfq
from solver.rfq.schema import load_rfq, validate_rfq

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted(p for p in (ROOT / "scenarios").iterdir()
                   if p.suffix in (".yaml", ".yml", ".json"))
#: scenarios whose candidate tables take over 0.4 s CPU to build: with the slow tests
HEAVY = {"finetune-70b-full-cluster", "hybrid-service-and-job", "moe-deepseek-serving",
         "pretrain-70b-open", "qlora-405b-one-node", "rent-oneoff-jobs"}


# --- the former loop, the reference ---------------------------------------------------

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


def _tighten_bounds_reference(model: LinearModel) -> int:
    """The former pure-Python ``tighten_bounds``, row by row and variable by variable: the
    oracle the vectorised one must match (the same bounds, the same count)."""
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


def assert_same_bounds(model: LinearModel) -> int:
    """Tighten two copies of ``model``, old and new; the bounds must be equal exactly."""
    old, new = copy.deepcopy(model), copy.deepcopy(model)
    changed_old = _tighten_bounds_reference(old)
    changed_new = tighten_bounds(new)
    before = {n: v.high for n, v in model.variables.items()}
    old_highs = {n: v.high for n, v in old.variables.items()}
    new_highs = {n: v.high for n, v in new.variables.items()}
    differ = {n: (before[n], old_highs[n], new_highs[n]) for n in old_highs
              if old_highs[n] != new_highs[n]
              or (old_highs[n] is None) != (new_highs[n] is None)}
    assert not differ, dict(list(differ.items())[:5])
    assert changed_new == changed_old
    for name, high in new_highs.items():  # a new bound is a float, an old one left as given
        assert high is before[name] or (type(high) is float and high != before[name])
    return changed_new


def untightened(table, rfq, monkeypatch, **kwargs) -> LinearModel:
    """The model :func:`build_model` builds, before it tightens the bounds."""
    with monkeypatch.context() as patch:
        patch.setattr(mip, "tighten_bounds", lambda model: 0)
        return mip.build_model(table, rfq, **kwargs)


@pytest.mark.parametrize("path", [
    pytest.param(p, id=p.stem, marks=[pytest.mark.slow] if p.stem in HEAVY else [])
    for p in SCENARIOS])
def test_same_bounds_on_every_scenario(catalog, monkeypatch, path):
    rfq = load_rfq(path, catalog)
    table = build_candidates(catalog, rfq)
    if any(not cands for cands in table.candidates.values()):
        pytest.skip("a workload has no candidate: the solver builds no model")
    for reference in (False, True):
        assert_same_bounds(untightened(table, rfq, monkeypatch, reference=reference))


@pytest.mark.parametrize("seed", [1, 4, pytest.param(2, marks=pytest.mark.slow),
                                  pytest.param(3, marks=pytest.mark.slow)])
def test_same_bounds_on_seeded_portfolios(catalog, monkeypatch, seed):
    """Portfolios as bench/scale_bench.py draws them (the workloads that fit somewhere),
    with one random scenario's limits (budget row included)."""
    data = portfolio_rfq(4, seed)
    fits = build_candidates(catalog, validate_rfq(data, catalog)).candidates
    data["workloads"] = [w for w in data["workloads"] if fits[w["name"]]]
    if not data["workloads"]:
        pytest.skip("no workload of this portfolio fits")
    rfq = validate_rfq(data, catalog)
    assert_same_bounds(untightened(table=build_candidates(catalog, rfq), rfq=rfq,
                                   monkeypatch=monkeypatch))


def test_same_bounds_on_the_random_mip_instances(monkeypatch):
    rng = random.Random(7)
    for _ in range(150):
        table, rfq = random_instance(rng)
        assert_same_bounds(untightened(table, rfq, monkeypatch))


def random_model(rng: random.Random) -> LinearModel:
    model = LinearModel()
    names = [f"x{i}" for i in range(rng.randint(1, 8))]
    for name in names:
        low = rng.choice([0.0, 0.0, 1.0, -2.0, 0.5])
        high = rng.choice([None, None, low + rng.choice([0.0, 1.0, 3.5, 10.0, 1e6])])
        model.var(name, low, high, integer=rng.random() < 0.7)
    for r in range(rng.randint(0, 8)):
        terms = rng.sample(names, rng.randint(1, len(names)))
        coeffs = {n: rng.choice([1.0, 2.0, 0.5, 3.0, -1.0, -2.5, 7.3, 1e-3, 1e4])
                  for n in terms}
        model.add(f"r{r}", coeffs, rng.choice(["<=", "<=", ">=", "=="]),
                  rng.choice([0.0, 1.0, 4.0, -3.0, 10.5, 1e5]))
    for name in names:
        if rng.random() < 0.6:
            model.objective[name] = rng.choice([1.0, 0.0, 2.5, -1.0])
    return model


def test_same_bounds_on_random_small_models():
    rng = random.Random(18)
    changed = unbounded = 0
    for _ in range(600):
        model = random_model(rng)
        changed += assert_same_bounds(model)
        tighten_bounds(model)
        unbounded += any(v.high is None for v in model.variables.values())
    assert changed > 150 and unbounded > 30  # both rules fire, some stay unbounded


def test_degenerate_models():
    empty = LinearModel()
    assert tighten_bounds(empty) == 0
    no_rows = LinearModel()
    no_rows.var("x", 0, None)
    no_rows.var("y", 0, 4, integer=False)
    assert assert_same_bounds(no_rows) == 2  # cost dominance: no row needs x or y -> 0
    zero = LinearModel()
    zero.var("x", 0, None)
    zero.var("y", 0, None)
    zero.constraints.append(Constraint("z", {"x": 0.0, "y": 1.0}, "<=", 3.0))
    zero.objective["x"] = -1.0
    assert_same_bounds(zero)
