"""Uploads cannot reach the server's files (issue 33).

An RFQ uploaded through the dashboard names its models by catalog id, by an inline
``architecture`` or by a config file uploaded with it (in the zip, relative to the RFQ) -
never by an absolute or parent (``..``) path on the server. The refusal is one message,
the same whether or not such a file exists, and no message shows a server path. The
command line keeps its behaviour: a local RFQ may name any config.json, relative to it.
"""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from plans import cost, tiny_plan

from solver.catalog.data import UPLOAD_REFUSED
from solver.common.errors import InputError
from solver.optimize.plan_model import Plan

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "scenarios" / "models" / "acme-support-32b" / "config.json"
RFQ = {"id": "up", "workloads": [{"name": "chat", "kind": "inference", "model": "MODEL",
                                  "concurrency": 4, "input_tokens": 500,
                                  "output_tokens": 100}]}
CSV = ("id,name,kind,model,concurrency,input_tokens,output_tokens\n"
       "up,chat,inference,{model},4,500,100\n")


def rfq_with(model: str) -> bytes:
    data = json.loads(json.dumps(RFQ))
    data["workloads"][0]["model"] = model
    return yaml.safe_dump(data).encode()


@pytest.fixture
def server_file(tmp_path: Path) -> Path:
    """A model config somewhere on the server (a file an upload must not reach)."""
    secret = tmp_path / "server-secret" / "config.json"
    secret.parent.mkdir()
    shutil.copy(CONFIG, secret)
    return secret


def _refusal(found: list[tuple[str, Any]]) -> tuple[str, list[str]]:
    """The one refused RFQ of an upload: its message and its reasons."""
    ((_, result),) = found
    assert isinstance(result, InputError), result
    return str(result), [problem.reason for problem in result.problems]


def hostile_refs(server_file: Path) -> dict[str, str]:
    """Model paths an upload may not name: an existing server file, a missing one, parent
    paths out of the upload, a home path."""
    return {"existing": str(server_file), "missing": str(server_file.parent / "nope.json"),
            "parent": "../server-secret/config.json",
            "deep-parent": "models/../../../server-secret/config.json",
            "home": "~/config.json", "proc": "/proc/self/environ.json"}


@pytest.mark.parametrize("kind", ["yaml", "csv"])
def test_uploaded_rfq_cannot_name_a_server_file(kind: str, server_file: Path,
                                                catalog: Any) -> None:
    """Issue 33: an uploaded RFQ whose model was an absolute path to a .json file made the
    server open and parse it (and echo its values); messages revealed which paths exist."""
    from dashboards.uploads import rfqs_from_upload

    reasons = {}
    for name, ref in hostile_refs(server_file).items():
        if kind == "yaml":
            found = rfqs_from_upload("up.yaml", rfq_with(ref), catalog)
        else:
            found = rfqs_from_upload("up.csv", CSV.format(model=ref).encode(), catalog)
        message, reasons[name] = _refusal(found)
        assert UPLOAD_REFUSED in message, message
        assert str(server_file.parent) not in message, message
        assert "hidden_size" not in message and "looked at" not in message
    # the same words whatever the path, whether the file exists or not: nothing to learn
    assert all(found == reasons["existing"] for found in reasons.values()), reasons


def test_uploaded_rfq_may_use_a_catalog_id_or_an_inline_architecture(catalog: Any) -> None:
    from dashboards.uploads import rfqs_from_upload

    ((_, by_id),) = rfqs_from_upload("up.yaml", rfq_with("llama-3.1-8b"), catalog)
    assert by_id.workloads[0].model == "llama-3.1-8b"
    data = json.loads(json.dumps(RFQ))
    data["workloads"][0]["model"] = "acme-inline"
    data["workloads"][0]["architecture"] = json.loads(CONFIG.read_text())
    ((_, inline),) = rfqs_from_upload("up.json", json.dumps(data).encode(), catalog)
    assert not isinstance(inline, InputError), inline
    assert inline.catalog(catalog).model(inline.workloads[0].model).layers == json.loads(
        CONFIG.read_text())["num_hidden_layers"]


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _fake_solve(rfq: Any, catalog: Any, **_: Any) -> Plan:
    model = rfq.catalog(catalog).model(rfq.workloads[0].model)
    return tiny_plan(rfq=rfq.id, cost=cost(float(model.layers)))


