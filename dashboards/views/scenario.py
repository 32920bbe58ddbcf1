"""Scenario page: build an RFQ in a form, upload one, or start from an example.

The form's draft lives in session state under ``form.*`` keys (kept across pages by
:func:`keep_draft`). Every rerun validates the draft with the library's own
:func:`solver.rfq.schema.validate_rfq` *before* the widgets are drawn, so each problem is shown
right under the field it names (``workloads[1].deadline_hours``).
"""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from solver.common.errors import InputError, Problem
from solver.rfq.schema import WORKLOAD_KINDS, validate_rfq

from .. import components, state
from ..uploads import rfqs_from_upload

P = "form."
KINDS = ("inference", "batch_inference", "lora", "qlora", "full_finetune", "pretrain")
TRAINING = ("lora", "qlora", "full_finetune", "pretrain")
PRECISIONS = ("auto", "bf16", "fp8", "int8", "int4", "fp4")
# field -> (label, type, default, min, help); None default = optional (empty)
FIELDS: dict[str, tuple[str, type, Any, float, str]] = {
    "concurrency": ("concurrency", int, 32, 1, "concurrent requests held within the SLOs"),
    "qps": ("qps", float, None, 0.001, "requests per second to sustain"),
    "input_tokens": ("input tokens", int, 2000, 1, "prompt length"),
    "output_tokens": ("output tokens", int, 400, 1, "generated length"),
    "ttft_ms": ("TTFT SLO (ms)", float, None, 0.1, "time to first token"),
    "tpot_ms": ("TPOT SLO (ms)", float, None, 0.1, "time per output token"),
    "requests": ("requests", int, 1_000_000, 1, "requests in the batch"),
    "deadline_hours": ("deadline (hours)", float, 48.0, 0.01, "must finish within"),
    "dataset_tokens": ("dataset tokens", int, 100_000_000, 1, "training tokens per epoch"),
    "epochs": ("epochs", float, 1.0, 0.01, "passes over the dataset"),
    "seq_len": ("sequence length", int, 4096, 16, "training sequence length"),
}
KIND_FIELDS = {
    "inference": ("concurrency", "qps", "input_tokens", "output_tokens", "ttft_ms", "tpot_ms"),
    "batch_inference": ("requests", "input_tokens", "output_tokens", "deadline_hours"),
    **{kind: ("dataset_tokens", "epochs", "seq_len", "deadline_hours") for kind in TRAINING},
}
LIMITS: dict[str, tuple[str, type, float]] = {
    "max_nodes": ("max nodes", int, 1), "max_gpus": ("max GPUs", int, 1),
    "max_power_kw": ("max power (kW)", float, 0.1),
    "max_rack_units": ("max rack units", int, 1),
}
UPLOAD_KEY = "scenario_upload"


# --- the draft in session state ---------------------------------------------------------

KEPT_KEYS = ("pareto_metric", "pareto_points", "pareto_pick")  # other pages' widgets kept
KEPT_PREFIXES = (P, "wi_")  # the form's draft and the What-if sliders
NOT_KEPT = ("wi_run_report",)  # buttons: their value cannot be set
RFQ_BOUND = ("pareto_pick", "wi_horizon")  # meaningless for another RFQ: reset when it changes
KEPT_FOR = "kept_for_rfq"


def keep_draft() -> None:
    """Re-assign the draft's keys, the Pareto choices and selected point, and the What-if
    sliders so Streamlit keeps them while other pages are shown. The selected Pareto point
    and the horizon slider (whose base is the RFQ's horizon) are reset when the active RFQ
    changes."""
    rfq_key = state.active_key()
    if st.session_state.get(KEPT_FOR) != rfq_key:
        if KEPT_FOR in st.session_state:
            for key in RFQ_BOUND:
                st.session_state.pop(key, None)
        st.session_state[KEPT_FOR] = rfq_key
    for key in [k for k in st.session_state
                if (str(k).startswith(KEPT_PREFIXES) or k in KEPT_KEYS)
                and k not in NOT_KEPT]:
        st.session_state[key] = st.session_state[key]


def unsaved_changes() -> bool:
    """Does the Scenario form describe a different RFQ than the active one?"""
    if f"{P}ids" not in st.session_state:
        return False
    active, _ = state.active()
    data = draft()
    try:
        data = state.rfq_to_data(validate_rfq(data, state.catalog(), "form"))
    except InputError:
        return True
    return data != active


