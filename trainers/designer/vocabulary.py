"""What a staged spec may copy from its document (`designer.vocabulary=document`): names, and values by column.

The 135M designer writes what its grammar lets it write. Left free, it named the tables of 8 in 10 valid
worlds after nothing in their documents (`worlds_your_dream_to_be_`), though each document lists its
fields and shows rows. With a vocabulary, the stage grammars offer a table's and a field's name only among
the document's words, and a record's text values and keys only among its cells (a field named like a
column of the document's table takes that column's cells; numbers likewise, where the column holds them).
The model still chooses which table, which columns, which rows and which values; it can no longer make them
up. Where the document has no table (the Python-docs corpus), its words are the cells.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from toolworlds.spec import RESERVED
from trainers.designer.budget import SPEC_BUDGET, SpecBudget

VocabularyRule = Literal["free", "document"]  # document: a staged spec's names and values from a `Vocabulary`
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]*")
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]{0,9})")
_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]{0,9})\.[0-9]{1,4}")
# Words too common to name a table or a field after: they would be copied, and mean nothing.
_PLAIN = frozenset(
    {"the", "and", "for", "with", "from", "that", "this", "these", "those", "are", "was", "were", "its", "all",
     "one", "each", "which", "below", "above", "them", "they", "their", "there", "here", "has", "have", "had",
     "not", "but", "any", "some", "many", "more", "most", "other", "into", "onto", "than", "then", "when",
     "where", "what", "who", "how", "records", "record", "fields", "field", "rows", "row"}
)  # fmt: skip
_NOT_FIRST = frozenset(string.punctuation + string.whitespace)
_TEXT_UNSAFE = re.compile(r'["\\\x00-\x1f\x7f]')  # what a JSON string cannot hold unescaped


@dataclass(frozen=True)
class Vocabulary:
    """A document's names (identifiers a table or field may take) and cells (values a record may hold)."""

    names: tuple[str, ...]
    cells: tuple[str, ...]
    columns: dict[str, tuple[str, ...]] = field(default_factory=dict)  # a column's name -> its cells

    @classmethod
    def of(cls, text: str, budget: SpecBudget = SPEC_BUDGET) -> Vocabulary:
        """The vocabulary of a document: its words as names, the cells of its `a | b | c` table (by column
        where a header row names them), or its words where it has no table."""
        names = _unique(
            word.casefold()
            for word in _WORD.findall(text)
            if 3 <= len(word) <= budget.name and _IDENTIFIER.fullmatch(word.casefold())
            and word.casefold() not in _PLAIN and word.casefold() not in RESERVED
        )  # fmt: skip
        columns = _columns(text)
        cells = _unique(cell for column in columns.values() for cell in column)
        if not cells:
            cells = _unique(word for word in _WORD.findall(text) if len(word) >= 3)
        fits = {cell for cell in cells if len(cell) <= budget.value and not _TEXT_UNSAFE.search(cell)}
        return cls(
            names=tuple(names),
            cells=tuple(cell for cell in cells if cell in fits),
            columns={name: tuple(c for c in column if c in fits) for name, column in columns.items()},
        )

    def values(self, field_name: str, kind: str) -> list[Any]:
        """What a record's `field_name` of type `kind` may hold: its column's cells if the document has such a
        column and they are of the type, else every cell of the type; [] where none is."""
        return self._column_else_all(field_name, lambda cell: _typed(cell, kind))

    def keys(self, field_name: str) -> list[str]:
        """What a record's key `field_name` may be: its text values (`values`) that a key may be (no '/')."""
        return self._column_else_all(field_name, lambda cell: None if "/" in cell else _typed(cell, "string"))

    def _column_else_all(self, field_name: str, read: Callable[[str], Any]) -> list[Any]:
        """The cells `read` makes something of (not None), from `field_name`'s column, else from every cell."""
        for source in (self.columns.get(field_name, ()), self.cells):
            if found := _unique(value for cell in source if (value := read(cell)) is not None):
                return found
        return []


def _columns(text: str) -> dict[str, list[str]]:
    """The cells of the document's table by column, read from a header row of names and the rows after it
    with as many cells."""
    columns: dict[str, list[str]] = {}
    header: list[str] | None = None
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split("|")] if "|" in line else []
        if header is not None and len(cells) == len(header):
            for name, cell in zip(header, cells, strict=True):
                if cell:
                    columns.setdefault(name, []).append(cell)
        elif len(cells) > 1 and all(_IDENTIFIER.fullmatch(cell) for cell in cells):
            header = cells
        else:
            header = None
    return columns


def _typed(cell: str, kind: str) -> Any:
    """`cell` as a value of `kind` (a JSON number the spec grammar admits, or the text itself); None if it
    is not one."""
    if kind == "string":
        return cell if cell[:1] not in _NOT_FIRST else None  # a value opens as a key must: not on punctuation
    if kind == "integer":
        return int(cell) if _INTEGER.fullmatch(cell) else None
    if kind == "number":
        if _INTEGER.fullmatch(cell):
            return int(cell)
        return float(cell) if _DECIMAL.fullmatch(cell) else None
    return None


def _unique(items: Any) -> list[Any]:
    return list(dict.fromkeys(items))
