"""Issue 32: terminal output fits the terminal - piped output at `COLUMNS` (else 100),
warnings and explain's lines wrapped and indented, `catalog list` readable at 80 columns
with every id whole."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from solver.common.console import PIPED_WIDTH, terminal_width, wrap_columns

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"


def _procure(*args: str, columns: str | None = "80") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run([sys.executable, "-m", "solver.cli.main", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=env)


def _too_wide(text: str, width: int) -> list[str]:
    """Lines wider than ``width`` in characters or in UTF-8 bytes (what `awk` counts)."""
    return [line for line in text.splitlines() if len(line.encode("utf-8")) > width]


def test_the_width_is_columns_else_100(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert terminal_width() == 80
    for bad in ("", "abc", "5", "99999"):
        monkeypatch.setenv("COLUMNS", bad)
        assert terminal_width() == PIPED_WIDTH == 100
    monkeypatch.delenv("COLUMNS")
    assert terminal_width() == 100


@given(st.lists(st.text(alphabet="ab×·—$1 ,.", min_size=1, max_size=30), min_size=1,
                max_size=40), st.integers(min_value=40, max_value=120))
def test_wrapping_keeps_every_word_and_the_width(words, width):
    text = " ".join(words)
    lines = wrap_columns(text, width, first="warning: ", indent="  ")
    assert all(len(line.encode("utf-8")) <= width for line in lines)
    assert lines[0].startswith("warning:")
    assert all(line.startswith("  ") for line in lines[1:])
    rejoined = "".join("".join(lines).split()).removeprefix("warning:")
    assert rejoined == "".join(text.split())  # nothing lost, nothing added


@pytest.mark.parametrize("name", ["pretrain-70b-open.yaml", "own-model-from-config.yaml",
                                  "hybrid-service-and-job.yaml", "infeasible-budget.yaml"])
def test_solve_fits_80_columns(name):
    result = _procure("solve", str(SCENARIOS / name))
    assert result.returncode in (0, 3), result.stderr
    # characters: a table row with "≤" may be a few bytes wider (known gap, issue 32)
    assert not [line for line in result.stdout.splitlines() if len(line) > 80]
    assert "…" not in result.stdout  # nothing cut


def test_explain_fits_80_columns_and_piped_output_defaults_to_100():
    result = _procure("explain", str(SCENARIOS / "own-model-from-config.yaml"))
    assert result.returncode == 0, result.stderr
    assert not _too_wide(result.stdout + result.stderr, 80)
    wide = _procure("solve", str(SCENARIOS / "pretrain-70b-open.yaml"), columns=None)
    assert not _too_wide(wide.stdout, 100)
    assert max(len(line) for line in wide.stdout.splitlines()) > 80  # uses the 100


def test_catalog_list_at_80_columns_shows_every_id_whole(catalog):
    result = _procure("catalog", "list")
    assert result.returncode == 0, result.stderr
    assert not _too_wide(result.stdout, 80)
    lines = set(result.stdout.splitlines())
    ids = [*catalog.gpus, *catalog.servers, *catalog.fabrics, *catalog.models]
    missing = [entry for entry in ids if entry not in lines]
    assert not missing, missing


HELP_COMMANDS = ("", "solve", "explain", "quote", "calibrate", "fit", "estimate", "validate",
                 "schema", "pareto", "sensitivity", "batch", "dashboard", "catalog",
                 "catalog list", "catalog show", "catalog validate")


def test_help_texts_are_whole_at_80_columns():
    """No option name, choice list or help word is cut with "…" at 80 columns, no line is
    wider, and the choices of estimate's training knobs are all there (issue 32)."""
    seen = ""
    for command in HELP_COMMANDS:
        result = _procure(*command.split(), "--help")
        assert result.returncode == 0, (command, result.stderr)
        assert "…" not in result.stdout, command
        assert _too_wide(result.stdout, 80) == [], command
        seen += result.stdout
    for whole in ("--sequence-parallel / --no-sequence-parallel", "none|selective|full",
                  "bf16|fp8|int8|int4|fp4", "serving.default_engine", "--context-parallel",
                  "gpu.l4.price_usd=2500", "--browser", "the first bad one.",
                  "demand each budget serves).", "would check."):
        assert whole in " ".join(seen.split()), whole
    summaries = [line for line in seen.splitlines()
                 if line.endswith("...") and not line.startswith("Usage:")]
    assert summaries == []  # click's cut command summaries