def _typed(value: Any, kind: type) -> Any:
    if value is None:
        return None
    return int(value) if kind is int else float(value)


def _set_workload(wid: int, workload: dict[str, Any], fresh: bool = False) -> None:
    s = st.session_state
    s[f"{P}w{wid}.name"] = workload.get("name", f"w{wid}")
    s[f"{P}w{wid}.kind"] = workload.get("kind", "inference")
    s[f"{P}w{wid}.model"] = workload.get("model", "llama-3.1-8b")
    s[f"{P}w{wid}.precision"] = workload.get("precision") or "auto"
    kind_fields = KIND_FIELDS.get(s[f"{P}w{wid}.kind"], ())
    for name, (_, kind, default, _, _) in FIELDS.items():
        value = workload.get(name)
        if value is None and (fresh or name not in kind_fields):
            value = default
        s[f"{P}w{wid}.{name}"] = _typed(value, kind)
    edited = ("name", "kind", "model", "precision", *FIELDS)
    s[f"{P}w{wid}.extra"] = (s[f"{P}w{wid}.kind"],
                             {k: v for k, v in workload.items() if k not in edited})


def load_into_form(data: dict[str, Any]) -> None:
    """Fill the form with an RFQ (call before the form's widgets are drawn, or in a callback)."""
    s = st.session_state
    s[f"{P}id"] = data.get("id", "")
    s[f"{P}customer"] = data.get("customer") or ""
    s[f"{P}horizon_years"] = float(data.get("horizon_years", 3))
    s[f"{P}objective"] = data.get("objective", "tco")
    s[f"{P}budget_usd"] = _typed(data.get("budget_usd"), float)
    cons = data.get("constraints") or {}
    s[f"{P}vendor"] = cons.get("vendor") or ""
    s[f"{P}gpus"] = list(cons.get("gpus") or [])
    s[f"{P}fabrics"] = list(cons.get("fabrics") or [])
    for name, (_, kind, _) in LIMITS.items():
        s[f"{P}{name}"] = _typed(cons.get(name), kind)
    # what the form does not edit is kept as it is, so the draft stays the same RFQ
    s[f"{P}extra"] = {k: v for k, v in data.items() if k not in RFQ_EDITED}
    s[f"{P}cons_extra"] = {k: v for k, v in cons.items()
                           if k not in ("vendor", "gpus", "fabrics", *LIMITS)}
    start = int(s.get(f"{P}next", 0))
    ids = list(range(start, start + len(data.get("workloads") or [])))
    s[f"{P}next"] = start + len(ids)
    s[f"{P}ids"] = ids
    for wid, workload in zip(ids, data.get("workloads") or [], strict=True):
        _set_workload(wid, workload)


RFQ_EDITED = ("id", "customer", "horizon_years", "objective", "budget_usd", "constraints",
              "workloads")


def blank_rfq() -> dict[str, Any]:
    return {"id": "new-rfq", "horizon_years": 3, "objective": "tco",
            "workloads": [{"name": "chat", "kind": "inference", "model": "llama-3.1-8b",
                           "concurrency": 32, "input_tokens": 2000, "output_tokens": 400,
                           "tpot_ms": 50.0}]}


def draft() -> dict[str, Any]:
    """The RFQ data the form currently describes (not yet validated)."""
    s = st.session_state
    data: dict[str, Any] = {"id": (s.get(f"{P}id") or "").strip()}
    if (s.get(f"{P}customer") or "").strip():
        data["customer"] = s[f"{P}customer"].strip()
    data["horizon_years"] = s.get(f"{P}horizon_years", 3.0)
    data["objective"] = s.get(f"{P}objective", "tco")
    if s.get(f"{P}budget_usd") is not None:
        data["budget_usd"] = s[f"{P}budget_usd"]
    data.update(s.get(f"{P}extra") or {})
    cons: dict[str, Any] = dict(s.get(f"{P}cons_extra") or {})
    if s.get(f"{P}vendor"):
        cons["vendor"] = s[f"{P}vendor"]
    for key in ("gpus", "fabrics"):
        if s.get(f"{P}{key}"):
            cons[key] = list(s[f"{P}{key}"])
    for name in LIMITS:
        if s.get(f"{P}{name}") is not None:
            cons[name] = s[f"{P}{name}"]
    if cons:
        data["constraints"] = cons
    workloads = []
    for wid in s.get(f"{P}ids", []):
        kind = s.get(f"{P}w{wid}.kind", "inference")
        workload: dict[str, Any] = {"name": (s.get(f"{P}w{wid}.name") or "").strip(),
                                    "kind": kind, "model": s.get(f"{P}w{wid}.model")}
        if s.get(f"{P}w{wid}.precision", "auto") != "auto":
            workload["precision"] = s[f"{P}w{wid}.precision"]
        for name in KIND_FIELDS[kind]:
            value = s.get(f"{P}w{wid}.{name}")
            if value is not None:
                workload[name] = value
        workload.update(_extra(wid, kind))
        workloads.append(workload)
    data["workloads"] = workloads
    return data


