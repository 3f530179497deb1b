"""Sandbox tests share one pool per module: starting workers costs about a second, and sharing is the point
(a pool must keep serving after a hostile world)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from toolworlds.examples import EXAMPLE_WORLD
from toolworlds.sandbox import Deadlines, SandboxPool, SandboxSettings

LIBRARY_SOURCE = EXAMPLE_WORLD
# Short, so hangs cost little, yet long enough not to flake on a busy 2-core CI machine.
FAST_DEADLINES = Deadlines(load=5.0, reset=2.0, step=2.0, grade=2.0, other=2.0)


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
async def pool() -> AsyncIterator[SandboxPool]:
    async with SandboxPool(SandboxSettings(zygotes=2, deadlines=FAST_DEADLINES)) as running:
        yield running


async def play_library(pool: SandboxPool, seed: int = 3) -> float:
    """Load the library example and replay its reference solution: a pool that serves returns 1.0."""
    world = await pool.load(LIBRARY_SOURCE, "library.py")
    episode = await pool.open(world)
    await episode.reset(seed)
    for action in await episode.solution():
        result = await episode.step(action)
    await episode.close()
    return result.reward
