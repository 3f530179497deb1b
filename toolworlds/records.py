"""Helpers for the commonest pieces of a world: sequential ids, fetching a record, finding by name.

The lookups raise `ToolError` the way every world should (`not_found`, `invalid_query`), so a world gets
the conventional refusals in one line and the agent sees the same wording in every world.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from pydantic import BaseModel

from toolworlds.core import ToolError

Record = TypeVar("Record")


class SequentialIds(BaseModel):
    """A state whose new records get ids from a counter: deterministic per seed, unlike uuids."""

    next_id: int = 1000

    def new_id(self, prefix: str) -> str:
        self.next_id += 1
        return f"{prefix}-{self.next_id}"

    def upcoming_id(self, prefix: str) -> str:
        """The id `new_id(prefix)` will give next: for a reference plan that names a record a tool will create."""
        return f"{prefix}-{self.next_id + 1}"


def lookup(records: Mapping[str, Record], key: str, what: str) -> Record:
    """`records[key]`, or a `not_found` refusal that names what was missing."""
    record = records.get(key)
    if record is None:
        raise ToolError("not_found", f"no {what} {key!r}")
    return record


def search(records: Iterable[Record], query: str, text: Callable[[Record], str]) -> list[Record]:
    """Records whose `text` contains `query`, ignoring case; an empty query is refused, not a match-all."""
    needle = query.strip().lower()
    if not needle:
        raise ToolError("invalid_query", "the search text must not be empty")
    return [record for record in records if needle in text(record).lower()]
