"""Charts of a Pareto frontier and a sensitivity tornado: ``.html`` (plotly) or ``.png``
(matplotlib). Both libraries are imported lazily; the library never shows a window."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from solver.common.errors import InputError, Problem
from solver.common.spreadsheet import safe_row
from solver.common.wording import axis_words, unit_cost_text


def check_plot_path(path: Path, option: str) -> str:
    suffix = path.suffix.lower()
    if suffix not in (".html", ".png"):
        raise InputError([Problem(option, "", str(path), "use a .html or .png file")])
    return suffix


def frontier_csv(result: dict[str, Any], path: Path) -> None:
    """One row per frontier point: cost, metric and the cluster bought."""
    cost_key, metric = result["axes"]
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([cost_key, metric, "total_nodes", "total_gpus", "gpu", "fabric",
                         "cluster"])
        for point in result["points"]:
            cluster = point["plan"]["cluster"]
            writer.writerow(safe_row([point[cost_key], point[metric], cluster["total_nodes"],
                                      cluster["total_gpus"],
                                      "+".join(sorted({n["gpu"] for n in cluster["nodes"]})),
                                      cluster["fabric"], cluster_text(cluster)]))


def cluster_text(cluster: dict[str, Any]) -> str:
    return "; ".join(f"{n['count']}x {n['server']} {n['gpus_per_node']}x{n['gpu']}"
                     for n in cluster["nodes"]) + f" ({cluster['fabric']})"


def point_text(point: dict[str, Any], workload: str) -> str:
    """A frontier point's hover: the cluster bought, whether the workload is bought or
    rented, and its cost per million output tokens."""
    plan = point["plan"]
    work: dict[str, Any] = next((w for w in plan["workloads"] if w["name"] == workload), {})
    sourcing = {"owned": "bought", "rented": "rented", "hybrid": "bought + rented"}.get(
        work.get("sourcing") or "owned", "bought")
    unit = unit_cost_text(work.get("cost_per_million_tokens_usd"))
    return (cluster_text(plan["cluster"]) + f"<br>{workload}: {sourcing}"
            + (f"<br>{unit}" if unit else ""))


def _dollars() -> Any:
    """A matplotlib tick formatter: ``$1,522,250``."""
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _pos: f"${value:,.0f}")


def frontier_plot(result: dict[str, Any], path: Path) -> None:
    """Cost (x) against the metric (y), one marker per plan."""
    suffix = check_plot_path(path, "--plot")
    cost_key, metric = result["axes"]
    xs = [p[cost_key] for p in result["points"]]
    ys = [p[metric] for p in result["points"]]
    labels = [point_text(p, result["workload"]) for p in result["points"]]
    title = (f"{result['rfq']}: {axis_words(cost_key).removesuffix(' (USD)').lower()} "
             f"against {result['workload']}'s {axis_words(metric).lower()}")
    if suffix == ".html":
        import plotly.graph_objects as go

        fig = go.Figure(go.Scatter(x=xs, y=ys, mode="lines+markers", text=labels,
                                   line_shape="hv", hovertemplate="$%{x:,.0f}<br>"
                                   "%{y}<br>%{text}<extra></extra>"))
        fig.update_layout(title=title, xaxis_title=axis_words(cost_key),
                          yaxis_title=axis_words(metric))
        fig.update_xaxes(tickprefix="$", tickformat=",.0f")
        fig.write_html(str(path), include_plotlyjs=True)  # self-contained: works offline
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    ax.step(xs, ys, where="post", marker="o")
    ax.set_xlabel(axis_words(cost_key))
    ax.set_ylabel(axis_words(metric))
    ax.xaxis.set_major_formatter(_dollars())
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def tornado_plot(report: dict[str, Any], path: Path) -> None:
    """TCO at the low and high end of each parameter's range around the base TCO."""
    suffix = check_plot_path(path, "--plot")
    base = report["base"]["tco_usd"] or 0.0
    rows = [r for r in report["parameters"] if r["tco_low_usd"] is not None
            and r["tco_high_usd"] is not None][::-1]
    labels = [f"{r['label']} [{r['low']:g} .. {r['high']:g}]" for r in rows]
    lows = [r["tco_low_usd"] - base for r in rows]
    highs = [r["tco_high_usd"] - base for r in rows]
    title = f"{report['rfq']}: TCO swing per parameter (base ${base:,.0f})"
    if suffix == ".html":
        import plotly.graph_objects as go

        fig = go.Figure([go.Bar(y=labels, x=lows, base=base, orientation="h", name="low end"),
                         go.Bar(y=labels, x=highs, base=base, orientation="h",
                                name="high end")])
        fig.update_layout(title=title, barmode="overlay",
                          xaxis_title=axis_words("tco_usd"))
        fig.update_xaxes(tickprefix="$", tickformat=",.0f")
        fig.write_html(str(path), include_plotlyjs=True)  # self-contained: works offline
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 0.5 * len(rows) + 1.5))
    ax.barh(labels, lows, left=base, label="low end")
    ax.barh(labels, highs, left=base, label="high end", alpha=0.7)
    ax.axvline(base, color="black", linewidth=0.8)
    ax.set_xlabel(axis_words("tco_usd"))
    ax.xaxis.set_major_formatter(_dollars())
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
