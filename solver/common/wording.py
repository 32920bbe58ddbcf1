"""Plain words for plans: money, counts, the cluster, assumptions, layouts, targets, fixes.

Shared by the terminal (``procure solve/explain``), the quote document, the batch export and
the dashboard so that all of them say the same thing about the same plan. Pure functions of
the plan JSON (docs/plan.md), the RFQ and the catalog; no Rich, no Streamlit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

TRAINING = frozenset({"lora", "qlora", "full_finetune", "pretrain"})


@dataclass(frozen=True)
class CostLabel:
    """How one cost term of a plan (``cost.*``) is named wherever it is shown."""

    label: str
    """In a table row, a spreadsheet column or a chart legend: ``Power``."""
    words: str
    """In a sentence: ``power``."""
    running: bool = False
    """A running cost: the amount covers the whole horizon (tables say so)."""


COST_LABELS: dict[str, CostLabel] = {
    "gpus_usd": CostLabel("GPUs", "GPUs"),
    "servers_usd": CostLabel("Servers (without GPUs)", "servers"),
    "network_usd": CostLabel("Network (NICs, switches, cables)", "network"),
    "storage_usd": CostLabel("Shared storage", "storage"),
    "capex_usd": CostLabel("Capex (hardware)", "capex"),
    "power_usd": CostLabel("Power", "power", running=True),
    "operations_usd": CostLabel("Operations and engineering", "operations", running=True),
    "multinode_overhead_usd": CostLabel("Coupled-node engineering overhead",
                                        "multi-node overhead", running=True),
    "rental_usd": CostLabel("Rental", "rental", running=True),
    "tco_usd": CostLabel("Total cost of ownership", "TCO", running=True),
}
"""The one table of cost labels (terminal, quote, explain, batch export, dashboard), in the
plan's ``cost`` order."""

CAPEX_TERMS = ("gpus_usd", "servers_usd", "network_usd", "storage_usd")
"""The terms that add up to ``capex_usd``."""
COST_TERMS = CAPEX_TERMS + ("power_usd", "operations_usd", "multinode_overhead_usd",
                            "rental_usd")
"""The terms that add up to ``tco_usd`` (capex terms, running costs, rental)."""


def cost_label(key: str, horizon_years: float | None = None) -> str:
    """A cost term's label; a running cost says the horizon it covers when given."""
    known = COST_LABELS.get(key)
    label = known.label if known else key.removesuffix("_usd").replace("_", " ").capitalize()
    if horizon_years and known is not None and known.running:
        label += f" ({years(horizon_years)})"
    return label


def usd(value: float | None) -> str:
    """``$1,522,250`` (whole dollars, thousands separators, never scientific notation)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    sign = "-" if value < -0.5 else ""
    return f"{sign}${abs(value):,.0f}"


def plural(count: int | float, word: str, plural_form: str | None = None) -> str:
    """``1 node``, ``2 nodes`` (``plural_form`` for irregular words)."""
    many = plural_form or f"{word}s"
    return f"{count:,} {word if count == 1 else many}"


def money_delta(delta: float) -> str:
    """A cost difference in words: ``costs $12,300 more``, ``saves $4,000``, ``costs the same``."""
    if abs(delta) < 0.5:
        return "costs the same"
    return f"costs ${delta:,.0f} more" if delta > 0 else f"saves ${-delta:,.0f}"


UNPRICED_WARNING = "binding constraints not priced in time: "
"""How a plan's warning naming the relaxations whose re-solve ran out of time begins
(solver.analysis.binding); the terminal's binding line looks for it."""


def binding_lines(binding: list[dict[str, Any]] | None, objective: str = "tco") -> list[str]:
    """Each binding constraint of a plan (plan JSON ``binding``) in words, the dominant one
    first: ``workloads.rag.ttft_ms = 5000 ms binds: at 10000 ms the plan saves $2,855,719
    (TCO $961,906: 5 x pcie-8gpu with 8 x rtx-pro-6000)``."""
    label = "capex" if objective == "capex" else "TCO"
    lines = []
    for b in binding or []:
        if b.get("served_share") is not None:  # objective max_served: it would serve more
            lines.append(f"{b['constraint']} = {b['value']} binds: at {b['relaxed_to']} the "
                         f"plan serves {b['served_share']:.0%} of the weighted demand "
                         f"({label} ${b['relaxed_cost_usd']:,.0f}: {b['relaxed_cluster']})")
            continue
        least = "at least " if b.get("proven") is False else ""
        lines.append(f"{b['constraint']} = {b['value']} binds: at {b['relaxed_to']} the plan "
                     f"saves {least}${b['saving_usd']:,.0f} ({label} "
                     f"${b['relaxed_cost_usd']:,.0f}: {b['relaxed_cluster']})")
    return lines


