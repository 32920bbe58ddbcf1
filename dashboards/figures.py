"""Plotly figures of the dashboard: the cluster, the cost breakdown, the frontier, the tornado.

Pure functions of the plan / frontier / report of docs/plan.md (no Streamlit), so they
can be checked without a browser. The cluster picture places each workload's replicas on
the nodes bought, first fit; the solver decides *how many* GPUs of which kind each layout
uses, the picture shows one way to put them in the boxes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go

from solver.common.wording import (
    CAPEX_TERMS,
    COST_LABELS,
    COST_TERMS,
    axis_words,
    layout_words,
    unit_cost_text,
    unit_gpus,
    unit_words,
)
from solver.optimize.plan_model import Cluster, Cost, LayoutUse, Plan, WorkloadPlan

PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6",
           "#9D755D", "#EECA3B", "#BAB0AC")
IDLE = "#D9D9D9"
MAX_DRAWN_NODES = 24
NODES_PER_ROW = 4
GPU_COLUMNS = 4
def _bound(row: dict, value: float) -> str:
    """A tornado range end: prices in whole dollars, other values to 3 significant digits."""
    if "price" in row.get("label", "") or str(row.get("path", "")).endswith("_usd"):
        return f"${value:,.0f}"
    if "USD/kWh" in row.get("label", ""):
        return f"${value:.2f}"
    return f"{value:.3g}"


def _log_ticks(low: float, high: float) -> dict:
    """Tick values 1-2-5 per decade covering [low, high], labelled ``$200,000``."""
    values = []
    decade = 10 ** math.floor(math.log10(low))
    while decade <= high * 10:
        values += [decade * m for m in (1, 2, 5) if low / 1.5 <= decade * m <= high * 1.5]
        decade *= 10
    return {"type": "log", "tickvals": values, "ticktext": [f"${v:,.0f}" for v in values]}


def _short_usd(value: float) -> str:
    """``$34k`` for a bar label, ``$1.72M`` from a million on (as the TCO tile); small
    amounts in dollars (``$19``, not ``$0k``)."""
    if abs(value) >= 1e6:
        return f"${value / 1e6:,.2f}M"
    return f"${value / 1000:,.0f}k" if abs(value) >= 1000 else f"${value:,.0f}"


FABRIC_SYMBOLS = ("circle", "diamond", "square", "triangle-up", "cross", "star")
LOG_SCALE_RATIO = 30  # a cost axis spanning more than this factor is drawn log-scaled
MONEY_AXIS = {"tickprefix": "$", "tickformat": ",.0f"}


# --- cluster picture --------------------------------------------------------------------

@dataclass
class Node:
    """One box of the cluster as drawn: its type and what each GPU slot runs."""

    gpu: str
    server: str
    slots: list[str | None]
    spanning: bool = False
    hover: list[str] = field(default_factory=list)


def _units(entry: WorkloadPlan) -> list[tuple[str, int, int, str]]:
    """A workload's placement units: (gpu, gpus_per_node, GPUs per unit, label)."""
    units = []
    training = entry.kind not in ("inference", "batch_inference")
    layouts = entry.layouts or [LayoutUse(
        gpu=entry.gpu, precision=entry.precision, tp=entry.tp, pp=entry.pp,
        ep=entry.ep, attention_dp=entry.attention_dp, mode=entry.mode,
        prefill=entry.prefill, decode=entry.decode,
        replicas=1 if training else entry.dp, gpus_per_node=entry.gpus_per_node,
        fabric=entry.fabric)]
    for layout in layouts:
        replicas = layout.replicas or 1
        size = entry.gpus if training else unit_gpus(layout)  # a job, else one replica
        if training:
            label = (f"{entry.name}: {layout.precision} TP{layout.tp}×PP{layout.pp}"
                     f"×DP{entry.dp}")
        elif layout.prefill is not None and layout.decode is not None:
            label = f"{entry.name}: {layout.precision} {unit_words(layout)}"
        else:
            label = (f"{entry.name}: {layout.precision} TP{layout.tp}×PP{layout.pp}"
                     if not layout.ep else f"{entry.name}: {layout.precision} "
                     + layout_words(layout.tp, layout.pp, layout.ep, layout.attention_dp))
        for replica in range(replicas):
            suffix = f" (replica {replica + 1}/{replicas})" if replicas > 1 else ""
            units.append((layout.gpu, layout.gpus_per_node, size, label + suffix))
    return units


