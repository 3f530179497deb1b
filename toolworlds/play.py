"""Play one episode of a world with a policy and keep the whole transcript.

`play` drives a trusted world object directly; `play_driven` drives any `EpisodeDriver`, which is how a
world in the sandbox (a `SandboxEpisode`) is played by the same scripted policies.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel

from toolworlds.core import Finish, StepResult, Task, ToolCall, ToolWorld
from toolworlds.policies import DrivenPolicy, Policy


class EpisodeDriver(Protocol):
    """One episode, wherever the world runs: in this process, or in the sandbox (`SandboxEpisode`)."""

    async def reset(self, seed: int) -> Task: ...

    async def step(self, action: ToolCall | Finish) -> StepResult: ...

    async def solution(self) -> list[ToolCall | Finish]: ...

    async def close(self) -> None: ...


class LocalEpisode:
    """A trusted world in this process, behind the async driver interface."""

    def __init__(self, world: ToolWorld[Any]) -> None:
        self.world = world

    async def reset(self, seed: int) -> Task:
        return self.world.reset(seed)

    async def step(self, action: ToolCall | Finish) -> StepResult:
        return self.world.step(action)

    async def solution(self) -> list[ToolCall | Finish]:
        return self.world.solution()

    async def grade(self) -> tuple[float, str]:
        card = self.world.grade()
        return card.score, card.summary()

    async def snapshot(self) -> dict[str, Any]:
        return self.world.snapshot()

    async def close(self) -> None:
        return None


class Turn(BaseModel):
    action: ToolCall | Finish
    result: StepResult


class Transcript(BaseModel):
    task: Task
    turns: list[Turn]
    score: float

    @property
    def tool_calls(self) -> int:
        return sum(isinstance(turn.action, ToolCall) for turn in self.turns)


def play(world: ToolWorld[Any], seed: int, policy: Policy) -> Transcript:
    """Reset to `seed` and let `policy` act until the episode ends (the world's step limit ends it)."""
    task = world.reset(seed)
    policy.start(world, task)
    turns: list[Turn] = []
    last: StepResult | None = None
    while last is None or not last.done:
        action = policy.act(last)
        last = world.step(action)
        turns.append(Turn(action=action, result=last))
    return Transcript(task=task, turns=turns, score=last.reward)


async def play_driven(
    episode: EpisodeDriver, seed: int, policy: DrivenPolicy, tools: list[dict[str, Any]]
) -> Transcript:
    """`play` through a driver: `tools` are the world's tool schemas (`name`, `input_schema`)."""
    task = await episode.reset(seed)
    await policy.begin(episode, tools, task)
    turns: list[Turn] = []
    last: StepResult | None = None
    while last is None or not last.done:
        action = policy.act(last)
        last = await episode.step(action)
        turns.append(Turn(action=action, result=last))
    return Transcript(task=task, turns=turns, score=last.reward)