def licensed_alternative_line(alt: dict[str, Any] | None, objective: str = "tco",
                               technical: bool = True, lead: bool = False) -> str | None:
    """A plan's ``licensed_alternative`` in one sentence (None when the plan has none): the
    datacenter-licensed plan's cost and what it costs more than this plan, or why there is
    no figure. ``technical``: name the --time-limit flag where it skipped the re-solve
    (terminal, explain); off, in a customer's words (quote, dashboard). ``lead``: first say
    which cards are consumer cards and that the site is the buyer's call."""
    if not alt:
        return None
    cards = ", ".join(alt.get("consumer_gpus") or [])
    first = (f"{cards}: a consumer (GeForce) card, not licensed for datacenter deployment "
             "(whether your site counts as one is your call). " if lead else "")
    if alt.get("extra_usd") is None:
        status = alt.get("status")
        if status == "skipped":
            why = ("not computed within --time-limit" if technical
                   else "not computed for this plan")
        elif status == "timeout":
            why = "none found in the time left"
        else:
            why = "no plan on datacenter-licensed GPUs meets the requirements"
        return f"{first}Datacenter-licensed alternative: {why}."
    measure = "capex" if objective == "capex" else "TCO"
    value = alt.get("capex_usd") if objective == "capex" else alt.get("tco_usd")
    extra = float(alt["extra_usd"])
    more = (f"{usd(extra)} more than this plan" if extra >= 0.5 else
            "the same as this plan" if extra > -0.5 else f"{usd(-extra)} less than this plan")
    cluster = str(alt.get("cluster") or "")
    buys = f" ({cluster})" if cluster else ""
    return f"{first}Datacenter-licensed alternative{buys}: {measure} {usd(value)}, {more}."


def years(value: float) -> str:
    """``3 years``, ``1 year``, ``2.5 years``."""
    return f"{value:g} year" + ("" if value == 1 else "s")


def node_lines(cluster: dict[str, Any]) -> list[str]:
    """``1 × pcie-8gpu server with 8 × rtx-pro-6000 GPUs`` for each node type bought."""
    return [f"{n['count']} × {n['server']} server with {plural(n['gpus_per_node'], 'GPU')} "
            f"({n['gpu']})" for n in cluster.get("nodes", [])]


def cluster_sentence(cluster: dict[str, Any]) -> str:
    """The whole cluster in one sentence."""
    nodes = "; ".join(node_lines(cluster)) or "nothing"
    fabric = (f"coupled over {cluster['fabric']}" if cluster.get("coupled")
              else "independent nodes, no fabric")
    return (f"{nodes}: {plural(cluster.get('total_gpus', 0), 'GPU')}, {fabric}, "
            f"{cluster.get('power_kw', 0):,.1f} kW, {cluster.get('rack_units', 0)} U")