def place(plan: Plan) -> list[Node]:
    """Nodes of the plan with each GPU slot assigned to a workload (first fit)."""
    nodes = [Node(n.gpu, n.server, [None] * n.gpus_per_node)
             for n in plan.cluster.nodes for _ in range(n.count)]
    for node in nodes:
        node.hover = [""] * len(node.slots)
    # busy and quiet hours (issue 29): the picture is the busy hours; a recurring job that
    # runs only in the quiet hours is in the timetable, on GPUs the services leave idle
    busy = ({r.workload for s in plan.timetable if s.slot == "busy" for r in s.runs}
            if plan.timetable else None)
    for entry in plan.workloads:
        if busy is not None and entry.name not in busy:
            continue
        for gpu, per_node, size, label in _units(entry):
            matching = [n for n in nodes if n.gpu == gpu and (not per_node
                                                              or len(n.slots) == per_node)]
            matching = matching or [n for n in nodes if n.gpu == gpu]
            _fill(matching, size, entry.name, label)
    return nodes


def _fill(nodes: list[Node], size: int, name: str, label: str) -> None:
    """Put one unit of ``size`` GPUs on one node if it fits, else across several."""
    for node in nodes:
        if node.slots.count(None) >= size:
            _take(node, size, name, label)
            return
    touched = []
    for node in nodes:
        if size <= 0:
            break
        free = node.slots.count(None)
        if free:
            size -= _take(node, min(free, size), name, label)
            touched.append(node)
    if len(touched) > 1:
        for node in touched:
            node.spanning = True


def _take(node: Node, count: int, name: str, label: str) -> int:
    taken = 0
    for index, slot in enumerate(node.slots):
        if slot is None and taken < count:
            node.slots[index] = name
            node.hover[index] = label
            taken += 1
    return taken


def workload_colours(plan: Plan) -> dict[str, str]:
    return {entry.name: PALETTE[i % len(PALETTE)] for i, entry in enumerate(plan.workloads)}


