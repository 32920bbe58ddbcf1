"""Issue 32: every default docs/rfq.md states is the default `procure schema` prints, and the
other docs' "`key: value` (default)" phrases agree with it (docs said `rental: allow`, the
solver and the schema `forbid`)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from in_process import procure

DOCS = Path(__file__).resolve().parent.parent / "docs"

# the heading of a docs/rfq.md section -> the schema definition its table documents
SECTIONS = {
    "## Top level": None,
    "## `constraints`": "Constraints",
    "## `facility`": "Facility",
    "### `kind: inference`": "InferenceWorkload",
    "### `kind: batch_inference`": "BatchInferenceWorkload",
    "### `kind: lora`": "TrainingWorkload",
    "### Demand over time": "InferenceWorkload",
    "### Busy and quiet hours": "InferenceWorkload",
    "### Recurring jobs": "BatchInferenceWorkload",  # TrainingWorkload has the same fields
    "### The best plan within a budget": None,
}
MISSING = object()


@pytest.fixture(scope="module")
def schema() -> dict:
    result = procure("schema")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _rows() -> list[tuple[str | None, str, str]]:
    """(schema definition, field, default cell) of every field row of docs/rfq.md's tables."""
    rows: list[tuple[str | None, str, str]] = []
    section: str | None = "?"
    for line in (DOCS / "rfq.md").read_text().splitlines():
        if line.startswith("#"):
            section = next((d for h, d in SECTIONS.items() if line.startswith(h)), "?")
            continue
        cells = [c.strip() for c in line.replace("\\|", "/").strip().strip("|").split("|")]
        if not line.startswith("| `") or len(cells) < 4:
            continue
        for field in re.findall(r"`([a-z_]+)`", cells[0]):
            rows.append((section, field, cells[2]))
    return rows


def _literal(cell: str) -> Any:
    """The value a default cell states: a backticked token or a bare number/bool leading the
    cell; MISSING for a description ("all the vendor builds")."""
    match = re.match(r"`([^`]+)`", cell)
    if match:
        return match.group(1)
    match = re.match(r"(-?\d+(?:\.\d+)?|true|false)\b", cell)
    if match:
        return json.loads(match.group(1))
    return MISSING


def _definition(schema: dict, name: str | None) -> dict:
    return schema if name is None else schema["$defs"][name]


def test_the_tables_cover_every_section_and_every_set_default(schema):
    rows = _rows()
    text = (DOCS / "rfq.md").read_text()
    assert all(section != "?" for section, _, _ in rows), "a table under an unknown heading"
    documented = {(section, field) for section, field, _ in rows}
    for name in [None, *schema["$defs"]]:
        definition = _definition(schema, name)
        for field, spec in definition.get("properties", {}).items():
            if spec.get("default") not in (None, {}) and not isinstance(spec.get("default"),
                                                                        dict):
                default = spec["default"]
                shown = f"{default:g}" if isinstance(default, int | float) else str(default)
                prose = re.search(rf"`{field}` \([^)]{{0,120}}default {re.escape(shown)}\b",
                                  text)  # a field of every workload, described in prose
                assert (name, field) in documented or prose, \
                    f"{name}.{field}: default {default!r} documented nowhere"


def test_every_documented_default_is_the_schemas(schema):
    wrong: list[str] = []
    for section, field, cell in _rows():
        definition = _definition(schema, section)
        spec = definition["properties"].get(field)
        assert spec is not None, f"docs/rfq.md documents {section}.{field}, unknown to schema"
        required = field in definition.get("required", [])
        default = spec.get("default", MISSING)
        stated = _literal(cell)
        if cell == "required":
            ok = required
        elif required:
            ok = False
        elif cell == "none":
            ok = default is None
        elif stated is MISSING:  # a description: resolved at solve time, or a sub-mapping
            ok = default is None or isinstance(default, dict)
        elif default is None and stated in definition["properties"]:  # another field's value
            ok = True
        elif default is None:  # resolved later: the schema's description names it
            ok = f"default '{stated}'" in spec.get("description", "")
        else:
            ok = stated == default or str(stated) == str(default)
        if not ok:
            wrong.append(f"{section or 'top'}.{field}: docs say {cell!r}, schema "
                         f"{'required' if required else default!r}")
    assert not wrong, "\n".join(wrong)


def test_default_phrases_in_every_doc_match_the_schema(schema):
    """`rental: forbid` (default) and "the default `rental: forbid`" in any docs/ page or the
    README agree with the schema's top-level defaults."""
    texts = {p.name: p.read_text() for p in [*DOCS.glob("*.md"), DOCS.parent / "README.md"]}
    top = schema["properties"]
    checked = 0
    for name, text in texts.items():
        for key, value in re.findall(r"`([a-z_]+): ([a-z0-9.+]+)` \(default\)", text) + \
                re.findall(r"the default `([a-z_]+): ([a-z0-9.+]+)`", text):
            if key in top:
                checked += 1
                assert str(top[key].get("default")) == value, f"{name}: {key}: {value}"
    assert checked >= 2  # rental.md states the rental default twice


def test_the_rental_default_is_forbid_everywhere(schema):
    """The case of the issue: one RFQ cost $41,322 under the documented default and $123,484
    under the real one."""
    from solver.rfq.schema import Rfq

    assert schema["properties"]["rental"]["default"] == "forbid"
    assert Rfq.model_validate({"id": "x", "workloads": [
        {"name": "a", "kind": "lora", "model": "llama-3.1-8b", "dataset_tokens": 1000,
         "deadline_hours": 1}]}).rental == "forbid"


def test_every_command_takes_catalog():
    """The README's "Every command takes `--catalog DIR`" (issue 32: `procure schema
    --catalog` was refused)."""
    import typer.main

    from solver.cli.main import app

    group = typer.main.get_command(app)

    def leaves(command: Any, path: str) -> list[tuple[str, Any]]:
        subs = getattr(command, "commands", None)
        if not subs:
            return [(path, command)]
        return [leaf for name, sub in subs.items() for leaf in leaves(sub, f"{path} {name}")]

    without = [path for path, command in leaves(group, "procure")
               if not any("--catalog" in p.opts for p in command.params)]
    assert not without, without
    assert "Every command takes `--catalog" in (DOCS.parent / "README.md").read_text()


def test_schema_reads_the_catalog_given(tmp_path):
    """`procure schema --catalog` reads that catalog (an overlay is fine, a missing one exit 2)."""
    (tmp_path / "prices.csv").write_text("id,price_usd,as_of,source\n")
    ok = procure("schema", "--catalog", str(tmp_path))
    assert ok.returncode == 0, ok.stderr
    assert "engine" in json.loads(ok.stdout)["$defs"]["InferenceWorkload"]["properties"]
    bad = procure("schema", "--catalog", str(tmp_path / "missing"))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