def assumptions(catalog: Any, rfq: Any, plan: dict[str, Any] | None = None) -> dict[str, Any]:
    """The cost assumptions behind a plan: horizon, electricity, PUE, overheads, prices."""
    costs = catalog.costs
    prices: list[dict[str, Any]] = []
    cluster = (plan or {}).get("cluster") or {}
    seen: set[str] = set()
    for node in cluster.get("nodes", []):
        for kind, key in (("GPU", node["gpu"]), ("server", node["server"])):
            if key in seen:
                continue
            seen.add(key)
            gpu = catalog.gpus.get(key) if kind == "GPU" else None
            server = catalog.servers.get(key) if kind == "server" else None
            if gpu is not None:
                prices.append({"item": key, "kind": kind, "price_usd": gpu.price_usd,
                               "as_of": gpu.price_as_of or gpu.as_of,
                               "source": gpu.price_source or gpu.source})
            elif server is not None:
                prices.append({"item": key, "kind": kind, "price_usd": server.price_usd,
                               "as_of": server.price_as_of or server.as_of,
                               "source": server.price_source or server.source})
    fabric = catalog.fabrics.get(cluster.get("fabric", "none"))
    if fabric is not None and cluster.get("coupled"):
        prices.append({"item": fabric.id, "kind": "fabric (NIC + switch port)",
                       "price_usd": fabric.nic_price_usd + fabric.switch_port_price_usd,
                       "as_of": fabric.as_of, "source": fabric.source})
        if fabric.nic_price_source.startswith("entered "):  # the NIC's price was typed
            prices[-1].update(as_of=fabric.nic_price_as_of or fabric.as_of,
                              source=fabric.nic_price_source)
    return {
        "horizon_years": rfq.horizon_years,
        "electricity_usd_per_kwh": costs.electricity_usd_per_kwh.value,
        "pue": costs.pue.value,
        "load_factor": costs.load_factor.value,
        "multinode_overhead_factor": costs.multinode_overhead_factor.value,
        "node_engineering_usd_per_year": costs.node_engineering_usd_per_year.value,
        "operations_usd_per_node_year": costs.operations_usd_per_node_year.value,
        "cost_model_as_of": costs.electricity_usd_per_kwh.as_of,
        "prices": prices,
        "serving": serving_assumptions(rfq),
    }


def serving_assumptions(rfq: Any) -> list[dict[str, Any]]:
    """What each online workload is planned for: engine, the percentile its SLOs hold at,
    the utilisation the capacity is sized for, and redundancy (``none`` or ``n+1``)."""
    return [{"workload": w.name, "engine": w.engine, "slo_percentile": w.slo_percentile,
             "target_utilization": w.target_utilization, "redundancy": w.redundancy}
            for w in rfq.workloads if w.kind == "inference"]


def assumption_lines(a: dict[str, Any]) -> list[str]:
    """The assumptions as short lines (fit 80 columns)."""
    lines = [f"horizon {years(a['horizon_years'])} · electricity "
             f"${a['electricity_usd_per_kwh']:.3g}/kWh · PUE {a['pue']:g} · "
             f"average load {a['load_factor']:.0%} of TDP",
             f"operations {usd(a['operations_usd_per_node_year'])} and engineering "
             f"{usd(a['node_engineering_usd_per_year'])} per node-year",
             f"each extra coupled node costs {a['multinode_overhead_factor']:g}× the first "
             "in engineering time"]
    for w in a.get("serving") or []:
        lines.append(f"{w['workload']}: SLOs at p{w['slo_percentile']}, capacity for "
                     f"{w['target_utilization']:.0%} utilization, redundancy "
                     f"{w['redundancy']}, engine {w['engine']}")
    for p in a.get("prices") or []:
        entered = str(p.get("source") or "").startswith("entered ")  # typed on the dashboard
        lines.append(f"price {p['item']} ({p['kind']}) {usd(p['price_usd'])}, "
                     + (f"quote, entered {p['as_of']}" if entered else f"as of {p['as_of']}"))
    return lines


def layout_words(tp: int, pp: int, ep: int | None = None, attention_dp: int | None = None,
                 dp: int | None = None) -> str:
    """A layout as people write it: ``TP8``, ``TP4 PP2``, ``TP1 EP8 attention-DP8``
    (``DPn`` appended when given and > 1)."""
    words = [f"TP{tp}"]
    if ep and ep > 1:
        words.append(f"EP{ep}")
    if attention_dp and attention_dp > 1:
        words.append(f"attention-DP{attention_dp}")
    if pp > 1:
        words.append(f"PP{pp}")
    if dp and dp > 1:
        words.append(f"DP{dp}")
    return " ".join(words)


def pools_words(prefill: dict[str, Any], decode: dict[str, Any]) -> str:
    """A disaggregated unit as people write it: ``disaggregated, prefill 4×TP4 + decode
    7×TP1 EP8 attention-DP8`` (engines × layout of each pool; a comma, not a colon, so a
    customer document never shows what reads as the RFQ field ``disaggregated:``)."""
    def one(pool: dict[str, Any]) -> str:
        words = layout_words(pool["tp"], pool.get("pp") or 1, pool.get("ep"),
                             pool.get("attention_dp"))
        return f"{pool['replicas']}×{words}"
    return f"disaggregated, prefill {one(prefill)} + decode {one(decode)}"


