"""The script `streamlit run` starts (``procure dashboard``): find this package, run the shell.

This file is run as ``__main__`` by Streamlit, so it cannot use relative imports. It works
out its own package name from the ``__init__.py`` files above it (``dashboards`` in a source
checkout, ``solver.procure_dashboards`` in an installed wheel), puts the folder that holds
that package on ``sys.path`` if needed, and hands over to :func:`shell.main`.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def _package() -> str:
    here = Path(__file__).resolve().parent
    parts = [here.name]
    root = here.parent
    while (root / "__init__.py").is_file():
        parts.insert(0, root.name)
        root = root.parent
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return ".".join(parts)


importlib.import_module(f"{_package()}.shell").main()
