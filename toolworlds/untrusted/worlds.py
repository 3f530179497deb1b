"""Model-written worlds for the `toolworld` commands and servers: loaded, played and described only through the
sandbox.

A sandboxed world is known to this process by its schemas alone (`toolworlds.sandbox.described`), so
`export` writes the same files for it as for a world class.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

import anyio
import structlog
from starlette.applications import Starlette

from toolworlds.checks import CheckResult, check_episodes
from toolworlds.episode import Episode
from toolworlds.hosting.http import MAX_BODY_BYTES
from toolworlds.play import Transcript, play_driven
from toolworlds.policies import OraclePolicy, RandomPolicy
from toolworlds.sandbox import SandboxPool, SandboxSettings, WorldInfo, WorldLoadError
from toolworlds.sandbox.described import DescribedWorld, SandboxWorld
from toolworlds.untrusted import ExtractionError, Repair, prepare

log = structlog.get_logger()

T = TypeVar("T")


def prepared_file(path: Path) -> Repair:
    """A model-written file as `validate`'s gates judge it (extracted and repaired): the code every command
    runs. The fixes are logged, so what runs is never a silent rewrite."""
    try:
        prepared = prepare(path.read_text(errors="replace"))
    except ExtractionError as error:
        raise WorldLoadError(f"{path.name}: {error}") from None
    if prepared.fixes:
        log.warning("model-written world repaired before it runs, as validate judged it", file=str(path),
                    fixes=prepared.fixes)  # fmt: skip
    return prepared


async def load_file(pool: SandboxPool, path: Path) -> WorldInfo:
    """Load a model-written file into `pool` as the gates judge it (`prepared_file`)."""
    return await pool.load(prepared_file(path).source, path.name)


async def load_world_file(pool: SandboxPool, path: Path) -> SandboxWorld:
    """`load_file`, as a `World` whose episodes open in `pool`."""
    return SandboxWorld(pool, await load_file(pool, path))


def in_sandbox(path: Path, work: Callable[[SandboxPool, WorldInfo], Awaitable[T]]) -> T:
    """Load `path` into a one-zygote sandbox, run `work` on it, and tear the sandbox down."""

    async def run() -> T:
        async with SandboxPool(SandboxSettings(zygotes=1)) as pool:
            return await work(pool, await load_file(pool, path))

    return anyio.run(run)


def describe(path: Path) -> DescribedWorld:
    async def read(pool: SandboxPool, world: WorldInfo) -> DescribedWorld:
        return DescribedWorld(world)

    return in_sandbox(path, read)


def play_in_sandbox(path: Path, seed: int, policy: OraclePolicy | RandomPolicy) -> Transcript:
    (transcript,) = plays_in_sandbox(path, [seed], lambda _: policy)
    return transcript


def plays_in_sandbox(
    path: Path, seeds: Sequence[int], policy: Callable[[int], OraclePolicy | RandomPolicy]
) -> list[Transcript]:
    """One play per seed, each an episode in a sandbox process of its own (one sandbox for all of them)."""

    async def play_all(pool: SandboxPool, world: WorldInfo) -> list[Transcript]:
        transcripts = []
        for seed in seeds:
            episode = await pool.open(world)
            try:
                transcripts.append(await play_driven(episode, seed, policy(seed), world.tools))
            finally:
                await episode.close()
        return transcripts

    return in_sandbox(path, play_all)


def check_in_sandbox(path: Path, seeds: Sequence[int]) -> list[CheckResult]:
    """The contract checks (`toolworlds.checks`) of a model-written file, played in the sandbox."""

    async def checked(pool: SandboxPool, world: WorldInfo) -> list[CheckResult]:
        return (await check_episodes(SandboxWorld(pool, world), list(seeds)))[0]

    return in_sandbox(path, checked)


class SandboxedFile(DescribedWorld):
    """A model-written file as a `World` for servers: described once (`describe`), its episodes opened in a pool
    that lives while `running()` is entered (servers enter it in their lifespan; the file is loaded again there).
    """

    def __init__(self, path: Path, described: DescribedWorld) -> None:
        super().__init__(described.info)
        self.source = prepared_file(path).source
        self.filename = path.name
        self._pool: SandboxPool | None = None
        self._loaded: WorldInfo | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with SandboxPool(SandboxSettings(quarantine=False)) as pool:  # one slow call must not end the rest
            self._pool, self._loaded = pool, await pool.load(self.source, self.filename)
            try:
                yield
            finally:
                self._pool = self._loaded = None

    async def open(self) -> Episode:
        if self._pool is None or self._loaded is None:
            raise RuntimeError("the sandbox is not running: enter running() first")
        return await self._pool.open(self._loaded)


def sandboxed_app(
    path: Path, world: DescribedWorld, capacity: int = 10_000, max_body_bytes: int = MAX_BODY_BYTES
) -> Starlette:
    """The HTTP session API of a model-written world: each session is an episode in a sandbox process of its own."""
    from toolworlds.hosting.http import create_app

    served = SandboxedFile(path, world)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with served.running():
            yield

    return create_app(served, capacity, lifespan=lifespan, max_body_bytes=max_body_bytes)