@given(st.floats(min_value=1e-4, max_value=1e7), st.floats(min_value=1e-4, max_value=0.2))
def test_a_rounded_break_even_stays_inside_its_bracket(value, width):
    """The flip is known within [below, above]: what is printed lies inside it, with at
    most 6 significant figures (issue 32)."""
    from solver.common.console import readable

    low, high = value * (1 - width), value * (1 + width)
    text = readable(value, low, high)
    shown = float(text.replace(",", ""))
    assert low <= shown <= high
    assert len(text.replace(",", "").replace(".", "").replace("-", "").strip("0")) <= 6


def test_sensitivity_prints_rounded_numbers(capsys):
    from solver.cli.pareto import _print_report
    from solver.common.console import readable

    assert readable(0.765625) == "0.766" and readable(0.765625, 0.7625, 0.76875) == "0.766"
    assert readable(6543.75, 6500.0, 6600.0) == "6,500" and readable(21000.000001) == "21,000"
    assert readable(0.5) == "0.5" and readable(4.0) == "4" and readable(1.2345678) == "1.23"
    row = {"label": "demand growth (×)", "low": 0.5, "high": 3.999999, "tco_low_usd": 1.0,
           "tco_high_usd": 2.0, "swing_usd": 1.0,
           "flips": [{"at": 0.765625, "below": 0.7625, "above": 0.76875, "to": "2 x 8 L40S"}]}
    _print_report({"rfq": "r", "objective": "tco", "solves": 3, "seconds": 1.5,
                   "base": {"tco_usd": 100.0, "cluster": "1 x 8 L40S"}, "parameters": [row]})
    printed = capsys.readouterr().out
    assert "at 0.766 → 2 x 8 L40S" in printed and "0.765625" not in printed
    assert "0.5 .. 4" in printed and "3.999999" not in printed


@pytest.mark.parametrize("entry", ["rtx-5090", "h100-sxm", "llama-3.1-70b"])
def test_catalog_show_prints_yaml_that_loads_back_with_urls_whole(entry):
    """`procure catalog show` at 80 columns: not re-wrapped by PyYAML or Rich, so the YAML
    under the title loads back to the entry and every URL of its sources is on one line."""
    import re

    import yaml

    from solver.catalog.load import load_catalog

    result = _procure("catalog", "show", entry)
    assert result.returncode == 0, result.stderr
    title, _, body = result.stdout.partition("\n")
    assert title.endswith(entry)
    cat = load_catalog()
    table = cat.gpus if entry in cat.gpus else None
    expected = (table[entry] if table else cat.model(entry)).model_dump(mode="json")
    assert yaml.safe_load(body) == expected
    urls = re.findall(r"(?:https?://|huggingface\.co/)\S+", str(expected.get("source", "")))
    assert urls, "the entry should cite a web page"
    lines = body.splitlines()
    for url in urls:
        assert any(url in line for line in lines), url


@pytest.mark.parametrize("extra", range(-3, 4))
def test_workload_heading_fits_80_bytes_whatever_the_model_path(catalog, extra):
    """The heading ``name — kind, model, PRECISION`` holds a 3-byte dash, and a model given
    as a config.json path is as long as the checkout's folder: around the length where the
    heading fills exactly 80 characters (a clone in /tmp/cc hit it), no line is wider than
    80 in bytes, and the heading says everything it said."""
    import io

    from rich.console import Console

    from solver.analysis.explain import solve_rfq
    from solver.cli.solve import _print_workload
    from solver.rfq.schema import load_rfq

    plan = solve_rfq(load_rfq(SCENARIOS / "chat-70b-one-node.yaml", catalog), catalog,
                     explain=False)
    work = plan.workloads[0]
    head = f"{work.name} — inference, , {work.precision.upper()}"
    path = "/" + "m" * (80 - len(head) - 1 + extra) + "/config.json"
    work = work.model_copy(update={"model": path[-(80 - len(head) + extra):]})
    buffer = io.StringIO()
    _print_workload(work, None, Console(file=buffer, width=80, force_terminal=False))
    text = buffer.getvalue()
    assert not _too_wide(text, 80)
    assert " ".join(text.split()).startswith(
        f"{work.name} — inference, {work.model}, {work.precision.upper()}")


@pytest.mark.parametrize("name", ["moe-ep-vs-tp.yaml", "deepseek-r1-rack.yaml"])
def test_explain_with_a_dominant_constraint_fits_80_columns(name):
    """explain leads with the dominant binding constraint: wrapped at the width like the
    rest (it was printed after its label as one unwrapped line of ~100 characters)."""
    result = _procure("explain", str(SCENARIOS / name))
    assert result.returncode == 0, result.stderr
    assert "Dominant constraint: " in result.stdout
    assert not _too_wide(result.stdout, 80)
