"""Issue 32: prices typed on the dashboard's Catalog page are quotes entered that day
(solver.catalog.load.entered_prices), checked as prices.csv checks prices."""

from __future__ import annotations

import pytest

from solver.catalog.load import ENTERED_SOURCE, check_price, entered_prices, load_catalog
from solver.common.errors import InputError
from solver.common.wording import assumption_lines, assumptions
from solver.report.customer import customer_source

DAY = "2026-12-05"


@pytest.mark.parametrize("bad", [0, 0.0, -1, -9500.0, "abc", float("nan"), float("inf"),
                                 1e12, True])
def test_a_price_that_is_no_price_is_refused(bad):
    with pytest.raises(InputError):
        check_price(bad, "Catalog page", "rtx-5090")
    with pytest.raises(InputError):
        entered_prices(load_catalog(), {"rtx-5090": bad}, DAY)


def test_prices_csv_refuses_a_zero_price_too(tmp_path):
    (tmp_path / "prices.csv").write_text("id,price_usd\nrtx-5090,0\n")
    with pytest.raises(InputError, match="more than 0 USD"):
        load_catalog(str(tmp_path))
    assert check_price("9500", "prices.csv", "line 2.price_usd") == 9500.0


def test_entered_prices_label_gpus_servers_and_nics_as_quotes_of_their_day():
    base = load_catalog()
    cat = entered_prices(base, {"rtx-5090": 3500.0, "pcie-4gpu": 17000.0,
                                "ib-ndr-400": 1500.0}, DAY)
    gpu, server, fabric = cat.gpus["rtx-5090"], cat.servers["pcie-4gpu"], \
        cat.fabrics["ib-ndr-400"]
    source = ENTERED_SOURCE.format(day=DAY)
    assert (gpu.price_usd, gpu.price_type, gpu.price_as_of, gpu.price_source) == (
        3500.0, "quote", DAY, source)
    assert (server.price_usd, server.price_type, server.price_as_of, server.price_source) == (
        17000.0, "quote", DAY, source)
    assert (fabric.nic_price_usd, fabric.nic_price_type, fabric.nic_price_as_of,
            fabric.nic_price_source) == (1500.0, "quote", DAY, source)
    assert cat.version != base.version  # no physics cache mixes the two
    assert base.gpus["rtx-5090"].price_type != "quote" or \
        base.gpus["rtx-5090"].price_as_of != DAY  # the built-in catalog is untouched
    for entry in (gpu, server):
        assert customer_source(entry.price_type, entry.price_as_of,
                               entry.price_source) == f"quote, entered {DAY}"
    assert entered_prices(base, {}, DAY) is base


def test_the_plan_bill_assumptions_and_warnings_carry_the_entered_quote(catalog):
    from pathlib import Path

    from solver.analysis.explain import solve_rfq
    from solver.rfq.schema import load_rfq

    scenarios = Path(__file__).resolve().parent.parent / "scenarios"
    cat = entered_prices(catalog, {"rtx-5090": 2500.0, "pcie-4gpu": 17000.0}, DAY)
    rfq = load_rfq(scenarios / "batch-corpus-one-box.yaml", cat)
    plan = solve_rfq(rfq, cat).to_json()
    lines = {b["sku"]: b for b in plan["bill_of_materials"]["lines"]}
    for sku, price in (("rtx-5090", 2500.0), ("pcie-4gpu", 17000.0)):
        assert (lines[sku]["unit_price_usd"], lines[sku]["price_type"], lines[sku]["as_of"]
                ) == (price, "quote", DAY)
        assert lines[sku]["source"].startswith(f"entered {DAY}")
    assert not [w for w in plan["warnings"] if w.startswith("stale price: GPU rtx-5090")]
    said = assumption_lines(assumptions(cat, rfq, plan))
    assert f"price rtx-5090 (GPU) $2,500, quote, entered {DAY}" in said
    assert f"price pcie-4gpu (server) $17,000, quote, entered {DAY}" in said


def test_the_downloaded_prices_csv_gives_the_same_words_in_the_terminal(tmp_path):
    """The Catalog page's prices.csv used with --catalog: the terminal's assumptions and
    bill say "quote, entered DAY" as the dashboard does."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    from dashboards.views.catalog import prices_csv

    (tmp_path / "prices.csv").write_text(prices_csv(load_catalog(), {"rtx-pro-6000": 7000.0},
                                                    {"rtx-pro-6000": DAY}))
    result = subprocess.run(
        [sys.executable, "-m", "solver.cli", "solve", str(root / "scenarios" /
                                                          "chat-70b-one-node.yaml"),
         "--catalog", str(tmp_path)], capture_output=True, text=True, cwd=root, timeout=300,
        env={**os.environ, "COLUMNS": "250", "PYTHONPATH": str(root)})  # cells unwrapped
    assert result.returncode == 0, result.stderr
    flat = " ".join(result.stdout.split())
    assert f"price rtx-pro-6000 (GPU) $7,000, quote, entered {DAY}" in flat
    assert f"(quote, entered {DAY})" in flat  # the bill's line
