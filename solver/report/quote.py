"""The customer quote: one self-contained HTML document (Jinja2) or an XLSX workbook.

:func:`quote_context` gathers everything the document says from the plan JSON, the RFQ and
the catalog — summary, cluster picture (inline SVG), bill of materials, SLO/deadline
margins, assumptions with price dates, alternatives, warnings, validity date — so the HTML
and the XLSX say the same thing. The bill of materials comes from the plan's
``bill_of_materials`` (contract.md); a plan without one falls back to the cost breakdown.
"""

from __future__ import annotations

import datetime as dt
from html import escape
from pathlib import Path
from typing import Any

from solver.common.wording import (
    assumption_lines,
    assumptions,
    cluster_sentence,
    layout_rows,
    money_delta,
    opex_rows,
    plural,
    qty,
    relaxations,
    serving_lines,
    short_source,
    target_rows,
    usd,
    years,
)

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
SLOT = 14  # px, one GPU slot in the cluster picture
COLOURS = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6",
           "#9D755D", "#EECA3B")
COST_ROWS = (("gpus_usd", "GPUs"), ("servers_usd", "Servers"),
             ("network_usd", "Network (NICs, switch ports)"), ("storage_usd", "Shared storage"))


def bom_lines(plan: dict[str, Any]) -> tuple[list[dict[str, Any]], float, Any, bool]:
    """(lines, capex, opex per year, from the plan's own BOM?) for the quote's BOM table."""
    bom = plan.get("bill_of_materials")
    if bom and bom.get("lines"):
        return list(bom["lines"]), float(bom.get("capex_usd", sum(
            line["line_total_usd"] for line in bom["lines"]))), bom.get("opex_per_year"), True
    cost = plan.get("cost") or {}
    lines = [{"sku": key.removesuffix("_usd"), "description": label, "quantity": 1,
              "unit_price_usd": cost[key], "price_type": "catalog", "as_of": "",
              "source": "cost breakdown", "line_total_usd": cost[key]}
             for key, label in COST_ROWS if cost.get(key)]
    return lines, float(cost.get("capex_usd", 0.0)), None, False


