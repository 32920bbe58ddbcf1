"""Render pieces shared by the pages: input problems, plan summaries, targets, explanations."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from solver.analysis.explain import money_delta
from solver.common.errors import InputError, Problem
from solver.common.wording import (
    binding_lines,
    cost_label,
    licensed_alternative_line,
    node_lines,
    opex_rows,
    qty,
    relaxations,
    unit_cost_text,
    unit_gpus,
    unit_words,
    usd,
)
from solver.optimize.plan_model import Cluster, Plan, WorkloadPlan
from solver.report.customer import customer_source

from . import state
from .figures import cluster_label


def problem_text(problem: Problem) -> str:
    """``field = value: reason`` (the file is shown once, above)."""
    shown = "" if problem.value is None else f" = `{problem.value!r}`"[:120]
    where = f"**{problem.field}**" if problem.field else "(whole file)"
    return f"{where}{shown}: {problem.reason}"


def show_problems(exc: InputError, title: str) -> None:
    """An input error, one line per problem with its field path and value."""
    files = sorted({p.file for p in exc.problems})
    st.error(f"{title} — {len(exc.problems)} problem{'s' if len(exc.problems) != 1 else ''}"
             f" in {', '.join(files)}:\n\n"
             + "\n".join(f"- {problem_text(p)}" for p in exc.problems))


def need_rfq() -> tuple[dict[str, Any], str] | None:
    """The active RFQ, or a note pointing to the Scenario page."""
    data, source = state.active()
    if data is None:
        st.info("No RFQ yet: pick an example, upload a file or fill in the form on the "
                "**Scenario** page.")
        return None
    return data, source


def overlay_note() -> None:
    overlay = state.price_overlay()
    if overlay:
        st.caption("Price overlay from the Catalog page is active: "
                   + ", ".join(f"{k} ${v:,.0f}" for k, v in sorted(overlay.items())))


def usd_short(value: float) -> str:
    """``$109,104`` or, from a million on, ``$5.40M`` (fits a metric tile)."""
    return f"${value / 1e6:,.2f}M" if abs(value) >= 1e6 else f"${value:,.0f}"


def status_badge(plan: Plan) -> str:
    status = plan.status
    colour = {"optimal": "green", "feasible": "orange"}.get(status, "red")
    return f":{colour}[**{status}**]"


HEADLINE_CSS = (
    "<style>"
    # figures scale with the window and never break inside a number ($190,381 stays whole at
    # 1024 px); ids break only at spaces (' + '), never mid-id or with an ellipsis
    "[data-testid='stMetricValue'] {font-size: clamp(1.15rem, 0.55rem + 1.55vw, 2.1rem);}"
    "[data-testid='stMetricValue'], [data-testid='stMetricValue'] * "
    "{white-space: normal !important; overflow-wrap: normal !important; "
    "word-break: keep-all !important; text-overflow: clip !important; "
    "overflow: visible !important}"
    "</style>")


def headline(plan: Plan) -> None:
    """TCO, capex and the cluster's size as metrics: four figures, then what is bought
    (GPU and server ids in wider tiles). A plan that buys nothing says so in words."""
    cost, cluster = plan.cost, plan.cluster
    if cost is None:
        return
    st.markdown(HEADLINE_CSS, unsafe_allow_html=True)
    rental = cost.rental_usd
    if not cluster.nodes:  # all rented: no empty GPU/server tiles, no "Buy:" with nothing
        cols = st.columns(3)
        cols[0].metric("TCO", usd_short(cost.tco_usd), help=f"${cost.tco_usd:,.0f}")
        cols[1].metric("Rental", usd_short(rental), help=f"${rental:,.0f}")
        cols[2].metric("Capex", usd_short(cost.capex_usd), help=f"${cost.capex_usd:,.0f}")
        st.markdown("**Nothing is bought:** every workload runs on rented instances (see "
                    "*Rented capacity* below).")
        return
    buy = "; ".join(node_lines(cluster.model_dump()))
    gpus = list(dict.fromkeys(n.gpu for n in cluster.nodes))
    servers = list(dict.fromkeys(n.server for n in cluster.nodes))
    cols = st.columns(4)
    cols[0].metric("TCO", usd_short(cost.tco_usd), help=f"${cost.tco_usd:,.0f}")
    cols[1].metric("Capex", usd_short(cost.capex_usd), help=f"${cost.capex_usd:,.0f}")
    cols[2].metric("Nodes", cluster.total_nodes)
    cols[3].metric("GPUs", cluster.total_gpus)
    cols = st.columns([1.4, 1.4, 0.8, 1.2])
    cols[0].metric("GPU" if len(gpus) == 1 else f"GPU ({len(gpus)} types)",
                   " + ".join(gpus), help=buy)
    cols[1].metric("Server" if len(servers) == 1 else f"Server ({len(servers)} types)",
                   " + ".join(servers), help=buy)
    cols[2].metric("Power", f"{cluster.power_kw:.1f} kW")
    cols[3].metric("Fabric (coupled)" if cluster.coupled else "Fabric",
                   cluster.fabric)
    st.markdown("**Buy:** " + buy)


def bom_table(plan: Plan) -> pd.DataFrame | None:
    """The plan's bill of materials as a table (SKU, qty, prices with dates), capex last."""
    bill = plan.bill_of_materials
    if bill is None or not bill.lines:
        return None
    rows = [{"SKU": line.sku, "description": line.description,
             "qty": qty(line.quantity), "unit price": usd(line.unit_price_usd),
             # in words: "quote, entered 2026-12-05" for a price typed on the Catalog page
             "price basis": customer_source(line.price_type, line.as_of, line.source),
             "line total": usd(line.line_total_usd)} for line in bill.lines]
    rows.append({"SKU": "capex", "description": "sum of lines", "qty": "", "unit price": "",
                 "price basis": "", "line total": usd(bill.capex_usd)})
    return pd.DataFrame(rows)


