"""A progress bar for a long solve in the dashboard (issue 31): what the solver is doing
(the stages' reports, :mod:`solver.common.progress`) in a Streamlit progress bar.

Used inside the cached solves of :mod:`dashboards.state`: Streamlit replays the elements a
cached function drew, so the bar is drawn (and emptied at the end) inside it; a cache hit
replays an empty slot."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

from solver.common.progress import reporting


@contextmanager
def progress_bar(label: str) -> Iterator[None]:
    """Show ``label`` and what the stages report, with how far they are, until the block
    ends."""
    slot = st.empty()

    def receive(what: str, done: int | None, total: int | None) -> None:
        share = min(1.0, done / total) if done is not None and total else 0.0
        slot.progress(share, text=f"{label}: {what}")

    try:
        with reporting(receive):
            yield
    finally:
        slot.empty()
