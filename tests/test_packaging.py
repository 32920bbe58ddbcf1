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
    catalog = ROOT / "catalog"
    for data_file in (p for p in catalog.rglob("*") if p.is_file()):
        relative = data_file.relative_to(catalog).as_posix()
        assert any(Path(relative).match(pattern) and relative.count("/") == pattern.count("/")
                   for pattern in patterns), relative
