"""The customer quote: one self-contained HTML document (Jinja2) or an XLSX workbook.

:func:`quote_context` gathers everything the document says from the typed plan
(:class:`~solver.optimize.plan_model.Plan`, docs/plan.md), the RFQ and the catalog — summary, cluster picture (inline SVG), bill of materials, SLO/deadline
margins, assumptions with price dates, alternatives, warnings, validity date — so the HTML
and the XLSX say the same thing. The bill of materials is the plan's
``bill_of_materials``.
"""

from __future__ import annotations

import datetime as dt
import re
from html import escape
from pathlib import Path
from typing import Any

from solver.catalog.data import Catalog
from solver.common.spreadsheet import safe_workbook
from solver.common.wording import (
    COST_LABELS,
    assumption_lines,
    assumptions,
    binding_lines,
    cluster_sentence,
    layout_rows,
    licensed_alternative_line,
    money_delta,
    opex_rows,
    plural,
    qty,
    relaxations,
    serving_lines,
    target_rows,
    usd,
    years,
)
from solver.optimize.plan_model import BuyVsRent, Period, Phasing, Plan, ScheduleRun
from solver.optimize.rental import breakeven_horizon_text, resale_text
from solver.report.customer import (
    customer_source,
    customer_text,
    is_renting_hint,
    model_words,
    orderable_line,
    price_words,
    source_title,
)
from solver.rfq.schema import AnyWorkload, Rfq

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
SLOT = 14  # px, one GPU slot in the cluster picture
COLOURS = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6",
           "#9D755D", "#EECA3B")
MONEY, RATE = '"$"#,##0', '"$"#,##0.00'
_FIGURE = re.compile(r"^([≤≥<>]=?)?\s*\$?(-?[\d,]*\.?\d+)\s*(%|ms|h|s|×)?$")


