"""The parsed-catalog cache (issue 18, start-up): a hit gives exactly what parsing gives,
a changed text or a damaged entry is parsed again, and a cache that cannot be used is
skipped."""

from __future__ import annotations

import os
import stat

import pytest

from solver.catalog import load as catalog_load
from solver.common import parse_cache
from solver.common.inputs import parse_yaml

TEXT = "gpus:\n  - id: a\n    price_usd: 1.5\n    since: 2026-01-02\n"


def _counting(text: str):
    calls = []

    def parse():
        calls.append(1)
        return parse_yaml(text, "t.yaml")

    return parse, calls


def test_hit_equals_parse_and_is_a_fresh_object(tmp_path, monkeypatch):
    monkeypatch.setenv(parse_cache.CACHE_ENV, str(tmp_path))
    parse, calls = _counting(TEXT)
    first = parse_cache.cached_parse(TEXT, "yaml", parse)
    first["gpus"][0]["price_usd"] = 99  # a caller changing what it got
    second = parse_cache.cached_parse(TEXT, "yaml", parse)
    assert calls == [1]  # parsed once, then read back
    assert second == parse_yaml(TEXT, "t.yaml")  # dates and floats as parsed
    assert len(list(tmp_path.glob("*.pickle"))) == 1


def test_changed_text_is_parsed_again(tmp_path, monkeypatch):
    monkeypatch.setenv(parse_cache.CACHE_ENV, str(tmp_path))
    parse_cache.cached_parse(TEXT, "yaml", _counting(TEXT)[0])
    changed = TEXT.replace("1.5", "2.5")
    parse, calls = _counting(changed)
    assert parse_cache.cached_parse(changed, "yaml", parse)["gpus"][0]["price_usd"] == 2.5
    assert calls == [1]


def test_damaged_entry_is_parsed_again_and_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv(parse_cache.CACHE_ENV, str(tmp_path))
    parse_cache.cached_parse(TEXT, "yaml", _counting(TEXT)[0])
    (entry,) = tmp_path.glob("*.pickle")
    entry.write_bytes(b"\x80\x05not a pickle")
    parse, calls = _counting(TEXT)
    assert parse_cache.cached_parse(TEXT, "yaml", parse) == parse_yaml(TEXT, "t.yaml")
    assert calls == [1]
    parse, calls = _counting(TEXT)
    parse_cache.cached_parse(TEXT, "yaml", parse)
    assert calls == []  # the entry was written again


def test_empty_setting_turns_the_cache_off(tmp_path, monkeypatch):
    monkeypatch.setenv(parse_cache.CACHE_ENV, "")
    monkeypatch.chdir(tmp_path)
    parse, calls = _counting(TEXT)
    parse_cache.cached_parse(TEXT, "yaml", parse)
    parse_cache.cached_parse(TEXT, "yaml", parse)
    assert calls == [1, 1]
    assert parse_cache.cache_dir() is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_unwritable_folder_is_skipped(tmp_path, monkeypatch):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    monkeypatch.setenv(parse_cache.CACHE_ENV, str(folder))
    parse, calls = _counting(TEXT)
    assert parse_cache.cached_parse(TEXT, "yaml", parse) == parse_yaml(TEXT, "t.yaml")
    assert calls == [1]


def test_folder_that_is_a_file_is_skipped(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(parse_cache.CACHE_ENV, str(blocker / "cache"))
    parse, calls = _counting(TEXT)
    assert parse_cache.cached_parse(TEXT, "yaml", parse) == parse_yaml(TEXT, "t.yaml")
    assert calls == [1]


def _fresh_catalog():
    """load_catalog without its in-process memo."""
    catalog_load.CATALOGS.clear()
    return catalog_load.load_catalog()


def test_catalog_from_the_cache_equals_the_parsed_one(tmp_path, monkeypatch):
    monkeypatch.setenv(parse_cache.CACHE_ENV, "")
    parsed = _fresh_catalog()
    monkeypatch.setenv(parse_cache.CACHE_ENV, str(tmp_path))
    filled = _fresh_catalog()
    assert list(tmp_path.glob("*.pickle"))  # the catalog's files were stored
    cached = _fresh_catalog()
    assert parsed == filled == cached
    assert parsed.model_dump_json() == cached.model_dump_json()