def unit_words(entry: Any) -> str:
    """The layout of a plan entry (a workload, one of its ``layouts`` or a placement run;
    a dict or a record) in words: :func:`pools_words` where disaggregated, else
    :func:`layout_words`."""
    def as_dict(pool: Any) -> dict[str, Any]:
        return pool if isinstance(pool, dict) else pool.model_dump()

    prefill, decode = _field(entry, "prefill"), _field(entry, "decode")
    if _field(entry, "mode") == "disaggregated" and prefill is not None and decode is not None:
        return pools_words(as_dict(prefill), as_dict(decode))
    return layout_words(_field(entry, "tp"), _field(entry, "pp"), _field(entry, "ep"),
                        _field(entry, "attention_dp"))


def _field(entry: Any, key: str) -> Any:
    """``key`` of a plan entry given as a dict (plan JSON) or a record (None when absent)."""
    return entry.get(key) if isinstance(entry, dict) else getattr(entry, key, None)


def layout_rows(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Every layout of a workload: TP × PP × DP per replica group, with GPUs = TP·PP·DP
    (× attention-DP ranks where the layout uses expert parallelism).

    Serving: each row is one layout with ``dp`` = its number of independent replicas;
    ``ep`` / ``attention_dp`` are 1 for a plain layout and ``layout`` says it in words
    (``TP1 EP8 attention-DP8``). Training: one row, the job's TP × PP × DP.
    """
    training = entry["kind"] in TRAINING
    layouts = entry.get("layouts")
    if training or not layouts:
        dp = entry["dp"]
        ep, ranks = entry.get("ep") or 1, entry.get("attention_dp") or 1
        return [{"gpu": entry["gpu"], "precision": entry["precision"], "tp": entry["tp"],
                 "pp": entry["pp"], "dp": dp, "ep": ep, "attention_dp": ranks,
                 "layout": unit_words(entry),
                 "mode": entry.get("mode") or "aggregated",
                 "gpus": (entry["gpus"] if entry.get("mode") == "disaggregated"
                          else entry["tp"] * ranks * entry["pp"] * dp),
                 "gpus_per_node": entry.get("gpus_per_node"),
                 "nodes_per_replica": entry.get("nodes_spanned", 1),
                 "replicas": 1 if training else dp}]
    rows = []
    for lay in layouts:
        ep, ranks = lay.get("ep") or 1, lay.get("attention_dp") or 1
        rows.append({"gpu": lay["gpu"], "precision": lay["precision"], "tp": lay["tp"],
                     "pp": lay["pp"], "dp": lay["replicas"], "ep": ep, "attention_dp": ranks,
                     "layout": unit_words(lay),
                     "mode": lay.get("mode") or "aggregated",
                     "gpus": unit_gpus(lay) * lay["replicas"],
                     "gpus_per_node": lay.get("gpus_per_node"),
                     "nodes_per_replica": max(1, -(-unit_gpus(lay)
                                                 // (lay.get("gpus_per_node") or 1))),
                     "replicas": lay["replicas"]})
    return rows


def unit_gpus(entry: Any) -> int:
    """GPUs of one replica of a layout entry (a dict or a record): both pools of a
    disaggregated unit, else TP x attention-DP ranks x PP."""
    prefill, decode = _field(entry, "prefill"), _field(entry, "decode")
    if _field(entry, "mode") == "disaggregated" and prefill and decode:
        return int(_field(prefill, "gpus") + _field(decode, "gpus"))
    return int(_field(entry, "tp") * (_field(entry, "attention_dp") or 1) * _field(entry, "pp"))


def _num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def _margin_rows(margins: Any) -> list[dict[str, str]]:
    """One row per SLO of the plan's ``margins``: ``TTFT p90``, predicted at the
    percentile, target, verdict with the margin. Reads ``target_ms``/``predicted_ms`` (the
    plan) or ``target``/``predicted`` (older plans)."""
    rows: list[dict[str, str]] = []
    items = margins.items() if isinstance(margins, dict) else (
        (m.get("metric", m.get("slo", "?")), m) for m in margins if isinstance(m, dict))
    for metric, m in items:
        if not isinstance(m, dict):
            continue
        target = m.get("target_ms", m.get("target"))
        predicted = m.get("predicted_ms", m.get("predicted"))
        margin = m.get("margin")
        pct = m.get("percentile")
        label = str(metric).replace("_ms", "").upper() + (f" p{pct}" if pct else "")
        if m.get("basis") == "median":  # no percentile from the physics: its median
            label = str(metric).replace("_ms", "").upper() + " median"
        timed = "ms" in str(metric) or "target_ms" in m or "hours" in str(metric)
        unit = " h" if "hours" in str(metric) else (" ms" if timed else "")
        ok = m.get("met")
        if ok is None and target is not None and predicted is not None:
            ok = predicted <= target if timed else predicted >= target
        rows.append({"metric": label,
                     "predicted": _num(predicted) + unit,
                     "target": ("≤ " if timed else "") + _num(target) + unit
                     if target is not None else "-",
                     "verdict": ("meets" if ok else "misses") + (
                         f" (margin {margin:.0%})" if isinstance(margin, float)
                         and abs(margin) <= 10 else "")})
    return rows


def target_rows(entry: dict[str, Any], spec: Any | None) -> list[dict[str, str]]:
    """Predicted against target for one workload: metric, predicted, target, verdict.

    Latency SLOs come from the plan's ``margins`` (predicted at the SLO percentile, with
    the margin) when the workload has them, else from the typical prediction; capacity rows
    (concurrency, requests/s) and the planned utilisation follow.
    """
    rows = _margin_rows(entry.get("margins") or {})
    pred = entry.get("predicted") or {}

    def target(name: str) -> Any:
        return getattr(spec, name, None) if spec is not None else None

    checks: list[tuple[str, Any, Any, bool, str]] = []
    if entry["kind"] == "inference":
        if not rows:
            checks = [("TTFT", pred.get("ttft_ms"), target("ttft_ms"), True, " ms"),
                      ("TPOT", pred.get("tpot_ms"), target("tpot_ms"), True, " ms")]
        checks += [("concurrent requests", pred.get("max_concurrency"),
                    target("concurrency"), False, ""),
                   ("requests per second", pred.get("qps_capacity"), target("qps"), False, "")]
    else:
        deadline = entry.get("deadline") or {}  # planned within (1 - headroom) x deadline
        planned = deadline.get("planned_within_hours", target("deadline_hours"))
        label = (f"hours to finish (deadline {_num(deadline['deadline_hours'])} h less "
                 f"{deadline['headroom']:.0%})" if deadline.get("headroom")
                 else "hours to finish")
        checks = [(label, deadline.get("hours_to_complete", pred.get("hours_to_complete")),
                   planned, True, " h")]
        if entry["kind"] == "batch_inference":
            checks.append(("requests per second", pred.get("qps_capacity"), None, False, ""))
        if pred.get("scaling_efficiency") is not None:
            checks.append(("scaling efficiency", pred["scaling_efficiency"], None, False, ""))
    for metric, value, goal, lower, unit in checks:
        if value is None and goal is None:
            continue
        if goal is None:
            verdict = ""
        elif value is None:
            verdict = "-"
        else:
            ok = value <= goal if lower else value >= goal
            verdict = "meets" if ok else "misses"
        rows.append({"metric": metric, "predicted": _num(value, 2 if metric ==
                                                         "scaling efficiency" else 1) + unit,
                     "target": ("≤ " if lower else "≥ ") + _num(goal) + unit
                     if goal is not None else "-", "verdict": verdict})
    util = entry.get("utilization")
    if entry["kind"] == "inference" and isinstance(util, int | float):
        goal = entry.get("target_utilization")
        rows.append({"metric": "utilization", "predicted": f"{util:.0%}",
                     "target": f"≤ {goal:.0%}" if isinstance(goal, int | float) else "-",
                     "verdict": "" if goal is None else
                     ("meets" if util <= goal + 1e-6 else "misses")})
    return rows


def unit_cost_text(unit: dict[str, Any] | None) -> str | None:
    """A serving workload's unit price in a few words: ``$0.17 per million output tokens
    ($0.028 per million prompt and output tokens)`` (None without one)."""
    if not unit or unit.get("output_usd") is None:
        return None
    text = f"{_per_million(unit['output_usd'])} per million output tokens"
    if unit.get("all_tokens_usd") is not None:
        text += f" ({_per_million(unit['all_tokens_usd'])} with the prompt tokens)"
    return text


def _per_million(value: float) -> str:
    """Dollars to two significant decimals below $10 (``$0.028``), cents above."""
    return f"${value:,.2f}" if value >= 10 else f"${value:,.2g}" if value < 0.1 \
        else f"${value:,.3g}"


def unit_cost_lines(entry: dict[str, Any]) -> list[str]:
    """The unit price lines of a serving workload (each under 80 columns)."""
    unit = entry.get("cost_per_million_tokens_usd")
    text = unit_cost_text(unit)
    if not text or not unit:
        return []
    lines = [f"cost: {text}"]
    rate = unit.get("output_tokens_per_s_per_usd_per_hour")
    if rate is not None:
        lines.append(f"at the planned load: {rate:,.0f} output tokens/s per $ per hour")
    return lines


def calibration_lines(entry: dict[str, Any]) -> list[str]:
    """How well the serving model is measured for the workload's GPU family and engine, in
    words (each line under 80 columns): calibrated with its held-out error, or the margin the
    plan carries. Empty for jobs."""
    cal = entry.get("calibration")
    if not cal:
        return []
    where = f"{cal['family']} on {cal['engine']}"
    if cal["calibrated"]:
        return [f"model calibrated for {where}: {plural(cal['rows'], 'measurement')} from "
                f"{plural(cal['sources'], 'source')}",
                f"  (typical error {cal['held_out_error_pct']:.0f} % with each source held "
                "out)"]
    seen = (f"only {plural(cal['rows'], 'published measurement')}" if cal["rows"]
            else "no published measurements")
    return [f"model not calibrated for {where} ({seen}):",
            f"  planned with a {cal['margin_applied_pct']:.0f} % margin (latency higher, "
            "throughput lower)"]


def headroom_lines(entry: dict[str, Any]) -> list[str]:
    """What the workload gains at no extra cost on GPUs the cheapest layouts left idle, in
    words (under 80 columns); empty when nothing (docs/plan.md, ``headroom``)."""
    room = entry.get("headroom")
    if not room:
        return []
    added = room["gpus_added"]
    more = f" on {added} more GPU{'s' if added > 1 else ''}" if added else ""
    left = f", leaving {plural(added, 'GPU')} idle" if added else ""
    if room["unit"] == "hours":
        return [f"at no extra cost: {room['capacity']:,.1f} h{more}",
                f"  (the cheapest layout: {room['cheapest_capacity']:,.1f} h{left}; "
                f"planned within {room['sized_for']:,.1f} h)"]
    return [f"at no extra cost: {_count(room['capacity'])} {room['unit']}{more}",
            f"  (the cheapest layout: {_count(room['cheapest_capacity'])}{left}; sized for "
            f"{_count(room['sized_for'])})"]


def serving_lines(entry: dict[str, Any]) -> list[str]:
    """How a serving workload is planned, in words (each line under 80 columns): engine,
    SLO percentile, utilisation headroom, what n+1 leaves with one node down, and the
    calibration of the physics behind it."""
    if entry.get("kind") == "batch_inference":
        return (served_share_lines(entry) + recurrence_lines(entry) + headroom_lines(entry)
                + unit_cost_lines(entry) + calibration_lines(entry))
    if entry.get("kind") != "inference":
        return served_share_lines(entry) + recurrence_lines(entry) + headroom_lines(entry)
    lines = served_share_lines(entry) + [f"engine {entry.get('engine', 'vllm')} · SLOs at p{entry.get('slo_percentile', 90)}"
             f" · capacity for ≤ {entry.get('target_utilization', 1.0):.0%} utilization"]
    if entry.get("redundancy") == "n+1":
        spare = entry.get("n_plus_1") or {}
        demand = entry.get("demand") or {}
        left = [f"{_count(spare[k])} {w}" for k, d, w in (
            ("concurrency_one_node_down", "concurrency", "concurrent"),
            ("qps_one_node_down", "qps", "req/s"))
            if spare.get(k) is not None and demand.get(d)]
        lines.append("n+1: any one node down still leaves "
                     + (", ".join(left) if left else "the demand"))
    return lines + headroom_lines(entry) + unit_cost_lines(entry) + calibration_lines(entry)


def recurrence_lines(entry: dict[str, Any]) -> list[str]:
    """A recurring job's runs and what they cost, in words (under 80 columns); empty for a
    one-off job or serving."""
    rec = entry.get("recurrence")
    if not rec:
        return []
    head = (f"runs {rec['every']}: {rec['runs']:,} runs over the horizon, each within "
            f"{_num(rec['window_hours'])} h")
    if rec.get("rented_usd") is None:
        return [head, "  on owned GPUs (their power and operations are in the TCO)"]
    return [head, f"  rented per run {usd(rec['rented_per_run_usd'])} x {rec['runs']:,} runs"
                  f" = {usd(rec['rented_usd'])}"]


def timetable_lines(timetable: list[dict[str, Any]] | None) -> list[str]:
    """What runs in the busy and the quiet hours of the day, one line per slot (under 80
    columns); empty without a ``daily_profile``."""
    if not timetable:
        return []
    lines = []
    for slot in timetable:
        runs = ", ".join(
            f"{r['workload']} {r['owned_gpus']}"
            + (f"+{r['rented_gpus']} rented" if r["rented_gpus"] else "")
            + (f" ({r['demand_share']:.0%} load)" if r["demand_share"] < 1.0 else "")
            for r in slot["runs"]) or "nothing"
        lines.append(f"{slot['slot']} {_num(slot['hours'])} h/day: {runs} GPUs; "
                     f"{slot['idle_gpus']} idle")
    return lines


def served_share_lines(entry: dict[str, Any]) -> list[str]:
    """Under ``objective: max_served``: the share of the workload's demand the budget
    serves (empty otherwise, or when it is all served)."""
    share = entry.get("served_fraction")
    if share is None or share >= 1.0:
        return []
    return [f"budget serves {share:.0%} of its demand (objective max_served)"]


def served_summary(served: list[dict[str, Any]] | None, budget_usd: float | None
                   ) -> list[str]:
    """What a max_served plan serves within the budget and what it gives up, one line per
    workload (under 80 columns); empty without ``served``."""
    if not served:
        return []
    money = f"{usd(budget_usd)} " if budget_usd else ""
    lines = [f"Within the {money}budget (objective max_served):"]
    for row in served:
        share = row["served_fraction"]
        verdict = ("all served" if share >= 1.0 else "given up" if share <= 0.0
                   else f"{share:.0%} served")
        lines.append(f"  {row['workload']}: {verdict} - {row['served']}")
    given_up = [row["workload"] + (" entirely" if row["served_fraction"] <= 0.0 else
                                   f" {1.0 - row['served_fraction']:.0%}")
                for row in served if row["served_fraction"] < 1.0]
    if given_up:
        lines.append("  given up: " + ", ".join(given_up) + " (a larger budget serves more)")
    return lines


def _count(value: float) -> str:
    """``140`` for whole numbers, ``11.98`` otherwise."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


