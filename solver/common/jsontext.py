"""Indented JSON text of plans and reports, fast enough for a plan of megabytes (issue 31).

``json.dumps(obj, indent=2)`` runs the standard library's pure-Python encoder: its C
encoder serves compact output only. A plan found at a time limit under load can fill
5.5 MB (placement and timetable of a poor incumbent) and took 0.2 s to encode that way, on
top of the limit. :func:`indented` writes the same layout with pydantic-core's compiled
serializer (a dependency of pydantic) in less than half the time
(0.075 s against 0.19 s for that plan, escapes included).

The text parses to the same values as ``json.dumps(obj, indent=2)``'s: same keys in the
same order, same indentation and separators, non-ASCII characters and DEL escaped as ``\\uXXXX``
(surrogate pairs above U+FFFF, what ``ensure_ascii`` writes), NaN and infinities as
``NaN``/``Infinity``. Only a float's spelling may differ where both are exact: below
1e-4 the compiled writer spells ``1e-05`` as ``0.00001`` and ``1.5e-07`` as ``1.5e-7``
(``tests/test_jsontext.py``)."""

from __future__ import annotations

import re
from typing import Any

import pydantic_core

_TO_ESCAPE = re.compile(r"[^\x00-\x7e]")  # what ensure_ascii escapes that the writer does not


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code > 0xFFFF:  # a UTF-16 surrogate pair, as json.dumps writes it
        code -= 0x10000
        return f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def indented(value: Any, indent: int = 2) -> str:
    """``value`` (dicts with string keys, lists, strings, numbers, booleans, None: what a
    plan's ``to_json()`` holds) as indented, ASCII-only JSON text:
    ``json.dumps(value, indent=indent)``'s layout. A key that is not a string is spelled
    differently (None as "None", not "null"): plans have none."""
    if not isinstance(value, (dict, list, tuple)):  # a bare scalar: nothing to gain
        import json

        return json.dumps(value, indent=indent)
    text = pydantic_core.to_json(value, indent=indent, inf_nan_mode="constants").decode()
    if text.isascii() and "\x7f" not in text:
        return text
    return _TO_ESCAPE.sub(_escaped, text)

