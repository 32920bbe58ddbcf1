"""Models named by a config.json path, an inline architecture block, a catalog overlay's model
folder, or a Hugging Face name (case-insensitive alias)."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from solver.catalog.data import model_from_file
from solver.catalog.load import load_catalog
from solver.common.errors import InputError
from solver.physics.geometry import geometry
from solver.rfq.schema import load_rfq, validate_rfq

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "catalog" / "models"
SERVING = ROOT / "bench" / "data" / "serving_latency.csv"

NEW_IDS = ["gpt-oss-120b", "gpt-oss-20b", "qwen3-8b", "qwen3-32b", "qwen3-30b-a3b",
           "qwen3-235b-a22b", "deepseek-r1", "kimi-k2.5", "glm-5", "minimax-m2.5",
           "llama-4-scout"]


def procure(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "solver.cli.main", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def test_new_catalog_ids_and_hf_names(catalog):
    for model_id in NEW_IDS:
        assert catalog.has_model(model_id), model_id
    assert catalog.model("deepseek-r1").id == "deepseek-v3"
    assert catalog.model("MiniMaxAI/MiniMax-M2.5").id == "minimax-m2.5"
    assert catalog.model("qwen/qwen3-235b-a22b-fp8").id == "qwen3-235b-a22b"
    assert catalog.model("OPENAI/GPT-OSS-120B").id == "gpt-oss-120b"
    with pytest.raises(KeyError):
        catalog.model("openai/gpt-oss-121b")


def test_every_serving_measurement_model_resolves(catalog):
    with SERVING.open() as handle:
        names = {row["model_hf"] for row in csv.DictReader(handle)}
    missing = sorted(n for n in names if not catalog.has_model(n))
    assert not missing


def test_catalog_model_equals_its_config_file(catalog):
    from_file = model_from_file(MODELS / "openai--gpt-oss-120b.config.json")
    assert from_file.architecture == catalog.model("gpt-oss-120b").architecture
    assert geometry(from_file).params == geometry(catalog.model("gpt-oss-120b")).params


def test_config_entry_refuses_hand_copied_fields(tmp_path):
    (tmp_path / "models.yaml").write_text(yaml.safe_dump([{
        "id": "mine", "name": "Mine", "config": str(MODELS / "Qwen--Qwen3-8B.config.json"),
        "params_b": 9.0, "source": "test", "as_of": "2026-12"}]))
    with pytest.raises(InputError) as info:
        load_catalog(str(tmp_path))
    assert "params_b" in str(info.value)


def test_overlay_model_folder(tmp_path):
    folder = tmp_path / "models" / "acme-70b"
    folder.mkdir(parents=True)
    shutil.copy(MODELS / "meta-llama--Meta-Llama-3.1-70B.config.json", folder / "config.json")
    shutil.copy(MODELS / "Qwen--Qwen3-8B.config.json", tmp_path / "models" / "tiny.config.json")
    catalog = load_catalog(str(tmp_path))
    assert catalog.model("acme-70b").params_b == catalog.model("llama-3.1-70b").params_b
    assert catalog.model("tiny").layers == 36
    assert "catalog overlay" in catalog.model("acme-70b").source


def test_rfq_config_path_relative_to_the_file(tmp_path, catalog):
    (tmp_path / "cfg").mkdir()
    shutil.copy(MODELS / "Qwen--Qwen3-30B-A3B.config.json", tmp_path / "cfg" / "mine.json")
    rfq = {"id": "x", "workloads": [{"name": "a", "kind": "inference", "model": "cfg/mine.json",
                                     "input_tokens": 100, "output_tokens": 10,
                                     "concurrency": 4}]}
    path = tmp_path / "rfq.yaml"
    path.write_text(yaml.safe_dump(rfq))
    loaded = load_rfq(path, catalog)
    model = loaded.workloads[0].model
    assert model == str((tmp_path / "cfg" / "mine.json").resolve())
    assert loaded.catalog(catalog).model(model).experts == 128
    assert not catalog.has_model(model)  # the file's model lives in the RFQ's catalog only
    # a context longer than the config's window is refused like a catalog model's
    rfq["workloads"][0]["input_tokens"] = 50_000
    path.write_text(yaml.safe_dump(rfq))
    with pytest.raises(InputError) as info:
        load_rfq(path, catalog)
    assert "40960" in str(info.value)


def test_rfq_bad_config_names_file_and_field(tmp_path, catalog):
    data = json.loads((MODELS / "Qwen--Qwen3-8B.config.json").read_text())
    del data["vocab_size"]
    (tmp_path / "bad.json").write_text(json.dumps(data))
    rfq = {"id": "x", "workloads": [{"name": "a", "kind": "inference", "model": "bad.json",
                                     "input_tokens": 100, "output_tokens": 10,
                                     "concurrency": 4}]}
    path = tmp_path / "rfq.yaml"
    path.write_text(yaml.safe_dump(rfq))
    with pytest.raises(InputError) as info:
        load_rfq(path, catalog)
    problem = info.value.problems[0]
    assert problem.field == "workloads[0].model"
    assert "vocab_size" in problem.reason and "bad.json" in problem.reason


def test_inline_architecture(catalog):
    arch = json.loads((MODELS / "mistralai--Mixtral-8x7B-v0.1.config.json").read_text())
    rfq = validate_rfq({"id": "x", "workloads": [{
        "name": "a", "kind": "inference", "model": "Acme-MoE", "architecture": arch,
        "input_tokens": 100, "output_tokens": 10, "concurrency": 4}]}, catalog)
    assert not catalog.has_model("acme-moe")  # the shared catalog is left as it was
    model = rfq.catalog(catalog).model(rfq.workloads[0].model)
    assert model.id == "acme-moe"
    assert model.params_b == pytest.approx(catalog.model("mixtral-8x7b").params_b)
    # survives pickling into a worker process: the model travels with the RFQ
    import pickle

    again = pickle.loads(pickle.dumps(rfq))
    assert again.catalog(catalog).model("acme-moe") == model
    bad = dict(arch, num_local_experts=None)
    with pytest.raises(InputError) as info:
        validate_rfq({"id": "x", "workloads": [{
            "name": "a", "kind": "inference", "model": "m", "architecture": bad,
            "input_tokens": 100, "output_tokens": 10, "concurrency": 4}]}, catalog)
    assert "num_experts" in str(info.value)


def test_estimate_from_a_config_file_on_the_command_line(tmp_path):
    shutil.copy(MODELS / "openai--gpt-oss-120b.config.json", tmp_path / "oss.json")
    result = procure("estimate", "--model", "oss.json", "--gpu", "h100-sxm", "--gpus", "8",
                     "--kind", "inference", "--concurrency", "16", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["model"] == str((tmp_path / "oss.json").resolve())
    # H100 has no FP4 tensor cores: the MXFP4 checkpoint runs weight-only (int4), said so
    assert data["precision"] == "int4"
    assert any("checkpoint" in note for note in data["notes"])
    assert data["fits"]
    # 116.8B params: 4-bit body + bf16 embeddings, split over the layout's TP x PP GPUs
    # (the model card's 60.8 GiB = 65.3 GB)
    shards = data["tp"] * data["pp"]
    assert 60 < data["memory"]["weights_gb"] * shards < 70
    # B200 has FP4: the checkpoint's own precision
    result = procure("fit", "--model", "openai/gpt-oss-120b", "--gpu", "b200-sxm", "--gpus",
                     "1", "--json")
    assert json.loads(result.stdout)["precision"] == "fp4"


def test_bad_config_on_the_command_line_exits_2(tmp_path):
    (tmp_path / "x.json").write_text('{"architectures": ["FalconForCausalLM"]}')
    result = procure("estimate", "--model", str(tmp_path / "x.json"), "--gpu", "h100-sxm",
                     "--gpus", "1", "--kind", "inference")
    assert result.returncode == 2
    assert "architectures" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr
    result = procure("fit", "--model", str(tmp_path / "missing.json"), "--gpu", "h100-sxm",
                     "--gpus", "1")
    assert result.returncode == 2 and "not found" in result.stderr + result.stdout


def test_catalog_list_shows_new_models_with_sources():
    result = subprocess.run([sys.executable, "-m", "solver.cli.main", "catalog", "list"],
                            capture_output=True, text=True, cwd=ROOT, timeout=300,
                            env={"COLUMNS": "400", "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    for model_id in NEW_IDS:
        if model_id != "deepseek-r1":  # an alias of deepseek-v3
            assert model_id in result.stdout
    assert "huggingface.co/openai/gpt-oss-120b config.json" in result.stdout
    assert "deepseek-r1" in result.stdout
