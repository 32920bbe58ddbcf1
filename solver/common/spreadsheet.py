"""Spreadsheet-safe text: the one rule every CSV and XLSX writer applies to a cell.

A spreadsheet evaluates a cell that begins with ``=``, ``+``, ``-`` or ``@`` as a formula,
and a tab or carriage return in front of one does not stop it; a formula can open links
(``=HYPERLINK(...)``) or, through DDE, run a program (``=cmd|' /C calc'!A0``). Text that
a customer, a price file or a batch input controls (a customer name, a ``source``, an RFQ
id) therefore never reaches a cell as is: :func:`cell_text` prefixes such text with a single
quote (the OWASP rule for CSV injection), so it is shown as text and never evaluated; in
XLSX it is also stored as a string cell, never a formula. Numbers, booleans and empty
cells are left alone, so figures stay figures.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

DANGEROUS_FIRST = frozenset("=+-@\t\r")
"""First characters that make a spreadsheet read a cell as a formula."""
QUOTE = "'"


def cell_text(value: Any) -> Any:
    """``value`` fit for a spreadsheet cell: text that a spreadsheet would evaluate (its
    first character, leading spaces skipped, in :data:`DANGEROUS_FIRST`) gets a leading
    single quote; anything that is not text is returned unchanged."""
    if isinstance(value, str) and value.lstrip(" ")[:1] in DANGEROUS_FIRST:
        return QUOTE + value
    return value


def safe_row(values: Iterable[Any]) -> list[Any]:
    """A row of cells through :func:`cell_text` (an openpyxl cell object is made safe in
    place and kept, with its style)."""
    return [_safe_cell(value) for value in values]


def _safe_cell(value: Any) -> Any:
    if hasattr(value, "data_type") and hasattr(value, "value"):  # an openpyxl cell
        if isinstance(value.value, str):
            value.value = cell_text(value.value)
        return value
    return cell_text(value)


def safe_workbook(book: Any) -> Any:
    """Every text cell of an openpyxl workbook (not write-only) through :func:`cell_text`,
    and every formula cell turned into the text it holds: call it right before ``save``."""
    for sheet in book.worksheets:
        for row in sheet.iter_rows():
            for cell in row:
                if isinstance(cell.value, str):
                    cell.value = cell_text(cell.value)
    return book


class SafeSheet:
    """A write-only openpyxl sheet whose ``append`` puts every cell through
    :func:`cell_text` (everything else is the sheet's own)."""

    def __init__(self, sheet: Any) -> None:
        self._sheet = sheet

    def append(self, values: Iterable[Any]) -> None:
        """Append one row, each cell spreadsheet-safe."""
        self._sheet.append(safe_row(values))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sheet, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "_sheet":
            object.__setattr__(self, name, value)
        else:
            setattr(self._sheet, name, value)