LIMIT_WORDS = {
    "constraints.max_nodes": ("allow {v:,.0f} nodes (max_nodes)", "total_nodes"),
    "constraints.max_gpus": ("allow {v:,.0f} GPUs (max_gpus)", "total_gpus"),
    "constraints.max_power_kw": ("allow {v:,.1f} kW (max_power_kw)", "power_kw"),
    "constraints.max_rack_units": ("allow {v:,.0f} rack units (max_rack_units)", "rack_units"),
}


def relaxations(info: dict[str, Any], objective: str = "tco",
                horizon_years: float | None = None) -> list[str]:
    """The nearest feasible relaxations of an infeasible RFQ, in words."""
    closest = info.get("closest") or {}
    clusters = info.get("closest_clusters") or {}
    out: list[str] = []
    for path, value in closest.items():
        buys = clusters.get(path)
        tail = f" — that buys {cluster_sentence(buys)}" if buys else ""
        if path == "budget_usd":
            what = ("capex" if objective == "capex" else
                    f"TCO over {years(horizon_years)}" if horizon_years else "TCO")
            out.append(f"raise the budget to {usd(value)} ({what}){tail}")
        elif path in LIMIT_WORDS:
            out.append(LIMIT_WORDS[path][0].format(v=value) + tail)
        elif isinstance(value, dict):  # a workload's relaxed targets
            parts = []
            if "deadline_hours" in value:
                parts.append(f"extend the deadline to at least {value['deadline_hours']:,.3g} h")
            if "tpot_ms" in value or "ttft_ms" in value:
                parts.append(f"loosen the SLO: the best achievable is TPOT "
                             f"{value.get('tpot_ms', 0):,.1f} ms and TTFT "
                             f"{value.get('ttft_ms', 0):,.0f} ms at one request")
            if "gpus_that_fit" in value:
                gpus = value["gpus_that_fit"]
                parts.append("allow one of these GPUs: " + ", ".join(gpus) if gpus else
                             "no GPU in the catalog runs it; relax its targets or pick a "
                             "smaller model or precision")
            if parts:
                out.append(f"workload {path}: " + "; ".join(parts))
    return out


