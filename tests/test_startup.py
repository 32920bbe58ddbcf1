"""Start-up guard (issue 18.1): `procure solve` imports only what it needs — the requested
backend's library, no pandas/pyarrow/plotly/matplotlib/streamlit — and checking which
backends are installed imports none of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from solver.optimize.backends import installed_backends

ROOT = Path(__file__).resolve().parent.parent
RFQ = ROOT / "scenarios" / "chat-70b-one-node.yaml"
ALWAYS_HEAVY = {"pandas", "pyarrow", "plotly", "matplotlib", "streamlit", "scipy", "dask"}
BACKEND_LIBS = {"cbc": "pulp", "highs": "highspy", "cpsat": "ortools"}
RUN_CLI = """
import json, sys
from solver.cli.main import main
sys.argv = ["procure"] + {args!r}
try:
    main()
except SystemExit as exc:
    code = exc.code
print("\\n@@MODULES@@" + json.dumps(sorted(m.split(".")[0] for m in sys.modules)))
"""


def modules_after(*args: str) -> set[str]:
    """Top-level modules imported by running the CLI in-process with ``args``."""
    done = subprocess.run([sys.executable, "-c", RUN_CLI.format(args=list(args))],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert "@@MODULES@@" in done.stdout, done.stderr
    return set(json.loads(done.stdout.rsplit("@@MODULES@@", 1)[1]))


@pytest.mark.parametrize("backend", [b for b in ("highs", "cbc") if b in installed_backends()])
def test_solve_imports_only_the_requested_backend(backend):
    loaded = modules_after("solve", str(RFQ), "--json", "--solver", backend)
    assert "solver" in loaded and BACKEND_LIBS[backend] in loaded
    assert not loaded & ALWAYS_HEAVY, loaded & ALWAYS_HEAVY
    assert "ortools" not in loaded


def test_version_and_installed_backends_import_no_solver_library():
    code = ("import sys; from solver.optimize.backends import installed_backends; installed_backends();"
            "from solver.catalog.load import load_catalog; load_catalog();"
            "print(sorted({m.split('.')[0] for m in sys.modules}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    loaded = set(eval(done.stdout))  # noqa: S307 - our own printed list
    assert not loaded & (ALWAYS_HEAVY | set(BACKEND_LIBS.values()) | {"numpy"})


def test_catalog_is_read_with_libyaml_when_present():
    import yaml

    from solver.common import inputs

    # the catalog goes through the strict reader (solver.common.inputs), built on libyaml's loader
    assert issubclass(inputs._BASE_LOADER, getattr(yaml, "CSafeLoader", yaml.SafeLoader))
