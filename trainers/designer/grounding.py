"""How much of a world comes from its document: the share of its names and record values found there.

A world is grounded when what it is made of was read, not made up: its table, field and tool names and
the values of its records. A name counts as found when it, or one of its words (snake_case split, three
letters or more, not one of the operation verbs every tool name may carry), occurs as a word of the
document; a text value when it occurs in the document as whole words (case folded); a number when the
document holds the same number. Booleans, empty texts and whole numbers below 10 say nothing about where
they came from (any document counts its rows) and are not counted.
Measured on spec worlds only: a Python world's state is code, not data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from toolworlds.spec import Spec

GROUNDED_SHARE = 0.5  # a world counts as grounded when at least half of its names and values were found
# Words any tool name may carry whatever its document: they say what a tool does, not what it is about.
OPERATION_WORDS = frozenset(
    {
        "get",
        "set",
        "find",
        "list",
        "lookup",
        "look",
        "search",
        "update",
        "create",
        "add",
        "new",
        "delete",
        "remove",
        "transfer",
        "move",
        "change",
        "by",
        "all",
        "the",
        "for",
        "and",
        "of",
        "with",
        "from",
        "to",
        "record",
        "records",
        "item",
        "items",
    }
)
_WORD = re.compile(r"[^\W_]+")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Grounding:
    """Counts of a world's names and values, and how many of each its document holds."""

    names: int
    names_found: int
    values: int
    values_found: int

    @property
    def share(self) -> float:
        """Found over all, names and values together; 0.0 for a world with neither."""
        total = self.names + self.values
        return (self.names_found + self.values_found) / total if total else 0.0

    @property
    def grounded(self) -> bool:
        return self.share >= GROUNDED_SHARE


def grounding(spec: Spec, document: str) -> Grounding:
    """Which of the spec's table, field and tool names and record values its document holds."""
    words = {word.casefold() for word in _WORD.findall(document)}
    folded = document.casefold()
    numbers = {float(number) for number in _NUMBER.findall(document)}
    names = [table.name for table in spec.tables]
    names += [field for table in spec.tables for field in table.fields]
    names += [tool.name for tool in spec.tools]
    values = [value for table in spec.tables for record in table.records for value in record.values()]
    values = [value for value in values if _telling(value)]
    return Grounding(
        names=len(names),
        names_found=sum(_name_found(name, words) for name in names),
        values=len(values),
        values_found=sum(_value_found(value, folded, numbers) for value in values),
    )


def _name_found(name: str, words: set[str]) -> bool:
    parts = [part for part in name.casefold().split("_") if part]
    if "".join(parts) in words:
        return True
    return any(part in words for part in parts if len(part) >= 3 and part not in OPERATION_WORDS)


def _telling(value: object) -> bool:
    """Whether a value could only have come from somewhere: not a flag, not empty, not a small count."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, int | float):
        return not (float(value).is_integer() and abs(value) < 10)
    return bool(str(value).strip())


def _value_found(value: str | int | float, folded: str, numbers: set[float]) -> bool:
    if isinstance(value, int | float):
        return float(value) in numbers
    text = re.escape(value.strip().casefold())
    return re.search(rf"(?<!\w){text}(?!\w)", folded) is not None
