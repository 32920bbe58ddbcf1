"""The Streamlit dashboard, page by page, with streamlit.testing.v1.AppTest (issue 7).

Each page is a ``render()`` function; a test runs the app's frame (defaults, draft keeping)
and one page in a fresh AppTest session, then looks at the elements it drew. The happy path
uses the example scenarios; error paths: an invalid upload (shown with its field) and an
infeasible RFQ (shown with its reason).
"""

from __future__ import annotations

import io
import json
import sys
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
TIMEOUT = 60
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PAGE_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
import streamlit as st
from dashboards import state
from dashboards.views import scenario, {page}
st.set_page_config(layout="wide")
state.ensure_defaults()
scenario.keep_draft()
{page}.render()
"""


def page(name: str) -> AppTest:
    return AppTest.from_string(PAGE_SCRIPT.format(root=str(ROOT), page=name),
                               default_timeout=TIMEOUT)


def load_example(at: AppTest, name: str) -> None:
    """Make an example the active RFQ, as the Scenario page's loader does."""
    from solver.catalog.load import load_catalog
    from solver.rfq.schema import load_rfq

    rfq = load_rfq(SCENARIOS / f"{name}.yaml", load_catalog())
    at.session_state["rfq_data"] = rfq.model_dump(mode="json", exclude_none=True)
    at.session_state["rfq_source"] = f"example {name}"
    at.session_state["price_overlay"] = {}


def texts(at: AppTest) -> str:
    """Everything the page wrote, as one string."""
    parts = [e.value for e in at.markdown] + [e.value for e in at.error]
    parts += [e.value for e in at.warning] + [e.value for e in at.info]
    parts += [e.value for e in at.success] + [e.value for e in at.caption]
    return "\n".join(str(p) for p in parts)


def serving_tables(at: AppTest) -> list:
    """The Plan page's serving SLO tables, one per serving workload."""
    return [d.value for d in at.dataframe if "check" in d.value.columns]


def charts(at: AppTest) -> list:
    return at.get("plotly_chart")


# --- the app frame ----------------------------------------------------------------------

def test_app_starts_on_the_plan_of_the_default_example():
    at = AppTest.from_file(str(ROOT / "dashboards" / "app.py"), default_timeout=TIMEOUT).run()
    assert not at.exception
    assert [t.value for t in at.title] == ["Plan"]
    assert "chat-70b-one-node" in texts(at)
    assert [m.label for m in at.metric][:2] == ["TCO", "Capex"]
    assert at.sidebar.selectbox(key="sidebar_example") is not None


def test_sidebar_example_switches_the_active_rfq():
    at = AppTest.from_file(str(ROOT / "dashboards" / "app.py"), default_timeout=TIMEOUT).run()
    at.sidebar.selectbox(key="sidebar_example").select("serve-405b-replicas").run()
    assert not at.exception
    assert at.session_state["rfq_data"]["id"] == "serve-405b-replicas"
    assert at.session_state["form.id"] == "serve-405b-replicas"


# --- Scenario ---------------------------------------------------------------------------

def test_scenario_loads_an_example_into_the_form_and_offers_yaml():
    at = page("scenario").run()
    assert not at.exception
    at.selectbox(key="scenario_example").select("portfolio-lab")
    at.button[0].click().run()  # "Load example"
    assert not at.exception
    assert at.session_state["rfq_data"]["id"] == "portfolio-lab"
    assert at.text_input(key="form.id").value == "portfolio-lab"
    kinds = [s.value for s in at.selectbox if str(s.key).endswith(".kind")]
    assert kinds == ["inference", "lora", "batch_inference"]
    assert any(d.label.startswith("Download the active RFQ") for d in at.get("download_button"))


def test_scenario_loads_an_example_whose_model_is_a_config_file():
    at = page("scenario").run()
    at.selectbox(key="scenario_example").select("own-model-from-config")
    at.button[0].click().run()  # "Load example"
    assert not at.exception
    model = next(s.value for s in at.selectbox if str(s.key).endswith(".model"))
    assert model.endswith("acme-support-32b/config.json")
    assert not at.error


def test_scenario_form_shows_errors_at_the_field_and_blocks_use():
    at = page("scenario").run()
    at.text_input(key="form.id").input("bad id!").run()
    errors = [e.value for e in at.error]
    assert any(e.startswith("`id`") and "pattern" in e for e in errors), errors
    use = next(b for b in at.button if b.label == "Use this RFQ")
    assert use.disabled
    # an inference workload with neither concurrency nor qps: the error sits at the workload
    at.text_input(key="form.id").input("ok-id")
    wid = at.session_state["form.ids"][0]
    at.number_input(key=f"form.w{wid}.concurrency").set_value(None)
    at.number_input(key=f"form.w{wid}.qps").set_value(None).run()
    errors = [e.value for e in at.error]
    assert any("workloads[0]" in e and "concurrency or qps" in e for e in errors), errors


def test_scenario_form_adds_a_workload_and_uses_the_rfq():
    at = page("scenario").run()
    before = len(at.session_state["form.ids"])
    next(b for b in at.button if "Add workload" in b.label).click().run()
    assert len(at.session_state["form.ids"]) == before + 1
    wid = at.session_state["form.ids"][-1]
    at.selectbox(key=f"form.w{wid}.kind").select("lora").run()
    assert at.number_input(key=f"form.w{wid}.dataset_tokens") is not None
    at.text_input(key="form.id").input("two-jobs").run()
    next(b for b in at.button if b.label == "Use this RFQ").click().run()
    assert not at.exception
    data = at.session_state["rfq_data"]
    assert data["id"] == "two-jobs" and data["workloads"][-1]["kind"] == "lora"


def test_scenario_invalid_upload_names_the_field():
    at = page("scenario").run()
    bad = (SCENARIOS / "chat-70b-one-node.yaml").read_text().replace(
        "model: llama-3.1-70b", "model: llama-3.1-7b")
    at.file_uploader(key="scenario_upload").upload("bad.yaml", bad.encode(),
                                                   "application/x-yaml").run()
    assert not at.exception
    errors = "\n".join(e.value for e in at.error)
    assert "workloads[0].model" in errors and "unknown model id" in errors
    assert "llama-3.1-70b" in errors  # the nearest known ids
    assert at.session_state["rfq_data"]["id"] == "chat-70b-one-node"  # unchanged


