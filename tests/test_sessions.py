"""The session store behind both servers: isolation and a bounded number of sessions."""

from __future__ import annotations

import pytest

from toolworlds.core import Finish
from toolworlds.episode import LocalEpisode, LocalWorld
from toolworlds.examples.library import LibraryWorld
from toolworlds.hosting.sessions import SessionError, SessionStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_full_store_drops_a_finished_session_never_a_live_one() -> None:
    store = SessionStore(LocalWorld(LibraryWorld), capacity=2)
    first, _ = await store.create(seed=1)
    second, _ = await store.create(seed=2)
    with pytest.raises(SessionError) as refused:
        await store.create(seed=3)
    assert refused.value.status == 503 and "still playing" in refused.value.message

    await store.step(first, Finish())
    third, _ = await store.create(seed=3)
    assert len(store) == 2
    with pytest.raises(SessionError) as gone:
        store.get(first)
    assert gone.value.status == 404
    assert store.get(second).public_task.seed == 2 and store.get(third).public_task.seed == 3


async def test_hint_only_on_request_and_finished_sessions_refuse_steps() -> None:
    store = SessionStore(LocalWorld(LibraryWorld))
    session, task = await store.create(seed=5)
    assert task.hint is None
    assert (await store.create(seed=5, include_hint=True))[1].hint == LibraryWorld().reset(5).hint
    await store.step(session, Finish())
    with pytest.raises(SessionError) as over:
        await store.step(session, Finish())
    assert over.value.status == 409 and over.value.code == "episode_over"
    report = await store.score(session)
    assert report.done and report.steps == 1 and report.score == 0.0


def test_a_paced_world_lets_no_more_episodes_step_at_once_than_its_limiter() -> None:
    """`Paced` is a wrapper: the world's own episodes, each reset and step waiting for one shared limiter."""
    import anyio

    from toolworlds.core import StepResult, Task, ToolCall
    from toolworlds.episode import Episode, Paced

    inside, most = 0, 0

    class Slow(LocalEpisode):  # the library world, each step taking a while
        async def step(self, action: ToolCall | Finish) -> StepResult:
            nonlocal inside, most
            inside += 1
            most = max(most, inside)
            await anyio.sleep(0.01)
            inside -= 1
            return await super().step(action)

    class SlowWorld(LocalWorld):
        async def open(self) -> Episode:
            return Slow(LibraryWorld())

    world = Paced(SlowWorld(LibraryWorld), anyio.CapacityLimiter(2))
    scores: list[float] = []

    async def play(seed: int) -> None:
        episode = await world.open()
        task: Task = await episode.reset(seed)
        assert task.world == LibraryWorld.name
        for _ in range(3):
            await episode.step(ToolCall(name="search", arguments={"title": "a"}))
        await episode.step(Finish())
        scores.append((await episode.grade()).score)

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for seed in range(6):
                group.start_soon(play, seed)

    anyio.run(main)
    assert world.name == LibraryWorld.name and world.openai_tools() == LibraryWorld.openai_tools()
    assert len(scores) == 6 and most == 2  # episodes did step at once, never more than the limiter lets
