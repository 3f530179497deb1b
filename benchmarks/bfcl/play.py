"""BFCL v4 multi-turn played by a model through the engine (`benchmarks.playing`), then scored.

Every entry of the four categories has a fixed seed, its place in base, miss_func, miss_param, long_context
order, so `--categories`, `--limit` and `--ids` only choose keys. An entry that failed for infrastructure
reasons (the endpoint gave no answer, the prompt overflowed the context) counts as wrong, as bfcl-eval
counts an inference error, and is reported on its own line.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import lru_cache
from pathlib import Path
from typing import Literal

import anyio

from benchmarks.bfcl.data import CATEGORIES, Entry, load_category
from benchmarks.bfcl.environment import WORLD, BFCLConversation, Style
from benchmarks.playing import BenchPlan, Played, play_keys
from engine.endpoints import EndpointPool
from engine.environments import Environment


class BFCLRun(BenchPlan):
    benchmark: Literal["bfcl-v4-multi-turn"] = "bfcl-v4-multi-turn"
    style: Style


@lru_cache(maxsize=1)
def all_entries() -> tuple[Entry, ...]:
    """The 800 entries in seed order (built once: the scripted server asks for one at every request)."""
    return tuple(entry for category in CATEGORIES for entry in load_category(category))


def seeds_of(chosen: Sequence[Entry]) -> list[int]:
    """The seeds of entries: their places in `all_entries()`."""
    seeds = {entry.id: seed for seed, entry in enumerate(all_entries())}
    return [seeds[entry.id] for entry in chosen]


def play_bfcl(out: Path, spec: BFCLRun, urls: list[str], seeds: list[int], concurrency: int,
              progress: bool = True) -> Played:  # fmt: skip
    """Play `seeds` not yet in `out`'s store through the endpoints at `urls`."""
    entries = all_entries()

    @asynccontextmanager
    async def conversations(pool: EndpointPool) -> AsyncIterator[Callable[[], Environment]]:
        scoring = anyio.CapacityLimiter(4)  # the checker runs in threads: a few at once
        yield lambda: BFCLConversation(entries, spec.style, scoring)

    return play_keys(out, spec, WORLD, seeds, urls, conversations, concurrency, progress)
