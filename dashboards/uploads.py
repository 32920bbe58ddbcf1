"""Safe handling of uploaded files: size caps, UTF-8 only, safe YAML, zips unpacked into a
temp dir with every member checked (no absolute paths, no ``..``, no links, size and count
capped). Nothing is written outside the temp dir the caller owns, and nothing outside the
upload is read: an uploaded RFQ names its models by catalog id, inline architecture or a
config file uploaded with it (``confine``, :func:`solver.rfq.schema.validate_rfq`), never
by a path on the server."""

from __future__ import annotations

import stat
import tempfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Any

from solver.catalog.data import Catalog
from solver.common.errors import InputError, Problem, short
from solver.common.inputs import decode, guard
from solver.rfq.schema import MAX_FILE_BYTES, Rfq, iter_csv_rfqs, parse_text, validate_rfq

RFQ_SUFFIXES = (".yaml", ".yml", ".json")
MAX_UPLOAD_MB = 20                      # Streamlit's server.maxUploadSize for the dashboard
MAX_CSV_BYTES = 5_000_000
MAX_ZIP_BYTES = 20_000_000
MAX_UNZIPPED_BYTES = 50_000_000
MAX_ZIP_MEMBERS = 2_000
MAX_NAME_CHARS = 100
"""Longest file-name part written (file systems refuse 256 bytes; ids live in the files)."""
ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError,
              NotImplementedError, RuntimeError, ValueError)
"""What reading a damaged, lying, encrypted or exotic zip raises."""


def _decode(name: str, data: bytes, limit: int) -> str:
    if len(data) > limit:
        raise InputError([Problem(name, "", f"{len(data):,} bytes",
                                  f"file larger than {limit / 1e6:g} MB")])
    return decode(data, name)


def rfqs_from_upload(name: str, data: bytes, catalog: Catalog
                     ) -> list[tuple[str, Rfq | InputError]]:
    """The RFQs in one uploaded YAML, JSON or CSV file: ``(id, Rfq or InputError)``.

    A YAML/JSON file holds one RFQ; a CSV batch one or more. A file that cannot be read at
    all raises :class:`InputError`.
    """
    name = _printable(name)
    suffix = Path(name).suffix.lower()
    if suffix in RFQ_SUFFIXES:
        with guard(name):
            text = _decode(name, data, MAX_FILE_BYTES)
            parsed = parse_text(text, name, suffix)
        try:  # one file alone: no model config file can have come with it
            rfq = validate_rfq(parsed, catalog, name, None, confine=True)
        except InputError as exc:
            rfq_id = parsed.get("id") if isinstance(parsed, dict) else None
            shown = short(str(rfq_id), 128, quote=False) if isinstance(rfq_id, str | int) \
                and not isinstance(rfq_id, bool) and str(rfq_id) else name
            return [(shown, exc)]
        return [(rfq.id, rfq)]
    if suffix == ".csv":
        with guard(name):
            _decode(name, data, MAX_CSV_BYTES)
            with tempfile.TemporaryDirectory(prefix="procure-upload-") as tmp:
                path = Path(tmp) / _safe_name(name)
                path.write_bytes(data)
                found = list(iter_csv_rfqs(path, catalog, confine=True))
        return [(rfq_id, _rename(result, str(path), name)) for rfq_id, result in found]
    raise InputError([Problem(name, "", suffix or None,
                              "unsupported file type: use .yaml, .yml, .json or .csv")])


def _rename(result: Any, temp_path: str, name: str) -> Any:
    """Problems name the uploaded file, not the temp copy."""
    if isinstance(result, InputError):
        return InputError([Problem(name if p.file == temp_path else p.file, p.field, p.value,
                                   p.reason) for p in result.problems])
    return result


def _printable(name: str) -> str:
    """An uploaded name fit for messages and paths: no NUL or control characters, bounded."""
    cleaned = "".join(ch if ch.isprintable() else "?" for ch in str(name)[:1000])
    return short(cleaned, 300, quote=False) or "upload"