def test_scenario_upload_with_yaml_syntax_error_and_csv_batch():
    at = page("scenario").run()
    at.file_uploader(key="scenario_upload").upload("broken.yaml", b"id: [unclosed\n",
                                                   "application/x-yaml").run()
    assert "YAML syntax error" in "\n".join(e.value for e in at.error)
    rows = ("id,name,kind,model,concurrency,input_tokens,output_tokens\n"
            "csv-a,chat,inference,llama-3.1-8b,8,1000,200\n"
            "csv-b,chat,inference,qwen2.5-7b,4,1000,200\n")
    at.file_uploader(key="scenario_upload").upload("batch.csv", rows.encode(),
                                                   "text/csv").run()
    assert not at.exception
    assert at.session_state["rfq_data"]["id"] == "csv-a"
    at.selectbox(key="scenario_upload_pick").select("csv-b").run()
    assert at.session_state["rfq_data"]["id"] == "csv-b"


# --- Plan -------------------------------------------------------------------------------

def test_plan_shows_cluster_layouts_targets_costs_and_explanations():
    at = page("plan")
    load_example(at, "chat-70b-one-node")
    at.run()
    assert not at.exception
    assert [m.label for m in at.metric] == ["TCO", "Capex", "Nodes", "GPUs", "GPU", "Server",
                                            "Power", "Fabric"]
    assert at.metric[-1].value == "none"
    tiles = {m.label: m.value for m in at.metric}
    node = _plan_nodes(at)
    assert tiles["GPU"] == node["gpu"] and tiles["Server"] == node["server"]
    assert tiles["TCO"].startswith("$") and tiles["Capex"].startswith("$")
    assert len(charts(at)) == 2  # the cluster and the cost waterfall
    headers = [h.value for h in at.subheader]
    for needed in ("Layouts", "Predicted against targets", "Decision path", "Counterfactuals"):
        assert needed in headers
    targets = at.dataframe[1].value
    assert "concurrency held" in set(targets["metric"])
    assert all(v.startswith("✓") for v in targets["verdict"] if v)
    serving = serving_tables(at)[0]  # the SLOs at their percentile
    assert {"TTFT at p90", "TPOT at p90"} <= set(serving["check"])
    assert all(v.startswith("✓") for v in serving["verdict"])
    assert "Does the model fit" in texts(at)
    cost = next(t.value for t in at.table if "cost" in t.value.columns)
    horizon = at.session_state["rfq_data"]["horizon_years"]
    assert f"Total cost of ownership ({horizon:g} years)" in list(cost["cost"])
    assert all(v.startswith("$") for v in cost["amount"])
    assert not any("_" in v or v.islower() for v in cost["cost"])  # words, not field names
    # alternatives that are the chosen plan itself are said once, not as table rows
    assert "Already the chosen plan" in texts(at)


def _plan_nodes(at: AppTest) -> dict:
    """The single node type of the plan the page shows (from its 'Buy:' line)."""
    from solver.analysis.explain import solve_rfq
    from solver.catalog.load import load_catalog
    from solver.rfq.schema import validate_rfq

    cat = load_catalog()
    plan = solve_rfq(validate_rfq(at.session_state["rfq_data"], cat, "test"), cat,
                     solver="cbc")
    assert len(plan.cluster.nodes) == 1
    return plan.cluster.nodes[0].model_dump()


def test_plan_tiles_name_every_gpu_and_server_of_a_mixed_cluster():
    at = page("plan")
    load_example(at, "portfolio-lab")
    at.run()
    assert not at.exception
    tiles = {m.label: m.value for m in at.metric}
    gpu_label = next(label for label in tiles if label.startswith("GPU") and label != "GPUs")
    server_label = next(label for label in tiles if label.startswith("Server"))
    buy = next(m.value for m in at.markdown if m.value.startswith("**Buy:**"))
    for name in tiles[gpu_label].split(" + ") + tiles[server_label].split(" + "):
        assert name in buy
    targets = at.dataframe[1].value
    shares = targets[targets["metric"].isin(["MFU", "scaling efficiency"])]
    assert len(shares) and all(v.endswith("%") for v in shares["predicted"])


def test_plan_shows_the_bill_of_materials_and_offers_the_quote():
    at = page("plan")
    load_example(at, "finetune-70b-full-cluster")
    at.run()
    assert not at.exception
    assert "Bill of materials" in [h.value for h in at.subheader]
    bom = next(t.value for t in at.table if "SKU" in t.value.columns)
    assert bom["SKU"].iloc[-1] == "capex"
    total = float(bom["line total"].iloc[-1].replace("$", "").replace(",", ""))
    lines = sum(float(v.replace("$", "").replace(",", "")) for v in bom["line total"][:-1])
    assert abs(total - lines) <= len(bom)  # whole dollars, rounded per line
    assert "**Buy:**" in texts(at) and "pcie-8gpu" in texts(at)
    buttons = [b for b in at.get("download_button")]
    assert any("quote" in str(b.proto.label).lower() for b in buttons)


def test_plan_of_an_infeasible_rfq_shows_its_reason_and_fix():
    at = page("plan")
    load_example(at, "infeasible-budget")
    at.run()
    assert not at.exception
    error = "\n".join(e.value for e in at.error)
    assert "No plan meets this RFQ" in error and "budget" in error and "binds" in error
    assert "raise budget_usd" in "\n".join(i.value for i in at.info)
    assert not at.metric


def test_plan_of_a_coupled_cluster_draws_the_fabric():
    at = page("plan")
    load_example(at, "finetune-70b-full-cluster")
    at.run()
    assert not at.exception
    fabric = next(m for m in at.metric if m.label.startswith("Fabric"))
    assert fabric.label == "Fabric (coupled)" and fabric.value != "none"


# --- Pareto -----------------------------------------------------------------------------

def test_pareto_draws_the_frontier_and_compares_a_point_with_the_optimum():
    at = page("pareto")
    load_example(at, "chat-70b-one-node")
    at.run()
    assert not at.exception
    assert len(charts(at)) == 1
    pick = at.selectbox(key="pareto_pick")
    assert len(pick.options) >= 2
    pick.select_index(len(pick.options) - 1).run()
    assert not at.exception
    cards = [m.value for m in at.markdown if m.value.startswith("####")]
    assert "#### Optimum (cheapest)" in cards
    assert f"#### Point #{len(pick.options)}" in cards
    assert "more for time per output token (ms)" in texts(at)


def test_pareto_of_an_infeasible_rfq_says_why():
    at = page("pareto")
    load_example(at, "infeasible-budget")
    at.run()
    assert not at.exception
    error = "\n".join(e.value for e in at.error)
    assert "no frontier" in error and "binds" in error