def opex_table(plan: Plan) -> pd.DataFrame | None:
    """Yearly running costs of the bill of materials."""
    bill = plan.bill_of_materials
    rows = opex_rows(bill.opex_per_year.model_dump()) if bill is not None else []
    if not rows:
        return None
    return pd.DataFrame([{"running cost": label, "per year": usd(value)}
                         for label, value in rows])


def infeasible(plan: Plan) -> None:
    """Why no plan meets the RFQ, the nearest relaxation and what to change."""
    info = plan.infeasibility
    reasons = (info.reasons if info else []) or ["no plan meets this RFQ"]
    st.error("**No plan meets this RFQ.**\n\n" + "\n".join(f"- {r}" for r in reasons))
    words = relaxations(info.model_dump(mode="json"), plan.objective) if info else []
    if words:
        st.markdown("**Nearest feasible changes:**\n\n" + "\n".join(f"- {w}" for w in words))
    if info and info.to_fix:
        st.info(f"**To fix:** {info.to_fix}")


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if value.is_integer() else f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def table_height(rows: int, limit: int = 30) -> int:
    """Pixels for a dataframe to show ``rows`` rows without scrolling (up to ``limit``)."""
    return 38 + 35 * max(1, min(rows, limit))


def layout_table(plan: Plan) -> pd.DataFrame:
    """Each workload's layout: GPU, precision, TP × PP × DP, GPUs, nodes, memory."""
    rows = []
    for w in plan.workloads:
        mem = w.memory
        row = {  # key columns first: what runs where, then the details (issue 32)
            "workload": w.name, "GPU": w.gpu,
            "TP × PP × DP": f"{w.tp} × {w.pp} × {w.dp}", "GPUs": w.gpus,
            "nodes per replica/job": w.nodes_spanned,
            "layout": unit_words(w), "precision": w.precision,
            "memory per GPU (GB)": f"{mem.total_gb:.1f} / {mem.capacity_gb:.0f}",
            "weights share": f"{mem.weights_fraction:.0%}",
            "kind": w.kind.replace("_", " "), "model": w.model,
        }
        layouts = w.layouts or []
        if len(layouts) < 2 or w.kind not in ("inference", "batch_inference"):
            rows.append(row)
            continue
        # several layouts serve this workload: one row each, so GPUs add up per row
        for index, layout in enumerate(layouts):
            unit = unit_gpus(layout)
            gpus = unit * layout.replicas
            first = index == 0
            rows.append({**row, "workload": f"{w.name} ({index + 1}/{len(layouts)})",
                         "precision": layout.precision, "GPU": layout.gpu,
                         "TP × PP × DP": f"{layout.tp} × {layout.pp} × {layout.replicas}",
                         "layout": unit_words(layout),
                         "GPUs": gpus,
                         "nodes per replica/job": max(1, -(-unit // layout.gpus_per_node)),
                         "memory per GPU (GB)": row["memory per GPU (GB)"] if first else "—",
                         "weights share": row["weights share"] if first else "—"})
    return pd.DataFrame(rows)


SHARES = ("scaling efficiency", "MFU")  # fractions, shown as percentages


def targets_table(plan: Plan, data: dict[str, Any]) -> pd.DataFrame:
    """Predicted latency, throughput and time against each workload's targets."""
    specs = {w["name"]: w for w in data.get("workloads", [])}
    rows = []
    for w in plan.workloads:
        spec, pred = specs.get(w.name, {}), w.predicted
        checks: list[tuple[str, Any, Any, bool]] = []  # metric, predicted, target, lower-better
        if w.kind == "inference":
            if w.margins is None:  # no SLO stated: the typical latency
                checks += [("TTFT ms", pred.ttft_ms, spec.get("ttft_ms"), True),
                           ("TPOT ms", pred.tpot_ms, spec.get("tpot_ms"), True)]
            # else: the latency SLOs at their percentile are in serving_table
            checks += [("concurrency held", pred.max_concurrency,
                        spec.get("concurrency"), False),
                       ("QPS capacity", pred.qps_capacity, spec.get("qps"), False),
                       ("output tokens/s", pred.tokens_per_s, None, False)]
        else:
            checks += [("hours to complete", pred.hours_to_complete,
                        spec.get("deadline_hours"), True),
                       ("tokens/s", pred.tokens_per_s, None, False)]
            if pred.scaling_efficiency is not None:
                checks.append(("scaling efficiency", pred.scaling_efficiency, None, False))
            if pred.mfu is not None:
                checks.append(("MFU", pred.mfu, None, False))
        for metric, predicted, target, lower in checks:
            if predicted is None and target is None:
                continue
            if target is None or predicted is None:
                verdict = ""
            else:
                ok = predicted <= target if lower else predicted >= target
                verdict = "✓ meets" if ok else "✗ misses"
            shown = (_pct(predicted) if metric in SHARES else
                     _fmt(predicted, 2 if isinstance(predicted, float) and predicted < 10
                          else 1))
            rows.append({"workload": w.name, "metric": metric, "predicted": shown,
                         "target": ("≤ " if lower else "≥ ") + _fmt(target)
                         if target is not None else "-",
                         "verdict": verdict})
    return pd.DataFrame(rows)


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value:.0%}"


def serving_table(entry: WorkloadPlan) -> pd.DataFrame | None:
    """One serving workload's SLO check: each latency SLO at its percentile (target,
    prediction, margin, met), utilisation against its target, and with redundancy n+1 the
    capacity left with the worst node down against the demand. None for jobs."""
    if entry.kind not in ("inference", "batch_inference"):
        return None
    rows = []
    for metric, m in (entry.margins or {}).items():
        basis = "median" if m.basis == "median" else f"p{m.percentile}"
        rows.append({"check": f"{metric.removesuffix('_ms').upper()} at {basis}",
                     "target": f"≤ {_fmt(m.target_ms)} ms",
                     "predicted": f"{_fmt(m.predicted_ms)} ms",
                     "margin": _pct(m.margin),
                     "verdict": "✓ met" if m.met else "✗ missed"})
    if entry.utilization is not None:
        goal = entry.target_utilization or 1.0
        used = entry.utilization
        rows.append({"check": "utilisation (demand ÷ capacity bought)",
                     "target": f"≤ {goal:.0%}", "predicted": f"{used:.0%}",
                     "margin": _pct(1 - used / goal) if goal else "-",
                     "verdict": "✓ met" if used <= goal + 1e-6 else "✗ missed"})
    spare = entry.n_plus_1
    demand = entry.demand
    if spare and demand:
        for left, need, label, unit in (
                (spare.concurrency_one_node_down, demand.concurrency, "concurrency",
                 "requests"),
                (spare.qps_one_node_down, demand.qps, "requests/s", "req/s")):
            if left is None or not need:
                continue
            rows.append({"check": f"n+1: {label} with {spare.worst_node} down",
                         "target": f"≥ {_fmt(need)} {unit}", "predicted": f"{_fmt(left)} {unit}",
                         "margin": _pct(1 - need / left) if left else "-",
                         "verdict": "✓ met" if left >= need - 1e-9 else "✗ missed"})
    if not rows:
        return None
    return pd.DataFrame(rows)


def serving_note(entry: WorkloadPlan) -> str:
    """Engine, SLO percentile and redundancy of a serving workload, in one line."""
    parts = [f"**{entry.name}**"]
    if entry.served_fraction is not None and entry.served_fraction < 1.0:
        parts.append(f"the budget serves {entry.served_fraction:.0%} of its demand "
                     "(objective max_served)")
    if entry.engine:
        parts.append(f"engine {entry.engine}")
    if entry.slo_percentile is not None:
        parts.append(f"SLOs held for {entry.slo_percentile} % of requests")
    redundancy = entry.redundancy
    if redundancy:
        parts.append("redundancy n+1 (demand met with any one node down)" if redundancy == "n+1"
                     else "no redundancy")
    unit = entry.cost_per_million_tokens_usd
    unit_text = unit_cost_text(unit.model_dump() if unit is not None else None)
    if unit_text:
        parts.append(unit_text)
    cal = entry.calibration
    if cal is not None and cal.calibrated:
        parts.append(f"model calibrated for {cal.family} on {cal.engine} "
                     f"({cal.rows} measurements, {cal.sources} sources, typical error "
                     f"{cal.held_out_error_pct:.0f} % held out)")
    elif cal is not None:
        parts.append(f"**not calibrated** for {cal.family} on {cal.engine}: planned with a "
                     f"{cal.margin_applied_pct:.0f} % margin")
    return " · ".join(parts)


def decision_path(plan: Plan) -> None:
    """The guide's decision path, per workload: the first yes ends it."""
    steps = plan.decision_path
    if not steps:
        st.caption("No decision path.")
        return
    for name in dict.fromkeys(s.workload for s in steps):
        st.markdown(f"**{name}**")
        lines = []
        for step in (s for s in steps if s.workload == name):
            mark = "**yes** ✓" if step.answer else "no"
            reference = (f"  \n   <small>for comparison, {step.reference}</small>"
                         if step.reference else "")
            lines.append(f"{step.step}. {step.question} — {mark}  \n"
                         f"   <small>{step.note}</small>{reference}")
        st.markdown("\n".join(lines), unsafe_allow_html=True)


def cost_word(key: str, horizon: float | None = None) -> str:
    """A cost term in words (:data:`~solver.common.wording.COST_LABELS`); running costs say
    the horizon they cover."""
    return cost_label(key, horizon)


def cost_terms_table(plan: Plan, horizon: float | None) -> pd.DataFrame:
    """The plan's cost terms in words with dollars, capex and TCO included."""
    cost = plan.cost.model_dump() if plan.cost is not None else {}
    return pd.DataFrame([{"cost": cost_word(key, horizon), "amount": usd(value)}
                         for key, value in cost.items()])


def same_as_chosen(plan: Plan, alt: dict[str, Any]) -> bool:
    """An alternative that is the chosen plan itself (same cost, same cluster)."""
    return bool(alt.get("feasible") and alt.get("delta_usd") is not None
                and abs(alt["delta_usd"]) < 0.5 and alt.get("cluster") is not None
                and cluster_label(Cluster.model_validate(alt["cluster"]))
                == cluster_label(plan.cluster))


def counterfactual_table(alternatives: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for alt in alternatives:
        rows.append({
            "alternative": alt["alternative"],
            "TCO": "infeasible" if not alt["feasible"] else f"${alt['tco_usd']:,.0f}",
            "vs chosen": "—" if alt.get("delta_usd") is None else money_delta(alt["delta_usd"]),
            "cluster": cluster_label(Cluster.model_validate(alt["cluster"]))
            if alt.get("cluster") else "—",
            "why": alt["why"],
        })
    return pd.DataFrame(rows)


def timetable(plan: Plan) -> None:
    """Busy and quiet hours: which workload runs on how many GPUs in each slot."""
    if not plan.timetable:
        return
    st.markdown("**Over the day** — busy and quiet hours")
    names = list(dict.fromkeys(r.workload for s in plan.timetable for r in s.runs))
    st.dataframe([{"slot": s.slot, "hours a day": s.hours,
                   **{name: sum(r.owned_gpus + r.rented_gpus for r in s.runs
                                if r.workload == name) for name in names},
                   "idle GPUs": s.idle_gpus} for s in plan.timetable], hide_index=True)
    st.caption("GPUs each workload runs on in each slot; the cluster picture below shows "
               "the busy hours.")


def binding(plan: Plan) -> None:
    """The binding constraints, the dominant first, each with the saving of its next
    relaxation (re-solved)."""
    if not plan.binding:
        return
    served = any(b.served_share is not None for b in plan.binding)
    title = "What limits the service" if served else "What drives the price"
    st.markdown(f"**{title}** (each constraint relaxed one step and re-solved)")
    for line in binding_lines([b.model_dump() for b in plan.binding], plan.objective):
        st.markdown(f"- {line}")


def licence(plan: Plan) -> None:
    """A plan on consumer (GeForce) cards: the datacenter-licensed alternative and its
    extra cost, beside the plan's price (issue 32)."""
    alt = plan.licensed_alternative
    line = licensed_alternative_line(alt.model_dump() if alt else None, plan.objective,
                                     technical=False, lead=True)
    if line:
        st.warning(f"**Licence.** {line}", icon=":material/gavel:")


def warnings(plan: Plan) -> None:
    for warning in plan.warnings:
        st.warning(warning, icon=":material/warning:")


def plan_card(plan: Plan, title: str) -> None:
    """A compact plan: cluster, cost and layouts (Pareto comparison, what-if)."""
    st.markdown(f"#### {title}")
    cost = plan.cost
    if not plan.feasible or cost is None:
        infeasible(plan)
        return
    st.markdown(f"{status_badge(plan)} · TCO **${cost.tco_usd:,.0f}** · capex "
                f"${cost.capex_usd:,.0f}  \n{cluster_label(plan.cluster, cost)}")
    # one line per layout, not a table: two cards side by side at 1024 px would squeeze a
    # table's columns to one character per line
    how = {w.name: {"rented": " (rented)", "hybrid": " (bought + rented)"}.get(
        w.sourcing or "owned", "") for w in plan.workloads}
    lines = []
    for row in layout_table(plan).to_dict("records"):
        name = str(row["workload"])
        lines.append(f"- **{name}**: {row['GPUs']} × {row['GPU']}, "
                     f"TP × PP × DP {row['TP × PP × DP']}, {row['precision']}"
                     + (f", {row['nodes per replica/job']} nodes per replica"
                        if row["nodes per replica/job"] > 1 else "")
                     + how.get(name.split(" (")[0], ""))
    st.markdown("\n".join(lines))


# --- buy, rent or both (issue 16) --------------------------------------------------------

def _rental_context(plan: Plan, horizon: float | None) -> dict[str, Any]:
    from solver.report.quote import rental_context

    return rental_context(plan, horizon or 3.0, plan.feasible)


def schedule_table(plan: Plan) -> pd.DataFrame | None:
    """The purchase schedule per period (when phased or something is rented), else None."""
    rows = _rental_context(plan, None)["schedule"]
    if not rows:
        return None
    return pd.DataFrame([{"months": f"{r['start_month']}–{r['end_month']}",
                          "nodes bought": r["nodes"], "GPUs bought": r["gpus"],
                          "capex": r["capex"], "rental": r["rental"],
                          "what runs where": r["runs"]} for r in rows])


def rental_table(plan: Plan) -> pd.DataFrame | None:
    """What the plan rents: offer, instances, GPU-hours, $/GPU-h, total, price date."""
    rows = _rental_context(plan, None)["rentals"]
    if not rows:
        return None
    return pd.DataFrame([{"workload": r["workload"], "offer": r["offer"], "GPU": r["gpu"],
                          "instances": r["instances"], "price type": r["price_type"],
                          "GPU-hours": r["hours"], "per GPU-hour": r["rate"],
                          "total": r["total"], "as of": r["as_of"]} for r in rows])


def buy_rent_table(plan: Plan) -> pd.DataFrame | None:
    """Buy against rent per workload alone, with the break-even utilisation and horizon."""
    rows = _rental_context(plan, None)["buy_rent"]
    if not rows:
        return None
    return pd.DataFrame([{"workload": c["workload"], "chosen": c["chosen"],
                          "own (alone)": c["owned"], "rent (alone)": c["rented"],
                          "hours used": c["hours_used"],
                          "break-even utilisation": c["breakeven_util"],
                          "break-even horizon (months)": c["breakeven_months"],
                          "buy, run, resell": c["resold"], "why": c["why"]}
                         for c in rows])


def buy_or_rent(plan: Plan, horizon: float | None) -> None:
    """The Plan page's buy-rent section: schedule, rented lines, the comparison table and
    the cumulative cost chart - each only when the plan has it."""
    from .figures import buy_rent_figure

    schedule, rented, compare = schedule_table(plan), rental_table(plan), buy_rent_table(plan)
    if schedule is None and rented is None and compare is None:
        return
    st.subheader("Buy, rent or both")
    phasing = plan.phasing
    if schedule is not None:
        st.markdown("**Purchase schedule**")
        st.table(schedule, hide_index=True, border="horizontal")
        if phasing:
            st.caption(f"Bought in steps: {usd(phasing.tco_usd)} over the horizon against "
                       f"{usd(phasing.buy_all_now_tco_usd)} buying everything at "
                       f"month 0; hardware bought later is "
                       f"{phasing.hardware_price_decline_per_year:.0%} a year cheaper "
                       "(labelled assumption).")
    if rented is not None:
        st.markdown("**Rented capacity**")
        st.table(rented, hide_index=True, border="horizontal")
    if compare is not None:
        st.markdown("**Buy or rent, each workload alone**")
        st.table(compare, hide_index=True, border="horizontal")
        figure = buy_rent_figure(plan, horizon or 3.0)
        if figure is not None:
            st.plotly_chart(figure, key="buy_rent", config={"displayModeBar": False})
        st.caption("Break-even utilisation: the share of the horizon above which owning "
                   "wins. Break-even horizon: months of 24/7 use after which owning wins. "
                   "Buy, run, resell: a one-off job on bought hardware sold afterwards at "
                   "the catalog's residual value.")
