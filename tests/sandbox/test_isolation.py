"""No world can touch another: every crossing attack leaves other results exactly as they are without it.

One pool with one zygote serves every attack, so every episode process comes from the same fork server
(the most any two episodes ever share). For each attack: its own episodes, one after another and two at
once, must all tell the same story; and the library world, loaded and played beside it, must produce the
same world info and transcripts, byte for byte, as in a pool that never saw an attack.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.sandbox.conftest import FAST_DEADLINES, LIBRARY_SOURCE
from tests.sandbox.crossing import CORPUS, Crossing
from toolworlds.core import Finish, ToolCall
from toolworlds.sandbox import SandboxEpisode, SandboxError, SandboxPool, SandboxSettings, WorldInfo

pytestmark = pytest.mark.anyio
SETTINGS = SandboxSettings(zygotes=1, deadlines=FAST_DEADLINES)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def shared_pool() -> AsyncIterator[SandboxPool]:
    async with SandboxPool(SETTINGS) as running:
        yield running


@pytest.fixture(scope="module")
async def untouched() -> list[str]:
    """The library world's transcripts in a pool no attack ever ran in."""
    async with SandboxPool(SETTINGS) as pool:
        return await library_story(pool)


async def outcome(call: object) -> str:
    try:
        return repr(await call)  # type: ignore[misc]
    except SandboxError as error:
        return f"{error.reason}: {error}"


async def library_story(pool: SandboxPool) -> list[str]:
    """World info, a do-nothing play and the reference play of the library world, as text."""
    world = await pool.load(LIBRARY_SOURCE, "library.py")
    story = [repr(world_fields(world))]
    for seed in (0, 1):
        idle = await pool.open(world)
        story += [await outcome(idle.reset(seed)), await outcome(idle.step(Finish())), await outcome(idle.grade())]
        await idle.close()
    solved = await pool.open(world)
    story.append(await outcome(solved.reset(2)))
    for action in await solved.solution():
        story.append(await outcome(solved.step(action)))
    story.append(await outcome(solved.grade()))
    await solved.close()
    await pool.unload(world)
    return story


def world_fields(world: WorldInfo) -> tuple[object, ...]:
    return world.name, world.class_name, world.description, world.max_steps, world.tools


async def start(episode: SandboxEpisode) -> list[str]:
    """An episode's look before and after its own plant."""
    return [await outcome(episode.reset(0)), await outcome(episode.step(ToolCall(name="act")))]


def test_the_corpus_reaches_every_way_we_know() -> None:
    assert len(CORPUS) >= 15 and len({attack.name for attack in CORPUS}) == len(CORPUS)
    assert sum(attack.passes_policy for attack in CORPUS) >= 6  # most of them need nothing the policy forbids


@pytest.mark.parametrize("attack", CORPUS, ids=[attack.name for attack in CORPUS])
async def test_an_attack_reaches_no_other_episode(
    attack: Crossing, shared_pool: SandboxPool, untouched: list[str]
) -> None:
    world = await shared_pool.load(attack.source, "crossing.py")
    first = await shared_pool.open(world)
    stories = [await start(first)]
    second = await shared_pool.open(world)  # while the first is still open
    stories.append(await start(second))
    await first.close()
    await second.close()
    for _ in range(2):  # and after both have gone
        later = await shared_pool.open(world)
        stories.append(await start(later))
        await later.close()
    assert all(story == stories[0] for story in stories), stories
    assert await library_story(shared_pool) == untouched
    await shared_pool.unload(world)
