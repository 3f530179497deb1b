"""Fixtures for the whole suite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.grammar_walk import bytes_matcher  # noqa: F401  (a fixture for every test module)
from tests.policy import embedded_policy  # noqa: F401  (a fixture for every test module)
from tests.vllm import vllm_server  # noqa: F401  (started only by the tests that ask for it)


@pytest.fixture(scope="session", autouse=True)
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Prepared tokenizers and checkpoints go to a fresh cache, as on a new machine (children inherit it), and
    runs track to a fresh Trackio store, not the user's."""
    path = tmp_path_factory.mktemp("model-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPADEWORK_CACHE", str(path))
        patch.setenv("TRACKIO_DIR", str(tmp_path_factory.mktemp("trackio")))
        yield path
