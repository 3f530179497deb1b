"""Play one episode of a world with a policy and keep the whole transcript."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from toolworlds.core import Finish, StepResult, Task, ToolCall, ToolWorld
from toolworlds.policies import Policy


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