def opex_rows(opex: Any) -> list[tuple[str, float]]:
    """Yearly running-cost lines of a bill of materials: (label, USD per year), total last.

    Accepts the plan's ``opex_per_year`` as ``{lines: [{description, usd_per_year}],
    total_usd}``, as a mapping of term -> USD, or as one number.
    """
    if isinstance(opex, dict) and isinstance(opex.get("lines"), list):
        rows = [(str(line.get("description") or line.get("item", "")),
                 float(line.get("usd_per_year", 0.0))) for line in opex["lines"]]
        total = opex.get("total_usd", sum(v for _, v in rows))
        return [*rows, ("total per year", float(total))]
    if isinstance(opex, dict):
        return [(k.removesuffix("_usd").replace("_", " "), float(v)) for k, v in opex.items()
                if isinstance(v, int | float)]
    if isinstance(opex, int | float):
        return [("total per year", float(opex))]
    return []


def short_source(source: str, limit: int = 60) -> str:
    """A catalog source cut to ``limit`` characters (the full text stays in the JSON)."""
    text = " ".join(str(source or "").split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def qty(value: float) -> str:
    """A quantity: ``16`` for whole numbers, ``2.97`` otherwise (TB, GB/s of storage)."""
    value = float(value)
    return f"{value:,.0f}" if value.is_integer() else f"{value:,.2f}"


AXIS_WORDS = {"tco_usd": "Total cost of ownership (USD)", "capex_usd": "Hardware cost, capex (USD)",
              "tpot_ms": "Time per output token (ms)", "ttft_ms": "Time to first token (ms)",
              "hours_to_complete": "Hours to finish (h)", "qps_capacity": "Requests per second",
              "tokens_per_s": "Output tokens per second",
              "max_concurrency": "Concurrent requests held"}


def axis_words(key: str) -> str:
    """A plain-language axis title with its unit for a plan/frontier field name."""
    return AXIS_WORDS.get(key, key.replace("_", " "))


def gap_words(gap: float, objective: float | None, time_limit: float | None,
              what: str = "TCO") -> str:
    """What a ``feasible`` plan's gap means, in words (issue 31): the best plan found
    within the time limit, not proven the cheapest; a plan at most ``gap`` of its
    ``objective`` (the TCO or capex, USD) cheaper may exist. A gap of 100 % means the solver
    had no useful lower bound yet."""
    limit = f" within the {time_limit:g} s time limit" if time_limit is not None else ""
    found = f"the best plan found{limit}, not proven the cheapest"
    if gap >= 0.999:
        return (f"{found}: the gap is {gap:.0%}, i.e. the solver had not yet bounded how much "
                f"cheaper a plan could be (raise --time-limit, or drop it, to prove the optimum)")
    saving = f" (up to {usd(gap * objective)} of its {what})" if objective else ""
    return (f"{found}: the gap of {gap:.2%} is the most a cheaper plan could save{saving}; "
            "raise --time-limit, or drop it, to prove the optimum")
