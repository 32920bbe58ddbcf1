"""Bounded, strict parsing of everything a user hands in: YAML, JSON, CSV text and files.

One loader for every entry point (RFQs, ``--overrides``, catalog overlays, batch inputs,
dashboard uploads), so hostile input fails the same way everywhere, quickly and with an
:class:`~solver.common.errors.InputError` that names the file, the place and the reason:

* YAML: the safe loader (libyaml's when available) with the composed node graph checked
  *before* any Python object is built: alias expansion is capped (a 500-byte "billion
  laughs" file would otherwise expand to 10^9 values), as are nesting depth and recursive
  aliases; duplicate keys are rejected (YAML would silently keep the last one); integers
  longer than :data:`MAX_INT_DIGITS` digits are rejected.
* JSON: duplicate keys and over-long integers rejected; nesting capped at
  :data:`MAX_DEPTH` (``NaN``/``Infinity`` parse, and the schemas reject them by field).
* Text: UTF-8 only, a leading byte-order mark (as Excel and Notepad write it) is dropped,
  a bad byte is reported with its offset; files over a size cap are refused unread.
* Paths: only a regular file is read. A symbolic link loop, a link to a missing file, a
  folder, a named pipe, a device, a socket, a file of ``/proc``, ``/sys`` or ``/dev``, or a
  path too long for the file system is refused with that reason (:func:`path_reason`),
  never opened (a pipe would block, ``/proc/self/mem`` fails with an I/O error).
* :func:`guard`: the last line at an edge; any unexpected exception while reading one
  input becomes an ``InputError`` for that input instead of a traceback.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import math
import os
import stat
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from solver.common.errors import InputError, Problem, short, shown_path

MAX_DEPTH = 64
"""Deepest nesting of mappings/lists accepted (an RFQ needs 4, the catalog 4)."""
MAX_NODES = 200_000
"""Most values a YAML document may expand to, aliases counted at every use."""
MAX_INT_DIGITS = 40
"""Longest integer literal accepted (the largest sane figure, 1e14 tokens, has 15)."""
BOM = "\ufeff"
MAX_PATH_CHARS = 4096
"""Longest path accepted (Linux's PATH_MAX); a longer one is refused before any system call."""
MAX_NAME_BYTES = 255
"""Longest file or folder name (one path part) the usual file systems allow."""
SYSTEM_FOLDERS = ("/proc", "/sys", "/dev")
"""Kernel and device files: never data, and reading some of them fails or never ends."""

_BASE_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _fail(source: str, reason: str, field: str = "", value: Any = None) -> InputError:
    return InputError([Problem(source, field, value, reason)])


# --- text ---------------------------------------------------------------------------------


def decode(data: bytes, source: str) -> str:
    """UTF-8 text without a leading byte-order mark; a bad byte names its offset."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail(source, f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                            f"{exc.start}); save the file as UTF-8") from None
    return text.removeprefix(BOM)


def _file_kind(mode: int) -> str | None:
    """What a file that is not a regular one is, in words (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder, not a file"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO), not a file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device, not a file"
    if stat.S_ISSOCK(mode):
        return "a socket, not a file"
    return "not a regular file"


def path_too_long(text: str) -> str | None:
    """Why a path is too long for the file system (None when it is not): checked on the
    text, before any system call (which would fail with ``ENAMETOOLONG``)."""
    if len(text) > MAX_PATH_CHARS:
        return f"path too long ({len(text):,} characters; at most {MAX_PATH_CHARS:,})"
    longest = max((len(os.fsencode(part)) for part in text.split("/")), default=0)
    if longest > MAX_NAME_BYTES:
        return f"a file name in the path is too long ({longest:,} bytes; at most " \
               f"{MAX_NAME_BYTES})"
    return None


def _stat_reason(text: str, exc: OSError) -> str:
    """Why ``os.stat`` failed, in words (a dangling link told apart from a missing file)."""
    if exc.errno == errno.ELOOP:
        return "a symbolic link loop"
    if exc.errno == errno.ENAMETOOLONG:
        return "path too long for the file system"
    if exc.errno == errno.EACCES:
        return "permission denied"
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        try:
            if stat.S_ISLNK(os.lstat(text).st_mode):
                return "a symbolic link to a missing file"
        except OSError:
            pass
        return "file not found"
    return f"cannot read: {exc.strerror or exc}"


def path_reason(path: str | os.PathLike[str], *, folder: bool = False) -> str | None:
    """Why ``path`` is not a regular file that can be read (``folder``: not a folder), in
    words; None when it is one. Looks only at the path and its ``stat``, never opens it."""
    text = os.fspath(path)
    reason = path_too_long(text)
    if reason is not None:
        return reason
    if not text:
        return "empty path"
    try:
        mode = os.stat(text).st_mode
    except OSError as exc:
        reason = _stat_reason(text, exc)
        return "folder not found" if folder and reason == "file not found" else reason
    if folder:
        return None if stat.S_ISDIR(mode) else "not a folder"
    kind = _file_kind(mode)
    if kind is not None:
        return kind
    real = os.path.realpath(text)
    for top in SYSTEM_FOLDERS:
        if real == top or real.startswith(top + "/"):
            return f"a system file (under {top}), not a data file"
    return None


def check_path(path: str | os.PathLike[str], source: str | None = None, field: str = "",
               *, folder: bool = False) -> None:
    """Raise the one-line :class:`InputError` of :func:`path_reason`, naming ``source``
    (default: the path) and ``field``."""
    reason = path_reason(path, folder=folder)
    if reason is not None:
        raise InputError([Problem(source if source is not None else shown_path(path),
                                  field, None, reason)])


def path_within(ref: str, root: str | os.PathLike[str] | None, refused: str) -> str:
    """The real path of ``ref`` inside the folder ``root``, for a path that someone else
    wrote (an uploaded RFQ naming a file uploaded with it): ``ref`` must be relative, without
    ``..``, and resolve (links followed) inside ``root``. Anything else - no ``root`` at all,
    an absolute or parent path, a link out of ``root`` - raises the same
    :class:`InputError` with the reason ``refused``, so that the message says nothing about
    the machine's other files (not even whether they exist); a missing or special file inside
    ``root`` gets its :func:`path_reason`, about ``ref`` as written."""
    parts = ref.replace("\\", "/").split("/")
    if root is None or not ref or ref.startswith(("/", "~")) or ".." in parts \
            or path_too_long(ref) is not None or (len(ref) > 1 and ref[1] == ":"):
        raise _fail(ref, refused)
    real_root = os.path.realpath(root)
    target = os.path.realpath(os.path.join(real_root, *[p for p in parts if p]))
    if not target.startswith(real_root.rstrip("/") + "/"):
        raise _fail(ref, refused)
    reason = path_reason(target)
    if reason is not None:
        raise _fail(ref, "no such uploaded file" if reason == "file not found" else reason)
    return target


def read_text(path: Path, source: str, max_bytes: int) -> str:
    """A regular file's UTF-8 text, refused unread when larger than ``max_bytes`` or when
    the path is anything but a readable regular file (:func:`path_reason`)."""
    check_path(path, source)
    try:  # O_NONBLOCK: a file swapped for a pipe since the check cannot block the open
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise _fail(source, _stat_reason(os.fspath(path), exc)) from None
    try:
        info = os.fstat(fd)
        kind = _file_kind(info.st_mode)
        if kind is not None:
            raise _fail(source, kind)
        if info.st_size > max_bytes:
            raise _fail(source, f"file larger than {max_bytes / 1e6:g} MB "
                                f"({info.st_size:,} bytes)")
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise _fail(source, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise _fail(source, f"file larger than {max_bytes / 1e6:g} MB")
    return decode(data, source)


# --- YAML ---------------------------------------------------------------------------------


class YamlSyntaxError(InputError):
    """Text that is not YAML at all (as opposed to YAML with a bad value)."""


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


class _BoundedLoader(_BASE_LOADER):
    """The safe loader with duplicate keys and over-long integers rejected."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                key = (key_node.tag, key_node.value)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {short(key_node.value)} (first at "
                        f"{_where(seen[key])}); YAML would silently keep only the last one",
                        key_node.start_mark)
                seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: Any) -> int:
        digits = str(node.value).lstrip("+-").replace("_", "")
        if len(digits) > MAX_INT_DIGITS:
            raise yaml.constructor.ConstructorError(
                None, None, f"integer with {len(digits)} digits (at most {MAX_INT_DIGITS})",
                node.start_mark)
        return super().construct_yaml_int(node)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)


def _children(node: Any) -> list[Any]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def check_nodes(root: Any, source: str) -> None:
    """Refuse a node graph that expands too far, nests too deep or refers to itself.

    Aliases make the graph a DAG whose expanded size can be exponential in its text size;
    sizes and heights are memoised per node, so the check is linear in the graph.
    """
    sizes: dict[int, int] = {}
    heights: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            children = _children(node)
            sizes[key] = 1 + sum(sizes[id(c)] for c in children)
            heights[key] = 1 + max((heights[id(c)] for c in children), default=0)
            if sizes[key] > MAX_NODES:
                raise _fail(source, f"YAML at {_where(node.start_mark)} expands to more than "
                                    f"{MAX_NODES:,} values through aliases (an alias bomb?)")
            if heights[key] > MAX_DEPTH:
                raise _fail(source, f"YAML nested more than {MAX_DEPTH} levels deep "
                                    f"(at {_where(node.start_mark)})")
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise _fail(source, f"YAML alias at {_where(node.start_mark)} refers to itself "
                                "(a recursive structure)")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)


def parse_yaml(text: str, source: str) -> Any:
    """One YAML document, bounded and strict (see the module docstring)."""
    loader = _BoundedLoader(text.removeprefix(BOM))
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_nodes(node, source)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = _where(mark) or "unknown position"
        problem = getattr(exc, "problem", None) or str(exc)
        syntax = isinstance(exc, yaml.scanner.ScannerError | yaml.parser.ParserError)
        kind = "syntax error" if syntax else "error"
        error = (YamlSyntaxError if syntax else InputError)(
            [Problem(source, "", None, f"YAML {kind} at {where}: "
                                       f"{short(problem, 300, quote=False)}")])
        raise error from None
    except (RecursionError, MemoryError):
        raise _fail(source, f"YAML nested too deeply (at most {MAX_DEPTH} levels)") from None
    finally:
        loader.dispose()


def parse_yaml_value(text: str, source: str = "--set") -> Any:
    """A ``--set`` value: a YAML scalar or flow list/map, bounded like a file; text that is
    not valid YAML syntax is taken as a plain string."""
    try:
        return parse_yaml(text, source)
    except YamlSyntaxError:
        return text.strip()


# --- JSON ---------------------------------------------------------------------------------


class _JsonProblem(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _JsonProblem(f"duplicate key {short(key)}; JSON would silently keep only "
                               "the last one")
        result[key] = value
    return result


def _int(text: str) -> int:
    digits = text.lstrip("-")
    if len(digits) > MAX_INT_DIGITS:
        raise _JsonProblem(f"integer with {len(digits)} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def parse_json(text: str, source: str) -> Any:
    """One JSON document, bounded and strict (see the module docstring)."""
    try:
        data = json.loads(text.removeprefix(BOM), object_pairs_hook=_pairs, parse_int=_int)
    except json.JSONDecodeError as exc:
        raise _fail(source, f"JSON syntax error at line {exc.lineno}, column {exc.colno}: "
                            f"{exc.msg}") from None
    except _JsonProblem as exc:
        raise _fail(source, f"JSON error: {exc}") from None
    except (RecursionError, MemoryError):
        raise _fail(source, f"JSON nested too deeply (at most {MAX_DEPTH} levels)") from None
    except ValueError as exc:  # e.g. a float literal beyond the digit limit
        raise _fail(source, f"JSON error: {short(str(exc), 200, quote=False)}") from None
    if depth(data) > MAX_DEPTH:
        raise _fail(source, f"JSON nested more than {MAX_DEPTH} levels deep")
    return data


def depth(data: Any) -> int:
    """Nesting depth of parsed data (a scalar is 0, ``[]`` is 1), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict | list | tuple):
            deepest = max(deepest, level + 1)
            if deepest > MAX_DEPTH:
                return deepest
            stack.extend((v, level + 1) for v in (value.values() if isinstance(value, dict)
                                                  else value))
    return deepest


def parse(text: str, source: str, suffix: str) -> Any:
    """YAML or JSON text by file suffix (``.json`` is JSON, anything else YAML)."""
    return parse_json(text, source) if suffix == ".json" else parse_yaml(text, source)


# --- checks on parsed data ----------------------------------------------------------------


def non_finite(data: Any, path: str = "") -> list[tuple[str, float]]:
    """Every NaN or infinite float in parsed data, with its field path."""
    found: list[tuple[str, float]] = []
    stack: list[tuple[Any, str]] = [(data, path)]
    while stack:
        value, where = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            found.append((where, value))
        elif isinstance(value, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(value))
    return sorted(found)


def too_large(data: Any, limit: float, path: str = "") -> list[tuple[str, float]]:
    """Every number in parsed data larger than ``limit`` in size, with its field path."""
    found: list[tuple[str, float]] = []
    stack: list[tuple[Any, str]] = [(data, path)]
    while stack:
        value, where = stack.pop()
        if isinstance(value, int | float) and not isinstance(value, bool) \
                and abs(value) > limit:
            found.append((where, value))
        elif isinstance(value, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(value))
    return sorted(found)


def admits_bool(annotation: Any) -> bool:
    """Whether a field's type annotation accepts ``true``/``false``."""
    if annotation is bool or annotation is Any:
        return True
    return any(admits_bool(arg) for arg in typing.get_args(annotation))


def reject_bool(model_cls: Any, value: Any, field_name: str | None) -> Any:
    """A ``mode="before"`` field check: ``true`` is not the number 1 (pydantic's lax mode
    would take it as one)."""
    if isinstance(value, bool) and field_name is not None:
        field = model_cls.model_fields.get(field_name)
        if field is not None and not admits_bool(field.annotation):
            raise ValueError(f"expected a {_kind(field.annotation)}, not {str(value).lower()}")
    return value


def _kind(annotation: Any) -> str:
    args = {a for a in typing.get_args(annotation) if a is not type(None)} or {annotation}
    if args <= {int}:
        return "whole number"
    if args <= {int, float}:
        return "number"
    return "value of the right type"


# --- the edge -----------------------------------------------------------------------------


@contextlib.contextmanager
def guard(source: str, what: str = "read") -> Iterator[None]:
    """Turn any unexpected exception while handling one input into its ``InputError``."""
    try:
        yield
    except InputError:
        raise
    except (RecursionError, MemoryError) as exc:
        raise _fail(source, f"cannot {what}: input too large or nested too deeply "
                            f"({type(exc).__name__})") from None
    except Exception as exc:  # noqa: BLE001 - the edge: one bad input, never a traceback
        raise _fail(source, f"cannot {what}: {type(exc).__name__}: "
                            f"{short(str(exc), 200, quote=False)}") from None


def read_csv_rows(path: Path, max_bytes: int) -> list[list[str]]:
    """The rows of one small CSV file (catalog overlays: prices.csv, rental.csv), read through
    the bounded reader; any failure is that file's ``InputError``."""
    source = str(path)
    with guard(source):
        text = read_text(path, source, max_bytes)
        try:
            return list(csv.reader(io.StringIO(text, newline="")))
        except csv.Error as exc:
            raise InputError([Problem(source, "", None, f"CSV error: {exc}")]) from None


def csv_records(rows: list[list[str]], header: list[str], source: str,
                max_rows: int) -> list[tuple[int, dict[str, str]]]:
    """The data rows of a CSV read by :func:`read_csv_rows` whose (checked) header is
    ``header``: (line number, cells by column, as written), blank lines skipped; more than
    ``max_rows`` rows or a row with another number of cells is that file's ``InputError``."""
    if len(rows) > max_rows:
        raise InputError([Problem(source, "", None, f"more than {max_rows:,} rows")])
    out: list[tuple[int, dict[str, str]]] = []
    for line, cells in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in cells):
            continue
        if len(cells) != len(header):
            raise InputError([Problem(source, f"line {line}", None,
                                      f"{len(cells)} cells where the header has {len(header)}")])
        out.append((line, dict(zip(header, cells, strict=True))))
    return out
