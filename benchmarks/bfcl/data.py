"""BFCL v4 multi-turn entries and their ground truth, from the `bfcl-eval` wheel (Apache-2.0).

The wheel installs without its heavy dependencies (`just bench-deps`: `--no-deps`, plus mpmath and
filelock). Importing it creates `result/` and `score/` folders under `BFCL_PROJECT_ROOT`, so that is
pointed at spadework's cache before the first import instead of at site-packages.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

CATEGORIES = ("base", "miss_func", "miss_param", "long_context")
PIN = "bfcl-eval==2026.3.23"


class BFCLUnavailable(RuntimeError):
    """The `bfcl-eval` wheel is not installed; the message says how to install it."""


class UnknownCategory(ValueError):
    """A category that BFCL v4 multi-turn does not have; the message lists the ones it has."""


class UnknownEntry(ValueError):
    """An entry id that no multi-turn category holds; the message names it and the id pattern."""


@dataclass(frozen=True)
class Entry:
    """One multi-turn test: the user's turns, the tools, the backends' start state and the answer."""

    id: str
    category: str
    turns: list[list[dict[str, Any]]]  # the user's messages, turn by turn ([] on a held-out-function turn)
    functions: list[dict[str, Any]]  # BFCL-style docs offered from the start
    missed: dict[int, list[dict[str, Any]]]  # turn -> docs revealed on that turn (miss_func)
    initial_config: dict[str, Any]
    involved_classes: list[str]
    ground_truth: list[list[str]]  # per turn, the calls as Python source (`cd(folder='x')`)
    raw: dict[str, Any]  # the entry as the checker wants it

    @property
    def long_context(self) -> bool:
        return self.category == "long_context"


def bfcl_modules() -> Any:
    """Import `bfcl_eval` with its project root in spadework's cache (it writes folders there at import)."""
    from engine.local_models import cache_root

    root = cache_root() / "bfcl"
    root.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("BFCL_PROJECT_ROOT", str(root))
    try:
        import bfcl_eval.utils as utils
    except ImportError:
        raise BFCLUnavailable(
            f"BFCL needs the bfcl-eval wheel: run `just bench-deps` (pip install --no-deps {PIN})"
        ) from None
    return utils


def categories(names: str | list[str] | None) -> list[str]:
    """`base,miss_func` (or a list; None: all four) checked against the multi-turn categories."""
    chosen = list(CATEGORIES) if names is None else names.split(",") if isinstance(names, str) else names
    chosen = [name.strip().removeprefix("multi_turn_") for name in chosen]
    unknown = [name or "''" for name in chosen if name not in CATEGORIES]
    if unknown or not chosen:
        named = f"unknown BFCL category {', '.join(unknown)}" if unknown else "no BFCL category named"
        raise UnknownCategory(f"{named}: choose from {', '.join(CATEGORIES)}")
    return list(dict.fromkeys(chosen))  # a category named twice is played once


@lru_cache(maxsize=8)
def load_category(category: str) -> tuple[Entry, ...]:
    """Every entry of one category (200 each), in the dataset's order."""
    utils = bfcl_modules()
    name = f"multi_turn_{category}"
    answers = {answer["id"]: answer["ground_truth"] for answer in utils.load_ground_truth_entry(name)}
    entries = []
    for raw in utils.load_dataset_entry(name):
        entries.append(
            Entry(
                id=raw["id"],
                category=category,
                turns=raw["question"],
                functions=raw["function"],
                missed={int(turn): docs for turn, docs in raw.get("missed_function", {}).items()},
                initial_config=raw["initial_config"],
                involved_classes=raw["involved_classes"],
                ground_truth=answers[raw["id"]],
                raw=raw,
            )
        )
    return tuple(entries)


def choose(categories: list[str], limit: int | None = None, ids: list[str] | None = None) -> list[Entry]:
    """The entries a run plays: the given `ids` (in any category), else the first `limit` of each category."""
    if not ids:
        return [entry for category in categories for entry in load_category(category)[:limit]]
    known = {entry.id: entry for category in CATEGORIES for entry in load_category(category)}
    unknown = [name for name in ids if name not in known]
    if unknown:
        raise UnknownEntry(f"no BFCL multi-turn entry {', '.join(unknown)} (ids look like multi_turn_base_0)")
    return [known[name] for name in dict.fromkeys(ids)]
