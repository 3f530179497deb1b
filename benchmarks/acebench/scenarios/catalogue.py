"""The apps' start data and the texts they answer with, per language, from `data/scenarios.json`.

Both were carried over as data from the reference's scenario classes (MIT, see `data/SOURCE.txt`): the users,
messages, reminders, merchants, flights and reservations each app starts with, and every status string it
returns. The texts are what the agent reads, so they are kept verbatim, placeholders written as `{name}`.
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from typing import Any, cast

from benchmarks.acebench.data import VENDORED, Language


@lru_cache(maxsize=1)
def _catalogue() -> dict[str, Any]:
    return cast(dict[str, Any], json.loads((VENDORED / "scenarios.json").read_text(encoding="utf-8")))


def start_data(language: Language, app: str) -> dict[str, Any]:
    """A fresh copy of what `app` starts with (each episode mutates its own)."""
    return copy.deepcopy(cast(dict[str, Any], _catalogue()[language]["defaults"][app]))


def phrase(language: Language, app: str, key: str, **fields: Any) -> str:
    """The text `app` answers with, its `{placeholders}` filled as the reference's f-strings fill them."""
    template = cast(str, _catalogue()[language]["messages"][app][key])
    return template.format(**fields) if fields else template


def term(language: Language, app: str, key: str) -> str:
    """A value the app's logic compares against, such as the cabin name "Economy Class" / "经济舱"."""
    return cast(str, _catalogue()[language]["terms"][app][key])
