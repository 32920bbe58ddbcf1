"""Pareto page: the frontier of cost against one service metric; pick a point to compare its
plan with the optimum (the cheapest point)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from solver.common.errors import InputError, SolverError
from solver.common.wording import money_delta
from solver.optimize.plan_model import Plan

from .. import components, state
from ..figures import axis_words, cluster_label, frontier_figure, hover_layout

CHART_KEY = "pareto_chart"
PICK_KEY = "pareto_pick"


def _chart_pick() -> int | None:
    """The point index clicked on the chart, if the selection changed since last time."""
    event = st.session_state.get(CHART_KEY)
    points: list[Any] = []
    try:
        points = list(event["selection"]["points"]) if event else []
    except (KeyError, TypeError):
        points = []
    marker = repr(points)
    if marker == st.session_state.get("pareto_last_event"):
        return None
    st.session_state["pareto_last_event"] = marker
    for point in points:
        custom = point.get("customdata") if isinstance(point, dict) else None
        if isinstance(custom, list | tuple):
            custom = custom[0] if custom else None
        if isinstance(custom, int | float):
            return int(custom)
    return None


def _per_million(work: Any) -> str:
    """The workload's cost per million output tokens at this point, or '-'."""
    unit = work.cost_per_million_tokens_usd if work is not None else None
    return f"${unit.output_usd:,.3g}" if unit is not None and unit.output_usd else "-"


def _table(result: dict[str, Any]) -> pd.DataFrame:
    cost_key, metric = result["axes"]
    rows = []
    for index, point in enumerate(result["points"]):
        plan: Plan = point["plan"]
        work = next((w for w in plan.workloads if w.name == result["workload"]), None)
        rows.append({"#": index + 1,
                     axis_words(cost_key).removesuffix(" (USD)"): f"${point[cost_key]:,.0f}",
                     axis_words(metric): round(point[metric], 3),
                     "cluster": cluster_label(plan.cluster, plan.cost),
                     "layout": hover_layout(work) if work else "",
                     "bought or rented": {"rented": "rented", "hybrid": "bought + rented"}
                     .get((work.sourcing if work else None) or "owned", "bought"),
                     "$ per M output tokens": _per_million(work)})
    return pd.DataFrame(rows)


def render() -> None:
    """The Pareto page."""
    st.title("Pareto frontier")
    found = components.need_rfq()
    if found is None:
        return
    data, _ = found
    components.overlay_note()
    served = data.get("objective") == "max_served"
    if served:  # a budget question: what each budget serves comes first
        _budget_section(served)
        st.subheader("Cost against service, all demand served")
    choices = state.metric_choices(data)
    cols = st.columns([3, 2, 5])
    metric = cols[0].selectbox("Trade cost against", ["(default)"] + choices,
                               key="pareto_metric", format_func=metric_words,
                               help="a workload's latency, time to finish, headroom or "
                                    "failure domains; the default is the first workload's "
                                    "latency (TPOT) or time to finish")
    limit = cols[1].number_input("at most N points", min_value=2, max_value=60, value=None,
                                 key="pareto_points", placeholder="all")
    try:
        with st.spinner("Walking the frontier…"):
            result = state.pareto_cached(state.active_key() or "", state.catalog_dir(),
                                         state.price_pairs(),
                                         None if metric == "(default)" else metric,
                                         int(limit) if limit else None)
    except InputError as exc:
        components.show_problems(exc, "Cannot compute this frontier")
        return
    except SolverError as exc:  # no answer about the RFQ: not "no plan meets it"
        st.error(f"The solver failed ({exc}); this says nothing about whether a plan exists.")
        return
    points = result["points"]
    if not points:
        st.error("No plan meets this RFQ, so there is no frontier.")
        plan = state.solve_cached(state.active_key() or "", state.catalog_dir(),
                                  state.price_pairs())["plan"]
        components.infeasible(plan)
        return
    clicked = _chart_pick()
    if clicked is not None and 0 <= clicked < len(points):
        st.session_state[PICK_KEY] = clicked
    default = _default_comparison(points, result)
    pick = st.session_state.get(PICK_KEY, default)
    if not isinstance(pick, int) or not 0 <= pick < len(points):
        pick = default
    st.session_state[PICK_KEY] = pick
    cols[2].caption(f"{len(points)} non-dominated plans from {result['candidates_solved']} "
                    f"solves in {result['seconds']} s — {result['method']}.")
    st.plotly_chart(frontier_figure(result, pick, _target(data, result)), key=CHART_KEY,
                    on_select="rerun",
                    selection_mode="points")
    st.caption("Colour: GPU type; marker: fabric (coupled or not); the open star marks the optimum. Click a "
               "point (or choose it below) to compare its plan with the optimum.")
    st.selectbox("Compare point", list(range(len(points))), key=PICK_KEY,
                 format_func=lambda i: f"#{i + 1}: ${points[i][result['axes'][0]]:,.0f} — "
                                       f"{axis_words(result['axes'][1]).lower()} "
                                       f"{points[i][result['axes'][1]]:,.2f}")
    left, right = st.columns(2)
    with left:
        components.plan_card(points[0]["plan"], "Optimum (cheapest)")
        note = _plan_page_note(points[0], result)
        if note:
            st.caption(note)
    with right:
        components.plan_card(points[pick]["plan"], f"Point #{pick + 1}")
        if pick:
            cost_key = result["axes"][0]
            extra = points[pick][cost_key] - points[0][cost_key]
            metric_name = result["axes"][1]
            st.markdown(f"{money_delta(extra).capitalize()} for "
                        f"{axis_words(metric_name).lower()} "
                        f"{points[pick][metric_name]:,.2f} instead of "
                        f"{points[0][metric_name]:,.2f}.")
    with st.expander("All frontier points", expanded=False):
        st.dataframe(_table(result), hide_index=True)
    if not served:
        _budget_section(served)


