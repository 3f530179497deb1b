"""The engine's view of a toolworld: an async reset/step/score/close, whatever process the world runs in.

Reference worlds are the project's own code and run in-process (`LocalEnvironment`); model-written worlds
run in the sandbox pool behind this same interface (`SandboxEnvironment`). A shared limiter bounds how
many in-process steps run at once, so thousands of episodes cannot pile CPU work onto the event loop in
one burst; sandboxed steps run in their own processes, whose sockets pace them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import anyio

from toolworlds.core import Finish, StepResult, Task, ToolCall, ToolWorld
from toolworlds.episode import Grade, LocalEpisode
from toolworlds.registry import load_world
from toolworlds.sandbox import SandboxEpisode, SandboxPool, WorldInfo
from toolworlds.sandbox.worlds import load_file


class Environment(Protocol):
    name: str
    description: str
    tools: list[dict[str, Any]]

    async def reset(self, seed: int) -> Task: ...

    async def step(self, action: ToolCall | Finish) -> StepResult: ...

    async def grade(self) -> Grade: ...

    async def close(self) -> None: ...


class LocalEnvironment:
    """A trusted world in this process (a `LocalEpisode`), its steps under the shared limiter; one per episode."""

    def __init__(
        self, world_class: type[ToolWorld[Any]], tools: list[dict[str, Any]], steps: anyio.CapacityLimiter
    ) -> None:
        self._episode = LocalEpisode(world_class())
        self._steps = steps
        self.name = world_class.name
        self.description = world_class.description
        self.tools = tools

    async def reset(self, seed: int) -> Task:
        async with self._steps:
            return await self._episode.reset(seed)

    async def step(self, action: ToolCall | Finish) -> StepResult:
        async with self._steps:
            return await self._episode.step(action)

    async def grade(self) -> Grade:
        return await self._episode.grade()

    async def close(self) -> None:
        await self._episode.close()


class LocalWorlds:
    """Makes a fresh `LocalEnvironment` per episode for one world spec (a name, `file.py:Class` or `module:Class`)."""

    def __init__(self, spec: str, max_concurrent_steps: int = 64) -> None:
        self.world_class = load_world(spec)
        self.name = self.world_class.name
        self.tools = self.world_class.openai_tools()  # built once: every episode sends the same list
        self._steps = anyio.CapacityLimiter(max_concurrent_steps)

    def __call__(self) -> Environment:
        return LocalEnvironment(self.world_class, self.tools, self._steps)


class SandboxEnvironment:
    """A model-written world in the sandbox; one per episode, opened (a process of its own) at the first reset."""

    def __init__(self, pool: SandboxPool, world: WorldInfo, tools: list[dict[str, Any]]) -> None:
        self._pool = pool
        self._world = world
        self._episode: SandboxEpisode | None = None
        self.name = world.name
        self.description = world.description
        self.tools = tools

    async def reset(self, seed: int) -> Task:
        if self._episode is None:
            self._episode = await self._pool.open(self._world)
        return await self._episode.reset(seed)

    def _opened(self) -> SandboxEpisode:
        if self._episode is None:
            raise RuntimeError("call reset(seed) before step()")
        return self._episode

    async def step(self, action: ToolCall | Finish) -> StepResult:
        return await self._opened().step(action)

    async def grade(self) -> Grade:
        return await self._opened().grade()

    async def close(self) -> None:
        if self._episode is not None:
            await self._episode.close()


class SandboxWorlds:
    """Makes a fresh `SandboxEnvironment` per episode of one world loaded in `pool`."""

    def __init__(self, pool: SandboxPool, world: WorldInfo) -> None:
        self.pool = pool
        self.world = world
        self.name = world.name
        self.tools = world.openai_tools()

    @classmethod
    async def load(cls, pool: SandboxPool, path: Path) -> SandboxWorlds:
        """Load a model-written file as `validate` judges it (extracted and repaired); raises `WorldLoadError`
        with the reason when it does not load."""
        return cls(pool, await load_file(pool, path))

    def __call__(self) -> Environment:
        return SandboxEnvironment(self.pool, self.world, self.tools)
