"""Where the package and its data live: installed (package data next to the modules) or
a source checkout (the repository's ``catalog/``, ``scenarios/``, ``dashboards/``,
``bench/data/`` beside ``solver/``). Every module that finds a data folder asks here, so
moving a module never changes what it finds."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
"""The ``solver`` package folder."""
REPOSITORY = PACKAGE.parent
"""The folder holding ``solver/``: a source checkout's root, or site-packages when installed."""


def data_dir(installed: str, source: str, marker: str) -> Path | None:
    """The first of ``solver/<installed>`` and ``<repository>/<source>`` holding ``marker``."""
    for candidate in (PACKAGE / installed, REPOSITORY / source):
        if (candidate / marker).is_file():
            return candidate
    return None
