"""Plan page: the cheapest plan for the active RFQ — the cluster, each workload's layout,
predictions against targets, the cost breakdown, the decision path and counterfactuals."""

from __future__ import annotations

import streamlit as st

from solver.common.errors import InputError
from solver.common.jsontext import indented
from solver.common.wording import headroom_lines
from solver.optimize.plan_model import Plan

from .. import components, state
from ..figures import cluster_figure, cost_figure


def render() -> None:
    """The Plan page."""
    st.title("Plan")
    found = components.need_rfq()
    if found is None:
        return
    data, source = found
    components.overlay_note()
    try:
        with st.spinner("Solving…"):
            result = state.solve_cached(state.active_key() or "", state.catalog_dir(),
                                        state.price_pairs())
    except InputError as exc:
        components.show_problems(exc, "This RFQ cannot be solved")
        return
    plan, alternatives = result["plan"], result["counterfactuals"]
    st.markdown(f"RFQ **{plan.rfq}** ({source}) · {components.status_badge(plan)} · "
                f"solver {plan.solver}, {plan.solve_seconds} s · objective "
                f"{plan.objective}")
    if not plan.feasible or plan.cost is None:
        components.infeasible(plan)
        with st.expander("Decision path", expanded=True):
            components.decision_path(plan)
        return
    components.licence(plan)  # beside the price: the datacenter-licensed alternative
    components.timetable(plan)
    components.binding(plan)
    components.warnings(plan)
    components.headline(plan)

    if plan.cluster.nodes:  # an all-rented plan has no cluster to draw
        st.plotly_chart(cluster_figure(plan), key="cluster", config={"displayModeBar": False})
        st.caption("GPUs coloured by the workload they run (hover for the layout); a box is "
                   "one node; the bar under coupled nodes is the fabric. Placement is one "
                   "valid first-fit assignment of the layouts the solver chose.")

    st.subheader("Layouts")
    layouts = components.layout_table(plan)
    st.dataframe(layouts, hide_index=True, height=components.table_height(len(layouts)))
    for entry in plan.workloads:  # GPUs the cheapest layouts left idle, put to work
        room = headroom_lines(entry.model_dump(mode="json"))
        if room:
            st.caption(f"{entry.name}: " + " ".join(line.strip() for line in room))
    st.subheader("Predicted against targets")
    targets = components.targets_table(plan, data)
    st.dataframe(targets, hide_index=True, height=components.table_height(len(targets)))
    serving = [(w, components.serving_table(w)) for w in plan.workloads]
    serving = [(w, table) for w, table in serving if table is not None]
    if serving:
        st.subheader("Serving SLOs, utilisation and redundancy")
        for entry, table in serving:
            st.markdown(components.serving_note(entry))
            st.dataframe(table, hide_index=True,
                         height=components.table_height(len(table)))
        st.caption("Margin: how far the prediction is inside the target (1 − predicted ÷ "
                   "target). Latency is predicted at the load the plan puts on each replica; "
                   "TTFT at the serving engine, the client's and network's own time on top.")

    left, right = st.columns([3, 2])
    with left:
        st.plotly_chart(cost_figure(plan.cost, plan.objective), key="cost",
                        config={"displayModeBar": False})
    with right:
        st.subheader("Cost terms")
        st.table(components.cost_terms_table(plan, data.get("horizon_years")),
                 hide_index=True, border="horizontal")

    components.buy_or_rent(plan, data.get("horizon_years"))

    bom = components.bom_table(plan)
    if bom is not None:
        st.subheader("Bill of materials")
        # a static table: the order list is read, copied and printed whole, not scrolled
        st.table(bom, hide_index=True, border="horizontal")
        opex = components.opex_table(plan)
        if opex is not None:
            st.markdown("**Yearly running costs**")
            st.table(opex, hide_index=True, border="horizontal", width="content")

    st.subheader("Decision path")
    components.decision_path(plan)
    st.subheader("Counterfactuals")
    same = [a for a in alternatives if components.same_as_chosen(plan, a)]
    others = [a for a in alternatives if not components.same_as_chosen(plan, a)]
    if others:
        st.table(components.counterfactual_table(others), hide_index=True,
                 border="horizontal")
    if same:
        st.caption("Already the chosen plan (same cluster, costs the same): "
                   + " · ".join(a["alternative"] for a in same) + ".")
    if not alternatives:
        st.caption("No alternatives to compare (the plan is already single-node without a "
                   "fabric, or none apply).")
    left, right = st.columns(2)
    left.download_button("Download the plan as JSON", indented(plan.to_json()),
                         file_name=f"{plan.rfq}-plan.json", mime="application/json")
    right.download_button("Download the quote (HTML)", _quote_html(plan, alternatives),
                          file_name=f"{plan.rfq}-quote.html", mime="text/html",
                          key="quote_download")


def _quote_html(plan: Plan, alternatives: list) -> str:
    """The customer quote of ``procure quote`` for this plan."""
    from solver.report.quote import quote_context, render_html

    cat, rfq = state.scenario(state.active_key() or "", state.catalog_dir(), state.price_pairs())
    return render_html(quote_context(plan, rfq, cat, alternatives))