def test_batch_upload_uses_its_own_config_and_no_server_file(server_file: Path,
                                                             tmp_path: Path) -> None:
    """A zip may carry the config.json its RFQ names (relative, inside the zip); a path out
    of the upload is recorded as invalid with the one message, naming no server path."""
    import sqlite3

    from dashboards.uploads import unpack_batch
    from solver.batch.runner import is_model_config, run_batch

    members = {"a/own.yaml": rfq_with("models/m/config.json").replace(b"id: up", b"id: own"),
               "a/models/m/config.json": CONFIG.read_bytes()}
    for name, ref in hostile_refs(server_file).items():
        members[f"b/{name}.yaml"] = rfq_with(ref).replace(b"id: up", f"id: {name}".encode())
    sources = [path for path in unpack_batch([("rfqs.zip", _zip(members))], tmp_path / "in")
               if not is_model_config(path)]  # as the dashboard does: configs are no RFQs
    db = tmp_path / "r.sqlite"
    summary = run_batch(sources, db, workers=1, solve_fn=_fake_solve, confine_models=True)
    assert summary.by_status == {"optimal": 1, "invalid": len(hostile_refs(server_file))}
    with sqlite3.connect(db) as con:
        rows = dict(con.execute("SELECT rfq, COALESCE(error, tco_usd) FROM results"))
    assert rows["own"] == json.loads(CONFIG.read_text())["num_hidden_layers"]
    for name in hostile_refs(server_file):
        assert UPLOAD_REFUSED in rows[name], rows[name]
        assert str(server_file.parent) not in rows[name]


def test_command_line_keeps_config_paths(server_file: Path, tmp_path: Path,
                                         catalog: Any) -> None:
    """The CLI is unchanged: a local RFQ names a config.json relative to itself, or by an
    absolute path."""
    from solver.rfq.schema import load_rfq

    (tmp_path / "models" / "m").mkdir(parents=True)
    shutil.copy(CONFIG, tmp_path / "models" / "m" / "config.json")
    for ref in ("models/m/config.json", str(server_file)):
        path = tmp_path / "r.yaml"
        path.write_bytes(rfq_with(ref))
        rfq = load_rfq(path, catalog)
        assert rfq.catalog(catalog).model(rfq.workloads[0].model).layers == json.loads(
            CONFIG.read_text())["num_hidden_layers"]


def test_dashboard_scenario_upload_is_confined(server_file: Path) -> None:
    pytest.importorskip("streamlit")
    from tests.test_dashboard import page, texts

    at = page("scenario").run()
    before = at.session_state["rfq_data"]
    at.file_uploader(key="scenario_upload").upload(
        "up.yaml", rfq_with(str(server_file)), "application/x-yaml").run()
    assert not at.exception
    shown = texts(at)
    assert "only when it was uploaded together" in shown, shown
    # the path the upload gave may be quoted back; nothing else of the server is shown
    assert str(server_file.parent) not in shown.replace(str(server_file), "<the upload's>")
    assert at.session_state["rfq_data"] == before  # nothing of the server file became active


def test_dashboard_batch_upload_is_confined(server_file: Path) -> None:
    pytest.importorskip("streamlit")
    from tests.test_dashboard import page

    at = page("batch").run()
    at.file_uploader(key="batch_upload").upload(
        "rfqs.zip", _zip({"x.yaml": rfq_with(str(server_file)).replace(b"id: up", b"id: x")}),
        "application/zip").run()
    next(b for b in at.button if b.label == "Run batch").click().run()
    assert not at.exception
    table = at.dataframe[0].value
    assert list(table["status"]) == ["invalid"]
    assert "only when it was uploaded together" in table["error"][0]
    assert str(server_file.parent) not in table["error"][0]
