"""A non-editable `pip install .` must ship every subpackage and the catalog data."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_solver_subpackage_is_listed():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in ROOT.glob("solver/**/__init__.py")}
    assert on_disk <= listed, on_disk - listed


def test_catalog_ships_as_package_data():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"]["solver.procure_catalog"] == "catalog"
    patterns = config["package-data"]["solver.procure_catalog"]
    for data_file in (ROOT / "catalog").iterdir():
        assert any(data_file.match(pattern) for pattern in patterns), data_file.name