def cluster_figure(plan: Plan) -> go.Figure:
    """Nodes as boxes, GPUs as squares coloured by workload, the fabric when coupled."""
    nodes = place(plan)
    cluster = plan.cluster
    shown = nodes[:MAX_DRAWN_NODES]
    colours = workload_colours(plan)
    coupled = cluster.coupled
    node_w, gap, header, cell = 5.0, 0.8, 0.9, 1.0
    bus = 0.9 if coupled else 0.0
    scale_columns = min(NODES_PER_ROW, max(2, len(shown)))  # few nodes: draw them larger
    width = scale_columns * (node_w + gap) - gap
    spanning = [i for i, n in enumerate(shown) if n.spanning]
    want = cluster.coupled_nodes if coupled else 0
    for i in range(len(shown)):
        if len(spanning) >= want:
            break
        if i not in spanning:
            spanning.append(i)
    rows = [shown[i:i + NODES_PER_ROW] for i in range(0, len(shown), NODES_PER_ROW)]
    row_heights = [max(header + math.ceil(len(n.slots) / _columns(n)) * cell + 0.2
                       for n in row) for row in rows]
    total_h = sum(h + bus for h in row_heights) + gap * (len(rows) - 1)
    px_per_unit = 1000 / (width + 0.6)
    fig = go.Figure()
    points: dict[str, tuple[list[float], list[float], list[str]]] = {}
    top = total_h
    for r_index, row in enumerate(rows):
        row_h = row_heights[r_index]
        y1 = top
        y0 = top - row_h
        start = (width - (len(row) * (node_w + gap) - gap)) / 2
        members = []
        for c_index, node in enumerate(row):
            index = r_index * NODES_PER_ROW + c_index
            x0 = start + c_index * (node_w + gap)
            on_fabric = coupled and index in spanning
            fig.add_shape(type="rect", x0=x0, y0=y0, x1=x0 + node_w, y1=y1, layer="below",
                          line={"color": "#333" if on_fabric else "#999", "width": 2},
                          fillcolor="#F7F7F7")
            fig.add_annotation(x=x0 + node_w / 2, y=y1 - header / 2, showarrow=False,
                               text=f"<b>node {index + 1}</b> · {node.server} · "
                                    f"{len(node.slots)}× {node.gpu}", font={"size": 12})
            columns = _columns(node)
            for slot, owner in enumerate(node.slots):
                r, c = divmod(slot, columns)
                xs, ys, texts = points.setdefault(owner or "idle", ([], [], []))
                xs.append(x0 + node_w / columns * (c + 0.5))
                ys.append(y1 - header - cell * (r + 0.5))
                texts.append(f"node {index + 1} GPU {slot}: "
                             + (node.hover[slot] if owner else "idle"))
            if on_fabric:
                members.append(x0 + node_w / 2)
                fig.add_shape(type="line", x0=x0 + node_w / 2, x1=x0 + node_w / 2, y0=y0,
                              y1=y0 - bus * 0.6, line={"color": "#333", "width": 3})
        if members:
            y_bus = y0 - bus * 0.6
            fig.add_shape(type="line", x0=min(members) - 0.4, x1=max(members) + 0.4,
                          y0=y_bus, y1=y_bus, line={"color": "#333", "width": 5})
            fig.add_annotation(x=(min(members) + max(members)) / 2, y=y_bus - 0.3,
                               showarrow=False, font={"size": 12},
                               text=f"fabric <b>{cluster.fabric}</b> (coupled)")
        top = y0 - gap - bus
    order = [name for name in colours if name in points] + (["idle"] if "idle" in points
                                                              else [])
    for key in order:
        xs, ys, texts = points[key]
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="markers", name=key, text=texts, hoverinfo="text",
            showlegend=True,
            marker={"symbol": "square", "size": max(14, min(44, int(0.55 * px_per_unit))), "color": colours.get(key, IDLE),
                    "line": {"color": "#555", "width": 1}}))
    title = f"{cluster.total_nodes} node{'s' if cluster.total_nodes != 1 else ''}, " \
            f"{cluster.total_gpus} GPUs, " + (f"fabric {cluster.fabric}"
                                               if cluster.fabric != "none" else "no fabric")
    if len(nodes) > len(shown):
        title += f" — first {len(shown)} of {len(nodes)} nodes drawn"
    fig.update_layout(
        title={"text": title, "font": {"size": 14}},
        xaxis={"visible": False, "range": [-0.3, width + 0.3], "fixedrange": True},
        yaxis={"visible": False, "range": [-0.2, total_h + 0.2], "fixedrange": True,
               "scaleanchor": "x", "scaleratio": 1},
        height=int(110 + total_h * px_per_unit),
        margin={"l": 10, "r": 10, "t": 40, "b": 40}, plot_bgcolor="white",
        legend={"title": {"text": "GPUs run"}, "orientation": "h", "y": -0.02,
                "x": 0.5, "xanchor": "center", "yanchor": "top"},
    )
    return fig


def _columns(node: Node) -> int:
    return min(GPU_COLUMNS if len(node.slots) <= 8 else 8, len(node.slots))


# --- cost -------------------------------------------------------------------------------

