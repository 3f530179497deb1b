"""Gate 1: the world's code out of a model's reply, within a size cap."""

from __future__ import annotations

import re

MAX_SOURCE_BYTES = 64 * 1024

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)
_WORLD_CLASS = re.compile(r"^class\s+\w+\s*\(\s*(?:toolworlds\.)?ToolWorld\b", re.MULTILINE)


class ExtractionError(ValueError):
    """The reply holds no usable code: the message says why."""


def extract_source(reply: str, max_bytes: int = MAX_SOURCE_BYTES) -> str:
    """The fenced block that defines a `ToolWorld` subclass (else the longest block, else the bare reply).

    An unclosed last fence (the reply hit its token limit) still yields its code; the later gates judge it.
    """
    blocks: list[str] = [str(block).strip("\n") for block in _FENCE.findall(reply)]
    if not blocks:
        blocks = [reply.strip("\n")] if _WORLD_CLASS.search(reply) else []
    if not blocks:
        raise ExtractionError("no code block in the reply, and no `class ...(ToolWorld...)` in its text")
    worlds = [block for block in blocks if _WORLD_CLASS.search(block)]
    source = max(worlds or blocks, key=len)
    size = len(source.encode())
    if size > max_bytes:
        raise ExtractionError(f"the code is {size:,} bytes; the cap is {max_bytes:,}")
    return source + "\n"
