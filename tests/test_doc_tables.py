"""Every markdown table in the repository's docs has as many cells in each row as in its
header: a row with more (a ``|`` inside a cell, or figures split over cells the header does
not name) renders shifted under the wrong headings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md", ROOT / "CHANGELOG.md",
               *ROOT.glob("catalog/*.md"), *ROOT.glob("bench/**/*.md")])
RULE = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")


def cells(line: str) -> int:
    """Cells of a table row (an escaped ``\\|`` or one inside backticks is text)."""
    text = re.sub(r"`[^`]*`", "", line.replace("\\|", ""))
    return text.strip().strip("|").count("|") + 1


def bad_rows(text: str) -> list[tuple[int, str]]:
    lines = text.split("\n")
    bad = []
    for i in range(len(lines) - 1):
        if lines[i].startswith("|") and RULE.match(lines[i + 1]):
            width = cells(lines[i + 1])
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                if cells(lines[j]) != width:
                    bad.append((j + 1, lines[j][:80]))
                j += 1
    return bad


def test_the_checker_finds_a_shifted_row() -> None:
    table = "| a | b |\n|---|---|\n| 1 | 2 |\n| 1 | 2 | 3 |\n| `x|y` | 2 |\n"
    assert bad_rows(table) == [(4, "| 1 | 2 | 3 |")]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_table_rows_match_their_header(path: Path) -> None:
    assert bad_rows(path.read_text(encoding="utf-8")) == []


def test_the_calibration_report_tables_have_their_headers_cells() -> None:
    """The serving report's headers name the three cells of each error figure, and its
    target cell carries no ``|`` (docs/calibration.md is generated from them)."""
    from solver.physics.serving_fit import FIT, HELD, _header, _target

    head, rule = _header("vendor", "metric", HELD, FIT, "target")
    assert cells(head) == cells(rule) == 2 + len(HELD) + len(FIT) + 1
    assert "|" not in _target("TTFT")