def cost_figure(cost: Cost, objective: str = "tco") -> go.Figure:
    """A waterfall from the capex terms through power, operations, overhead and rental to
    TCO (labels: :data:`~solver.common.wording.COST_LABELS`)."""
    amounts = cost.model_dump()
    keys = CAPEX_TERMS if objective == "capex" else COST_TERMS
    terms = [(COST_LABELS[key].words.capitalize() if key != "gpus_usd" else "GPUs",
              float(amounts[key])) for key in keys]
    labels = [label for label, _ in terms] + ["Capex" if objective == "capex" else "TCO"]
    values = [value for _, value in terms] + [0.0]
    measures = ["relative"] * len(terms) + ["total"]
    fig = go.Figure(go.Waterfall(
        x=labels, y=values, measure=measures, textposition="outside",
        text=[_short_usd(v) if v else "" for v in values[:-1]]
        + [_short_usd(cost.capex_usd if objective == "capex" else cost.tco_usd)],
        connector={"line": {"color": "#999"}},
        increasing={"marker": {"color": "#4C78A8"}}, totals={"marker": {"color": "#333"}}))
    fig.update_layout(title="Cost breakdown over the horizon", height=360,
                      margin={"l": 10, "r": 10, "t": 50, "b": 10}, yaxis_title="US dollars",
                      showlegend=False)
    fig.update_yaxes(**MONEY_AXIS)
    return fig


# --- Pareto frontier --------------------------------------------------------------------

def plan_gpus(plan: Plan) -> str:
    return "+".join(sorted({n.gpu for n in plan.cluster.nodes})) or "nothing owned"


def plan_fabric(plan: Plan) -> str:
    cluster = plan.cluster
    return f"{cluster.fabric} (coupled)" if cluster.coupled else "no fabric"


def cluster_label(cluster: Cluster, cost: Cost | None = None) -> str:
    """``1× pcie-8gpu 8×rtx-pro-6000, no fabric`` (with ``cost``: says when nothing is
    owned because everything is rented)."""
    if not cluster.nodes:
        return "nothing owned (rented)" if cost is not None and cost.rental_usd \
            else "nothing owned"
    return " + ".join(f"{n.count}× {n.server} {n.gpus_per_node}×{n.gpu}"
                      for n in cluster.nodes) + (f", fabric {cluster.fabric}"
                                                 if cluster.fabric != "none" else
                                                 ", no fabric")


def frontier_figure(result: dict[str, Any], selected: int | None = None,
                    target: float | None = None) -> go.Figure:
    """TCO against the metric: one trace per GPU mix, marker by fabric, the optimum starred;
    ``target`` (the workload's SLO or deadline for the metric) is drawn as a dashed line."""
    cost_key, metric = result["axes"]
    points = result["points"]
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=[p[cost_key] for p in points], y=[p[metric] for p in points], mode="lines",
        line={"shape": "hv", "color": "#BBB", "dash": "dot"}, hoverinfo="skip",
        name="frontier", showlegend=False))
    fabrics = sorted({plan_fabric(p["plan"]) for p in points})
    symbols = {f: FABRIC_SYMBOLS[i % len(FABRIC_SYMBOLS)] for i, f in enumerate(fabrics)}
    gpu_mixes = sorted({plan_gpus(p["plan"]) for p in points})
    for g_index, gpus in enumerate(gpu_mixes):
        for fabric in fabrics:
            for how in SOURCING_ORDER:  # bought points filled, rented ones open and labelled
                members = [(i, p) for i, p in enumerate(points)
                           if plan_gpus(p["plan"]) == gpus and plan_fabric(p["plan"]) == fabric
                           and point_sourcing(p, result) == how]
                if not members:
                    continue
                owned = how == "bought"
                fig.add_trace(go.Scatter(
                    x=[p[cost_key] for _, p in members], y=[p[metric] for _, p in members],
                    mode="markers" if owned else "markers+text",
                    name=f"{gpus} · {fabric}" + ("" if owned else f" · {how}"),
                    customdata=[i for i, _ in members],
                    hovertext=[_hover(i, p, result) for i, p in members], hoverinfo="text",
                    text=None if owned else [how] * len(members), textposition="top center",
                    textfont={"size": 11, "color": "#555"},
                    marker={"size": 13, "symbol": symbols[fabric] + ("" if owned else "-open"),
                            "color": PALETTE[g_index % len(PALETTE)],
                            "line": {"color": "#222" if owned else
                                     PALETTE[g_index % len(PALETTE)], "width": 1 if owned
                                     else 2}}))
    if points:
        best = points[0]
        fig.add_trace(go.Scatter(
            x=[best[cost_key]], y=[best[metric]], mode="markers", name="optimum (cheapest)",
            hoverinfo="skip", marker={"size": 24, "symbol": "star-open",
                                      "color": "#111", "line": {"width": 2}}))
    if selected is not None and 0 <= selected < len(points):
        chosen = points[selected]
        fig.add_trace(go.Scatter(
            x=[chosen[cost_key]], y=[chosen[metric]], mode="markers", name="selected",
            hoverinfo="skip", marker={"size": 26, "symbol": "circle-open", "color": "#E45756",
                                      "line": {"width": 3}}))
    if target is not None:
        fig.add_hline(y=target, line_dash="dash", line_color="#E45756",
                      annotation_text=f"SLO target {target:,g}"
                                      + (" ms" if metric.endswith("_ms") else
                                         " h" if metric.startswith("hours") else ""),
                      annotation_position="top left")
    better = "lower" if result["lower_is_better"][metric] else "higher"
    costs = [p[cost_key] for p in points if p[cost_key] > 0]
    log = bool(costs) and max(costs) / min(costs) > LOG_SCALE_RATIO
    # log axis: ticks at 1, 2 and 5 of each decade, each labelled in dollars (plotly's own
    # 'D2' ticks drop the $ prefix on the 2s and 5s; whole decades may leave one label)
    fig.update_xaxes(**MONEY_AXIS, **(_log_ticks(min(costs), max(costs)) if log else {}))
    fig.update_layout(
        title=f"{result['rfq']}: {axis_words(cost_key).removesuffix(' (USD)').lower()} "
              f"against {result['workload']}'s {axis_words(metric).lower()} "
              f"({better} is better)",
        xaxis_title=axis_words(cost_key) + (", log scale" if log else ""),
        yaxis_title=axis_words(metric), height=460,
        margin={"l": 10, "r": 10, "t": 50, "b": 10}, clickmode="event+select",
        legend={"title": "GPU · fabric (open, labelled: rented)"})
    return fig