# --- What-if ----------------------------------------------------------------------------

@pytest.mark.slow  # re-solves a what-if and a full tornado (CI runs the slow marker)
def test_whatif_resolves_and_reports_the_change_and_the_tornado():
    at = page("whatif")
    load_example(at, "chat-70b-one-node")
    at.run()
    assert not at.exception
    base = at.metric[0].value
    at.slider(key="wi_gpu_pct").set_value(50)
    at.slider(key="wi_horizon").set_value(5.0).run()
    assert not at.exception
    assert at.metric[0].value != base
    assert "GPU prices +50 % (all GPUs)" in texts(at) and "horizon 5 years" in texts(at)
    assert "rfq.horizon_years" not in texts(at) and "e+0" not in texts(at)
    at.button(key="wi_run_report").click().run()
    assert not at.exception
    assert len(charts(at)) == 1  # the tornado
    labels = json.loads(charts(at)[0].proto.spec)["data"][0]["y"]
    prices = [label for label in labels if "price" in label]
    assert prices and all("[$" in label for label in prices), prices


def test_whatif_of_an_infeasible_rfq_shows_the_reason():
    at = page("whatif")
    load_example(at, "infeasible-budget")
    at.run()
    assert not at.exception
    assert "binds" in "\n".join(e.value for e in at.error)


# --- Batch ------------------------------------------------------------------------------

