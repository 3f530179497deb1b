"""The sandbox pool through its public interface: worlds load, play and fail the way the docs say."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from tests.procfs import process_stats
from tests.sandbox.conftest import LIBRARY_SOURCE, play_library
from toolworlds.core import Finish, ToolCall
from toolworlds.episode import Grade
from toolworlds.registry import load_world
from toolworlds.sandbox import (
    EpisodeLost,
    SandboxPool,
    SandboxSettings,
    SandboxStartError,
    WorldCodeError,
    WorldLoadError,
    WorldQuarantined,
    WorldTimeout,
)
from toolworlds.sandbox.landlock import abi_version

pytestmark = pytest.mark.anyio

HANGS_IN_STEP = LIBRARY_SOURCE.replace(
    '"""Borrow a book by its id.', '"""Borrow a book by its id.\n\n        Hangs.'
).replace("        book = self.state.books.get(book_id)", "        while True:\n            pass")
RAISES_IN_SEARCH = LIBRARY_SOURCE.replace(
    "        return [b for b in self.state.books.values()",
    "        if title == 'boom':\n            raise KeyError(title)\n"
    "        return [b for b in self.state.books.values()",
)


async def test_a_sandboxed_world_plays_exactly_as_in_process(pool: SandboxPool) -> None:
    world = await pool.load(LIBRARY_SOURCE, "library.py")
    local = load_world("toolworlds/examples/library.py:LibraryWorld")
    assert world.name == "library" and world.max_steps == local.max_steps
    assert world.openai_tools() == local.openai_tools()
    episode, reference = await pool.open(world), local()
    for seed in range(3):
        task = await episode.reset(seed)
        assert task == reference.reset(seed)
        for action in await episode.solution():
            assert (await episode.step(action)) == reference.step(action)
        assert (await episode.grade()) == Grade(score=1.0, scorecard=reference.grade().summary())
    assert await episode.snapshot() == reference.snapshot()


async def test_load_errors_name_what_is_wrong(pool: SandboxPool) -> None:
    with pytest.raises(WorldLoadError, match="SyntaxError"):
        await pool.load("class Broken(:\n")
    with pytest.raises(WorldLoadError, match=r"exactly one ToolWorld subclass.*none"):
        await pool.load("x = 1\n")
    with pytest.raises(WorldLoadError, match="ZeroDivisionError"):
        await pool.load(LIBRARY_SOURCE + "\n1 / 0\n")


async def test_a_world_that_raises_stays_usable(pool: SandboxPool) -> None:
    world = await pool.load(RAISES_IN_SEARCH)
    episode = await pool.open(world)
    await episode.reset(0)
    with pytest.raises(WorldCodeError, match=r"search crashed on .*KeyError\('boom'\)"):
        await episode.step(ToolCall(name="search", arguments={"title": "boom"}))
    assert pool.quarantined(world) is None
    result = await episode.step(Finish())
    assert result.terminated and result.reward == 0.0


async def test_a_hang_is_killed_at_its_deadline_and_quarantined(pool: SandboxPool) -> None:
    hanging = await pool.load(HANGS_IN_STEP)
    victim_world = await pool.load(LIBRARY_SOURCE)
    episode = await pool.open(hanging)
    # Episodes open at the same time, of another world and of the hanging world itself.
    victims = [await pool.open(victim_world) for _ in range(2)]
    sibling = await pool.open(hanging)
    for victim in [*victims, sibling]:
        await victim.reset(0)
    await episode.reset(1)
    killed = pool.killed
    with anyio.fail_after(5):
        with pytest.raises(WorldTimeout, match=r"step ran past its 2 s deadline.*SIGKILL"):
            await episode.step(ToolCall(name="borrow", arguments={"book_id": "B0"}))
    assert pool.killed == killed + 1
    assert "deadline" in (pool.quarantined(hanging) or "")
    with pytest.raises(WorldQuarantined):
        await episode.reset(0)
    with pytest.raises(WorldQuarantined):
        await pool.open(hanging)
    with pytest.raises(WorldQuarantined):  # a quarantined world's other episodes get no more calls
        await sibling.step(Finish())
    for victim in victims:  # a hang costs its own episode, nobody else's
        for action in await victim.solution():
            result = await victim.step(action)
        assert result.reward == 1.0
        await victim.close()
    assert await play_library(pool) == 1.0


async def test_a_cancelled_caller_does_not_desynchronise_the_worker(pool: SandboxPool) -> None:
    world = await pool.load(LIBRARY_SOURCE)
    episode = await pool.open(world)
    await episode.reset(0)
    with anyio.move_on_after(0):
        await episode.step(ToolCall(name="search", arguments={"title": "e"}))
    # The abandoned reply is consumed by the reader, never handed to the next caller.
    task = await episode.reset(4)
    assert task.seed == 4
    assert await play_library(pool) == 1.0


async def test_opens_cancelled_while_their_process_is_forked_leave_nothing_behind() -> None:
    """A caller cancelled mid-open abandons a process its zygote has already forked and handed over: the pool
    must still end it, or the zygote (which outlives its children) holds the pool's exit until it is killed."""
    async with SandboxPool(SandboxSettings(zygotes=1, spares=0)) as pool:
        assert await play_library(pool) == 1.0
        world = await pool.load(LIBRARY_SOURCE)
        sessions = set(pool.zygote_pids)
        for attempt in range(40):  # cancelled at every point of the open, from before the fork to after it
            with anyio.move_on_after(0.0002 * attempt):
                episode = await pool.open(world)
                await episode.close()
        started = time.monotonic()
    assert time.monotonic() - started < 2  # the zygote's grace is 5 s: it exited by itself
    assert not [pid for pid, fields in process_stats() if int(fields[3]) in sessions]