def _extra(wid: int, kind: str) -> dict[str, Any]:
    """A workload's fields the form does not edit (SLO percentile, redundancy, engine, …),
    kept from the file while the workload keeps its kind."""
    kept = st.session_state.get(f"{P}w{wid}.extra")
    if not kept or kept[0] != kind:
        return {}
    return dict(kept[1])


def _problems(data: dict[str, Any]) -> list[Problem]:
    try:
        validate_rfq(data, state.catalog(), "form")
    except InputError as exc:
        return exc.problems
    return []


# --- callbacks --------------------------------------------------------------------------

def _add_workload() -> None:
    s = st.session_state
    wid = int(s.get(f"{P}next", 0))
    s[f"{P}next"] = wid + 1
    names = {s.get(f"{P}w{i}.name") for i in s.get(f"{P}ids", [])}
    name = next(f"workload-{n}" for n in range(1, 1000) if f"workload-{n}" not in names)
    _set_workload(wid, {"name": name, "kind": "inference", "model": "llama-3.1-8b"}, fresh=True)
    s[f"{P}ids"] = [*s.get(f"{P}ids", []), wid]


def _remove_workload(wid: int) -> None:
    s = st.session_state
    s[f"{P}ids"] = [i for i in s.get(f"{P}ids", []) if i != wid]


def _use_form() -> None:
    data = draft()
    try:
        rfq = validate_rfq(data, state.catalog(), "form")
    except InputError:
        return
    state.set_active(state.rfq_to_data(rfq), "form")
    st.session_state["scenario_note"] = f"RFQ {rfq.id} from the form is now active."


def _load_example() -> None:
    name = st.session_state.get("scenario_example")
    if not name:
        return
    try:
        data = state.load_example(name)
    except InputError as exc:
        st.session_state["scenario_upload_error"] = exc
        return
    state.set_active(data, f"example {name}")
    load_into_form(data)
    st.session_state["scenario_note"] = f"Example {name} loaded and active."


def _reset_form() -> None:
    data, _ = state.active()
    load_into_form(data or blank_rfq())


def _blank_form() -> None:
    load_into_form(blank_rfq())


def _process_upload() -> None:
    """Read the uploaded file (before any form widget is drawn)."""
    uploaded = st.session_state.get(UPLOAD_KEY)
    if uploaded is None:
        st.session_state.pop("scenario_upload_seen", None)
        return
    marker = (uploaded.name, uploaded.size, getattr(uploaded, "file_id", ""))
    if st.session_state.get("scenario_upload_seen") == marker:
        return
    st.session_state["scenario_upload_seen"] = marker
    st.session_state.pop("scenario_upload_error", None)
    st.session_state.pop("scenario_upload_choices", None)
    try:
        found = rfqs_from_upload(uploaded.name, uploaded.getvalue(), state.catalog())
    except InputError as exc:
        st.session_state["scenario_upload_error"] = exc
        return
    problems = [p for _, r in found if isinstance(r, InputError) for p in r.problems]
    valid = {rfq_id: state.rfq_to_data(r) for rfq_id, r in found if not isinstance(r,
                                                                                  InputError)}
    if problems:
        st.session_state["scenario_upload_error"] = InputError(problems)
    if valid:
        st.session_state["scenario_upload_choices"] = valid
        first = next(iter(valid))
        state.set_active(valid[first], f"upload {uploaded.name}")
        load_into_form(valid[first])
        st.session_state["scenario_note"] = (f"RFQ {first} from {uploaded.name} is now active"
                                             + (f" ({len(valid)} valid RFQs in the file)"
                                                if len(valid) > 1 else "."))


