"""Regenerate ``docs/screenshots/*.png`` from the current dashboard in headless Chromium.

Starts the dashboard the way ``procure dashboard`` does (toolbar minimal: no Deploy button)
on a free local port, drives it with playwright at a 1440 × 900 viewport and writes one PNG
per page and example, each as tall as its content (width 1440). Needs what the browser test
needs: ``pip install playwright`` and a Chromium binary (Debian's ``chromium`` or
``PROCURE_CHROMIUM=/path``); no browser download.

    PYTHONPATH=. python bench/screenshots.py                 # all, into docs/screenshots/
    PYTHONPATH=. python bench/screenshots.py plan pareto     # only these names
    PYTHONPATH=. python bench/screenshots.py --out /tmp/shots
    PYTHONPATH=. python bench/screenshots.py plan pareto catalog --width 1024  # 1024 x 768
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WIDTH, HEIGHT = 1440, 900
MAX_HEIGHT = 6000
TIMEOUT_MS = 120_000
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def chromium() -> str:
    for candidate in (os.environ.get("PROCURE_CHROMIUM"), shutil.which("chromium"),
                      shutil.which("chromium-browser"), shutil.which("google-chrome")):
        if candidate and Path(candidate).is_file():
            return candidate
    raise SystemExit("no Chromium binary: apt-get install -y chromium, or set PROCURE_CHROMIUM")


@contextmanager
def dashboard() -> Iterator[str]:
    """The dashboard on 127.0.0.1 and a free port, as ``procure dashboard --headless``."""
    from solver.cli.dashboard import streamlit_command, wait_until_healthy

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = streamlit_command(port, "127.0.0.1", headless=True)
    command += ["--server.fileWatcherType", "none"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_until_healthy(url, process):
            raise SystemExit("streamlit did not start")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def settled(page, charts: int = 0) -> None:
    """The script run is over, no spinner shows and ``charts`` plotly charts are drawn."""
    page.wait_for_selector("h1", timeout=TIMEOUT_MS)
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]',
                           timeout=TIMEOUT_MS)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stSpinner\"]')",
                           timeout=TIMEOUT_MS)
    if charts:
        page.wait_for_function(
            f"() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= {charts}",
            timeout=TIMEOUT_MS)
    page.wait_for_timeout(800)  # fonts, chart transitions


SIZES = {1024: 768, 1440: 900}
"""The viewports the dashboard is checked at (issue 32): width -> height."""


def shoot(page, path: Path, width: int = WIDTH) -> None:
    """The whole page at ``width``: the viewport grows to the content's height."""
    base = SIZES.get(width, HEIGHT)
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]')"
                           ".scrollHeight")
    page.set_viewport_size({"width": width, "height": min(max(height, base), MAX_HEIGHT)})
    page.wait_for_timeout(500)
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size({"width": width, "height": base})
    print(f"wrote {path}")


def pick_example(page, name: str) -> None:
    page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first.click()
    page.get_by_role("option", name=name, exact=True).click()
    page.wait_for_function(
        f"() => document.body.innerText.includes('{name}') && "
        "document.querySelector('[data-testid=\"stSidebar\"]').innerText.includes("
        f"'example {name}')", timeout=TIMEOUT_MS)


def go(page, link: str) -> None:
    page.get_by_role("link", name=link).click()


def start(page, url: str, example: str | None) -> None:
    page.goto(url)
    settled(page, charts=2)
    if example:
        pick_example(page, example)
        settled(page)


def plan_shot(example: str, charts: int = 2) -> Callable:
    def take(page, url: str) -> None:
        start(page, url, example)
        settled(page, charts=charts)
    return take


def pareto(page, url: str) -> None:
    start(page, url, "chat-70b-one-node")
    go(page, "Pareto")
    settled(page, charts=1)


