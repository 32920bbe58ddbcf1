"""Issue 30: models an RFQ defines itself are part of the catalog's content, so two different
models of the same name solved in one process each get the plan a fresh process gives."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from solver.analysis.explain import solve_rfq
from solver.catalog.data import content_key
from solver.rfq.schema import validate_rfq

REPO_ROOT = Path(__file__).resolve().parents[1]
LLAMA_8B = REPO_ROOT / "catalog" / "models" / "meta-llama--Meta-Llama-3.1-8B.config.json"


def acme(layers: int) -> dict:
    """An RFQ serving an inline architecture named ``acme`` with ``layers`` layers."""
    arch = dict(json.loads(LLAMA_8B.read_text()), num_hidden_layers=layers)
    return {"id": f"acme-{layers}", "workloads": [{
        "name": "chat", "kind": "inference", "model": "acme", "architecture": arch,
        "precision": "bf16", "concurrency": 16, "input_tokens": 2000, "output_tokens": 200,
        "ttft_ms": 2000, "tpot_ms": 50}]}


def headline(plan: dict) -> tuple:
    work = plan["workloads"][0]
    return (work["memory"]["weights_gb"], work["gpus"], work["gpu"], plan["cost"]["tco_usd"])


COLD_SCRIPT = """
import json, sys
from solver.analysis.explain import solve_rfq
from solver.catalog.load import load_catalog
from solver.rfq.schema import validate_rfq
catalog = load_catalog()
plan = solve_rfq(validate_rfq(json.loads(sys.argv[1]), catalog), catalog, explain=False).to_json()
work = plan["workloads"][0]
print(json.dumps([work["memory"]["weights_gb"], work["gpus"], work["gpu"],
                  plan["cost"]["tco_usd"]]))
"""


@pytest.fixture(scope="module")
def cold() -> dict[int, tuple]:
    """Each RFQ's plan solved in a fresh process (nothing memoised before it)."""
    out = {}
    for layers in (16, 128):
        done = subprocess.run([sys.executable, "-c", COLD_SCRIPT, json.dumps(acme(layers))],
                              capture_output=True, text=True, check=True, cwd=REPO_ROOT)
        out[layers] = tuple(json.loads(done.stdout))
    return out


@pytest.mark.parametrize("order", [(16, 128), (128, 16)])
def test_same_name_models_get_their_own_plans(catalog, cold, order):
    """Issue 30: the second RFQ got the first one's plan (the registry and caches keyed by
    the model's name); now each solve matches its cold plan, in both orders."""
    assert cold[16] != cold[128]  # the two models really differ (weights, GPUs, cost)
    for layers in order:
        rfq = validate_rfq(acme(layers), catalog)
        assert headline(solve_rfq(rfq, catalog, explain=False).to_json()) == cold[layers]


def test_rfq_models_change_the_catalog_content(catalog):
    small, big = (validate_rfq(acme(n), catalog) for n in (16, 128))
    keys = {content_key(catalog), content_key(small.catalog(catalog)),
            content_key(big.catalog(catalog))}
    assert len(keys) == 3
    assert small.catalog(catalog).model("acme").layers == 16
    assert big.catalog(catalog).model("acme").layers == 128
    assert small.catalog(catalog) is small.catalog(catalog)  # found again, not rebuilt
    assert not catalog.has_model("acme")


def test_one_name_for_two_architectures_in_one_rfq_is_refused(catalog):
    from solver.common.errors import InputError

    data = acme(16)
    other = dict(data["workloads"][0], name="chat-2",
                 architecture=acme(128)["workloads"][0]["architecture"])
    data["workloads"].append(other)
    with pytest.raises(InputError) as info:
        validate_rfq(data, catalog)
    assert "two different architectures" in str(info.value)


def test_catalog_memo_reads_a_changed_file(tmp_path):
    """The loaded-catalog memo is keyed by the files' content: an overlay edited on disk is
    read again (it was keyed by the folder's name)."""
    from solver.catalog.load import load_catalog

    (tmp_path / "prices.csv").write_text("id,price_usd\nl4,1234\n")
    assert load_catalog(str(tmp_path)).gpus["l4"].price_usd == 1234
    (tmp_path / "prices.csv").write_text("id,price_usd\nl4,4321\n")
    assert load_catalog(str(tmp_path)).gpus["l4"].price_usd == 4321
    assert load_catalog(str(tmp_path)) is load_catalog(str(tmp_path))


# --- one source of serving engines: catalog/efficiency.yaml serving.engines ----------------

def _overlay_with_engine(tmp_path):
    """An overlay catalog whose efficiency.yaml adds engine ``acme-serve`` (vLLM's factors)."""
    import yaml

    serving = yaml.safe_load((REPO_ROOT / "catalog" / "efficiency.yaml").read_text())["serving"]
    serving["engines"]["acme-serve"] = dict(serving["engines"]["vllm"], label="test engine")
    (tmp_path / "efficiency.yaml").write_text(yaml.safe_dump({"serving": serving}))
    return str(tmp_path)


def test_an_engine_added_to_the_catalog_is_valid_in_rfqs_and_estimate(tmp_path):
    """Issue 30: engines were hard-coded in rfq/schema.py and cli/physics.py; an engine is
    a factor set, so a catalog that adds one makes it valid everywhere."""
    from solver.catalog.load import load_catalog
    from solver.common.errors import InputError
    from solver.rfq.schema import serving_engines

    data = acme(16)
    data["workloads"][0]["engine"] = "acme-serve"
    builtin = load_catalog()
    with pytest.raises(InputError) as info:
        validate_rfq(data, builtin)
    assert "acme-serve" in str(info.value) and "vllm" in str(info.value)
    overlay = load_catalog(_overlay_with_engine(tmp_path))
    assert validate_rfq(data, overlay).workloads[0].engine == "acme-serve"
    # no engine named: the catalog's default; a calibration-only set is not offered
    assert validate_rfq(acme(16), builtin).workloads[0].engine == serving_engines(builtin)[0]
    assert "roofline" not in serving_engines(builtin)[1]
    cli = [sys.executable, "-m", "solver.cli.main", "estimate", "--model", "llama-3.1-8b",
           "--gpu", "l4", "--gpus", "1", "--kind", "inference", "--engine", "acme-serve",
           "--json"]
    refused = subprocess.run(cli, capture_output=True, text=True, cwd=REPO_ROOT)
    assert refused.returncode == 2 and "--engine" in refused.stderr
    accepted = subprocess.run(cli + ["--catalog", str(tmp_path)], capture_output=True,
                              text=True, cwd=REPO_ROOT)
    assert accepted.returncode == 0, accepted.stderr