SOURCING_ORDER = ("bought", "bought + rented", "rented")


def point_sourcing(point: dict[str, Any], result: dict[str, Any]) -> str:
    """Whether a frontier point's workload is bought, rented or both (issue 32: the same
    cluster at rising TCO was an unlabelled rental)."""
    plan: Plan = point["plan"]
    work = next((w for w in plan.workloads if w.name == result["workload"]), None)
    return {"rented": "rented", "hybrid": "bought + rented"}.get(
        (work.sourcing if work else None) or "owned", "bought")


def hover_layout(work: Any) -> str:
    """A workload's layouts for a hover: one ``precision TPa×PPb×DPc on n× GPU`` per layout,
    each with its own GPUs (a workload on two layouts is not "DP8 on 13×": the summary's
    TP/PP/DP are its first layout's), rented ones marked."""
    uses = work.layouts or []
    if len(uses) < 2:
        return f"{work.precision} TP{work.tp}×PP{work.pp}×DP{work.dp} on {work.gpus}× {work.gpu}"
    parts = []
    for use in uses:
        shape = (f"{unit_words(use)} ×{use.replicas}" if use.mode == "disaggregated"
                 else f"TP{use.tp}×PP{use.pp}×DP{use.replicas}")
        parts.append(f"{use.precision} {shape} on {unit_gpus(use) * use.replicas}× "
                     f"{use.gpu}" + (" rented" if use.rented else ""))
    return " + ".join(parts)


def _hover(index: int, point: dict[str, Any], result: dict[str, Any]) -> str:
    cost_key, metric = result["axes"]
    plan: Plan = point["plan"]
    work = next((w for w in plan.workloads if w.name == result["workload"]), None)
    layout = hover_layout(work) if work else ""
    sourcing = {"rented": "rented", "hybrid": "bought + rented"}.get(
        (work.sourcing if work else None) or "owned", "bought")
    unit = unit_cost_text(work.cost_per_million_tokens_usd.model_dump()
                          if work and work.cost_per_million_tokens_usd else None)
    return (f"<b>#{index + 1}</b> {axis_words(cost_key)} ${point[cost_key]:,.0f}<br>"
            f"{axis_words(metric)} "
            f"{point[metric]:,.2f}<br>{cluster_label(plan.cluster, plan.cost)}<br>"
            f"{result['workload']}: {layout} ({sourcing})"
            + (f"<br>{unit}" if unit else ""))


