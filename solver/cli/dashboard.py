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


DEFAULT_PORT = 8501  # Streamlit's


def streamlit_command(port: int | None, address: str, headless: bool = True) -> list[str]:
    """The ``python -m streamlit run …`` command line.

    Streamlit always runs headless: a non-headless Streamlit on a fresh HOME stops at its
    e-mail prompt (``~/.streamlit/credentials.toml`` absent) before it serves anything.
    ``headless=False`` (``procure dashboard --browser``) is honoured by
    :func:`open_browser_when_ready`, which opens the page itself once the server answers.
    """
    del headless  # the browser is opened by procure, never by Streamlit (no prompt)
    command = [sys.executable, "-m", "streamlit", "run", str(app_path()),
               "--server.address", address, "--server.maxUploadSize", str(MAX_UPLOAD_MB),
               "--browser.gatherUsageStats", "false", "--client.toolbarMode", "minimal",
               "--server.headless", "true"]
    if port is not None:
        command += ["--server.port", str(port)]
    return command


def streamlit_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with Streamlit's settings that keep it prompt-free whatever HOME holds."""
    return {**env, "STREAMLIT_SERVER_HEADLESS": "true",
            "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}


def open_browser_when_ready(url: str, process: subprocess.Popen) -> None:
    """Open ``url`` in the user's browser once the server at it is healthy (a thread)."""
    import threading
    import webbrowser

    def _open() -> None:
        if wait_until_healthy(url, process):
            webbrowser.open(url)

    threading.Thread(target=_open, daemon=True).start()


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
            "--catalog", help="A catalog directory, or a price overlay over the built-in one.")
        ] = None,
        browser: Annotated[bool, typer.Option(
            "--browser/--headless",
            help="Open a browser window on the dashboard (default: headless, no prompt; "
                 "open the printed URL yourself).")] = False,
    ) -> int:
        """Start the Streamlit dashboard: scenario, plan, Pareto, what-if, batch, catalog."""
        from solver.catalog.load import load_catalog

        env = streamlit_env(dict(os.environ))
        if catalog is not None:
            load_catalog(catalog)  # fail here, with file and field, not inside the browser
            env[CATALOG_ENV] = str(Path(catalog).resolve())
        command = streamlit_command(port, address)
        url = None
        if browser:
            host = "127.0.0.1" if address in ("0.0.0.0", "::") else address
            url = f"http://{host}:{port or DEFAULT_PORT}"
        return run_child(command, env, open_url=url)


def run_child(command: list[str], env: dict[str, str], open_url: str | None = None) -> int:
    """Run Streamlit as a child; SIGTERM/SIGINT to ``procure dashboard`` stop the child too.
    ``open_url``: opened in the user's browser once the child serves it."""
    import signal

    child = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL)
    if open_url is not None:
        open_browser_when_ready(open_url, child)

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
