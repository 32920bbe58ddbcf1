"""`procure dashboard`: start the Streamlit dashboard (``dashboards/app.py``).

The app is found next to the package: ``solver/procure_dashboards/app.py`` in an installed
wheel (package data), ``dashboards/app.py`` in a source checkout. The library itself never
imports Streamlit; this command only starts ``python -m streamlit run`` in a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from solver.common.errors import InputError, Problem
from solver.common.paths import data_dir

CATALOG_ENV = "PROCURE_DASHBOARD_CATALOG"  # read by dashboards/state.py
MAX_UPLOAD_MB = 20


def app_path() -> Path:
    """The dashboard's ``app.py`` (installed package data first, then the source tree)."""
    found = data_dir("procure_dashboards", "dashboards", "app.py")
    if found is not None:
        return found / "app.py"
    raise InputError([Problem("procure dashboard", "", None,
                              "the dashboard files are not installed next to the solver "
                              "package (expected solver/procure_dashboards/app.py)")])


def streamlit_command(port: int | None, address: str, headless: bool) -> list[str]:
    """The ``python -m streamlit run …`` command line."""
    command = [sys.executable, "-m", "streamlit", "run", str(app_path()),
               "--server.address", address, "--server.maxUploadSize", str(MAX_UPLOAD_MB),
               "--browser.gatherUsageStats", "false", "--client.toolbarMode", "minimal",
               "--server.headless", "true" if headless else "false"]
    if port is not None:
        command += ["--server.port", str(port)]
    return command


def wait_until_healthy(url: str, process: subprocess.Popen, seconds: float = 60.0) -> bool:
    """Poll Streamlit's health endpoint at ``url`` until it answers 200 (True), or the
    process exits or ``seconds`` pass (False). For the browser test and the screenshots."""
    import time
    import urllib.request

    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as reply:
                if reply.status == 200:
                    return True
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.3)


def register(app: typer.Typer) -> None:
    @app.command()
    def dashboard(
        port: Annotated[int | None, typer.Option(
            "--port", min=1, max=65535, help="Port to serve on (default: Streamlit's 8501).")
        ] = None,
        address: Annotated[str, typer.Option(
            "--address", help="Address to bind (default 127.0.0.1: this machine only).")
        ] = "127.0.0.1",
        catalog: Annotated[str | None, typer.Option(
            "--catalog", help="A catalog directory or price overlay on top of the built-in.")
        ] = None,
        headless: Annotated[bool, typer.Option(
            "--headless/--browser", help="Do not / do open a browser window.")] = False,
    ) -> int:
        """Start the Streamlit dashboard: scenario, plan, Pareto, what-if, batch, catalog."""
        from solver.catalog.load import load_catalog

        env = dict(os.environ)
        if catalog is not None:
            load_catalog(catalog)  # fail here, with file and field, not inside the browser
            env[CATALOG_ENV] = str(Path(catalog).resolve())
        command = streamlit_command(port, address, headless)
        return run_child(command, env)


def run_child(command: list[str], env: dict[str, str]) -> int:
    """Run Streamlit as a child; SIGTERM/SIGINT to ``procure dashboard`` stop the child too."""
    import signal

    child = subprocess.Popen(command, env=env)

    def forward(signum: int, _frame: object) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while True:
            try:
                code = child.wait()
                break
            except KeyboardInterrupt:  # pragma: no cover - handled by forward()
                forward(signal.SIGINT, None)
        return 0 if code in (-signal.SIGTERM, -signal.SIGINT) else code
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
