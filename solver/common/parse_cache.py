"""A disk cache of parsed catalog files, keyed by their exact text (issue 18, start-up).

Parsing the catalog's YAML with the bounded loader (:mod:`solver.common.inputs`: node-graph
checks, duplicate keys, Python-level construction) is most of what loading the catalog
costs, and every ``procure`` process loads it. The parsed data (plain dicts, lists, numbers,
strings, dates) are kept under a key that hashes the file's text together with the procure,
PyYAML and Python versions, so a cached value is exactly what parsing that text gives:
a changed file, an upgrade or another interpreter is a miss and is parsed again.
Validation (pydantic, the catalog checks) still runs on every load.

Where: ``$PROCURE_CACHE_DIR`` when set (an empty value turns the cache off), else
``$XDG_CACHE_HOME/procure`` or ``~/.cache/procure``. A cache that cannot be read or
written (read-only home, a damaged entry) is skipped silently: the file is parsed as if
there were none. Only successful parses are kept; a bad file fails the same way each time.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from solver import __version__

CACHE_ENV = "PROCURE_CACHE_DIR"
FORMAT = 1
"""Bumped when what is stored changes shape."""


def cache_dir() -> Path | None:
    """The parse cache's folder, or None when ``$PROCURE_CACHE_DIR`` is set empty."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen is not None:
        return Path(chosen) if chosen.strip() else None
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "procure"


def _key(text: str, kind: str) -> str:
    stamp = f"{FORMAT}|{kind}|{__version__}|{yaml.__version__}|{sys.version}|"
    return hashlib.sha256(stamp.encode() + text.encode("utf-8")).hexdigest()[:32]


def cached_parse(text: str, kind: str, parse: Callable[[], Any]) -> Any:
    """``parse()`` of ``text`` (a ``kind`` of parser, e.g. ``"yaml"``), from the cache when
    this exact text was parsed before. Each call returns a fresh object (callers may change
    what they get)."""
    folder = cache_dir()
    if folder is None:
        return parse()
    path = folder / f"{_key(text, kind)}.pickle"
    found = load_entry(path, MISSING)
    if found is not MISSING:
        return found
    value = parse()  # no entry yet, or an unreadable one
    store_entry(path, value)
    return value


MISSING = object()
"""What :func:`load_entry` returns by default for no entry (a cached value may be None)."""


def load_entry(path: Path, default: Any = None) -> Any:
    """The value pickled at ``path`` by :func:`store_entry`, or ``default`` when there is
    none or it cannot be read (this cache's own files, keyed by content)."""
    try:
        with path.open("rb") as handle:
            return pickle.load(handle)  # noqa: S301 - our own cache, keyed by content
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ValueError,
            ImportError, IndexError, TypeError):
        return default


def store_entry(path: Path, value: Any) -> None:
    """Write an entry atomically (a temporary file renamed into place), or not at all
    (also the candidate cache's, solver/optimize/candidate_cache.py)."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with temporary.open("wb") as handle:
            pickle.dump(value, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, path)
    except (OSError, pickle.PicklingError, TypeError, RecursionError):
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