def pareto_budget(page, url: str) -> None:
    start(page, url, "best-for-a-budget")  # max_served: the budget curve comes first
    go(page, "Pareto")
    settled(page, charts=1)  # the frontier (plotly) is drawn after the budget curve
    page.wait_for_timeout(3000)  # the vega line chart and the table


def what_if(page, url: str) -> None:
    start(page, url, "chat-70b-one-node")
    go(page, "What-if")
    settled(page)
    thumb = page.get_by_role("slider").first  # GPU prices (% change)
    thumb.focus()
    for _ in range(4):
        thumb.press("ArrowRight")
    settled(page)
    page.get_by_role("button", name="Run the sensitivity report").click()
    settled(page, charts=1)


def batch(page, url: str) -> None:
    start(page, url, None)
    go(page, "Batch")
    settled(page)
    folder = Path(tempfile.mkdtemp(prefix="procure-shots-"))
    archive = folder / "rfqs.zip"
    with zipfile.ZipFile(archive, "w") as out:
        for name in ("chat-70b-one-node", "serve-405b-replicas", "portfolio-lab",
                     "finetune-70b-full-cluster", "infeasible-budget", "chat-n-plus-1"):
            out.write(ROOT / "scenarios" / f"{name}.yaml", f"rfqs/{name}.yaml")
        out.writestr("rfqs/typo.yaml", (ROOT / "scenarios" / "chat-70b-one-node.yaml")
                     .read_text().replace("id: chat-70b-one-node", "id: typo")
                     .replace("model: llama-3.1-70b", "model: llama-3.1-7b"))
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(archive))
    page.wait_for_function(
        "() => [...document.querySelectorAll('button')].some(b => b.innerText.trim() === "
        "'Run batch' && !b.disabled)", timeout=TIMEOUT_MS)
    page.get_by_role("button", name="Run batch").click()
    page.get_by_role("button", name="Open in Plan").wait_for(timeout=TIMEOUT_MS)
    settled(page)
    shutil.rmtree(folder, ignore_errors=True)


def page_shot(link: str) -> Callable:
    def take(page, url: str) -> None:
        start(page, url, None)
        go(page, link)
        settled(page)
    return take


SHOTS: dict[str, Callable] = {
    "plan": plan_shot("chat-70b-one-node"),
    "plan-replicas": plan_shot("serve-405b-replicas"),
    "plan-n-plus-1": plan_shot("chat-n-plus-1"),
    "plan-coupled": plan_shot("finetune-70b-full-cluster"),
    "plan-capex": plan_shot("capex-open-datacenter"),
    "plan-portfolio": plan_shot("portfolio-lab"),
    "plan-pretrain": plan_shot("pretrain-70b-open"),
    "plan-infeasible": plan_shot("infeasible-budget", charts=0),
    "plan-rent": plan_shot("rent-oneoff-jobs"),
    "plan-hybrid": plan_shot("hybrid-service-and-job"),
    "plan-growing": plan_shot("growing-chat-service"),
    "plan-day-night": plan_shot("day-chat-night-batch"),
    "plan-budget": plan_shot("best-for-a-budget"),
    "plan-rack": plan_shot("deepseek-r1-rack"),
    "pareto": pareto,
    "pareto-budget": pareto_budget,
    "what-if": what_if,
    "batch": batch,
    "scenario": page_shot("Scenario"),
    "catalog": page_shot("Catalog"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"which screenshots (default all): {', '.join(SHOTS)}")
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    parser.add_argument("--width", type=int, default=WIDTH,
                        help="viewport width (1024 gives 1024 x 768, 1440 gives 1440 x 900)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in SHOTS]
    if unknown:
        parser.error(f"unknown screenshot(s): {', '.join(unknown)}; choose from "
                     f"{', '.join(SHOTS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    with dashboard() as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), headless=True,
                                             args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": args.width,
                                          "height": SIZES.get(args.width, HEIGHT)})
        for name in args.names or list(SHOTS):
            SHOTS[name](page, url)
            shoot(page, out / f"{name}.png", args.width)
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
