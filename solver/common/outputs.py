"""Output paths checked before any work: a file procure writes never replaces its inputs.

An ``--export``, ``--plot``, ``--csv`` or quote ``-o`` path is refused (an
:class:`~solver.common.errors.InputError`, exit 2) when it

* is in a folder that does not exist, or is a folder itself, or cannot be written;
* is the results store (or one of its ``-wal``, ``-shm``, ``-journal`` or ``.lock``
  companions) - writing an export over the SQLite file it reads from destroys it;
* is one of the run's inputs (an RFQ, a CSV batch, an overrides file, a file a catalog
  overlay reads).

"The same file" means the same real file: symbolic links are followed
(``os.path.realpath``) and a second hard link is found by ``os.path.samefile``. Every check
runs before anything is solved, so a refused run costs nothing and changes nothing.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from solver.common.errors import InputError, Problem, shown_path
from solver.common.inputs import path_reason, path_too_long

STORE_COMPANIONS = ("", "-wal", "-shm", "-journal", ".lock")
"""The files SQLite and the batch lock keep next to a results store."""


def same_file(first: str | os.PathLike[str], second: str | os.PathLike[str]) -> bool:
    """Whether two paths name one file: equal real paths (links followed), or one inode."""
    if os.path.realpath(first) == os.path.realpath(second):
        return True
    try:
        return os.path.samefile(first, second)
    except (OSError, ValueError):
        return False


def check_output_path(path: str | os.PathLike[str], flag: str, *,
                      suffixes: tuple[str, ...] | None = None,
                      inputs: Iterable[str | os.PathLike[str]] = (),
                      store: str | os.PathLike[str] | None = None) -> Path:
    """``path`` when it is a file ``flag`` may write (module docstring), else the one-line
    :class:`InputError` naming the path, the flag and why. ``suffixes``: the allowed file
    name endings (lower case, with the dot)."""
    path = Path(path)
    shown = shown_path(path)

    def refuse(reason: str, value: str | None = None) -> InputError:
        return InputError([Problem(shown, flag, value, reason)])

    if suffixes is not None and path.suffix.lower() not in suffixes:
        raise refuse(f"use a {', '.join(suffixes[:-1])} or {suffixes[-1]} file name"
                     if len(suffixes) > 1 else f"use a {suffixes[0]} file name", path.suffix)
    too_long = path_too_long(os.fspath(path))
    if too_long is not None:
        raise refuse(too_long)
    folder = path.parent
    folder_reason = path_reason(folder, folder=True)
    if folder_reason is not None:
        raise refuse(f"folder {shown_path(folder)} does not exist"
                     if folder_reason == "folder not found"
                     else f"folder {shown_path(folder)}: {folder_reason}")
    if path.is_dir():
        raise refuse("is a folder; give a file name")
    if store is not None:
        for companion in STORE_COMPANIONS:
            if same_file(path, f"{os.fspath(store)}{companion}"):
                raise refuse("is the results store" + (f" ({companion} file)" if companion
                                                       else "")
                             + " of this run; writing there would destroy it: choose "
                             "another file name")
    for source in inputs:
        if same_file(path, source):
            raise refuse(f"is an input of this run ({shown_path(source)}); writing there "
                         "would replace it: choose another file name")
    _check_writable(path, refuse)
    return path


def _check_writable(path: Path, refuse: Callable[..., InputError]) -> None:
    """A real write test (permissions, read-only file systems): append nothing, and remove
    the file again when it was not there before. Only a regular file is written: a pipe
    would block the run, a device is no file."""
    existed = os.path.lexists(path)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise refuse(f"cannot write here: {exc.strerror or exc}") from None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    finally:
        os.close(fd)
    if not regular:
        raise refuse("not a regular file (a pipe, a device or a socket)")
    if not existed:
        path.unlink(missing_ok=True)