def _zip(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def test_batch_runs_a_zip_and_offers_downloads():
    good = (SCENARIOS / "chat-70b-one-node.yaml").read_text()
    infeasible = (SCENARIOS / "infeasible-budget.yaml").read_text()
    bad = json.dumps({"id": "broken", "workloads": [{"name": "x", "kind": "inference",
                                                     "model": "nope", "concurrency": 1,
                                                     "input_tokens": 1,
                                                     "output_tokens": 1}]})
    at = page("batch").run()
    at.file_uploader(key="batch_upload").upload(
        "rfqs.zip", _zip({"a/chat.yaml": good, "b/infeasible.yaml": infeasible,
                          "broken.json": bad, "../evil.yaml": good}), "application/zip").run()
    next(b for b in at.button if b.label == "Run batch").click().run()
    assert not at.exception
    # the zip member with '..' is refused, naming it
    assert "unsafe path" in "\n".join(e.value for e in at.error)
    at.file_uploader(key="batch_upload").upload(
        "rfqs.zip", _zip({"a/chat.yaml": good, "b/infeasible.yaml": infeasible,
                          "broken.json": bad}), "application/zip").run()
    next(b for b in at.button if b.label == "Run batch").click().run()
    assert not at.exception
    table = at.dataframe[0].value
    assert sorted(table["status"]) == ["infeasible", "invalid", "optimal"]
    priced = table["tco_usd"].dropna()
    assert len(priced) and all(v == round(v) for v in priced)  # whole dollars, rounded
    assert not table["error"].isna().any()  # no 'None' shown for an RFQ without an error
    labels = [d.label for d in at.get("download_button")]
    assert labels == ["Download XLSX", "Download CSV"]
    at.multiselect(key="batch_status").set_value(["optimal"]).run()
    assert list(at.dataframe[0].value["rfq"]) == ["chat-70b-one-node"]


# --- Catalog ----------------------------------------------------------------------------

def test_catalog_browses_with_sources_and_overlays_prices():
    at = page("catalog").run()
    assert not at.exception
    gpus = at.dataframe[0].value
    assert {"rtx-pro-6000", "h100-sxm"} <= set(gpus["id"]) and "source" in gpus
    at.selectbox(key="cat_vendor").select("kentino").run()
    assert "h100-sxm" not in set(at.dataframe[0].value["id"])
    from dashboards.views.catalog import prices_csv
    from solver.catalog.load import load_catalog

    text = prices_csv(load_catalog(), {"rtx-pro-6000": 9500.0})
    assert text.splitlines()[0] == "id,price_usd,as_of,source"
    assert text.splitlines()[1].startswith("rtx-pro-6000,9500,")


def test_price_overlay_reaches_the_plan(tmp_path):
    at = page("plan")
    load_example(at, "chat-70b-one-node")
    at.run()
    tco = at.metric[0].value
    # raise the price of every GPU the kentino vendor builds: whichever the plan bought
    # now costs more, so the plan's TCO must move
    at.session_state["price_overlay"] = {gpu: 50000.0 for gpu in
                                         ("rtx-5090", "rtx-pro-6000", "l40", "l4")}
    at.run()
    assert not at.exception
    assert at.metric[0].value != tco
    assert "Price overlay" in texts(at)


def test_overlay_csv_is_usable_with_catalog_dir(tmp_path):
    from dashboards.views.catalog import prices_csv
    from solver.catalog.load import load_catalog

    (tmp_path / "prices.csv").write_text(prices_csv(load_catalog(), {"rtx-pro-6000": 9500.0,
                                                                     "ib-hdr-200": 800.0}))
    overlaid = load_catalog(str(tmp_path))
    assert overlaid.gpus["rtx-pro-6000"].price_usd == 9500.0
    assert overlaid.fabrics["ib-hdr-200"].nic_price_usd == 800.0


# --- the command and the library boundary ----------------------------------------------

def test_dashboard_command_finds_the_app_and_builds_the_streamlit_command():
    from solver.cli.dashboard import app_path, streamlit_command

    assert app_path().is_file() and app_path().name == "app.py"
    command = streamlit_command(8600, "127.0.0.1", headless=True)
    assert command[1:4] == ["-m", "streamlit", "run"]
    assert command[command.index("--server.port") + 1] == "8600"


def test_procure_dashboard_is_headless_and_prompt_free_on_a_fresh_home(tmp_path):
    """A fresh HOME (no ~/.streamlit/credentials.toml) and a stdin that never answers: the
    server must come up (a prompt would block on stdin and it would never be healthy)."""
    import os
    import socket
    import subprocess

    from solver.cli.dashboard import streamlit_env, wait_until_healthy

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    env.pop("STREAMLIT_SERVER_HEADLESS", None)
    process = subprocess.Popen([sys.executable, "-m", "solver.cli", "dashboard", "--port",
                                str(port)], env=env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert wait_until_healthy(f"http://127.0.0.1:{port}", process, seconds=90)
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=30)
    assert "email" not in out.lower()
    assert not (tmp_path / ".streamlit" / "credentials.toml").exists()  # nothing written
    assert streamlit_env({})["STREAMLIT_SERVER_HEADLESS"] == "true"


def test_procure_dashboard_browser_flag_opens_the_url(monkeypatch):
    from typer.testing import CliRunner

    import solver.cli.dashboard as dash
    from solver.cli.main import app

    calls: list = []
    monkeypatch.setattr(dash, "run_child",
                        lambda command, env, open_url=None: calls.append((command, open_url)) or 0)
    runner = CliRunner()
    assert runner.invoke(app, ["dashboard", "--port", "8611"]).exit_code == 0
    assert runner.invoke(app, ["dashboard", "--port", "8611", "--browser"]).exit_code == 0
    (plain_cmd, plain_url), (browser_cmd, browser_url) = calls
    assert plain_url is None and browser_url == "http://127.0.0.1:8611"
    for command in (plain_cmd, browser_cmd):  # Streamlit itself never opens it (no prompt)
        assert command[command.index("--server.headless") + 1] == "true"


def test_the_library_never_imports_streamlit():
    offenders = [p.name for p in (ROOT / "solver").rglob("*.py")
                 if "import streamlit" in p.read_text() or "from streamlit" in p.read_text()]
    assert offenders == []


def _tiny_plan(**fields):
    """A real (typed) plan of one L4 node and no workload, with ``fields`` set."""
    from solver.optimize.plan_model import Cluster, NodeGroup, Plan

    cluster = Cluster(nodes=[NodeGroup(gpu="l4", server="s", gpus_per_node=1, count=1)],
                      total_nodes=1, total_gpus=1, fabric="none", coupled=False,
                      coupled_nodes=0, power_kw=0.1, rack_units=1)
    return Plan(**{"rfq": "r", "status": "optimal", "solver": "highs", "gap": 0.0,
                   "solve_seconds": 0.0, "objective": "tco", "cluster": cluster,
                   "workloads": [], "cost": None, "placement": [],
                   "bill_of_materials": None, **fields})


def _frontier(points: tuple[tuple[float, float], ...]) -> dict:
    """A two-axis frontier result (TCO against TPOT) over one tiny plan, for the figures."""
    plan = _tiny_plan()
    return {"axes": ["tco_usd", "tpot_ms"], "rfq": "r", "workload": "chat",
            "lower_is_better": {"tpot_ms": True},
            "points": [{"tco_usd": tco, "tpot_ms": tpot, "plan": plan} for tco, tpot in points]}


def test_frontier_has_plain_axis_titles_dollar_ticks_and_the_slo_line():
    from dashboards.figures import frontier_figure

    result = _frontier(((100_000.0, 40.0), (150_000.0, 20.0)))
    fig = frontier_figure(result, 1, target=50.0)
    layout = fig.layout
    assert layout.xaxis.title.text == "Total cost of ownership (USD)"
    assert layout.yaxis.title.text == "Time per output token (ms)"
    assert layout.xaxis.tickprefix == "$" and layout.xaxis.type != "log"
    assert any(shape.y0 == 50.0 for shape in layout.shapes)
    assert any("SLO target" in a.text for a in layout.annotations)


def test_default_comparison_is_a_meaningful_improvement():
    from dashboards.views.pareto import _default_comparison

    result = {"axes": ["tco_usd", "tpot_ms"], "lower_is_better": {"tpot_ms": True}}
    points = [{"tpot_ms": 40.0}, {"tpot_ms": 39.8}, {"tpot_ms": 30.0}]
    assert _default_comparison(points, result) == 2


def test_dashboard_command_hides_deploy_and_forwards_sigterm():
    import os
    import signal
    import threading

    from solver.cli.dashboard import run_child, streamlit_command

    command = streamlit_command(None, "127.0.0.1", headless=True)
    assert command[command.index("--client.toolbarMode") + 1] == "minimal"
    child_cmd = [sys.executable, "-c", "import time; time.sleep(60)"]
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        code = run_child(child_cmd, dict(os.environ))
    finally:
        timer.cancel()
    assert code == 0  # the child was stopped by the forwarded SIGTERM, not after 60 s


UNSAVED_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
import streamlit as st
from dashboards import state
from dashboards.views import scenario
state.ensure_defaults()
if "loaded" not in st.session_state:
    scenario.load_into_form(state.active()[0])
    st.session_state["loaded"] = True
if st.session_state.get("edit"):
    st.session_state[scenario.P + "id"] = "changed-id"
st.markdown("UNSAVED" if scenario.unsaved_changes() else "SAVED")
"""


def test_unsaved_form_changes_are_detected():
    at = AppTest.from_string(UNSAVED_SCRIPT.format(root=str(ROOT)), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception
    assert at.markdown[-1].value == "SAVED"  # the form holds the active RFQ
    at.session_state["edit"] = True
    at.run()
    assert at.markdown[-1].value == "UNSAVED"


# --- state kept across pages (issue 12, item 6) ----------------------------------------

SWITCH_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
import streamlit as st
from dashboards import state
from dashboards.views import scenario, whatif, pareto, plan
st.set_page_config(layout="wide")
state.ensure_defaults()
scenario.keep_draft()
{{"whatif": whatif, "pareto": pareto, "plan": plan}}[st.session_state.get("page", "whatif")].render()
"""


def switching_app() -> AppTest:
    return AppTest.from_string(SWITCH_SCRIPT.format(root=str(ROOT)), default_timeout=TIMEOUT)


def test_whatif_sliders_are_kept_across_page_switches():
    at = switching_app()
    load_example(at, "chat-70b-one-node")
    at.run()
    at.slider(key="wi_gpu_pct").set_value(25)
    at.slider(key="wi_pue").set_value(1.5)
    at.selectbox(key="wi_gpu_which").select("rtx-pro-6000").run()
    moved = at.metric[0].value
    at.session_state["page"] = "plan"
    at.run()
    assert not at.exception and [t.value for t in at.title] == ["Plan"]
    at.session_state["page"] = "whatif"
    at.run()
    assert not at.exception
    assert at.slider(key="wi_gpu_pct").value == 25
    assert at.slider(key="wi_pue").value == 1.5
    assert at.selectbox(key="wi_gpu_which").value == "rtx-pro-6000"
    assert at.metric[0].value == moved


def test_pareto_point_is_kept_across_page_switches_and_reset_for_another_rfq():
    at = switching_app()
    load_example(at, "chat-70b-one-node")
    at.session_state["page"] = "pareto"
    at.run()
    pick = at.selectbox(key="pareto_pick")
    last = len(pick.options) - 1
    pick.select_index(last).run()
    at.session_state["page"] = "plan"
    at.run()
    at.session_state["page"] = "pareto"
    at.run()
    assert not at.exception
    assert at.selectbox(key="pareto_pick").value == last
    assert f"#### Point #{last + 1}" in [m.value for m in at.markdown]
    load_example(at, "serve-405b-replicas")  # another RFQ: its own default comparison
    at.run()
    assert not at.exception
    from dashboards.views.pareto import _default_comparison
    from solver.analysis.pareto import frontier
    from solver.catalog.load import load_catalog
    from solver.rfq.schema import load_rfq

    cat = load_catalog()
    result = frontier(cat, load_rfq(SCENARIOS / "serve-405b-replicas.yaml", cat), solver="cbc")
    assert at.selectbox(key="pareto_pick").value == _default_comparison(result["points"],
                                                                        result)


def _cells(xlsx: bytes) -> list[str]:
    from openpyxl import load_workbook

    book = load_workbook(io.BytesIO(xlsx))
    return [str(c.value) for sheet in book.worksheets for row in sheet.iter_rows()
            for c in row if c.value is not None]


def test_batch_shows_and_exports_no_temp_paths_and_opens_a_row_in_plan():
    good = (SCENARIOS / "chat-70b-one-node.yaml").read_text()
    other = (SCENARIOS / "serve-405b-replicas.yaml").read_text()
    bad = json.dumps({"id": "broken", "workloads": [{"name": "x", "kind": "inference",
                                                     "model": "nope", "concurrency": 1,
                                                     "input_tokens": 1,
                                                     "output_tokens": 1}]})
    at = page("batch").run()
    at.file_uploader(key="batch_upload").upload(
        "rfqs.zip", _zip({"a/chat.yaml": good, "b/serve.yaml": other, "broken.json": bad,
                          "c/chat-again.yaml": good}), "application/zip").run()
    next(b for b in at.button if b.label == "Run batch").click().run()
    assert not at.exception
    result = at.session_state["batch_result"]
    shown = texts(at) + "\n" + at.dataframe[0].value.to_csv()
    xlsx = "\n".join(_cells(result["xlsx"]))
    for text in (shown, result["csv"].decode(), xlsx):
        assert "procure-batch-" not in text and "/tmp/" not in text, text
        assert "upload-0" not in text
    assert "rfqs.zip/a/chat.yaml" in result["csv"].decode()
    assert "rfqs.zip/broken.json" in xlsx  # the error names the member of the upload
    assert any("duplicate id" in w.value and "rfqs.zip/c/chat-again.yaml" in w.value
               for w in at.warning)
    # a result row opens in Plan as the active RFQ (and fills the Scenario form)
    pick = at.selectbox(key="batch_open")
    assert set(pick.options) == {"chat-70b-one-node", "serve-405b-replicas"}
    pick.select("serve-405b-replicas")
    at.button(key="batch_open_button").click().run()
    assert not at.exception
    assert at.session_state["rfq_data"]["id"] == "serve-405b-replicas"
    assert at.session_state["rfq_source"] == "batch serve-405b-replicas"
    assert at.session_state["form.id"] == "serve-405b-replicas"
    assert "active RFQ" in "\n".join(s.value for s in at.success)


def test_batch_errors_name_the_upload_not_the_temp_folder():
    at = page("batch").run()
    at.file_uploader(key="batch_upload").upload(
        "rfqs.zip", _zip({"a/chat.yaml": "id: x\n", "../evil.yaml": "id: y\n"}),
        "application/zip").run()
    next(b for b in at.button if b.label == "Run batch").click().run()
    assert not at.exception
    errors = "\n".join(e.value for e in at.error)
    assert "unsafe path" in errors and "rfqs.zip" in errors
    assert "procure-batch-" not in errors and "/tmp/" not in errors


def test_plan_shows_slo_margins_utilisation_and_n_plus_1_per_serving_workload():
    at = page("plan")
    load_example(at, "chat-n-plus-1")
    at.run()
    assert not at.exception
    assert "Serving SLOs, utilisation and redundancy" in [h.value for h in at.subheader]
    note = next(m.value for m in at.markdown if m.value.startswith("**support**"))
    assert "95 % of requests" in note and "redundancy n+1" in note
    table = serving_tables(at)[0]
    checks = list(table["check"])
    assert checks[:2] == ["TTFT at p95", "TPOT at p95"]
    assert any(c.startswith("utilisation") for c in checks)
    assert any(c.startswith("n+1: concurrency with node-") for c in checks)
    utilisation = table[table["check"].str.startswith("utilisation")].iloc[0]
    assert utilisation["target"] == "≤ 70%" and utilisation["predicted"].endswith("%")
    assert all(v == "✓ met" for v in table["verdict"])
    assert all(m.endswith("%") for m in table["margin"])
    # no raw field names on the page
    assert "n_plus_1" not in texts(at) and "target_utilization" not in texts(at)


def test_an_example_with_fields_the_form_does_not_edit_is_not_unsaved():
    at = AppTest.from_string(UNSAVED_SCRIPT.format(root=str(ROOT)), default_timeout=TIMEOUT)
    load_example(at, "chat-n-plus-1")  # slo_percentile, target_utilization, redundancy n+1
    at.run()
    assert not at.exception
    assert at.markdown[-1].value == "SAVED"
    at = page("scenario")
    load_example(at, "chat-n-plus-1")
    at.run()
    assert not at.exception
    assert "redundancy n+1" in texts(at) and "slo percentile 95" in texts(at)
    next(b for b in at.button if b.label == "Use this RFQ").click().run()
    assert at.session_state["rfq_data"]["workloads"][0]["redundancy"] == "n+1"


def test_log_cost_axis_labels_every_tick_in_dollars():
    from dashboards.figures import frontier_figure

    result = _frontier(((145_000.0, 45.0), (5_400_000.0, 24.0)))
    axis = frontier_figure(result, 1, target=50.0).layout.xaxis
    assert axis.type == "log"
    assert len(axis.ticktext) >= 4 and all(t.startswith("$") for t in axis.ticktext)
    assert "$200,000" in axis.ticktext and "$5,000,000" in axis.ticktext


def test_plan_with_two_layouts_lists_each_and_names_both_servers():
    at = page("plan")
    load_example(at, "chat-n-plus-1")  # one 4-GPU and two 8-GPU RTX PRO boxes
    at.run()
    assert not at.exception
    tiles = {m.label: m.value for m in at.metric}
    assert tiles.get("Server (2 types)") == "pcie-4gpu + pcie-8gpu", tiles
    layouts = at.dataframe[0].value
    rows = layouts[layouts["workload"].str.startswith("support")]
    assert len(rows) >= 2  # one row per layout the MIP mixed
    assert rows["GPUs"].sum() == int(tiles["GPUs"])
    for _, row in rows.iterrows():
        tp, pp, dp = (int(x) for x in row["TP × PP × DP"].split(" × "))
        assert tp * pp * dp == row["GPUs"]


# --- buy, rent or both (issue 16) -------------------------------------------------------

def test_plan_shows_rented_lines_buy_rent_table_and_cumulative_cost_chart():
    """A busy service owned and a one-off LoRA rented: the schedule, the rented line, the
    buy-or-rent table with its break-evens and the buy-vs-rent chart, figures from the
    plan."""
    at = page("plan")
    load_example(at, "hybrid-service-and-job")
    at.run()
    assert not at.exception
    assert "Buy, rent or both" in [h.value for h in at.subheader]
    tables = [t.value for t in at.table]
    schedule = next(t for t in tables if "nodes bought" in t.columns)
    rented = next(t for t in tables if "per GPU-hour" in t.columns)
    compare = next(t for t in tables if "break-even utilisation" in t.columns)
    assert list(schedule["months"]) == ["0–36"]
    assert list(rented["workload"]) == ["tune"]
    assert dict(zip(compare["workload"], compare["chosen"], strict=True)) == {
        "chat": "owned", "tune": "rented"}
    assert all(v.endswith("%") for v in compare["break-even utilisation"])
    figures = [c for c in charts(at) if "Cumulative cost" in c.proto.spec]
    assert len(figures) == 1
    names = [trace["name"] for trace in json.loads(figures[0].proto.spec)["data"]]
    assert names == ["chat: buy", "chat: rent", "tune: buy", "tune: rent"]


def test_plan_without_rental_or_schedule_has_no_buy_rent_section():
    from dashboards import components
    from solver.optimize.plan_model import Period

    plan = _tiny_plan(schedule=[Period(start_month=0, months=36, nodes_bought=1,
                                       gpus_bought=8, capex_usd=1.0, rental_usd=0.0,
                                       runs={})], buy_vs_rent=[])
    assert components.schedule_table(plan) is None
    assert components.rental_table(plan) is None
    assert components.buy_rent_table(plan) is None


def test_buy_rent_figure_crosses_at_the_break_even_horizon():
    """Known answer: $120k capex + $1k/month owned against $6/h rented 24/7 ($4,380 a
    month) cross at 120000 / 3380 = 35.5 months."""
    from dashboards.figures import buy_rent_figure
    from solver.optimize.plan_model import BuyVsRent

    row = BuyVsRent(workload="chat", chosen="owned", owned_usd=156_000.0,
                    rented_usd=157_680.0, owned_capex_usd=120_000.0,
                    owned_running_usd_per_month=1000.0, rent_usd_per_hour=6.0,
                    hours_used=26_280.0,
                    breakeven_months=round(120_000 / (6 * 730 - 1000), 2), why="owning wins")
    fig = buy_rent_figure(_tiny_plan(buy_vs_rent=[row]), 3)
    buy, rent = fig.data
    assert buy.y[0] == 120_000 and rent.y[0] == 0
    assert buy.y[12] == pytest.approx(132_000) and rent.y[12] == pytest.approx(52_560)
    assert row.breakeven_months == pytest.approx(35.5, abs=0.01)
    assert buy.y[35] > rent.y[35] and buy.y[36] < rent.y[36]
    one_sided = BuyVsRent(workload="x", chosen="owned", owned_usd=1.0, rented_usd=None,
                          why="no offer")
    assert buy_rent_figure(_tiny_plan(buy_vs_rent=[one_sided]), 3) is None


def test_sidebar_loads_the_growing_service_and_shows_its_purchase_schedule():
    """An example with demand over time (growth_per_year) loads without a problem or an
    'unsaved changes' banner, and its plan shows the purchase schedule."""
    at = AppTest.from_file(str(ROOT / "dashboards" / "app.py"), default_timeout=TIMEOUT).run()
    at.sidebar.selectbox(key="sidebar_example").select("growing-chat-service").run()
    assert not at.exception
    assert not [e.value for e in at.error]
    assert "Unsaved changes" not in texts(at)
    assert at.session_state["rfq_data"]["id"] == "growing-chat-service"
    assert "Purchase schedule" in texts(at)


def test_pareto_of_a_budget_question_shows_what_each_budget_serves():
    """Issue 29: for objective max_served the Pareto page leads with the share each budget
    serves (a chart and a table whose last budget serves everything), then the frontier of
    serving all demand."""
    at = page("pareto")
    load_example(at, "chat-70b-one-node")
    at.session_state["rfq_data"] = {**at.session_state["rfq_data"],
                                    "objective": "max_served", "budget_usd": 150000}
    at.run()
    assert not at.exception
    headers = [h.value for h in at.subheader]
    assert headers[:2] == ["What each budget serves", "Cost against service, all demand served"]
    assert at.toggle(key="pareto_budget").value is True
    table = at.dataframe[0].value
    assert list(table["share served"])[-1] == 1.0
    assert list(table["share served"]) == sorted(table["share served"])
    assert "Everything is served at $" in " ".join(c.value for c in at.caption)


def test_plan_on_geforce_cards_shows_the_datacenter_licensed_alternative():
    """Issue 32: beside the plan (before the tiles), the cheapest plan on
    datacenter-licensed GPUs and its extra cost (batch-corpus-one-box: $1,494 more)."""
    at = page("plan")
    load_example(at, "batch-corpus-one-box")
    at.run()
    assert not at.exception
    licence = [w.value for w in at.warning if "Licence." in w.value]
    assert len(licence) == 1
    assert "rtx-5090: a consumer (GeForce) card" in licence[0]
    assert "$1,494 more than this plan" in licence[0]
    assert "datacenter_grade_only" not in licence[0]
    at = page("plan")
    load_example(at, "chat-70b-one-node")
    at.run()
    assert not [w for w in at.warning if "Licence." in w.value]


TYPED_PRICE_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
import streamlit as st
from dashboards import state
from dashboards.views import catalog, scenario
st.set_page_config(layout="wide")
state.ensure_defaults()
scenario.keep_draft()
if "typed" not in st.session_state:
    st.session_state["typed"] = True
    frame = catalog._price_rows(state.catalog(), {{}})
    row = int(frame.index[frame["id"] == {entry!r}][0])
    key = catalog._editor_key()
    st.session_state[key] = {{"edited_rows": {{row: {{"your USD": {price!r}}}}}}}
    catalog._save_overlay(state.catalog())
    st.session_state.pop(key, None)
catalog.render()
"""


@pytest.mark.parametrize("price", [0.0, -100.0])
def test_a_zero_or_negative_typed_price_is_refused_on_the_catalog_page(price):
    at = AppTest.from_string(TYPED_PRICE_SCRIPT.format(root=str(ROOT), entry="rtx-5090",
                                                       price=price), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception
    assert at.session_state["price_overlay"] == {}  # not applied
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "GPU rtx-5090" in errors[0] and "refused" in errors[0]
    assert "more than 0 USD" in errors[0]


def test_a_typed_price_is_a_quote_entered_today_in_plan_quote_and_export(tmp_path):
    """Issue 32: a price typed on the Catalog page is "quote, entered <day>" in the plan's
    bill (plan JSON), the assumptions, the quote (HTML and XLSX) and prices.csv - not the
    catalog's "msrp, 2026-04", and never a stale-price warning."""
    import datetime as dt

    from openpyxl import load_workbook

    from dashboards.views.catalog import prices_csv
    from solver.analysis.explain import solve_rfq
    from solver.catalog.load import load_catalog
    from solver.report.quote import write_quote

    at = AppTest.from_string(TYPED_PRICE_SCRIPT.format(root=str(ROOT), entry="rtx-pro-6000",
                                                       price=7000.0), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception and not at.error
    assert at.session_state["price_overlay"] == {"rtx-pro-6000": 7000.0}
    today = dt.date.today().isoformat()
    assert at.session_state["price_overlay_days"] == {"rtx-pro-6000": today}

    at = page("plan")  # the default example buys RTX PRO 6000 boxes
    load_example(at, "chat-70b-one-node")
    at.session_state["price_overlay"] = {"rtx-pro-6000": 7000.0}
    at.run()
    assert not at.exception
    assert "stale price: GPU rtx-pro-6000" not in texts(at)
    bom = next(t.value for t in at.table if "SKU" in t.value.columns)
    basis = dict(zip(bom["SKU"], bom["price basis"], strict=True))
    assert basis["rtx-pro-6000"] == f"quote, entered {today}"  # the Plan page's bill
    assert not [v for v in basis.values() if v.split(" ")[0] in ("msrp", "street", "quote")]

    from dashboards import state as dash_state

    cat, rfq = dash_state.scenario(json.dumps(load_example_data("chat-70b-one-node")), None,
                                   (("rtx-pro-6000", 7000.0, today),))
    plan = solve_rfq(rfq, cat)
    line = next(b for b in plan.to_json()["bill_of_materials"]["lines"]
                if b["sku"] == "rtx-pro-6000")
    assert (line["unit_price_usd"], line["price_type"], line["as_of"]) == (7000.0, "quote",
                                                                          today)
    assert line["source"].startswith(f"entered {today}")
    assert not [w for w in plan.warnings if "stale price: GPU rtx-pro-6000" in w]
    html, xlsx = tmp_path / "q.html", tmp_path / "q.xlsx"
    write_quote(html, plan, rfq, cat, [])
    write_quote(xlsx, plan, rfq, cat, [])
    text = html.read_text()
    assert f"quote, entered {today}" in text
    row = next(r for r in load_workbook(xlsx)["Bill of materials"].iter_rows(values_only=True)
               if r[0] == "rtx-pro-6000")
    assert row[3] == 7000.0 and f"entered {today}" in " ".join(str(c) for c in row)
    assert "msrp" not in " ".join(str(c) for c in row).lower()
    exported = prices_csv(load_catalog(), {"rtx-pro-6000": 7000.0}, {"rtx-pro-6000": today})
    assert exported.splitlines()[1] == (f"rtx-pro-6000,7000,{today},entered {today} on the "
                                        "dashboard's Catalog page")


def load_example_data(name: str) -> dict:
    from solver.catalog.load import load_catalog
    from solver.rfq.schema import load_rfq

    rfq = load_rfq(SCENARIOS / f"{name}.yaml", load_catalog())
    return rfq.model_dump(mode="json", exclude_none=True)


RAW = ("None", "NoneType", "['", "0 types", "Buy:** \n", ", fabric none", "- · none",
       "chat:tpot_ms", "nan")


def _raw_states(at: AppTest) -> list[str]:
    """Raw or empty states a page must say in words (issue 32)."""
    text = texts(at) + "\n" + "\n".join(f"{m.label} {m.value}" for m in at.metric)
    found = [raw for raw in RAW if raw in text]
    for frame in [d.value for d in at.dataframe] + [t.value for t in at.table]:
        cells = [str(c) for c in frame.to_numpy().ravel().tolist()]
        found += [c for c in cells if c in ("None", "nan", "NaN", "<NA>")
                  or c.startswith("['") or c == "[]"]
    return found


def test_an_all_rented_plan_says_nothing_is_bought_in_words():
    at = page("plan")
    load_example(at, "rent-oneoff-jobs")
    at.run()
    assert not at.exception
    assert [m.label for m in at.metric] == ["TCO", "Rental", "Capex"]
    tiles = {m.label: m.value for m in at.metric}
    assert tiles["TCO"] == tiles["Rental"] and tiles["Capex"] == "$0"
    assert "**Nothing is bought:** every workload runs on rented instances" in texts(at)
    assert not any("Cluster" in c.proto.spec and "0 nodes" in c.proto.spec for c in charts(at))
    assert _raw_states(at) == []


@pytest.mark.parametrize("example", ["chat-70b-one-node", "hybrid-service-and-job",
                                     "portfolio-lab"])
def test_plan_pages_show_no_raw_states(example):
    at = page("plan")
    load_example(at, example)
    at.run()
    assert not at.exception
    assert _raw_states(at) == []
    layouts = at.dataframe[0].value
    assert list(layouts.columns[:5]) == ["workload", "GPU", "TP × PP × DP", "GPUs",
                                         "nodes per replica/job"]  # key columns first


def test_frontier_labels_rented_points_and_keeps_bought_ones_filled(monkeypatch):
    """Issue 32: six points of one cluster whose TCO rose were unlabelled rentals; a rented
    point is an open marker labelled 'rented', in its own legend entry."""
    import dashboards.figures as figures

    result = _frontier(((100_000.0, 40.0), (150_000.0, 30.0), (200_000.0, 20.0)))
    rented_at = {1: "rented", 2: "bought + rented"}
    monkeypatch.setattr(figures, "point_sourcing", lambda point, _result: rented_at.get(
        result["points"].index(point), "bought"))
    fig = figures.frontier_figure(result, 0)
    markers = [t for t in fig.data if t.customdata is not None]
    by_point = {i: t for t in markers for i in t.customdata}
    assert set(by_point) == {0, 1, 2}
    assert by_point[0].text is None and not by_point[0].marker.symbol.endswith("-open")
    for index, words in rented_at.items():
        trace = by_point[index]
        assert list(trace.text) == [words] and trace.marker.symbol.endswith("-open")
        assert trace.name.endswith(f"· {words}") and trace.mode == "markers+text"
    assert all(t.hovertext for t in markers)


def test_point_sourcing_of_real_plans():
    from dashboards.figures import point_sourcing
    from solver.analysis.explain import solve_rfq
    from solver.catalog.load import load_catalog
    from solver.rfq.schema import load_rfq

    cat = load_catalog()
    for name, workload, expected in (("rent-oneoff-jobs", "tune", "rented"),
                                     ("chat-70b-one-node", "chat", "bought")):
        plan = solve_rfq(load_rfq(SCENARIOS / f"{name}.yaml", cat), cat, explain=False)
        assert point_sourcing({"plan": plan}, {"workload": workload}) == expected


def test_pareto_comparison_cards_list_layouts_as_lines_not_squeezed_tables():
    at = page("pareto")
    load_example(at, "chat-70b-one-node")
    at.run()
    assert not at.exception
    assert not at.table  # no side-by-side tables (one character per line at 1024 px)
    cards = [m.value for m in at.markdown if m.value.startswith("- **chat")]
    assert len(cards) >= 2 and all("TP × PP × DP" in c and "rtx-pro-6000" in c for c in cards)
    assert _raw_states(at) == []


def test_pareto_metric_choices_are_in_words_not_keys():
    at = page("pareto")
    load_example(at, "chat-70b-one-node")
    at.run()
    assert not at.exception
    options = at.selectbox(key="pareto_metric").options
    assert "chat: time per output token (ms)" in options
    assert not [o for o in options if "_" in o or "tpot" in o]  # no chat:tpot_ms
    at.selectbox(key="pareto_metric").select("chat:ttft_ms").run()
    assert not at.exception
    assert "chat:ttft_ms" not in texts(at)


def test_catalog_tables_key_columns_first_and_no_raw_cells():
    from dashboards.views.catalog import PROVENANCE

    at = page("catalog").run()
    assert not at.exception
    frames = [d.value for d in at.dataframe]
    assert len(frames) >= 6
    for frame in frames[1:5]:  # servers, fabrics, models, vendors
        assert list(frame.columns[:2]) == ["id", "name"]
        assert frame.columns[-1] in PROVENANCE  # where a figure was read: last
        assert "architecture" not in frame.columns and "config" not in frame.columns
    assert _raw_states(at) == []


def test_pareto_names_the_plan_pages_plan_when_it_ties_on_cost() -> None:
    """Two optima of the MIP: the frontier's cheapest point and the Plan page's plan cost the
    same but are laid out differently. The Pareto page says so (issue 32), and stays silent
    when the plans are the same or the costs differ."""
    from dashboards.views.pareto import plan_page_note
    from solver.analysis.explain import solve_rfq
    from solver.catalog.load import load_catalog
    from solver.rfq.schema import load_rfq

    cat = load_catalog()
    rfq = load_rfq(SCENARIOS / "chat-70b-one-node.yaml", cat)
    plan = solve_rfq(rfq, cat, explain=False)
    work = plan.workloads[0]
    # the same GPUs laid out otherwise: TP and PP swapped, or (where they are equal) twice
    # the pipeline stages and half the replicas
    change = ({"tp": work.pp, "pp": work.tp} if work.tp != work.pp
              else {"pp": work.pp * 2, "dp": work.dp // 2})
    other = plan.model_copy(update={"workloads": [work.model_copy(update={
        **change, "layouts": None})]})
    moved = other.workloads[0]
    assert moved.tp * moved.pp * moved.dp == work.tp * work.pp * work.dp
    assert (moved.tp, moved.pp, moved.dp) != (work.tp, work.pp, work.dp)
    assert plan_page_note(plan, plan, "tco_usd", "tpot_ms") is None
    note = plan_page_note(other, plan, "tco_usd", "tpot_ms")
    assert note is not None
    assert f"${plan.cost.tco_usd:,.0f} TCO" in note
    assert f"{work.tp} × {work.pp} × {work.dp}" in note  # the Plan page's layout, named
    assert "time per output token" in note
    dearer = plan.model_copy(update={"cost": plan.cost.model_copy(update={
        "tco_usd": plan.cost.tco_usd + 1.0})})
    assert plan_page_note(other, dearer, "tco_usd", "tpot_ms") is None
    assert plan_page_note(other, None, "tco_usd", "tpot_ms") is None


def test_pareto_hover_lists_each_layout_with_its_own_gpus() -> None:
    """A workload on two layouts (chat-n-plus-1: TP4 replicas on an 8-GPU and a 4-GPU box)
    reads as both layouts with their own GPU counts, which add up to the workload's GPUs -
    not the first layout's DP on the workload's whole GPU count ("DP8 on 13×", issue 32)."""
    import re

    from dashboards.figures import hover_layout
    from solver.analysis.explain import solve_rfq
    from solver.catalog.load import load_catalog
    from solver.rfq.schema import load_rfq

    cat = load_catalog()
    plan = solve_rfq(load_rfq(SCENARIOS / "chat-n-plus-1.yaml", cat), cat, explain=False)
    work = plan.workloads[0]
    assert work.layouts is not None and len(work.layouts) >= 2
    text = hover_layout(work)
    parts = text.split(" + ")
    assert len(parts) == len(work.layouts)
    counts = [int(re.search(r" on (\d+)× ", part).group(1)) for part in parts]
    assert sum(counts) == work.gpus
    for part, use in zip(parts, work.layouts, strict=True):
        assert f"TP{use.tp}×PP{use.pp}×DP{use.replicas} " in part
    single = work.model_copy(update={"layouts": None})
    assert hover_layout(single) == (f"{work.precision} TP{work.tp}×PP{work.pp}×DP{work.dp} "
                                    f"on {work.gpus}× {work.gpu}")