async def test_many_cancelled_opens_leave_no_fork_unclaimed_while_the_pool_runs() -> None:
    """Each open cancelled mid-fork must not leave its process alive, nor its descriptors in flight to the
    pool: the kernel caps those per user (at the zygote's 64 open files), and once unclaimed hand-overs reach
    it, every later fork fails with ETOOMANYREFS (it did, after ~32 such opens)."""
    async with SandboxPool(SandboxSettings(zygotes=1, spares=0)) as pool:
        world = await pool.load(LIBRARY_SOURCE)
        (zygote,) = pool.zygote_pids
        cancelled = 0
        for attempt in range(200):
            with anyio.move_on_after(0.0002 * (attempt % 10)) as scope:
                episode = await pool.open(world)
                await episode.close()
            cancelled += scope.cancelled_caught
        assert cancelled > 100
        await anyio.sleep(0.2)  # killed processes take a moment to go
        forks = [pid for pid, fields in process_stats() if int(fields[1]) == zygote and fields[0] != "Z"]
        assert len(forks) <= 1, f"{len(forks)} episode processes outlived their cancelled opens"
        assert await play_library(pool) == 1.0


async def test_the_pool_reports_its_confinement() -> None:
    settings = SandboxSettings(zygotes=1, require=frozenset({"rlimit address space", "rlimit processes"}))
    async with SandboxPool(settings) as pool:
        layers = pool.confinement["layers"]
        assert layers["rlimit processes"] == "0"
        if abi_version() >= 1:
            assert "landlock" in layers
    impossible = SandboxSettings(zygotes=1, require=frozenset({"a layer nobody has"}))
    with pytest.raises(SandboxStartError, match="a layer nobody has"):
        async with SandboxPool(impossible):
            pass


UNPRIVILEGED_RUN = """
import anyio, json
from tests.sandbox.conftest import play_library
from toolworlds.sandbox import SandboxPool, SandboxSettings

async def main():
    async with SandboxPool(SandboxSettings(zygotes=1)) as pool:
        print(json.dumps({"confinement": pool.confinement, "score": await play_library(pool)}))

anyio.run(main)
"""


def system_python() -> str | None:
    """An interpreter an unprivileged user may run (ours may live under /root), of our version."""
    candidate = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    return str(candidate) if candidate.exists() else None


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to become nobody")
@pytest.mark.skipif(system_python() is None, reason="no system Python of this version for an unprivileged user")
def test_an_unprivileged_user_gets_the_layers_it_can(tmp_path: Path) -> None:
    repository = Path(__file__).parents[2]
    packages = next(p for p in sys.path if p.endswith("site-packages") and Path(p, "pydantic").exists())
    tmp_path.chmod(0o777)
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    environment = {"PYTHONPATH": f"{packages}:{repository}", "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    completed = subprocess.run(
        [*nobody, str(system_python()), "-c", UNPRIVILEGED_RUN],
        env={**environment, "PATH": os.defpath},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report["score"] == 1.0
    layers = report["confinement"]["layers"]
    assert layers["unprivileged user"] == "65534"
    assert "rlimit processes" in layers
    if abi_version() >= 1:
        assert "landlock" in layers


async def test_an_unloaded_world_ends_its_episodes(pool: SandboxPool) -> None:
    world = await pool.load(LIBRARY_SOURCE)
    episodes = [await pool.open(world) for _ in range(3)]
    await episodes[0].reset(0)
    await pool.unload(world)
    with pytest.raises(LookupError, match="was unloaded"):
        await pool.open(world)
    for episode in episodes:  # each episode's process was killed with the world
        with pytest.raises(EpisodeLost, match="closed"):
            await episode.reset(0)