# --- sensitivity ------------------------------------------------------------------------

def tornado_figure(report: dict[str, Any]) -> go.Figure:
    """Cost at the low and high end of each parameter's range around the base cost."""
    base = report["base"]["tco_usd"] or 0.0
    rows = [r for r in report["parameters"] if r["tco_low_usd"] is not None
            and r["tco_high_usd"] is not None][::-1]
    labels = [f"{r['label']} [{_bound(r, r['low'])} .. {_bound(r, r['high'])}]" for r in rows]
    fig = go.Figure([
        go.Bar(y=labels, x=[r["tco_low_usd"] - base for r in rows], base=base,
               orientation="h", name="at low end", marker_color="#54A24B"),
        go.Bar(y=labels, x=[r["tco_high_usd"] - base for r in rows], base=base,
               orientation="h", name="at high end", marker_color="#E45756"),
    ])
    fig.add_vline(x=base, line_color="#111", line_width=1)
    fig.update_xaxes(**MONEY_AXIS)
    fig.update_layout(title=f"Tornado: {report['objective'].upper()} around the base "
                            f"${base:,.0f}", barmode="overlay",
                      xaxis_title=axis_words(f"{report['objective']}_usd"),
                      height=max(260, 60 + 34 * len(rows)),
                      margin={"l": 10, "r": 10, "t": 50, "b": 10})
    return fig


# --- buy or rent ------------------------------------------------------------------------

def buy_rent_figure(plan: Plan, horizon_years: float) -> go.Figure | None:
    """Cumulative cost month by month of owning (capex at month 0, then power and
    operations) against renting (the rented capacity's $/h for the hours it is used), one
    pair of lines per workload of ``plan.buy_vs_rent`` that has both sides; the
    break-even horizon marked where the lines cross (inside the horizon and the hours
    used: a job rented for 9 hours never reaches it). None when no workload
    could be both bought and rented."""
    from solver.optimize.rental import cumulative_costs

    colours = workload_colours(plan)
    fig = go.Figure()
    drawn = 0
    for row in plan.buy_vs_rent or []:
        series = cumulative_costs(row, horizon_years)
        if series is None:
            continue
        name, colour = row.workload, colours.get(row.workload, PALETTE[0])
        drawn += 1
        fig.add_trace(go.Scatter(x=series["month"], y=series["buy_usd"], mode="lines",
                                 name=f"{name}: buy", line={"color": colour},
                                 hovertemplate="month %{x}: $%{y:,.0f}<extra>buy</extra>"))
        fig.add_trace(go.Scatter(x=series["month"], y=series["rent_usd"], mode="lines",
                                 name=f"{name}: rent", line={"color": colour, "dash": "dash"},
                                 hovertemplate="month %{x}: $%{y:,.0f}<extra>rent</extra>"))
        months = row.breakeven_months
        used_months = (row.hours_used or 0.0) / (8760.0 / 12.0)
        if months is not None and months <= min(12 * horizon_years, used_months):
            # the lines cross only when the capacity is used past the break-even horizon
            fig.add_vline(x=months, line={"color": colour, "dash": "dot", "width": 1},
                          annotation_text=f"{name}: break-even {months:,.1f} mo",
                          annotation_position="top left")
    if not drawn:
        return None
    fig.update_layout(title="Cumulative cost: buy (solid) against rent (dashed)",
                      height=380, margin={"l": 10, "r": 10, "t": 50, "b": 10},
                      xaxis_title="months from now", yaxis_title="US dollars",
                      legend={"orientation": "h", "y": -0.2})
    fig.update_yaxes(**MONEY_AXIS)
    return fig
