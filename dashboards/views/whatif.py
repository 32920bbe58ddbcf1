"""What-if page: move prices, power, horizon, overhead and demand; the plan re-solves (cached)
and the page says what changed; the sensitivity report adds the tornado and break-evens."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from solver.common.errors import InputError
from solver.common.wording import years
from solver.optimize.plan_model import Plan

from .. import components, state
from ..figures import cluster_label, tornado_figure

ALL_GPUS = "(all GPUs)"


def _param_range(param: Any, low: float, high: float) -> tuple[float, float]:
    lo = min(param.low if param.low is not None else low, param.value)
    hi = max(param.high if param.high is not None else high, param.value)
    return float(lo), float(hi)


def _controls(data: dict[str, Any]) -> list[tuple[str, Any]]:
    """Draw the sliders; the override pairs they ask for (only what differs from the base)."""
    cat = state.catalog()
    costs = cat.costs
    overlay = state.price_overlay()
    pairs: list[tuple[str, Any]] = []
    cols = st.columns(3)
    with cols[0]:
        gpu_pct = st.slider("GPU prices (% change)", -50, 50, 0, step=5, key="wi_gpu_pct")
        which = st.selectbox("…applied to", [ALL_GPUS, *cat.gpus], key="wi_gpu_which")
        if gpu_pct:
            for gpu_id, gpu in cat.gpus.items():
                if which in (ALL_GPUS, gpu_id):
                    base = overlay.get(gpu_id, gpu.price_usd)
                    pairs.append((f"gpu.{gpu_id}.price_usd", round(base * (1 + gpu_pct / 100),
                                                                   2)))
    with cols[1]:
        e = costs.electricity_usd_per_kwh
        lo, hi = _param_range(e, e.value * 0.5, e.value * 2)
        elec = st.slider("electricity (USD/kWh)", lo, hi, float(e.value), step=0.01,
                         key="wi_elec")
        pue_param = costs.pue
        pue = st.slider("PUE", 1.0, max(2.0, float(pue_param.high or 2.0)),
                        float(pue_param.value), step=0.05, key="wi_pue")
    with cols[2]:
        horizon_base = float(data.get("horizon_years", 3))
        horizon = st.slider("horizon (years)", 1.0, 10.0, horizon_base, step=0.5,
                            key="wi_horizon")
        overhead_param = costs.multinode_overhead_factor
        lo, hi = _param_range(overhead_param, 4.0, 5.0)
        overhead = st.slider("multi-node overhead factor (×)", min(lo, 4.0), max(hi, 5.0),
                             float(overhead_param.value), step=0.1, key="wi_overhead",
                             help="engineering overhead of each additional coupled node "
                                  "(the guide's 4–5×)")
    serving = any(w["kind"] in ("inference", "batch_inference") for w in data["workloads"])
    demand = st.slider("demand growth (× concurrency, QPS, requests)", 0.5, 4.0, 1.0,
                       step=0.25, key="wi_demand", disabled=not serving,
                       help=None if serving else "no serving workload in this RFQ")
    if abs(elec - e.value) > 1e-9:
        pairs.append(("costs.electricity_usd_per_kwh", elec))
    if abs(pue - pue_param.value) > 1e-9:
        pairs.append(("costs.pue", pue))
    if abs(horizon - horizon_base) > 1e-9:
        pairs.append(("rfq.horizon_years", horizon))
    if abs(overhead - overhead_param.value) > 1e-9:
        pairs.append(("costs.multinode_overhead_factor", overhead))
    if serving and abs(demand - 1.0) > 1e-9:
        pairs.append(("demand", demand))
    return pairs


def _at(row: dict[str, Any], value: float) -> str:
    label = row.get("label", "")
    if "price" in label:
        return f"${value:,.0f}"
    if "USD/kWh" in label:
        return f"${value:.3f}/kWh"
    return f"{value:,.3g}"


def _override_words(pairs: list[tuple[str, Any]]) -> list[str]:
    """The what-if values in words (not override paths)."""
    words = []
    if any(path.startswith("gpu.") for path, _ in pairs):
        which = st.session_state.get("wi_gpu_which", ALL_GPUS)
        words.append(f"GPU prices {st.session_state.get('wi_gpu_pct', 0):+d} % "
                     f"({'all GPUs' if which == ALL_GPUS else which})")
    for path, value in pairs:
        if path == "costs.electricity_usd_per_kwh":
            words.append(f"electricity ${value:.2f}/kWh")
        elif path == "costs.pue":
            words.append(f"PUE {value:.2f}")
        elif path == "rfq.horizon_years":
            words.append(f"horizon {years(value)}")
        elif path == "costs.multinode_overhead_factor":
            words.append(f"multi-node overhead {value:.1f}×")
        elif path == "demand":
            words.append(f"demand × {value:g}")
    return words


def _changes(base: Plan, new: Plan) -> list[str]:
    """What changed between two plans, in words."""
    out = []
    before_label = cluster_label(base.cluster, base.cost)
    after_label = cluster_label(new.cluster, new.cost)
    if before_label != after_label:
        out.append(f"**Cluster:** {before_label} → **{after_label}**")
    old_layouts = {w.name: w for w in base.workloads}
    for w in new.workloads:
        o = old_layouts.get(w.name)
        if o is None:
            continue
        before = f"{o.precision} {o.gpu} TP{o.tp}×PP{o.pp}×DP{o.dp}"
        after = f"{w.precision} {w.gpu} TP{w.tp}×PP{w.pp}×DP{w.dp}"
        if before != after:
            out.append(f"**{w.name}:** {before} → **{after}**")
    return out


def _cost_delta(base: Plan, new: Plan) -> pd.DataFrame:
    rows = []
    old = base.cost.model_dump() if base.cost else {}
    now = new.cost.model_dump() if new.cost else {}
    for key, value in old.items():
        after = now.get(key, 0.0)
        rows.append({"cost": components.cost_word(key), "base": f"${value:,.0f}",
                     "what-if": f"${after:,.0f}",
                     "change": "-" if abs(after - value) < 0.5 else
                     f"{'+' if after > value else '−'}${abs(after - value):,.0f}"})
    return pd.DataFrame(rows)


def _sensitivity(rfq_key: str) -> None:
    st.subheader("Sensitivity: tornado and break-evens")
    key = (rfq_key, state.catalog_dir(), state.price_pairs())
    stored = st.session_state.get("wi_report")
    if st.button("Run the sensitivity report", key="wi_run_report",
                 help="sweeps every major parameter over its range (several seconds)"):
        with st.spinner("Sweeping parameters and bisecting break-evens…"):
            report = state.sensitivity_cached(*key)
        st.session_state["wi_report"] = stored = (key, report)
    if not stored or stored[0] != key:
        st.caption("Press the button for the tornado chart (cost at both ends of each "
                   "parameter's range) and the values where the chosen plan flips.")
        return
    report = stored[1]
    if report["base"]["status"] not in ("optimal", "feasible"):
        st.error("The base RFQ is infeasible: nothing to sweep.")
        return
    st.plotly_chart(tornado_figure(report), key="tornado", config={"displayModeBar": False})
    st.caption("The tornado varies each parameter around the catalog's base values (and the "
               "Catalog page's price overlay), not around the what-if sliders above.")
    flips = [{"parameter": row["label"], "break-even at": _at(row, flip["at"]),
              "below": flip["from"], "above": flip["to"],
              "cost below": f"${flip['tco_below_usd']:,.0f}" if flip["tco_below_usd"] else "-",
              "cost above": f"${flip['tco_above_usd']:,.0f}" if flip["tco_above_usd"] else "-"}
             for row in report["parameters"] for flip in row["flips"]]
    if flips:
        st.table(pd.DataFrame(flips), hide_index=True, border="horizontal")
    else:
        st.success("The plan does not flip anywhere in the ranges swept: it is robust.")
    st.caption(f"{report['solves']} solves in {report['seconds']} s.")


def render() -> None:
    """The What-if page."""
    st.title("What-if")
    found = components.need_rfq()
    if found is None:
        return
    data, _ = found
    components.overlay_note()
    rfq_key = state.active_key() or ""
    try:
        with st.spinner("Solving…"):
            base = state.solve_cached(rfq_key, state.catalog_dir(), state.price_pairs())["plan"]
    except InputError as exc:
        components.show_problems(exc, "This RFQ cannot be solved")
        return
    pairs = _controls(data)
    if not base.feasible:
        components.infeasible(base)
    try:
        if pairs:
            with st.spinner("Re-solving with these values…"):
                new = state.whatif_cached(rfq_key, state.catalog_dir(), state.price_pairs(),
                                          tuple(pairs))
        else:
            new = base
    except InputError as exc:
        components.show_problems(exc, "These what-if values are not valid")
        return
    if pairs:
        st.caption("What-if: " + " · ".join(_override_words(pairs)))
    if not new.feasible or new.cost is None:
        if base.feasible:
            st.error("Under these values no plan meets the RFQ.")
            components.infeasible(new)
    elif base.feasible and base.cost is not None:
        capex = new.objective == "capex"
        now = new.cost.capex_usd if capex else new.cost.tco_usd
        delta = now - (base.cost.capex_usd if capex else base.cost.tco_usd)
        cols = st.columns(3)
        cols[0].metric("Capex" if capex else "TCO", components.usd_short(now),
                       f"{'+' if delta >= 0 else '-'}${abs(delta):,.0f}",
                       delta_color="inverse")
        cols[1].metric("Nodes", new.cluster.total_nodes,
                       new.cluster.total_nodes - base.cluster.total_nodes,
                       delta_color="off")
        cols[2].metric("GPUs", new.cluster.total_gpus,
                       new.cluster.total_gpus - base.cluster.total_gpus,
                       delta_color="off")
        changes = _changes(base, new)
        if changes:
            st.warning("**The plan changes.**\n\n" + "\n".join(f"- {c}" for c in changes))
        else:
            st.success("Same plan; only its cost moves." if pairs else
                       "Move a slider to see how the plan and its cost respond.")
        left, right = st.columns(2)
        with left:
            components.plan_card(new, "What-if plan")
        with right:
            st.markdown("#### Cost terms")
            st.dataframe(_cost_delta(base, new), hide_index=True)
    _sensitivity(rfq_key)
