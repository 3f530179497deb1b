"""The mock model's `random` script draws the same calls for the same episode in every process: tests that
count on a random agent doing something (searching twice in one play) must not pass or fail by Python's
per-process string-hash salt, as one did on a fresh clone's CI."""

from __future__ import annotations

import os
import subprocess
import sys

DRAW = """
from engine.trajectory import EpisodeKey
from spadework.testing.mock_server import MockModel, MockSettings
model = MockModel(MockSettings(script="random"))
print([model.next_action(EpisodeKey(world="banking", seed=3, sample=1), turn) for turn in range(3)])
"""


def test_the_random_script_draws_the_same_calls_whatever_the_hash_salt() -> None:
    def draw(salt: str) -> str:
        env = {**os.environ, "PYTHONHASHSEED": salt}
        return subprocess.run([sys.executable, "-c", DRAW], capture_output=True, text=True, check=True, timeout=120,
                              env=env).stdout  # fmt: skip

    draws = [draw("1"), draw("2")]
    assert draws[0] == draws[1] and "ToolCall" in draws[0]
