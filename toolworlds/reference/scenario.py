"""Worlds with many task variants: a populated state plus one goal drawn per seed.

A reference world writes `populate` (the hidden state for a seed) and a list of *families*: functions
that look at that state, pick parameters with the same rng, and return a `Goal` holding the task in
words, the hint, the reference plan and the grader. Keeping each family in one function keeps the
instruction, the plan and the scoring of one variant side by side, where a reader can check they agree.
"""

from __future__ import annotations

import random
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from toolworlds.core import Brief, Finish, StateT, ToolCall, ToolWorld
from toolworlds.scoring import Scorecard

Grader = Callable[[StateT, str | None], Scorecard]


@dataclass
class Goal(Generic[StateT]):
    """One task, bound to its parameters at reset."""

    instruction: str
    hint: str
    plan: list[ToolCall | Finish]
    grader: Grader[StateT]
    variant: str = field(default="")


Family = Callable[[StateT, random.Random], Goal[StateT]]
Status = TypeVar("Status", bound=str)


def described_moves(moves: Mapping[Status, Sequence[Status]]) -> str:
    """A status machine in words for the agent's description (`open -> in_progress or pending; ...; closed
    is final`), written from the table the world enforces so the two never disagree."""
    steps = [f"{status} -> {' or '.join(targets)}" for status, targets in moves.items() if targets]
    final = [status for status, targets in moves.items() if not targets]
    ending = f"; {' and '.join(final)} {'is' if len(final) == 1 else 'are'} final" if final else ""
    return "; ".join(steps) + ending


class ScenarioWorld(ToolWorld[StateT], Generic[StateT]):
    """A `ToolWorld` whose task is drawn from `families` after `populate` builds the state."""

    families: ClassVar[Sequence[Family[Any]]]
    goal: Goal[StateT]

    @abstractmethod
    def populate(self, rng: random.Random) -> StateT:
        """The hidden state for this seed, before any task-specific setup."""

    def build(self, rng: random.Random) -> Brief:
        self.state = self.populate(rng)
        family = rng.choice(self.families)
        self.goal = family(self.state, rng)
        variant = self.goal.variant or family.__name__
        return Brief(instruction=self.goal.instruction, hint=self.goal.hint, variant=variant)

    def grade(self) -> Scorecard:
        return self.goal.grader(self.state, self.answer)

    def solution(self) -> list[ToolCall | Finish]:
        return list(self.goal.plan)
