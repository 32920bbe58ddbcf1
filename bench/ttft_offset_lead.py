"""A lead for issue 26, measured and not adopted: a per-source TTFT harness offset.

Run by hand (three held-out folds, ~4 min each way on 2 cores)::

    PYTHONPATH=. python bench/ttft_offset_lead.py [mlperf-v5.1,mlperf-v6.0,nim] [offset|none]

Some sources time the first token with their client, tokeniser or harness on top of the
engine: the silicon sample's low-load TTFT is 1.4-2x the physics on every engine
(docs/calibration.md, "TTFT at low load against the fit"). The serving fit has no term for
that, so the engine factors and efficiencies absorb it, and sources without such time are
then predicted slow. Here each source gets a nuisance offset (ms, 0-1000) on its TTFT rows
only; the fit's physics is unchanged, and a held-out source's own offset is unknown (0).

2026-12-07, catalog of 9038e44, the fold held out / median |error| and signed, TTFT:
mlperf-v5.1 24.3 % +16.9 % -> 13.0 % +1.9 %; mlperf-v6.0 19.1 % -6.0 % -> 17.1 % -5.4 %;
nim 23.7 % +21.8 % -> 23.2 % +17.1 % (TPOT 26.9 % -> 22.5 %). Throughput does not move
(v5.1 -23 %): Hopper's FP8 efficiency still fits at 0.60 without v5.1. Not adopted yet:
it needs the full held-out report, the planner's view of TTFT (engine time, without a
harness) said in the plan, and every downstream figure regenerated.
"""

from __future__ import annotations

import collections
import statistics
import sys

from solver.catalog.load import load_catalog
from solver.physics import serving_fit as f
from solver.physics.serving_data import load_all, prepare


def main() -> None:
    groups = (sys.argv[1] if len(sys.argv) > 1 else "mlperf-v5.1,mlperf-v6.0,nim").split(",")
    use = (sys.argv[2] if len(sys.argv) > 2 else "offset") == "offset"
    cat = load_catalog()
    observations, _ = load_all(cat, None)
    rows = [p for p in (prepare(cat, o) for o in observations) if not isinstance(p, str)]
    problem = f.build_problem(cat, rows)
    offset_of: dict[str, int] = {}
    if use:
        for source in sorted({p.obs.source for p in rows if f.metric_class(p.obs) == "TTFT"}):
            offset_of[source] = len(problem.params)
            problem.params.append(f.Param(f"offset.{source}", 0.0, 0.0, 1000.0,
                                          engine="__offset__"))  # no engine: linear prior
            problem.rows_of.append([i for i, p in enumerate(rows) if p.obs.source == source
                                    and f.metric_class(p.obs) == "TTFT"])
        base = f._row_prediction

        def with_offset(problem, x, i, engines):  # the fit's own call, plus the offset
            value = base(problem, x, i, engines)
            o = problem.rows[i].obs
            if value is not None and f.metric_class(o) == "TTFT":
                value += x[offset_of[o.source]]
            return value

        f._row_prediction = with_offset
    full = f.fit(problem)
    print("offsets (ms):", {k[7:]: round(v) for k, v in full.values.items()
                            if k.startswith("offset.") and v > 1})
    for group in groups:
        train = [i for i, p in enumerate(rows) if f.holdout_group(p.obs.source) != group]
        start = {k: (0.0 if k.startswith("offset.") else v) for k, v in full.values.items()}
        held = f.fit(problem, train, start=start)
        errors = collections.defaultdict(list)
        for p in rows:
            if f.holdout_group(p.obs.source) == group:
                errors[f.metric_class(p.obs)].append(f.error(held.predicted[p.obs.id], p.obs))
        print(group, {k: f"{statistics.median(abs(e) for e in v):.1%} "
                         f"{statistics.median(v):+.1%}" for k, v in sorted(errors.items())},
              flush=True)


if __name__ == "__main__":
    main()