def _pick_uploaded() -> None:
    choices = st.session_state.get("scenario_upload_choices") or {}
    rfq_id = st.session_state.get("scenario_upload_pick")
    if rfq_id in choices:
        state.set_active(choices[rfq_id], f"upload ({rfq_id})")
        load_into_form(choices[rfq_id])


# --- drawing ----------------------------------------------------------------------------

def _errors_at(errors: dict[str, list[str]], path: str) -> None:
    for reason in errors.pop(path, []):
        st.error(f"`{path}`: {reason}", icon=":material/error:")


def _optional_number(label: str, key: str, kind: type, minimum: float, help_text: str = ""
                     ) -> None:
    st.number_input(label, min_value=kind(minimum), value=None, key=key,
                    step=1 if kind is int else None, help=help_text or None,
                    placeholder="optional",
                    format=None if kind is int else "%g")


def _workload_box(index: int, wid: int, errors: dict[str, list[str]]) -> None:
    cat = state.catalog()
    base = f"workloads[{index}]"
    with st.container(border=True):
        head = st.columns([3, 3, 3, 2, 2], vertical_alignment="bottom")
        head[0].text_input("name", key=f"{P}w{wid}.name")
        head[1].selectbox("kind", KINDS, key=f"{P}w{wid}.kind")
        models = sorted(cat.model_ids())
        current = st.session_state.get(f"{P}w{wid}.model")
        if current and current not in models:  # a config file or an inline architecture
            models.append(current)
        head[2].selectbox("model", models, key=f"{P}w{wid}.model")
        head[3].selectbox("precision", PRECISIONS, key=f"{P}w{wid}.precision",
                          help="auto: the solver picks any precision valid for kind and GPU")
        head[4].button("Remove", key=f"remove-{wid}", icon=":material/delete:",
                       help="remove this workload",
                       on_click=_remove_workload, args=(wid,))
        for name in ("name", "kind", "model", "precision"):
            _errors_at(errors, f"{base}.{name}")
        kind = st.session_state.get(f"{P}w{wid}.kind", "inference")
        fields = KIND_FIELDS.get(kind, ())
        cols = st.columns(len(fields))
        for col, name in zip(cols, fields, strict=True):
            label, ftype, default, minimum, help_text = FIELDS[name]
            with col:
                if default is None:
                    _optional_number(label, f"{P}w{wid}.{name}", ftype, minimum, help_text)
                else:
                    st.number_input(label, min_value=ftype(minimum), value=None,
                                    key=f"{P}w{wid}.{name}", help=help_text,
                                    step=1 if ftype is int else None,
                                    format=None if ftype is int else "%g")
                _errors_at(errors, f"{base}.{name}")
        extra = _extra(wid, kind)
        if extra:
            st.caption("Kept from the RFQ as it is (edit the file to change): "
                       + " · ".join(f"{k.replace('_', ' ')} {_shown(v)}"
                                    for k, v in extra.items()))
        _errors_at(errors, base)


def _shown(value: Any) -> str:
    if isinstance(value, float) and 0 < value < 1:
        return f"{value:.0%}"
    if isinstance(value, dict | list):
        return json.dumps(value)[:80]
    return str(value)


def _form(errors: dict[str, list[str]]) -> None:
    cat = state.catalog()
    st.subheader("RFQ")
    cols = st.columns([3, 3, 2, 2, 2])
    with cols[0]:
        st.text_input("id", key=f"{P}id", help="letters, digits, '.', '_', '-'")
        _errors_at(errors, "id")
    with cols[1]:
        st.text_input("customer", key=f"{P}customer")
        _errors_at(errors, "customer")
    with cols[2]:
        st.number_input("horizon (years)", min_value=0.5, max_value=15.0, step=0.5,
                        key=f"{P}horizon_years", value=None, format="%g")
        _errors_at(errors, "horizon_years")
    with cols[3]:
        st.selectbox("objective", ("tco", "capex"), key=f"{P}objective")
        _errors_at(errors, "objective")
    with cols[4]:
        _optional_number("budget (USD)", f"{P}budget_usd", float, 1.0, "hard cap on the "
                         "objective")
        _errors_at(errors, "budget_usd")

    st.markdown("**Constraints** (all optional)")
    cols = st.columns([2, 4, 4])
    with cols[0]:
        st.selectbox("vendor profile", [""] + list(cat.vendors), key=f"{P}vendor",
                     format_func=lambda v: v or "(any: open)")
        _errors_at(errors, "constraints.vendor")
    with cols[1]:
        st.multiselect("allowed GPUs", list(cat.gpus), key=f"{P}gpus")
        _errors_at(errors, "constraints.gpus")
    with cols[2]:
        st.multiselect("allowed fabrics", list(cat.fabrics), key=f"{P}fabrics")
        _errors_at(errors, "constraints.fabrics")
    cols = st.columns(len(LIMITS))
    for col, (name, (label, kind, minimum)) in zip(cols, LIMITS.items(), strict=True):
        with col:
            _optional_number(label, f"{P}{name}", kind, minimum)
            _errors_at(errors, f"constraints.{name}")
    _errors_at(errors, "constraints")

    st.markdown("**Workloads** (all run at the same time on the cluster bought)")
    for index, wid in enumerate(st.session_state.get(f"{P}ids", [])):
        _workload_box(index, wid, errors)
    _errors_at(errors, "workloads")
    st.button("Add workload", icon=":material/add:", on_click=_add_workload)


