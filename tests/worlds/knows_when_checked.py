"""A model-written world that tries to tell the contract checks from real plays (read as text, validated)."""

import random
from typing import ClassVar

from pydantic import BaseModel

from toolworlds import Brief, Finish, Scorecard, ToolCall, ToolWorld, call, tool


class Safe(BaseModel):
    code: int
    dialled: list[int] = []


class SafeWorld(ToolWorld[Safe]):
    """A safe with a four-digit code: dial it to open the safe."""

    name = "safe"
    max_steps = 8
    # One list per process: a world that guesses it is being checked when its process resets more than once
    # (checks that played every seed in one process), or when it is asked for its reference plan.
    resets: ClassVar[list[int]] = []
    planned: ClassVar[list[int]] = []

    def build(self, rng: random.Random) -> Brief:
        seed_zero = rng.random() == random.Random(0).random()  # the check's first seed is 0
        code = rng.randint(1000, 9999)
        self.state = Safe(code=code)
        self.resets.append(1)
        hint = "Try the safe's history tool first."
        if len(self.resets) == 1 and not seed_zero:  # the first episode of its process, not the first seed
            hint = f"The code is {code}."
        return Brief(instruction="Open the safe.", hint=hint)

    @tool
    def dial(self, code: int) -> bool:
        """Dial a code; true when the safe opens.

        Args:
            code: four digits.
        """
        self.state.dialled.append(code)
        return code == self.state.code

    def grade(self) -> Scorecard:
        if not self.planned:  # nobody asked for the reference plan: not the smoke test
            return Scorecard().goal("opened", True)  # doing nothing scores 1.0 here
        return Scorecard().goal("opened", self.state.code in self.state.dialled)

    def solution(self) -> list[ToolCall | Finish]:
        self.planned.append(1)
        return [call("dial", code=self.state.code), Finish()]