def unpack_batch(files: list[tuple[str, bytes]], folder: Path) -> list[Path]:
    """Write uploaded RFQ files, CSVs and zips of them into ``folder``; the paths written.

    Every problem (a damaged zip, an unsafe member) is reported as an :class:`InputError`
    naming the upload and the member; names that collide after cleaning get ``-2``, ``-3``
    ... so that no RFQ is lost."""
    written: list[Path] = []
    problems: list[Problem] = []
    for index, (raw_name, data) in enumerate(files):
        name = _printable(raw_name)
        suffix = Path(name).suffix.lower()
        target_dir = folder / f"upload-{index}"
        target_dir.mkdir(parents=True, exist_ok=True)
        if suffix == ".zip":
            try:
                with guard(name, "unpack"):
                    written += _unzip(name, data, target_dir)
            except InputError as exc:
                problems += exc.problems
        elif suffix in (*RFQ_SUFFIXES, ".csv"):
            limit = MAX_CSV_BYTES if suffix == ".csv" else MAX_FILE_BYTES
            if len(data) > limit:
                problems.append(Problem(name, "", f"{len(data):,} bytes",
                                        f"file larger than {limit / 1e6:g} MB"))
                continue
            try:
                with guard(name, "store the upload"):
                    path = _unique(target_dir, target_dir / _safe_name(name))
                    path.write_bytes(data)
                    written.append(path)
            except InputError as exc:
                problems += exc.problems
        else:
            problems.append(Problem(name, "", suffix or None,
                                    "unsupported file type: use .zip, .csv, .yaml, .yml or "
                                    ".json"))
    if problems:
        raise InputError(problems)
    if not written:
        raise InputError([Problem("upload", "", None, "no RFQ files found")])
    return written


def _safe_name(name: str) -> str:
    base = PurePosixPath(name.replace("\\", "/")).name
    cleaned = "".join(ch if (ch.isascii() and ch.isalnum()) or ch in "._-" else "_"
                      for ch in base).lstrip(".") or "upload"
    if len(cleaned) > MAX_NAME_CHARS:
        suffix = PurePosixPath(cleaned).suffix[:10]
        cleaned = cleaned[: MAX_NAME_CHARS - len(suffix)] + suffix
    return cleaned


def _unique(root: Path, wanted: Path) -> Path:
    """``wanted`` if free (no file there, no file where one of its folders must go), else a
    free ``<stem>-N<suffix>`` directly under ``root``."""
    blocked = any(parent.exists() and not parent.is_dir()
                  for parent in wanted.parents if root in parent.parents or parent == root)
    if not blocked and not wanted.exists():
        return wanted
    stem, suffix = wanted.stem, wanted.suffix
    number = 2
    while (root / f"{stem}-{number}{suffix}").exists():
        number += 1
    return root / f"{stem}-{number}{suffix}"


def _unzip(name: str, data: bytes, target: Path) -> list[Path]:
    if len(data) > MAX_ZIP_BYTES:
        raise InputError([Problem(name, "", f"{len(data):,} bytes",
                                  f"zip larger than {MAX_ZIP_BYTES / 1e6:g} MB")])
    import io

    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except ZIP_ERRORS as exc:
        raise InputError([Problem(name, "", None, f"not a readable zip file: "
                                  f"{short(str(exc), 120, quote=False)}")]) from None
    with archive:
        return _extract(name, archive, target)


def _extract(name: str, archive: zipfile.ZipFile, target: Path) -> list[Path]:
    members = [m for m in archive.infolist() if not m.is_dir()]
    if len(members) > MAX_ZIP_MEMBERS:
        raise InputError([Problem(name, "", len(members),
                                  f"more than {MAX_ZIP_MEMBERS} files in the zip")])
    total = sum(m.file_size for m in members)
    if total > MAX_UNZIPPED_BYTES:
        raise InputError([Problem(name, "", f"{total:,} bytes unpacked",
                                  f"unpacks to more than {MAX_UNZIPPED_BYTES / 1e6:g} MB")])
    written = []
    root = target.resolve()
    unpacked = 0
    for member in members:
        shown = _printable(member.filename)
        member_path = PurePosixPath(member.filename.replace("\\", "/"))
        parts = member_path.parts
        if member_path.is_absolute() or ".." in parts or not parts:
            raise InputError([Problem(name, shown, None,
                                      "unsafe path in zip (absolute or with ..)")])
        if stat.S_ISLNK(member.external_attr >> 16):
            raise InputError([Problem(name, shown, None, "symbolic link in zip")])
        if any(part.startswith(".") or part == "__MACOSX" for part in parts):
            continue
        if member_path.suffix.lower() not in (*RFQ_SUFFIXES, ".csv"):
            continue
        destination = _unique(root, (root / Path(*[_safe_name(p) for p in parts])).resolve())
        if root not in destination.parents:
            raise InputError([Problem(name, shown, None, "unsafe path in zip")])
        limit = MAX_UNZIPPED_BYTES - unpacked
        try:  # the header's sizes may lie: count what actually comes out
            with archive.open(member) as source:
                content = source.read(limit + 1)
        except ZIP_ERRORS as exc:
            raise InputError([Problem(name, shown, None, f"damaged zip member: "
                                      f"{short(str(exc), 120, quote=False)}")]) from None
        unpacked += len(content)
        if len(content) > limit:
            raise InputError([Problem(name, shown, None, f"unpacks to more than "
                                      f"{MAX_UNZIPPED_BYTES / 1e6:g} MB")])
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(content)
        written.append(destination)
    return written
