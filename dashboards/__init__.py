"""The Streamlit dashboard of procure: a thin shell over the solver library (conventions §8).

``app.py`` is the script Streamlit runs (``procure dashboard``); the pages live in
:mod:`views` as plain ``render()`` functions, shared session state and every Streamlit
cache decorator in :mod:`state`, and the plotly figures in :mod:`figures`. The solver
library never imports Streamlit.
"""
