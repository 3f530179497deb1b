"""Play one episode of a world with a policy and keep the whole transcript.

`play` drives a trusted world object directly; `play_driven` drives any `Episode` (`toolworlds.episode`),
which is how a world in the sandbox is played by the same scripted policies.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from toolworlds.core import Finish, StepResult, Task, ToolCall, ToolWorld
from toolworlds.episode import Episode
from toolworlds.policies import DrivenPolicy, Policy


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


async def play_driven(episode: Episode, seed: int, policy: DrivenPolicy, tools: list[dict[str, Any]]) -> Transcript:
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