def placement_units(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """One drawn node per bought node: its type and which workload uses each GPU slot."""
    placement = plan.get("placement")
    nodes: list[dict[str, Any]] = []
    if placement:
        for item in placement:
            per_node = int(item.get("gpus_per_node") or item.get("gpus") or 0)
            slots: list[str | None] = []
            for run in item.get("runs") or item.get("workloads") or []:
                if isinstance(run, dict):
                    slots += [run.get("workload") or run.get("name")] * int(run.get("gpus", 1))
                else:
                    slots.append(str(run))
            slots = (slots + [None] * per_node)[:max(per_node, len(slots))]
            nodes.append({"label": f"{item.get('server', '')} · {item.get('gpu', '')}",
                          "slots": slots})
        return nodes
    for node in plan["cluster"]["nodes"]:  # first fit, as the dashboard draws it
        for _ in range(int(node["count"])):
            nodes.append({"label": f"{node['server']} · {node['gpu']}", "gpu": node["gpu"],
                          "slots": [None] * int(node["gpus_per_node"])})
    for entry in plan.get("workloads", []):
        for row in layout_rows(entry):
            size = row["tp"] * row["pp"] * (row["dp"] if entry["kind"] not in (
                "inference", "batch_inference") else 1)
            copies = 1 if entry["kind"] not in ("inference", "batch_inference") else row["dp"]
            for _ in range(copies):
                need = size
                for node in nodes:
                    if node.get("gpu") != row["gpu"]:
                        continue
                    free = [i for i, s in enumerate(node["slots"]) if s is None]
                    if size <= len(node["slots"]) and len(free) < need:
                        continue
                    for i in free[:need]:
                        node["slots"][i] = entry["name"]
                    need -= len(free[:need])
                    if need <= 0:
                        break
    return nodes


def cluster_svg(plan: dict[str, Any]) -> str:
    """The cluster as an inline SVG: one box per node, one square per GPU, coloured by job."""
    nodes = placement_units(plan)
    names = [w["name"] for w in plan.get("workloads", [])]
    colour = {name: COLOURS[i % len(COLOURS)] for i, name in enumerate(names)}
    per_row = 4
    box_w, box_h = 190, 58
    rows = max(1, -(-len(nodes) // per_row))
    legend_h = 22
    width = per_row * (box_w + 10) + 10
    height = rows * (box_h + 10) + 10 + legend_h
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="cluster">']
    for index, node in enumerate(nodes):
        x = 10 + (index % per_row) * (box_w + 10)
        y = 10 + (index // per_row) * (box_h + 10)
        parts.append(f'<rect x="{x}" y="{y}" width="{box_w}" height="{box_h}" rx="6" '
                     'fill="#fafafa" stroke="#555"/>')
        parts.append(f'<text x="{x + 6}" y="{y + 15}" font-size="11">'
                     f'{escape(node["label"])}</text>')
        for slot, name in enumerate(node["slots"]):
            sx = x + 6 + (slot % 12) * (SLOT + 1)
            sy = y + 22 + (slot // 12) * (SLOT + 1)
            fill = colour.get(name or "", "#d9d9d9")
            title = escape(name or "idle")
            parts.append(f'<rect x="{sx}" y="{sy}" width="{SLOT}" height="{SLOT}" '
                         f'fill="{fill}"><title>{title}</title></rect>')
    ly = height - legend_h + 14
    lx = 10
    for name in names:
        parts.append(f'<rect x="{lx}" y="{ly - 10}" width="10" height="10" '
                     f'fill="{colour[name]}"/><text x="{lx + 14}" y="{ly}" font-size="11">'
                     f'{escape(name)}</text>')
        lx += 24 + 7 * len(name)
    parts.append("</svg>")
    return "".join(parts)


def quote_context(plan: dict[str, Any], rfq: Any, catalog: Any,
                  alternatives: list[dict[str, Any]] | None = None, valid_days: int = 30,
                  today: dt.date | None = None) -> dict[str, Any]:
    """Everything the quote says, as plain values (strings already formatted)."""
    today = today or dt.date.today()
    feasible = plan["status"] in ("optimal", "feasible")
    a = assumptions(catalog, rfq, plan)
    specs = {w.name: w for w in rfq.workloads}
    lines, capex, opex, from_plan = bom_lines(plan) if feasible else ([], 0.0, None, False)
    cost = plan.get("cost") or {}
    workloads = []
    for entry in plan.get("workloads", []):
        workloads.append({
            "name": entry["name"], "kind": entry["kind"].replace("_", " "),
            "model": entry["model"], "precision": entry["precision"].upper(),
            "layouts": layout_rows(entry),
            "targets": target_rows(entry, specs.get(entry["name"])),
            "utilization": entry.get("utilization"),
            "notes": serving_lines(entry),
        })
    alts = []
    for alt in alternatives or []:
        alts.append({"name": alt["alternative"],
                     "tco": usd(alt["tco_usd"]) if alt.get("feasible") else "not possible",
                     "difference": money_delta(alt["delta_usd"]) if alt.get("delta_usd")
                     is not None else "-", "why": alt["why"]})
    if feasible:
        summary = (f"To run {plural(len(rfq.workloads), 'workload')} for "
                   f"{rfq.customer or rfq.id}, buy {cluster_sentence(plan['cluster'])}. "
                   f"Hardware costs {usd(capex)}; the total cost of ownership over "
                   f"{years(rfq.horizon_years)} is {usd(cost.get('tco_usd'))}, including "
                   + ("power, operations and the engineering overhead of coupled nodes."
                      if plan["cluster"].get("coupled") else "power and operations."))
    else:
        words = relaxations(plan.get("infeasibility") or {}, plan.get("objective", "tco"),
                            rfq.horizon_years)
        summary = ("No configuration of the allowed hardware meets every requirement. "
                   + ("Nearest feasible change: " + words[0] + "." if words else ""))
    opex_list = [(label, usd(value)) for label, value in opex_rows(opex)]
    return {
        "rfq": rfq, "plan": plan, "feasible": feasible, "summary": summary,
        "customer": rfq.customer or "", "date": today.isoformat(),
        "valid_until": (today + dt.timedelta(days=valid_days)).isoformat(),
        "svg": cluster_svg(plan) if feasible else "",
        "bom": [{**line, "unit": usd(line.get("unit_price_usd")),
                 "qty": qty(line.get("quantity", 0)),
                 "total": usd(line.get("line_total_usd")),
                 "source_short": short_source(line.get("source", ""))} for line in lines],
        "bom_from_plan": from_plan, "capex": usd(capex), "capex_value": capex,
        "opex_rows": opex_list,
        "costs": [(label, usd(cost[key])) for key, label in (
            ("capex_usd", "Hardware (capex)"), ("power_usd", "Power"),
            ("operations_usd", "Operations and engineering"),
            ("multinode_overhead_usd", "Coupled-node engineering overhead"),
            ("rental_usd", "Rental"), ("tco_usd", "Total cost of ownership"))
            if key in cost],
        "tco": usd(cost.get("tco_usd")), "horizon": years(rfq.horizon_years),
        "workloads": workloads, "assumptions": assumption_lines(a), "prices": a["prices"],
        "alternatives": alts, "warnings": list(plan.get("warnings") or []),
        "infeasible": relaxations(plan.get("infeasibility") or {},
                                  plan.get("objective", "tco"), rfq.horizon_years)
        if not feasible else [],
        "reasons": (plan.get("infeasibility") or {}).get("reasons", []),
    }


def render_html(context: dict[str, Any]) -> str:
    """The quote as one self-contained HTML page (inline CSS and SVG, no external files)."""
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(loader=FileSystemLoader(TEMPLATE_DIR),
                      autoescape=select_autoescape(["html", "j2"]))
    return env.get_template("quote.html.j2").render(**context)


def write_xlsx(path: Path, context: dict[str, Any]) -> None:
    """The quote as a workbook: Summary, Bill of materials, Workloads, Assumptions."""
    from openpyxl import Workbook
    from openpyxl.styles import Font

    book = Workbook()
    sheet = book.active
    sheet.title = "Summary"
    sheet.append(["Quote for", context["customer"] or context["rfq"].id])
    sheet.append(["Date", context["date"]])
    sheet.append(["Valid until", context["valid_until"]])
    sheet.append(["Summary", context["summary"]])
    for label, value in context["costs"]:
        sheet.append([label, value])
    bom = book.create_sheet("Bill of materials")
    bom.append(["SKU", "Description", "Quantity", "Unit price (USD)", "Price type", "As of",
                "Source", "Line total (USD)"])
    for line in context["bom"]:
        bom.append([line.get("sku"), line.get("description"), line.get("quantity"),
                    line.get("unit_price_usd"), line.get("price_type"), line.get("as_of"),
                    line.get("source"), line.get("line_total_usd")])
    bom.append(["Capex", "", "", "", "", "", "", context["capex_value"]])
    for cell in bom[1]:
        cell.font = Font(bold=True)
    for row in bom.iter_rows(min_row=2, min_col=4, max_col=8):
        for cell in row:
            if isinstance(cell.value, int | float):
                cell.number_format = '"$"#,##0'
    work = book.create_sheet("Workloads")
    work.append(["Workload", "GPU", "Precision", "TP", "PP", "DP", "GPUs", "Metric",
                 "Predicted", "Target", "Verdict"])
    for w in context["workloads"]:
        for lay in w["layouts"]:
            work.append([w["name"], lay["gpu"], lay["precision"], lay["tp"], lay["pp"],
                         lay["dp"], lay["gpus"]])
        for t in w["targets"]:
            work.append([w["name"], "", "", "", "", "", "", t["metric"], t["predicted"],
                         t["target"], t["verdict"]])
    assume = book.create_sheet("Assumptions")
    for line in context["assumptions"]:
        assume.append([line])
    for alt in context["alternatives"]:
        assume.append([f"Alternative: {alt['name']}", alt["tco"], alt["difference"],
                       alt["why"]])
    for warning in context["warnings"]:
        assume.append([f"Risk: {warning}"])
    book.save(path)


def write_quote(path: Path, plan: dict[str, Any], rfq: Any, catalog: Any,
                alternatives: list[dict[str, Any]] | None = None, valid_days: int = 30) -> None:
    """Write the quote as HTML or XLSX, chosen by the file suffix."""
    context = quote_context(plan, rfq, catalog, alternatives, valid_days)
    if path.suffix.lower() == ".xlsx":
        write_xlsx(path, context)
    else:
        path.write_text(render_html(context), encoding="utf-8")
