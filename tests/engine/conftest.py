"""Engine tests run on both AnyIO backends, against the mock model as a real server in its own process."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from engine.endpoints import EndpointPool, RetryPolicy
from engine.environments import playing
from engine.rollout import Hints, RolloutPlan, RolloutStats, run_rollout
from engine.settings import EpisodeSettings
from engine.store import TrajectoryStore, read_records
from engine.trajectory import EpisodeRecord
from toolworlds.episode import LocalWorld
from toolworlds.hosting.serving import launched_command
from toolworlds.registry import load_world


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def mock_model(*flags: str) -> AbstractContextManager[str]:
    """`spadework mock-server FLAGS` on a free port; yields its OpenAI base URL."""
    return launched_command("mock-server", *flags, "--port", "0")


@pytest.fixture(scope="module")
def oracle_url() -> Iterator[str]:
    with mock_model() as url:
        yield url


async def play(
    out: Path,
    urls: Sequence[str],
    *,
    world: str = "banking",
    tasks: int = 6,
    samples: int = 1,
    hints: Hints = "plain",
    concurrency: int = 8,
    retry: RetryPolicy | None = None,
    **settings: Any,
) -> tuple[RolloutStats, list[EpisodeRecord]]:
    """Run a rollout into `out` and read back what it stored."""
    plan = RolloutPlan(
        run="test",
        world=world,
        tasks=tasks,
        samples=samples,
        hints=hints,
        settings=EpisodeSettings(**settings),
    )
    retry = retry or RetryPolicy(attempts=4, base_s=0.01, cap_s=0.05)
    with TrajectoryStore.open(out, plan) as store:
        async with EndpointPool.open(urls, retry=retry) as pool:
            stats = await run_rollout(plan, store, pool, playing(LocalWorld(load_world(world))), concurrency)
    return stats, list(read_records(out))