def _layout_words(plan: Plan) -> list[str]:
    """Each layout of a plan in words (the plan card's lines, without the markdown)."""
    return [f"{row['workload']}: {row['GPUs']} × {row['GPU']}, TP × PP × DP "
            f"{row['TP × PP × DP']}, {row['precision']}"
            for row in components.layout_table(plan).to_dict("records")]


def plan_page_note(cheapest: Plan, plan_page: Plan | None, cost_key: str, metric: str
                   ) -> str | None:
    """When the frontier's cheapest point and the Plan page's plan cost the same but are laid
    out differently (two optima of the MIP), say so: both are the cheapest plan, and the
    frontier keeps the one with the better ``metric`` at that cost (its walk tightens the
    metric until the cost rises, so of equal-cost plans only the best one stays)."""
    if (plan_page is None or not plan_page.feasible or plan_page.cost is None
            or cheapest.cost is None):
        return None
    cost = float(getattr(plan_page.cost, cost_key))
    if abs(cost - float(getattr(cheapest.cost, cost_key))) >= 0.5:
        return None
    here, there = _layout_words(cheapest), _layout_words(plan_page)
    if here == there:
        return None
    return (f"The Plan page's plan costs the same (${cost:,.0f} "
            f"{'capex' if cost_key == 'capex_usd' else 'TCO'}) with "
            f"another layout ({'; '.join(there)}). Both are cheapest; of plans at one cost "
            f"the frontier keeps the one with the best {axis_words(metric).lower()}.")


def _plan_page_note(cheapest: dict[str, Any], result: dict[str, Any]) -> str | None:
    """:func:`plan_page_note` for the active RFQ (the Plan page's solve is cached)."""
    try:
        plan_page = state.solve_cached(state.active_key() or "", state.catalog_dir(),
                                       state.price_pairs())["plan"]
    except (InputError, SolverError):
        return None
    return plan_page_note(cheapest["plan"], plan_page, *result["axes"])


def metric_words(choice: str) -> str:
    """A frontier metric choice in words: ``chat:tpot_ms`` is ``chat: time per output
    token (ms)`` (never the raw key on screen)."""
    if ":" not in choice:
        return choice  # "(default)": the help says what it is
    workload, metric = choice.split(":", 1)
    return f"{workload}: {axis_words(metric).lower()}"


def _budget_section(served: bool) -> None:
    """Served share against budget (objective max_served at each budget), on request - it
    solves one MIP per budget - unless the RFQ asks for max_served."""
    st.subheader("What each budget serves")
    if not st.toggle("Show the share of demand each budget serves", key="pareto_budget",
                     value=served):
        st.caption("Solves the RFQ under objective max_served at budgets up to the one that "
                   "serves everything (procure pareto --over budget).")
        return
    with st.spinner("Solving each budget…"):
        result = state.budget_cached(state.active_key() or "", state.catalog_dir(),
                                     state.price_pairs(), 8)
    if result.get("reason"):
        st.warning(result["reason"])
        return
    rows = [{"budget (USD)": p["budget_usd"],
             "share served": p.get("served_share", 0.0),
             "GPUs": p.get("total_gpus", 0), "TCO spent (USD)": p.get("tco_usd", 0.0),
             **{f"{name} served": share for name, share in p.get("workloads", {}).items()}}
            for p in result["points"]]
    frame = pd.DataFrame(rows)
    shares = [c for c in frame.columns if c.endswith("served")]
    st.line_chart(frame, x="budget (USD)", y=shares)
    st.caption(f"Everything is served at ${result['full_demand_tco_usd']:,.0f}; below that "
               "the budget serves the priority-weighted share shown (steps of 1 %).")
    money = st.column_config.NumberColumn(format="$%,.0f")
    share = st.column_config.NumberColumn(format="percent")
    st.dataframe(frame, hide_index=True,
                 column_config={"budget (USD)": money, "TCO spent (USD)": money,
                                **{c: share for c in shares}})


TARGET_FIELDS = {"tpot_ms": "tpot_ms", "ttft_ms": "ttft_ms", "hours_to_complete": "deadline_hours"}
MEANINGFUL_GAIN = 0.10  # the default comparison improves the metric by at least 10 %


def _target(data: dict, result: dict) -> float | None:
    """The RFQ's SLO or deadline for the frontier's metric (drawn as a line), if any."""
    field = TARGET_FIELDS.get(result["axes"][1])
    spec = next((w for w in data.get("workloads", []) if w.get("name") == result["workload"]),
                {})
    value = spec.get(field) if field else None
    return float(value) if isinstance(value, int | float) else None


def _default_comparison(points: list[dict], result: dict) -> int:
    """The cheapest point that improves the metric by at least 10 % over the optimum."""
    if len(points) < 2:
        return 0
    metric = result["axes"][1]
    lower = result["lower_is_better"][metric]
    base = points[0][metric]
    for index, point in enumerate(points[1:], start=1):
        gain = (base - point[metric]) if lower else (point[metric] - base)
        if base and gain / abs(base) >= MEANINGFUL_GAIN:
            return index
    return 1
