"""The base of spadework's transformers callbacks: transformers' own `TrainerCallback`, whose every event does
nothing until a subclass says otherwise. Only the trainer's modules import this (it loads transformers)."""

from __future__ import annotations

from transformers import TrainerCallback


class Callback(TrainerCallback):  # type: ignore[misc]
    """A transformers `TrainerCallback`; subclasses define the `on_*` events they act on."""
