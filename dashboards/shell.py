"""The dashboard's frame: page config, the sidebar (active RFQ, example picker), navigation."""

from __future__ import annotations

import streamlit as st

from solver.common.errors import InputError

from . import state
from .views import batch, catalog, pareto, plan, scenario, whatif

PAGES = (
    (scenario.render, "Scenario", "scenario", ":material/edit_note:"),
    (plan.render, "Plan", "plan", ":material/dns:"),
    (pareto.render, "Pareto", "pareto", ":material/scatter_plot:"),
    (whatif.render, "What-if", "what-if", ":material/tune:"),
    (batch.render, "Batch", "batch", ":material/table_rows:"),
    (catalog.render, "Catalog", "catalog", ":material/menu_book:"),
)
EXAMPLE_KEY = "sidebar_example"


def _pick_example() -> None:
    name = st.session_state.get(EXAMPLE_KEY)
    if not name:
        return
    try:
        state.set_active(state.load_example(name), f"example {name}")
        scenario.load_into_form(state.active()[0] or {})
    except InputError as exc:
        st.session_state["sidebar_error"] = str(exc)


def sidebar() -> None:
    """Which RFQ every page works on, and a quick way to switch examples."""
    data, source = state.active()
    with st.sidebar:
        if data is not None:
            st.markdown(f"**Active RFQ:** `{data['id']}`  \n<small>{source} · "
                        f"{len(data['workloads'])} workload"
                        f"{'s' if len(data['workloads']) != 1 else ''}</small>",
                        unsafe_allow_html=True)
        names = list(state.examples())
        if names:
            st.selectbox("Load an example", [""] + names, key=EXAMPLE_KEY,
                         on_change=_pick_example,
                         format_func=lambda n: n or "— choose —")
        if st.session_state.get("sidebar_error"):
            st.error(st.session_state.pop("sidebar_error"))
        if state.price_overlay():
            st.caption(f"Price overlay: {len(state.price_overlay())} price(s) changed")
        cat_dir = state.catalog_dir()
        st.caption(f"Catalog {state.catalog().version}"
                   + (f" + {cat_dir}" if cat_dir else " (built-in)"))


def main() -> None:
    """Run one rerun of the app."""
    st.set_page_config(page_title="procure — GPU procurement", page_icon=":material/dns:", layout="wide")
    state.ensure_defaults()
    scenario.keep_draft()
    if scenario.unsaved_changes():
        data, _ = state.active()
        st.warning("Unsaved changes: the Scenario form differs from the active RFQ "
                   f"**{(data or {}).get('id', '-')}**, which every page still solves. Press "
                   "**Use this RFQ** on the Scenario page to apply them.",
                   icon=":material/edit_note:")
    pages = [st.Page(fn, title=title, url_path=url, icon=icon, default=(url == "plan"))
             for fn, title, url, icon in PAGES]
    st.session_state[state.NAV_PAGES] = {url: page for (_, _, url, _), page
                                         in zip(PAGES, pages, strict=True)}
    current = st.navigation(pages, position="sidebar", expanded=True)
    sidebar()
    current.run()
