"""Input errors: every bad input names its file, field path, value and reason."""

from __future__ import annotations

import difflib
import os
import re
import reprlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input."""

    file: str
    field: str
    value: Any
    reason: str

    def __str__(self) -> str:
        where = f"{short_path(self.file)}: {short(self.field, 200, quote=False)}" \
            if self.field else short_path(self.file)
        shown = "" if self.value is None else f" = {short(self.value)}"
        return escape_surrogates(
            f"{where}{shown}: {short(self.reason, MAX_REASON_CHARS, quote=False)}")


class InputError(Exception):
    """Invalid input (RFQ, catalog, command-line value). The CLI prints it and exits 2."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    def __reduce__(self) -> tuple[type[InputError], tuple[list[Problem]]]:
        """Pickled with its problems (a worker process sends it to the driver)."""
        return (InputError, (self.problems,))


MAX_REASON_CHARS = 1000


class SolverError(Exception):
    """The MIP solver failed on a valid model: no answer about the RFQ, neither a plan nor
    infeasible. The CLI says so in one line and exits 1 (never 3, infeasible)."""


class _BoundedRepr(reprlib.Repr):
    """``repr`` that looks at a bounded part of a value: never walks or copies it whole."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxdict, self.maxlist, self.maxtuple = 3, 4, 6, 6
        self.maxset = self.maxfrozenset = 6
        self.maxstring, self.maxother, self.maxlong = 80, 80, 40

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 200:  # str() of a 5,000-digit int raises ValueError
            return f"<integer of about {int(x.bit_length() * 0.30103)} digits>"
        return super().repr_int(x, level)

    def repr_str(self, x: str, level: int) -> str:
        return super().repr_str(x[: self.maxstring + 2], level)


_REPR = _BoundedRepr()


def short(value: Any, limit: int = 80, *, quote: bool = True) -> str:
    """A bounded excerpt of a value for a message: cut *before* formatting, so a huge or
    self-expanding value (a YAML alias bomb) costs no more than a small one."""
    if isinstance(value, str) and not quote:
        text = value[: limit + 1]
    else:
        try:
            text = _REPR.repr(value)
        except Exception:  # noqa: BLE001 - a value whose repr fails still gets a message
            text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


_short = short


def short_path(text: str, limit: int = 300) -> str:
    """A file name for a message: a long one keeps its start and its end (the file's own
    name), cut in the middle."""
    text = str(text)
    if len(text) <= limit:
        return text
    head = limit // 3
    return f"{text[:head]}...{text[-(limit - head - 3):]}"

_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def escape_surrogates(text: str) -> str:
    """Text that can be printed and stored as UTF-8: a byte of a file name that is not UTF-8
    (Python keeps it as a lone surrogate, ``\\udcff``) is shown as ``\\xff``, any other lone
    surrogate (a JSON ``\\ud800`` escape) as ``\\ud800``; other text is unchanged."""
    return _SURROGATE.sub(_escape, text) if _SURROGATE.search(text) else text


def shown_path(path: str | os.PathLike[str]) -> str:
    """A file name as messages, stores and exports show it: its bytes that are not UTF-8
    escaped (``bad\\xff.yaml``), so that any name can be printed, stored and compared."""
    return escape_surrogates(os.fspath(path))


def field_path(loc: Iterable[Any]) -> str:
    """Turn a pydantic location tuple into ``workloads[1].deadline_hours``."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += ("." if path else "") + str(part)
    return path


def nearest(value: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """The nearest known ids to a misspelt one."""
    choices = list(choices)
    close = difflib.get_close_matches(value, choices, n=n, cutoff=0.4)
    if not close:
        close = [c for c in choices if value.split("-")[0] in c][:n]
    return close


def problems_from_pydantic(
    exc: ValidationError, file: str, *, id_keyed: bool = False,
    tags: frozenset[str] = frozenset(),
) -> list[Problem]:
    """Convert a pydantic ValidationError into our problems (one per error).

    ``tags`` are discriminator values (e.g. workload kinds) that pydantic puts into the
    location after a list index; they are not field names and are dropped.
    """
    problems = []
    for err in exc.errors():
        loc = list(err.get("loc", ()))
        # drop pydantic's union/tag branch names such as 'function-after[...]'
        loc = [part for part in loc if not (isinstance(part, str) and "[" in part)]
        loc = [part for i, part in enumerate(loc)
               if not (part in tags and i > 0 and isinstance(loc[i - 1], int))]
        reason = err.get("msg", "invalid")
        reason = reason.removeprefix("Value error, ")
        if err.get("type") == "extra_forbidden":
            reason = "unknown key (not part of the format)"
        elif err.get("type") == "missing":
            reason = "required field missing"
        value = err.get("input") if err.get("type") != "missing" else None
        if isinstance(value, dict) and err.get("type") != "extra_forbidden":
            value = None
        problems.append(Problem(file, field_path(loc), value, reason))
    return problems
