"""One episode of a world, wherever its code runs: the protocol everything that plays a world speaks.

A `ToolWorld` is synchronous and trusted. An `Episode` is the same reset / step / grade, asynchronous, so a
world in this process (`LocalEpisode`) and a model-written world in a sandbox process (`SandboxEpisode`) are
played alike by the scripted policies (`toolworlds.play`), the contract checks, the HTTP and MCP sessions
and the engine. A `World` is where episodes come from, as gymnasium's `make` is: its name, description and
tools, and `open()` for a fresh episode. What a world is scored is a `Grade`, under that one name in every
layer.
"""

from __future__ import annotations

from typing import Any, Protocol

import anyio
from pydantic import BaseModel, ConfigDict, Field

from toolworlds.core import Finish, StepResult, Task, ToolCall, ToolWorld
from toolworlds.scoring import Scorecard
from toolworlds.tool import ArgumentProblem, OpenAITool


class Grade(BaseModel):
    """A world's verdict on the state an episode reached: its score and the scorecard that explains it."""

    model_config = ConfigDict(frozen=True)

    score: float = Field(ge=0, le=1)
    scorecard: str = Field(description="Goals met (+) and missed (-), harms done (!), as `Scorecard.summary` says.")

    @classmethod
    def of(cls, card: Scorecard) -> Grade:
        return cls(score=card.score, scorecard=card.summary())


class Episode(Protocol):
    """One episode: reset to a seed's task, step through actions, grade the state reached, close."""

    async def reset(self, seed: int) -> Task: ...

    async def step(self, action: ToolCall | Finish) -> StepResult: ...

    async def grade(self) -> Grade: ...

    async def solution(self) -> list[ToolCall | Finish]:
        """The reference play of the task the last reset chose."""
        ...

    async def snapshot(self) -> dict[str, Any]:
        """The hidden state as JSON (for debugging and the session API's `/state`)."""
        ...

    async def close(self) -> None: ...


class Tool(Protocol):
    """A tool as its schemas describe it: a trusted world's `ToolSpec`, or a sandboxed world's `DescribedTool`."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def input_schema(self) -> dict[str, Any]: ...
    @property
    def output_schema(self) -> dict[str, Any]: ...
    @property
    def required_arguments(self) -> tuple[str, ...]: ...
    def input_schema_with_refs(self, ref_template: str) -> dict[str, Any]: ...
    def output_schema_with_refs(self, ref_template: str) -> dict[str, Any]: ...
    def validate(self, arguments: object) -> tuple[Any, list[ArgumentProblem]]: ...
    def openai_function(self) -> OpenAITool: ...


class Described(Protocol):
    """What a world says of itself: a `ToolWorld` class says it, and so does every `World`."""

    name: str
    description: str

    def tools(self) -> list[Any]: ...  # `Tool`s (a class attribute's variance keeps this `Any`)
    def openai_tools(self) -> list[OpenAITool]: ...


class World(Described, Protocol):
    """Where a world's episodes come from: a trusted class here (`LocalWorld`), or code in the sandbox."""

    async def open(self) -> Episode: ...


def tool_schemas(world: Described) -> list[dict[str, Any]]:
    """Each tool's name, description and input and output JSON Schemas, as plain data."""
    return [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema, "output_schema": t.output_schema}
        for t in world.tools()
    ]


class LocalEpisode:
    """A trusted world in this process, as an `Episode`."""

    def __init__(self, world: ToolWorld[Any]) -> None:
        self.world = world

    async def reset(self, seed: int) -> Task:
        return self.world.reset(seed)

    async def step(self, action: ToolCall | Finish) -> StepResult:
        return self.world.step(action)

    async def grade(self) -> Grade:
        return Grade.of(self.world.grade())

    async def solution(self) -> list[ToolCall | Finish]:
        return self.world.solution()

    async def snapshot(self) -> dict[str, Any]:
        return self.world.snapshot()

    async def close(self) -> None:
        return None


class LocalWorld:
    """A trusted world class: each episode a fresh instance in this process."""

    def __init__(self, world_class: type[ToolWorld[Any]]) -> None:
        self.world_class = world_class
        self.name = world_class.name
        self.description = world_class.description
        self._openai = world_class.openai_tools()  # built once: every episode offers the same list

    def tools(self) -> list[Any]:
        return list(self.world_class.tools())

    def openai_tools(self) -> list[OpenAITool]:
        return self._openai

    async def open(self) -> Episode:
        return LocalEpisode(self.world_class())


class Paced:
    """A world whose episodes reset and step only when a shared limiter lets them: thousands of in-process
    episodes cannot pile their CPU work onto the event loop in one burst (a wrapper, as gymnasium's are)."""

    def __init__(self, world: World, limiter: anyio.CapacityLimiter) -> None:
        self.world, self.limiter = world, limiter
        self.name, self.description = world.name, world.description

    def tools(self) -> list[Any]:
        return self.world.tools()

    def openai_tools(self) -> list[OpenAITool]:
        return self.world.openai_tools()

    async def open(self) -> Episode:
        return PacedEpisode(await self.world.open(), self.limiter)


class EpisodeWrapper:
    """An episode around another (gymnasium's `Wrapper`): every call passes through to `inner` unless a
    subclass changes it."""

    def __init__(self, inner: Episode) -> None:
        self.inner = inner

    async def reset(self, seed: int) -> Task:
        return await self.inner.reset(seed)

    async def step(self, action: ToolCall | Finish) -> StepResult:
        return await self.inner.step(action)

    async def grade(self) -> Grade:
        return await self.inner.grade()

    async def solution(self) -> list[ToolCall | Finish]:
        return await self.inner.solution()

    async def snapshot(self) -> dict[str, Any]:
        return await self.inner.snapshot()

    async def close(self) -> None:
        await self.inner.close()


class PacedEpisode(EpisodeWrapper):
    """An episode whose resets and steps wait for `limiter`."""

    def __init__(self, inner: Episode, limiter: anyio.CapacityLimiter) -> None:
        super().__init__(inner)
        self.limiter = limiter

    async def reset(self, seed: int) -> Task:
        async with self.limiter:
            return await self.inner.reset(seed)

    async def step(self, action: ToolCall | Finish) -> StepResult:
        async with self.limiter:
            return await self.inner.step(action)


def as_world(world: World | type[ToolWorld[Any]]) -> World:
    """A trusted world class becomes a `LocalWorld`; a `World` stays what it is."""
    return LocalWorld(world) if isinstance(world, type) else world
