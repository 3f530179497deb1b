"""The embedded model as the trainer loads it, once a session: each load is seconds of the suite's run."""

from __future__ import annotations

import copy
from typing import Any

import pytest


@pytest.fixture(scope="session")
def embedded_policy() -> tuple[Any, Any]:
    """The embedded model (eval mode) and its tokenizer, to read: a test that trains it, or changes the model
    or the tokenizer in any way, takes its own copy (`trainable`)."""
    from engine.local_models import default_gguf
    from trainers.checkpoint import load_policy

    return load_policy(default_gguf())


def trainable(policy: tuple[Any, Any]) -> tuple[Any, Any]:
    """A copy of `policy` that a test may train and change (a trainer sets the tokenizer's padding, too)."""
    return copy.deepcopy(policy[0]), copy.deepcopy(policy[1])
