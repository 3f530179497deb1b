"""The engine's view of a toolworld: an async reset/step/score, whatever process the world runs in.

Reference worlds are the project's own code and run in-process (`LocalEnvironment`); model-written worlds
will run in the sandbox pool behind this same interface. A shared limiter bounds how many environment
steps run at once, so thousands of episodes cannot pile CPU work onto the event loop in one burst.
"""

from __future__ import annotations

from typing import Any, Protocol

import anyio

from toolworlds.core import Finish, StepResult, Task, ToolCall, ToolWorld
from toolworlds.registry import load_world


class Environment(Protocol):
    name: str
    description: str
    tools: list[dict[str, Any]]

    async def reset(self, seed: int) -> Task: ...

    async def step(self, action: ToolCall | Finish) -> StepResult: ...

    async def score(self) -> tuple[float, str]: ...


class LocalEnvironment:
    """A trusted world in this process; one instance per episode."""

    def __init__(
        self, world_class: type[ToolWorld[Any]], tools: list[dict[str, Any]], steps: anyio.CapacityLimiter
    ) -> None:
        self._world = world_class()
        self._steps = steps
        self.name = world_class.name
        self.description = world_class.description
        self.tools = tools

    async def reset(self, seed: int) -> Task:
        async with self._steps:
            return self._world.reset(seed)

    async def step(self, action: ToolCall | Finish) -> StepResult:
        async with self._steps:
            return self._world.step(action)

    async def score(self) -> tuple[float, str]:
        card = self._world.grade()
        return card.score, card.summary()


class LocalWorlds:
    """Makes a fresh `LocalEnvironment` per episode for one world spec (a name, `file.py:Class` or `module:Class`)."""

    def __init__(self, spec: str, max_concurrent_steps: int = 64) -> None:
        self.world_class = load_world(spec)
        self.name = self.world_class.name
        self.tools = self.world_class.openai_tools()  # built once: every episode sends the same list
        self._steps = anyio.CapacityLimiter(max_concurrent_steps)

    def __call__(self) -> Environment:
        return LocalEnvironment(self.world_class, self.tools, self._steps)