def figure_cell(text: Any) -> tuple[Any, str | None]:
    """A formatted figure of the quote as a spreadsheet cell: (number, number format) -
    ``1,478.5 ms`` -> (1478.5, ``#,##0.0" ms"``), ``≤ 2,000 ms`` -> (2000, ``"≤ "#,##0" ms"``),
    ``80%`` -> (0.8, ``0%``), ``$1,200`` -> (1200, money); anything else stays text."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return text, None
    match = _FIGURE.match(str(text).strip())
    if not match:
        return text, None
    sign, digits, unit = match.group(1) or "", match.group(2), match.group(3) or ""
    value = float(digits.replace(",", ""))
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    fraction = "." + "0" * decimals if decimals else ""
    prefix = f'"{sign} "' if sign else ""
    if unit == "%":
        return value / 100, f"{prefix}0{fraction}%"
    body = "#,##0" + fraction
    if str(text).strip().lstrip("≤≥<>= ").startswith("$"):
        body = '"$"' + body
    suffix = f'" {unit}"' if unit else ""
    return value, prefix + body + suffix


def _append_figures(sheet: Any, values: list[Any]) -> None:
    """Append a row whose formatted figures become numbers with their number formats."""
    cells = [figure_cell(value) for value in values]
    sheet.append([value for value, _ in cells])
    for cell, (_, fmt) in zip(sheet[sheet.max_row], cells, strict=False):
        if fmt:
            cell.number_format = fmt


def bom_lines(plan: Plan) -> tuple[list[dict[str, Any]], float, dict[str, Any] | None]:
    """(lines, capex, opex per year) of the plan's bill of materials for the quote's table."""
    bill = plan.bill_of_materials
    if bill is None:
        return [], 0.0, None
    return ([line.model_dump() for line in bill.lines], bill.capex_usd,
            bill.opex_per_year.model_dump())


def placement_units(plan: Plan) -> list[dict[str, Any]]:
    """One drawn node per bought node: its type and which workload uses each GPU slot."""
    nodes: list[dict[str, Any]] = []
    for item in plan.placement:
        slots: list[str | None] = []
        for run in item.runs:
            slots += [run.workload] * run.gpus
        slots = (slots + [None] * item.gpus)[:max(item.gpus, len(slots))]
        nodes.append({"label": f"{item.server} · {item.gpu}", "slots": slots})
    return nodes


def cluster_svg(plan: Plan) -> str:
    """The cluster as an inline SVG: one box per node, one square per GPU, coloured by job."""
    nodes = placement_units(plan)
    names = [w.name for w in plan.workloads]
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


def quote_context(plan: Plan, rfq: Rfq, catalog: Catalog,
                  alternatives: list[dict[str, Any]] | None = None, valid_days: int = 30,
                  today: dt.date | None = None) -> dict[str, Any]:
    """Everything the quote says, as plain values (strings already formatted)."""
    today = today or dt.date.today()
    catalog = rfq.catalog(catalog)
    feasible = plan.feasible and plan.cost is not None
    a = assumptions(catalog, rfq, plan.to_json())
    specs = {w.name: w for w in rfq.workloads}
    lines, capex, opex = bom_lines(plan) if feasible else ([], 0.0, None)
    workloads = _workload_rows(plan, specs)
    buy_only = rfq.rental == "forbid"  # a buy quote: renting hints would undercut it
    alts = _alternative_rows([alt for alt in alternatives or []
                              if not (buy_only and is_renting_hint(alt["alternative"]))])
    summary = _summary(plan, rfq, capex) if feasible else _infeasible_summary(plan, rfq)
    opex_list = opex_rows(opex) if opex else []
    cost = plan.cost.model_dump() if plan.cost is not None else {}
    info = plan.infeasibility
    return {
        "rfq": rfq, "plan": plan, "feasible": feasible, "summary": summary,
        "customer": rfq.customer or "", "date": today.isoformat(),
        "valid_until": (today + dt.timedelta(days=valid_days)).isoformat(),
        "svg": cluster_svg(plan) if feasible else "",
        "bom": [_bom_row(line) for line in lines],
        "capex": usd(capex), "capex_value": capex,
        "opex_rows": [(customer_text(label), usd(value)) for label, value in opex_list],
        "costs": [(COST_LABELS[key].label, usd(cost[key])) for key in QUOTE_COSTS
                  if key in cost],
        "tco": usd(cost.get("tco_usd")), "horizon": years(rfq.horizon_years),
        "workloads": workloads,
        "assumptions": [customer_text(line) for line in assumption_lines(a)],
        "prices": a["prices"], "alternatives": alts,
        "binding_served": any(b.served_share is not None for b in plan.binding or []),
        "binding": [customer_text(line) for line in binding_lines(
            [b.model_dump() for b in plan.binding or []], plan.objective)],
        "warnings": [customer_text(w) for w in plan.warnings
                     if not (buy_only and is_renting_hint(w))],
        "infeasible": [customer_text(r) for r in relaxations(
            info.model_dump(mode="json"), plan.objective, rfq.horizon_years)]
        if info and not feasible else [],
        "reasons": [customer_text(r) for r in info.reasons] if info else [],
        "uncalibrated": any(c is not None and not c.calibrated for w in plan.workloads
                            for c in [w.calibration] + [u.calibration
                                                         for u in w.layouts or []]),
        **rental_context(plan, rfq.horizon_years, feasible),
        **licence_context(plan, feasible),
    }


def licence_context(plan: Plan, feasible: bool) -> dict[str, Any]:
    """A plan on consumer (GeForce) cards: the datacenter-licensed alternative beside it,
    in the customer's words (``licence``, empty when none) and as figures."""
    alt = plan.licensed_alternative if feasible else None
    if alt is None:
        return {"licence": "", "licence_tco_usd": None, "licence_extra_usd": None}
    line = licensed_alternative_line(alt.model_dump(), plan.objective, technical=False,
                                     lead=True)
    return {"licence": customer_text(line or ""),
            "licence_tco_usd": alt.capex_usd if plan.objective == "capex" else alt.tco_usd,
            "licence_extra_usd": alt.extra_usd}


def _bom_row(line: dict[str, Any]) -> dict[str, Any]:
    """One bill-of-materials line as the customer reads it: an orderable quantity, the
    price's type and date in words, the sites it was read from (never the catalog's notes)."""
    order = orderable_line(line)
    return {**order, "unit": usd(order["order_unit_usd"]), "qty": qty(order["order_quantity"]),
            "total": usd(line["line_total_usd"]),
            "price_words": price_words(line.get("price_type")),
            "source_short": source_title(line.get("source")),
            "basis": customer_source(line.get("price_type"), line.get("as_of"),
                                     line.get("source"))}


QUOTE_COSTS = ("capex_usd", "power_usd", "operations_usd", "multinode_overhead_usd",
               "rental_usd", "tco_usd")
"""The cost rows of the quote's summary: capex, the running costs, rental and the TCO they
add up to (labels: :data:`~solver.common.wording.COST_LABELS`)."""


