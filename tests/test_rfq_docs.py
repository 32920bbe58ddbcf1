"""docs/rfq.md documents the RFQ format (issue 12 item 5): every schema field, valid examples."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from in_process import procure

from solver.cli.schema import rfq_schema
from solver.rfq.schema import validate_rfq

DOC = Path(__file__).resolve().parent.parent / "docs" / "rfq.md"


def _fields(schema: dict) -> set[str]:
    names: set[str] = set(schema.get("properties", {}))
    for definition in schema.get("$defs", {}).values():
        names.update(definition.get("properties", {}))
    return names


def test_every_schema_field_is_documented():
    text = DOC.read_text()
    missing = sorted(f for f in _fields(rfq_schema()) if f"`{f}`" not in text)
    assert not missing, f"docs/rfq.md does not document: {missing}"


def test_every_kind_has_a_valid_example(catalog):
    text = DOC.read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    kinds: set[str] = set()
    for block in blocks:
        rfq = validate_rfq(yaml.safe_load(block), catalog, source="docs/rfq.md")
        kinds.update(w.kind for w in rfq.workloads)
    assert kinds == {"inference", "batch_inference", "lora", "qlora", "full_finetune",
                     "pretrain"}
    for field in ("max_gpus", "max_rack_units", "fabrics"):
        assert any(field in block for block in blocks)


def test_schema_command_prints_the_json_schema():
    result = procure("schema")
    assert result.returncode == 0
    schema = json.loads(result.stdout)
    assert {"id", "workloads", "constraints"} <= set(schema["properties"])
    assert "workloads" in schema["required"]


def _doc_default(section: str, field: str) -> str:
    """The default column of ``field``'s row in the table under ``## section``."""
    text = DOC.read_text()
    part = text[text.index(f"## {section}\n"):]
    part = part[:part.index("\n## ", 1)] if "\n## " in part[1:] else part
    for line in part.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) >= 3 and cells[0] == f"`{field}`":
            return cells[2]
    raise AssertionError(f"no row for {field} under {section}")


def test_issue_28_new_fields_are_documented_with_the_schema_defaults():
    """The defaults docs/rfq.md gives for deadline_headroom and facility.* are the ones
    `procure schema` prints (issue 28)."""
    schema = rfq_schema()
    assert _doc_default("Top level", "deadline_headroom") == \
        f"`{schema['properties']['deadline_headroom']['default']}`"
    facility = schema["$defs"]["Facility"]["properties"]
    for field in ("cooling", "continuous_load_factor"):
        assert _doc_default("`facility`", field) == f"`{facility[field]['default']}`", field
    for field in ("max_kw_per_rack", "racks"):
        assert facility[field]["default"] is None
        assert _doc_default("`facility`", field) == "none"
