"""What-if: how the optimum's TCO moves with each major parameter, and where the plan flips.

For every parameter (each chosen and runner-up GPU's price, the chosen server's price, the
chosen fabric's NIC price, electricity price, PUE, horizon, the multi-node overhead factor,
demand growth and each deadline) the report solves the MIP at ``SAMPLES`` values spread over
the parameter's range (catalog low/high where it has one, else a relative range), and
bisects every interval whose end points buy different clusters down to ``TOLERANCE`` of the
range: the *break-even* value and what the plan flips to. A flip is a change of the cluster
signature (node types and counts, fabric). The tornado is TCO at the low and high ends.

Price-like parameters re-use the candidate table and only recompute cost coefficients
(:func:`solver.analysis.whatif.reprice`); demand and deadlines re-run the estimate stage (whose
physics calls are cached). Flips closer together than one sampling interval can be missed
when both ends of the interval buy the same cluster.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import re
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from solver.analysis.cluster import dask_client, map_on_cluster
from solver.analysis.whatif import Outcome, describe, gpu_counts, outcome, rebuild_workload, reprice
from solver.catalog.data import Catalog
from solver.common.childproc import die_with_parent, kill_children_on_sigterm
from solver.common.errors import InputError, Problem
from solver.common.progress import report as progress
from solver.optimize.backends import DEFAULT_SOLVER, release_solver_threads
from solver.optimize.candidates import build_candidates
from solver.optimize.records import CandidateTable
from solver.optimize.solve import run_mip
from solver.physics.layout import TRAINING_KINDS
from solver.rfq.overrides import apply_pairs, valid_paths
from solver.rfq.schema import Rfq

SAMPLES = 7
TOLERANCE = 0.01          # break-even to 1 % of the range
PRICE_RANGE = (0.7, 1.3)  # ±30 % for prices without a catalog range
DEMAND_RANGE = (0.5, 4.0)
DEADLINE_RANGE = (0.5, 2.0)
WARM_START = True
PRICE_PREFIXES = ("gpu.", "server.", "fabric.", "costs.", "rfq.horizon_years")


@dataclass(frozen=True)
class Parameter:
    """One parameter of the report: its override path, base value and range."""

    path: str
    label: str
    base: float
    low: float
    high: float
    multiplier: bool = False  # value is a factor on the base (demand, deadlines)

    def pairs(self, value: float) -> list[tuple[str, Any]]:
        if self.path == "demand":
            return [("demand", value)]
        if self.multiplier:
            return [(self.path, self.base * value)]
        return [(self.path, value)]


class Evaluator:
    """Solve scenarios quickly: reprice the base table, or rebuild only what changed."""

    def __init__(self, catalog: Catalog, rfq: Rfq, solver: str = DEFAULT_SOLVER):
        self.catalog = rfq.catalog(catalog)
        self.rfq = rfq
        self.solver = solver
        self.table = build_candidates(catalog, rfq)
        self.solves = 0
        #: warm start: the previous plan's values, handed to the next solve (WARM_START)
        self.warm_start = WARM_START
        self._last: dict[str, float] | None = None

    def table_for(self, pairs: list[tuple[str, Any]]) -> tuple[CandidateTable, Rfq]:
        catalog, rfq = apply_pairs(self.catalog, self.rfq, pairs, "sensitivity")
        if all(path.startswith(PRICE_PREFIXES) for path, _ in pairs):
            return reprice(self.table, catalog, rfq), rfq
        table = self.table
        before = {s.name: s for s in self.rfq.workloads}
        for spec in rfq.workloads:
            if spec != before[spec.name] and spec.kind in TRAINING_KINDS:
                table = rebuild_workload(catalog, rfq, table, spec)
        return reprice(table, catalog, rfq), rfq

    def solve(self, pairs: list[tuple[str, Any]]) -> Outcome:
        table, rfq = self.table_for(pairs)
        self.solves += 1
        solution = run_mip(table, rfq, solver=self.solver,
                           initial=self._last if self.warm_start else None)
        if solution.status in ("optimal", "feasible"):
            self._last = solution.values
        return outcome(table, solution)


def default_parameters(ev: Evaluator, base: Outcome) -> list[Parameter]:
    """The major parameters of one RFQ, around its optimum."""
    catalog, rfq = ev.catalog, ev.rfq
    costs = catalog.costs
    params: list[Parameter] = []
    chosen_gpus = sorted(gpu_counts(base.table, base.signature))
    runner_up = _runner_up_gpus(ev, chosen_gpus)
    for gpu in chosen_gpus + [g for g in runner_up if g not in chosen_gpus]:
        price = catalog.gpus[gpu].price_usd
        role = "chosen" if gpu in chosen_gpus else "runner-up"
        params.append(Parameter(f"gpu.{gpu}.price_usd", f"{gpu} price ({role})", price,
                                price * PRICE_RANGE[0], price * PRICE_RANGE[1]))
    if base.signature:
        for server in sorted({base.table.node_types[k].server for k, _ in base.signature[0]}):
            price = catalog.servers[server].price_usd
            if price > 0:
                params.append(Parameter(f"server.{server}.price_usd", f"{server} server price",
                                        price, price * PRICE_RANGE[0], price * PRICE_RANGE[1]))
        fabric = base.signature[1]
        if fabric != "none":
            nic = catalog.fabrics[fabric].nic_price_usd
            params.append(Parameter(f"fabric.{fabric}.nic_price_usd", f"{fabric} NIC price",
                                    nic, nic * PRICE_RANGE[0], nic * PRICE_RANGE[1]))
    for name, label in (("electricity_usd_per_kwh", "electricity USD/kWh"), ("pue", "PUE"),
                        ("multinode_overhead_factor", "multi-node overhead factor")):
        param = getattr(costs, name)
        low = param.low if param.low is not None else param.value * PRICE_RANGE[0]
        high = param.high if param.high is not None else param.value * PRICE_RANGE[1]
        params.append(Parameter(f"costs.{name}", label, param.value, min(low, param.value),
                                max(high, param.value)))
    horizon = rfq.horizon_years
    params.append(Parameter("rfq.horizon_years", "horizon (years)", horizon,
                            max(1.0, horizon - 2),
                            max(horizon, min(horizon + 2, schema_max(Rfq, "horizon_years")))))
    if any(s.kind in ("inference", "batch_inference") for s in rfq.workloads):
        params.append(Parameter("demand", "demand growth (×)", 1.0, DEMAND_RANGE[0],
                                max(1.0, min(DEMAND_RANGE[1], _demand_headroom(rfq))),
                                multiplier=True))
    for spec in rfq.workloads:
        if spec.kind != "inference":
            room = schema_max(type(spec), "deadline_hours") / spec.deadline_hours
            params.append(Parameter(f"workloads.{spec.name}.deadline_hours",
                                    f"{spec.name} deadline (×)", spec.deadline_hours,
                                    DEADLINE_RANGE[0], max(1.0, min(DEADLINE_RANGE[1], room)),
                                    multiplier=True))
    return params


def schema_max(model_cls: Any, field: str) -> float:
    """The largest value the schema allows for a field (``le``/``lt``), else infinity."""
    for item in model_cls.model_fields[field].metadata:
        for attr in ("le", "lt"):
            if getattr(item, attr, None) is not None:
                return float(getattr(item, attr))
    return math.inf


def _demand_headroom(rfq: Rfq) -> float:
    """The largest demand factor that keeps every serving workload within the schema (a
    valid RFQ's sweep never steps outside it)."""
    room = math.inf
    for spec in rfq.workloads:
        for field in ("concurrency", "qps", "requests"):
            value = getattr(spec, field, None)
            if value:
                room = min(room, (schema_max(type(spec), field) - 1) / value)
    return room


def _runner_up_gpus(ev: Evaluator, chosen: list[str]) -> list[str]:
    """The GPUs of the best plan that uses none of the chosen GPUs."""
    if not chosen:
        return []
    table = ev.table
    kept = {name: [c for c in cands if c.layout.gpu not in chosen]
            for name, cands in table.candidates.items()}
    from dataclasses import replace

    alt = outcome(table, run_mip(replace(table, candidates=kept), ev.rfq, solver=ev.solver))
    return sorted(gpu_counts(table, alt.signature))


def parameter_from_path(ev: Evaluator, path: str, range_text: str | None) -> Parameter:
    """A user-chosen parameter (``--param PATH --range -30%:+30%``)."""
    known = valid_paths(ev.catalog, ev.rfq)
    if path not in known and not (path.startswith("costs.") and path.endswith(".value")):
        ev_pairs = [(path, 1.0)]
        apply_pairs(ev.catalog, ev.rfq, ev_pairs, "--param")  # raises with nearest paths
    base = 1.0 if path == "demand" else _current_value(ev, path)
    low, high = parse_range(range_text or "-30%:+30%", base)
    multiplier = path == "demand"
    return Parameter(path, path, base, low, high, multiplier=multiplier)


def _current_value(ev: Evaluator, path: str) -> float:
    parts = path.split(".")
    head = parts[0]
    value: Any = None
    if head in ("gpu", "server", "fabric", "model"):
        table = getattr(ev.catalog, {"gpu": "gpus", "server": "servers", "fabric": "fabrics",
                                     "model": "models"}[head])
        value = getattr(table[".".join(parts[1:-1])], parts[-1])
    elif head == "costs":
        value = (ev.rfq.horizon_years if parts[1] == "horizon_years"
                 else getattr(ev.catalog.costs, parts[1]).value)
    elif head == "rfq":
        value = (getattr(ev.rfq.constraints, parts[2]) if parts[1] == "constraints"
                 else getattr(ev.rfq, parts[1]))
    elif head == "workloads":
        spec = next(s for s in ev.rfq.workloads if s.name == ".".join(parts[1:-1]))
        value = getattr(spec, parts[-1])
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise InputError([Problem("--param", "", path, f"not a numeric parameter ({value!r})")])
    return float(value)


def parse_range(text: str, base: float) -> tuple[float, float]:
    """``-30%:+30%`` (relative to the base value) or ``LOW:HIGH`` (absolute)."""
    match = re.fullmatch(r"\s*([^:]+):([^:]+)\s*", text)
    if not match:
        raise InputError([Problem("--range", "", text, "expected LOW:HIGH, e.g. -30%:+30%")])
    ends = []
    for part in match.groups():
        part = part.strip()
        try:
            ends.append(base * (1 + float(part[:-1]) / 100) if part.endswith("%")
                        else float(part))
        except ValueError:
            raise InputError([Problem("--range", "", text, f"{part!r} is not a number "
                                      "or percentage")]) from None
    low, high = sorted(ends)
    if not (math.isfinite(low) and math.isfinite(high)) or low == high:
        raise InputError([Problem("--range", "", text, "the range must have two different "
                                  "finite ends")])
    return low, high


def sweep(ev: Evaluator, param: Parameter, samples: int = SAMPLES) -> dict[str, Any]:
    """TCO over the parameter's range, and every break-even found by bisection."""
    objective = ev.rfq.objective
    values = [param.low + (param.high - param.low) * i / (samples - 1) for i in range(samples)]
    if param.low < param.base < param.high and not any(
            math.isclose(v, param.base) for v in values):
        values = sorted([*values, param.base])
    results = [(v, ev.solve(param.pairs(v))) for v in values]
    flips = []
    tol = TOLERANCE * (param.high - param.low)
    for (lo, lo_out), (hi, hi_out) in zip(results, results[1:], strict=False):
        if lo_out.signature == hi_out.signature:
            continue
        while hi - lo > tol:
            mid = (lo + hi) / 2
            mid_out = ev.solve(param.pairs(mid))
            if mid_out.signature == lo_out.signature:
                lo, lo_out = mid, mid_out
            else:
                hi, hi_out = mid, mid_out
        flips.append({"at": _shown(param, (lo + hi) / 2),
                      "below": _shown(param, lo, math.floor),
                      "above": _shown(param, hi, math.ceil),
                      "from": describe(lo_out.signature), "to": describe(hi_out.signature),
                      "tco_below_usd": lo_out.tco_usd, "tco_above_usd": hi_out.tco_usd})
    tcos = [o.objective_usd(objective) for _, o in results]
    low_out, high_out = results[0][1], results[-1][1]
    return {
        "path": param.path, "label": param.label, "base_value": _shown(param, 1.0)
        if param.multiplier else param.base,
        "low": _shown(param, param.low), "high": _shown(param, param.high),
        "multiplier": param.multiplier,
        "tco_low_usd": low_out.objective_usd(objective),
        "tco_high_usd": high_out.objective_usd(objective),
        "swing_usd": _swing(tcos),
        "flips": flips,
        "samples": [{"value": _shown(param, v), "tco_usd": o.objective_usd(objective),
                     "cluster": describe(o.signature)} for v, o in results],
    }


SHOWN_PLACES = 6
"""Decimal places of a value in the report."""


def _shown(param: Parameter, value: float,
           rounding: Callable[[float], float] | None = None) -> float:
    """``value`` to ``SHOWN_PLACES`` decimals; a break-even's ``below`` rounds down and its
    ``above`` up, so that the shown bracket still holds the flip. Rounded to nearest, a
    demand factor just below a step of the concurrency (50 / 48 = 1.0416666...) showed as
    1.041667, where the demand is already one request more and the plan already the other."""
    if rounding is None:
        return round(value, SHOWN_PLACES)
    scale = 10 ** SHOWN_PLACES
    return rounding(round(value * scale, 3)) / scale


def _swing(values: list[float | None]) -> float | None:
    finite = [v for v in values if v is not None]
    return round(max(finite) - min(finite), 2) if finite else None


def report(catalog: Catalog, rfq: Rfq, *, param: str | None = None,
           range_text: str | None = None, solver: str = DEFAULT_SOLVER,
           samples: int = SAMPLES, workers: int = 1,
           scheduler: str | None = None) -> dict[str, Any]:
    """The sensitivity report (all major parameters, or the one given), tornado-sorted.
    ``workers`` > 1 sweeps the parameters in that many forked processes (:func:`sweeps`);
    ``scheduler`` (a Dask address) sweeps each on that cluster instead
    (:mod:`solver.analysis.cluster`)."""
    start = time.perf_counter()
    progress("sensitivity: candidate layouts and the base plan")
    ev = Evaluator(catalog, rfq, solver)
    base = ev.solve([])
    if param is not None:
        params = [parameter_from_path(ev, param, range_text)]
    else:
        params = default_parameters(ev, base)
        if range_text:
            params = [Parameter(p.path, p.label, p.base, *parse_range(
                range_text, 1.0 if p.multiplier else p.base), multiplier=p.multiplier)
                for p in params]
    if scheduler:
        rows = cluster_sweeps(ev, params, samples, scheduler)
    else:
        rows = sweeps(ev, params, samples, workers)
    rows.sort(key=lambda r: -(r["swing_usd"] or 0.0))
    return {
        "rfq": rfq.id, "objective": rfq.objective,
        "base": {"tco_usd": base.objective_usd(rfq.objective), "status": base.status,
                 "cluster": describe(base.signature)}
        | ({"error": base.solution.message} if base.status == "error" else {}),
        "parameters": rows, "solves": ev.solves,
        "seconds": round(time.perf_counter() - start, 3),
    }


def cluster_sweeps(ev: Evaluator, params: list[Parameter], samples: int,
                   scheduler: str) -> list[dict[str, Any]]:
    """:func:`sweep` of every parameter, each a task on the Dask cluster at ``scheduler``
    (the evaluator, with its catalog and candidate table, travels with each task); the
    rows come back in parameter order and ``ev.solves`` counts the cluster's solves."""
    with dask_client(scheduler) as client:
        progress(f"sensitivity: {len(params)} parameters on the Dask cluster", 0, len(params))
        done = map_on_cluster(
            client, partial(_remote_sweep, ev, samples=samples), params,
            lambda count, total: progress("sensitivity: sweeps on the Dask cluster",
                                          count, total))
    ev.solves += sum(solves for _, solves in done)
    return [row for row, _ in done]


def _remote_sweep(ev: Evaluator, param: Parameter, samples: int) -> tuple[dict[str, Any], int]:
    """On a cluster worker: one parameter's sweep and the solves it took."""
    before = ev.solves
    row = sweep(ev, param, samples)
    return row, ev.solves - before


def sweeps(ev: Evaluator, params: list[Parameter], samples: int = SAMPLES,
           workers: int = 1) -> list[dict[str, Any]]:
    """:func:`sweep` of every parameter, in order. With ``workers`` > 1 (and ``fork``
    available) the parameters are dealt round-robin to that many forked processes, which
    inherit the evaluator (catalog, candidate table) instead of receiving a copy and send
    back their rows; each sweep is the same computation as in this process (a warm start
    changes no result), so the rows are the same. ``ev.solves`` counts the children's
    solves too."""
    workers = min(workers, len(params))
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        rows = []
        for index, param in enumerate(params):
            progress(f"sensitivity: {param.label}", index, len(params))
            rows.append(sweep(ev, param, samples))
        return rows
    progress(f"sensitivity: {len(params)} parameters in {workers} processes")
    release_solver_threads()  # the base solve ran here: children must not wait for its pool
    context = multiprocessing.get_context("fork")
    jobs: list[tuple[Any, Any]] = []
    with kill_children_on_sigterm(lambda: [child.pid for child, _ in jobs if child.pid]):
        for index in range(workers):
            receive, send = context.Pipe(duplex=False)
            share = list(range(index, len(params), workers))
            child = context.Process(target=_sweep_share, daemon=True,
                                    args=(ev, params, share, samples, send, os.getpid()))
            child.start()
            send.close()
            jobs.append((child, receive))
        return _collect(ev, jobs, len(params))


def _collect(ev: Evaluator, jobs: list[tuple[Any, Any]], count: int) -> list[dict[str, Any]]:
    """The rows the sweep processes send back, in parameter order; a failure in one is
    raised here (an input error first: this process would have raised it)."""
    found: dict[int, dict[str, Any]] = {}
    failure: BaseException | None = None  # an input error wins: this process would raise it
    for child, receive in jobs:
        try:
            status, payload, solves = receive.recv()
        except EOFError:
            status, payload, solves = "error", "a sweep process ended without a result", 0
        child.join()
        ev.solves += solves
        if status == "ok":
            found.update(payload)
        elif status == "input" or failure is None:
            failure = payload if status == "input" else RuntimeError(
                "sensitivity sweep failed in a worker process:\n" + payload)
    if failure is not None:
        raise failure
    return [found[index] for index in range(count)]


def _sweep_share(ev: Evaluator, params: list[Parameter], share: list[int], samples: int,
                 send: Any, parent: int) -> None:
    """In a forked child: die with the parent ``parent`` (any signal, SIGKILL included),
    sweep the parameters at ``share`` and send back ``("ok", [(index, row), ...], solves)``,
    ``("input", InputError, solves)`` or ``("error", traceback, solves)``."""
    die_with_parent(parent)
    before = ev.solves
    try:
        rows = [(index, sweep(ev, params[index], samples)) for index in share]
        send.send(("ok", rows, ev.solves - before))
    except InputError as exc:  # a bad value: the parent raises it as this process would
        send.send(("input", exc, ev.solves - before))
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises it
        send.send(("error", traceback.format_exc(), ev.solves - before))
    finally:
        send.close()