FORM_CSS = (
    "<style>"
    # a form row of five or six fields wraps onto a second line in a narrow window (1024 px)
    # instead of cutting its values ('20' for 200,000,000) and labels
    "[data-testid='stMain'] [data-testid='stHorizontalBlock'] {flex-wrap: wrap;}"
    "[data-testid='stMain'] [data-testid='stColumn'] {min-width: 9.5rem;}"
    "</style>")


def render() -> None:
    """The Scenario page."""
    st.title("Scenario")
    st.caption("Build the RFQ the other pages solve: start from an example, upload a file, "
               "or edit the form. Errors appear at the field they concern.")
    st.markdown(FORM_CSS, unsafe_allow_html=True)
    if f"{P}ids" not in st.session_state:
        _reset_form()
    _process_upload()

    left, right = st.columns(2)
    with left:
        names = list(state.examples())
        if names:
            st.selectbox("Example scenario", [""] + names, key="scenario_example",
                         format_func=lambda n: n or "— choose an example —")
            st.button("Load example", on_click=_load_example, type="primary")
        else:
            st.info("No example scenarios found (set PROCURE_DASHBOARD_SCENARIOS).")
    with right:
        st.file_uploader("…or upload an RFQ (YAML, JSON, or a CSV batch)",
                         type=["yaml", "yml", "json", "csv"], key=UPLOAD_KEY,
                         help="At most 2 MB (YAML/JSON) or 5 MB (CSV); parsed with "
                              "yaml.safe_load; nothing is stored on disk.")
        upload_error = st.session_state.get("scenario_upload_error")
        if upload_error is not None:
            components.show_problems(upload_error, "The uploaded file is not a valid RFQ")
        choices = st.session_state.get("scenario_upload_choices") or {}
        if len(choices) > 1:
            st.selectbox("RFQ from the uploaded CSV", list(choices), key="scenario_upload_pick",
                         on_change=_pick_uploaded)
    note = st.session_state.pop("scenario_note", None)
    if note:
        st.success(note)

    data = draft()
    problems = _problems(data)
    errors: dict[str, list[str]] = {}
    for problem in problems:
        errors.setdefault(problem.field, []).append(
            problem.reason + ("" if problem.value is None else f" (value: {problem.value!r})"))
    st.divider()
    _form(errors)
    for path, reasons in errors.items():  # anything not shown at a field
        for reason in reasons:
            st.error(f"`{path or 'RFQ'}`: {reason}", icon=":material/error:")

    st.divider()
    cols = st.columns([2, 2, 2, 4])
    cols[0].button("Use this RFQ", type="primary", disabled=bool(problems), on_click=_use_form,
                   help="validate the form and make it the RFQ every page solves")
    cols[1].button("Reset to active RFQ", on_click=_reset_form)
    cols[2].button("New blank RFQ", on_click=_blank_form)
    if problems:
        cols[3].warning(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} to fix "
                        "before this RFQ can be used.")
    active, source = state.active()
    if active is not None:
        with st.expander(f"Active RFQ `{active['id']}` ({source}) as YAML", expanded=False):
            st.code(state.rfq_yaml(active), language="yaml")
        st.download_button("Download the active RFQ as YAML", state.rfq_yaml(active),
                           file_name=f"{active['id']}.yaml", mime="application/x-yaml")
    kinds = ", ".join(sorted(WORKLOAD_KINDS))
    st.caption(f"Workload kinds: {kinds}. The RFQ format is the one of `procure solve`.")
