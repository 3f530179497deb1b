"""The base of spadework's transformers callbacks, without importing transformers where they are defined."""

from __future__ import annotations

from typing import Any


class Callback:
    """A transformers `TrainerCallback` by duck typing: each `on_*` event a subclass does not define does nothing."""

    def __getattr__(self, event: str) -> Any:
        if event.startswith("on_"):
            return lambda *args, **kwargs: None
        raise AttributeError(event)
