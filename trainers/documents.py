"""What a grounding corpus is made of: documents, the sources that hold them, and the error a bad source raises.

Apart from `trainers.corpus` (sampling and the built-in sources) so that a source defined elsewhere
(`trainers.tables`) and the corpus that picks among sources need not import each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class CorpusError(ValueError):
    """A corpus source that cannot be read: the message names the file, line or field."""


@dataclass(frozen=True)
class Document:
    """One grounding document (or one chunk of it); `source` says where it came from."""

    source: str
    title: str
    text: str


class Source(Protocol):
    """Random access to a collection of documents."""

    name: str

    def __len__(self) -> int: ...

    def document(self, index: int) -> Document: ...