def _workload_rows(plan: Plan, specs: dict[str, AnyWorkload]) -> list[dict[str, Any]]:
    """Per workload of the plan: what runs, its layouts, targets against the RFQ, notes."""
    workloads = []
    for work in plan.workloads:
        entry = work.model_dump(mode="json")  # the wording helpers read the plan JSON
        workloads.append({
            "name": work.name, "kind": work.kind.replace("_", " "),
            "model": model_words(work.model), "precision": work.precision.upper(),
            "layouts": layout_rows(entry),
            "targets": target_rows(entry, specs.get(work.name)),
            "utilization": work.utilization,
            "notes": [customer_text(note) for note in serving_lines(entry)],
        })
    return workloads


def _alternative_rows(alternatives: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The counterfactuals: name, cost (or 'not possible'), difference, why."""
    alts = []
    for alt in alternatives:
        alts.append({"name": customer_text(alt["alternative"]),
                     "tco": usd(alt["tco_usd"]) if alt.get("feasible") else "not possible",
                     "difference": money_delta(alt["delta_usd"]) if alt.get("delta_usd")
                     is not None else "-", "why": customer_text(alt["why"]),
                     "tco_usd": alt["tco_usd"] if alt.get("feasible") else None,
                     "delta_usd": alt.get("delta_usd")})
    return alts


def _summary(plan: Plan, rfq: Rfq, capex: float) -> str:
    """The opening paragraph of a feasible quote: what to buy, hardware cost, TCO."""
    tco = plan.cost.tco_usd if plan.cost else None
    summary = (f"To run {plural(len(rfq.workloads), 'workload')} for "
               f"{rfq.customer or rfq.id}, buy {cluster_sentence(plan.cluster.model_dump())}. "
               f"Hardware costs {usd(capex)}; the total cost of ownership over "
               f"{years(rfq.horizon_years)} is {usd(tco)}, including "
               + ("power, operations and the engineering overhead of coupled nodes."
                  if plan.cluster.coupled else "power and operations."))
    return customer_text(summary + served_sentence(plan, rfq) + timetable_sentence(plan)
                         + rental_summary(plan))


def timetable_sentence(plan: Plan) -> str:
    """With busy and quiet hours: which recurring jobs run on the GPUs the services leave
    idle at quiet hours ('' without a daily profile)."""
    if not plan.timetable:
        return ""
    busy = {r.workload for s in plan.timetable if s.slot == "busy" for r in s.runs}
    quiet = next((s for s in plan.timetable if s.slot == "quiet"), None)
    night = [r.workload for r in (quiet.runs if quiet else []) if r.workload not in busy]
    if not night or quiet is None:
        return ""
    return (f" {', '.join(night)} {'runs' if len(night) == 1 else 'run'} in the quiet "
            f"{quiet.hours:g} hours of the day on GPUs the services leave idle then, so "
            "no hardware is bought for it.")


def served_sentence(plan: Plan, rfq: Rfq) -> str:
    """Under ``objective: max_served``: what the budget serves of each workload ('' under
    the other objectives)."""
    if not plan.served:
        return ""
    parts = []
    for row in plan.served:
        share = row.served_fraction
        verdict = ("served in full" if share >= 1.0 else "not served" if share <= 0.0
                   else f"{share:.0%} served")
        parts.append(f"{row.workload} {verdict} ({row.served})")
    return (f" The budget of {usd(rfq.budget_usd)} is spent on serving as much as it can: "
            + "; ".join(parts) + ".")


def _infeasible_summary(plan: Plan, rfq: Rfq) -> str:
    """The opening paragraph when nothing meets the RFQ: the nearest feasible change."""
    info = plan.infeasibility
    words = (relaxations(info.model_dump(mode="json"), plan.objective, rfq.horizon_years)
             if info else [])
    return ("No configuration of the allowed hardware meets every requirement. "
            + ("Nearest feasible change: " + words[0] + "." if words else ""))


def rental_context(plan: Plan, horizon_years: float, feasible: bool = True
                   ) -> dict[str, Any]:
    """What the quote says about the purchase schedule, rented capacity and buy-or-rent
    (docs/rental.md) - each list empty when the plan has none of it, so a plan that buys
    everything at month 0 and rents nothing gets the quote of the first version:

    * ``schedule``: per period start month, months, nodes/GPUs bought, capex, rental -
      shown when purchases are phased (``phasing``) or something is rented;
    * ``phasing``: phased TCO against buying everything at month 0 (or None);
    * ``rentals``: what is rented (workload, offer, instances, GPU-hours, $/GPU-h, USD);
    * ``buy_rent``: per workload, owned-alone and rented-alone cost, the break-even
      utilisation and horizon, a one-off job's buy-run-resell cost, and the verdict -
      shown when renting was considered (some row has a rented cost)."""
    empty: dict[str, Any] = {"schedule": [], "phasing": None, "rentals": [], "buy_rent": [],
                             "rental_total": usd(0.0)}
    if not feasible:
        return empty

    rentals = _rental_rows(plan)
    phasing = plan.phasing
    rows = _schedule_rows(plan.schedule) if phasing or rentals else []
    phase = _phasing_row(phasing) if phasing else None
    rows_in = plan.buy_vs_rent or []
    compare = []
    if any(row.rented_usd is not None for row in rows_in):
        compare = [_buy_rent_row(row) for row in rows_in]
    return {"schedule": rows, "phasing": phase, "rentals": rentals, "buy_rent": compare,
            "rental_total": usd(sum(r["usd"] for r in rentals))}


def _rental_rows(plan: Plan) -> list[dict[str, Any]]:
    """Every rented block of every workload: offer, instances, GPU-hours, rate, cost."""
    rentals = []
    for entry in plan.workloads:
        for rent in entry.rental or []:
            rentals.append({
                "workload": entry.name, "offer": rent.offer, "gpu": rent.gpu,
                "instances": f"{rent.instances} × {rent.gpus_per_instance} GPUs",
                "price_type": rent.price_type.replace("_", " "),
                "price_words": price_words(rent.price_type),
                "provider": rent.provider_class,
                "hours": qty(rent.gpu_hours), "gpu_hours": rent.gpu_hours,
                "rate": f"${rent.usd_per_gpu_hour:,.2f}",
                "usd_per_gpu_hour": rent.usd_per_gpu_hour, "total": usd(rent.usd),
                "usd": rent.usd, "as_of": rent.as_of,
                "source": rent.source,
                "source_short": source_title(rent.source)})
    return rentals


def _schedule_rows(schedule: list[Period]) -> list[dict[str, Any]]:
    """The purchase schedule, one row per period: months, what is bought, what it costs,
    and what runs where."""
    rows = []
    for period in schedule:
        runs = "; ".join(_run_text(name, run) for name, run in period.runs.items())
        rows.append({"start_month": _months(period.start_month),
                     "end_month": _months(period.start_month + period.months),
                     "months": _months(period.months),
                     "nodes": period.nodes_bought, "gpus": period.gpus_bought,
                     "capex": usd(period.capex_usd), "capex_usd": period.capex_usd,
                     "rental": usd(period.rental_usd),
                     "rental_usd": period.rental_usd, "runs": runs})
    return rows


def _phasing_row(phasing: Phasing) -> dict[str, Any]:
    """Phased TCO against buying everything now, and the saving."""
    return {"tco": usd(phasing.tco_usd),
            "now": usd(phasing.buy_all_now_tco_usd),
            "saving": usd(phasing.saving_usd),
            "decline": f"{phasing.hardware_price_decline_per_year:.0%}",
            "tco_usd": phasing.tco_usd, "buy_all_now_tco_usd": phasing.buy_all_now_tco_usd,
            "saving_usd": phasing.saving_usd}


def _buy_rent_row(row: BuyVsRent) -> dict[str, Any]:
    """One workload's buy-or-rent comparison, formatted ('-' where a figure is absent)."""
    util = row.breakeven_utilization
    return {
        "workload": row.workload, "chosen": row.chosen or "",
        "owned": usd(row.owned_usd) if row.owned_usd is not None else "-",
        "rented": usd(row.rented_usd) if row.rented_usd is not None else "-",
        "offer": row.rent_offer or "",
        "hours_used": qty(row.hours_used) if row.hours_used is not None else "-",
        "breakeven_hours": qty(round(row.breakeven_hours))
        if row.breakeven_hours is not None else "-",
        "breakeven_util": f"{util:.1%}" if util is not None else "-",
        "breakeven_months": (f"{row.breakeven_months:,.1f}"
                             if row.breakeven_months is not None else
                             "never" if row.owned_capex_usd is not None
                             else "-"),
        "resold": usd(row.owned_resold_usd) if row.owned_resold_usd is not None else "-",
        "why": customer_text(row.why),
        "notes": [customer_text(t) for t in (breakeven_horizon_text(row), resale_text(row))
                  if t],
        "raw": row.model_dump(mode="json")}


def _months(value: float) -> str:
    return f"{float(value):g}"


def rental_summary(plan: Plan) -> str:
    """Sentences the summary adds for rented capacity and a phased purchase ('' when the
    plan rents nothing and buys everything at month 0)."""
    rented = [w.name for w in plan.workloads if w.rental]
    text = ""
    if rented:
        total = plan.cost.rental_usd if plan.cost else 0.0
        names = ", ".join(rented)
        text += (f" {names} {'runs' if len(rented) == 1 else 'run'} on rented cloud "
                 f"instances (rental {usd(total)}, included in the total).")
    phasing = plan.phasing
    if phasing:
        text += (f" Bought in steps (purchase schedule below), the total is "
                 f"{usd(phasing.tco_usd)} instead of "
                 f"{usd(phasing.buy_all_now_tco_usd)} buying everything now.")
    return text


def _run_text(name: str, run: ScheduleRun) -> str:
    """One workload's place in one period: owned/rented GPUs (phased) or its sourcing."""
    if run.owned_gpus is not None:
        return f"{name}: {run.owned_gpus} owned + {run.rented_gpus} rented GPUs"
    return f"{name}: {run.sourcing or 'owned'}, {run.gpus or 0} GPUs"


def render_html(context: dict[str, Any]) -> str:
    """The quote as one self-contained HTML page (inline CSS and SVG, no external files)."""
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(loader=FileSystemLoader(TEMPLATE_DIR),
                      autoescape=select_autoescape(["html", "j2"]))
    return env.get_template("quote.html.j2").render(**context)


def write_xlsx(path: Path, context: dict[str, Any]) -> None:
    """The quote as a workbook: Summary, Bill of materials, Workloads, Assumptions (and
    Schedule, Rental, Buy or rent when the plan has them)."""
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
        _append_figures(sheet, [label, value])
    if context.get("licence"):
        sheet.append(["Datacenter-licensed alternative", context["licence"]])
        for label, key in (("Its cost (USD)", "licence_tco_usd"),
                           ("Extra cost (USD)", "licence_extra_usd")):
            if context.get(key) is not None:
                sheet.append([label, context[key]])
                sheet.cell(sheet.max_row, 2).number_format = '"$"#,##0;"-$"#,##0'
    bom = book.create_sheet("Bill of materials")
    bom.append(["SKU", "Description", "Quantity", "Unit price (USD)", "Price type", "As of",
                "Source", "Line total (USD)"])
    for line in context["bom"]:
        bom.append([line.get("sku"), line.get("description"), line.get("order_quantity"),
                    line.get("order_unit_usd"), line.get("price_words"), line.get("as_of"),
                    line.get("source_short"), line.get("line_total_usd")])
    bom.append(["Capex", "", "", "", "", "", "", context["capex_value"]])
    for cell in bom[1]:
        cell.font = Font(bold=True)
    for row in bom.iter_rows(min_row=2, min_col=4, max_col=8):
        for cell in row:
            if isinstance(cell.value, int | float):
                cell.number_format = '"$"#,##0'
    work = book.create_sheet("Workloads")
    work.append(["Workload", "GPU", "Precision", "TP", "PP", "DP", "GPUs", "Metric",
                 "Predicted", "Target", "Verdict", "EP", "Attention DP", "Layout"])
    for w in context["workloads"]:
        for lay in w["layouts"]:
            work.append([w["name"], lay["gpu"], lay["precision"], lay["tp"], lay["pp"],
                         lay["dp"], lay["gpus"], "", "", "", "", lay.get("ep", 1),
                         lay.get("attention_dp", 1), lay.get("layout", "")])
        for t in w["targets"]:
            _append_figures(work, [w["name"], "", "", "", "", "", "", t["metric"],
                                   t["predicted"], t["target"], t["verdict"]])
    notes = [(w["name"], note) for w in context["workloads"] for note in _joined(w["notes"])]
    if notes:  # what the HTML quote says under each workload's table
        work.append([])
        work.append(["Workload", "Note"])
        for name, note in notes:
            work.append([name, note])
    assume = book.create_sheet("Assumptions")
    for line in context["assumptions"]:
        assume.append([line])
    for alt in context["alternatives"]:
        assume.append([f"Alternative: {alt['name']}", alt["tco_usd"]
                       if alt["tco_usd"] is not None else alt["tco"], alt["delta_usd"]
                       if alt["delta_usd"] is not None else alt["difference"], alt["why"]])
        for cell in assume[assume.max_row][1:3]:
            if isinstance(cell.value, int | float):
                cell.number_format = '"$"#,##0;"-$"#,##0'  # + costs more, - saves
    for line in context["binding"]:
        assume.append([f"Binding constraint: {line}"])
    for warning in context["warnings"]:
        assume.append([f"Risk: {warning}"])
    _xlsx_rental(book, context)
    safe_workbook(book).save(path)  # no text a customer or a price file gave is a formula


def _joined(lines: list[str]) -> list[str]:
    """Note lines with their continuation lines (indented, or an aside in brackets) joined
    on: one cell each."""
    out: list[str] = []
    for line in lines:
        if out and (line[:1].isspace() or line.startswith("(")):
            out[-1] += " " + line.strip()
        else:
            out.append(line.strip())
    return out


def _xlsx_rental(book: Any, context: dict[str, Any]) -> None:
    """The schedule, rental lines and buy-or-rent sheets (only when the plan has them)."""
    from openpyxl.styles import Font

    sheets = []
    if context.get("schedule"):
        sheet = book.create_sheet("Schedule")
        sheet.append(["Start month", "Months", "Nodes bought", "GPUs bought",
                      "Capex (USD)", "Rental (USD)", "What runs where"])
        for row in context["schedule"]:
            sheet.append([float(row["start_month"]), float(row["months"]), row["nodes"],
                          row["gpus"], row["capex_usd"], row["rental_usd"], row["runs"]])
        phase = context.get("phasing")
        if phase:
            sheet.append(["Phased TCO", "", "", "", phase["tco_usd"]])
            sheet.append(["Buying everything at month 0", "", "", "",
                          phase["buy_all_now_tco_usd"]])
            sheet.append(["Saving", "", "", "", phase["saving_usd"]])
        sheets.append((sheet, {"E": MONEY, "F": MONEY}))
    if context.get("rentals"):
        sheet = book.create_sheet("Rental")
        sheet.append(["Workload", "Offer", "GPU", "Instances", "Price type", "GPU-hours",
                      "USD per GPU-hour", "Total (USD)", "As of", "Source"])
        for r in context["rentals"]:
            sheet.append([r["workload"], r["offer"], r["gpu"], r["instances"],
                          r["price_type"], r["gpu_hours"], r["usd_per_gpu_hour"], r["usd"],
                          r["as_of"], r["source_short"]])
        sheet.append(["Rental total", "", "", "", "", "", "",
                      sum(r["usd"] for r in context["rentals"])])
        sheets.append((sheet, {"G": RATE, "H": MONEY}))
    if context.get("buy_rent"):
        sheet = book.create_sheet("Buy or rent")
        sheet.append(["Workload", "Chosen", "Owned alone (USD)", "Rented alone (USD)",
                      "Offer", "Hours used", "Break-even hours",
                      "Break-even utilisation", "Break-even horizon (months)",
                      "Buy, run, resell (USD)", "Why"])
        for c in context["buy_rent"]:
            raw = c["raw"]
            sheet.append([c["workload"], c["chosen"], raw.get("owned_usd"),
                          raw.get("rented_usd"), c["offer"], raw.get("hours_used"),
                          raw.get("breakeven_hours"), raw.get("breakeven_utilization"),
                          raw.get("breakeven_months"), raw.get("owned_resold_usd"), c["why"]])
        for cell in sheet["H"][1:]:
            cell.number_format = "0.0%"
        sheets.append((sheet, {"C": MONEY, "D": MONEY, "J": MONEY}))
    for sheet, formats in sheets:
        for cell in sheet[1]:
            cell.font = Font(bold=True)
        for col, fmt in formats.items():
            for cell in sheet[col][1:]:
                if isinstance(cell.value, int | float):
                    cell.number_format = fmt


def write_quote(path: Path, plan: Plan, rfq: Rfq, catalog: Catalog,
                alternatives: list[dict[str, Any]] | None = None, valid_days: int = 30) -> None:
    """Write the quote as HTML or XLSX, chosen by the file suffix."""
    context = quote_context(plan, rfq, catalog, alternatives, valid_days)
    if path.suffix.lower() == ".xlsx":
        write_xlsx(path, context)
    else:
        path.write_text(render_html(context), encoding="utf-8")
