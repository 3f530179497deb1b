"""Scripted policies: the oracle (the world's reference plan) and a random baseline.

They give every world two fixed points without a model: the oracle must score 1.0, and the random
policy shows what blind button-pressing earns. The random policy is a strong baseline on purpose: it
fills arguments with ids and numbers it has actually seen, so a world whose scorer it can fool is caught.
"""

from __future__ import annotations

import random
import re
from typing import Any, Protocol

from pydantic import JsonValue

from toolworlds.core import Finish, StepResult, Task, ToolCall, ToolWorld


class Policy(Protocol):
    """Chooses the next action from what the agent has seen."""

    def start(self, world: ToolWorld[Any], task: Task) -> None: ...

    def act(self, last: StepResult | None) -> ToolCall | Finish: ...


class DrivenPolicy(Protocol):
    """A policy that can also play a world it only reaches through an episode driver (the sandbox)."""

    async def begin(self, episode: Any, tools: list[dict[str, Any]], task: Task) -> None: ...

    def act(self, last: StepResult | None) -> ToolCall | Finish: ...


class ScriptedPolicy:
    """Plays a fixed plan (a reference plan read elsewhere, a probe), then finishes."""

    plan: list[ToolCall | Finish]

    def __init__(self, plan: list[ToolCall | Finish] | None = None) -> None:
        self.follow(plan or [])

    def start(self, world: ToolWorld[Any], task: Task) -> None:
        pass

    async def begin(self, episode: Any, tools: list[dict[str, Any]], task: Task) -> None:
        pass

    def follow(self, plan: list[ToolCall | Finish]) -> None:
        self.plan = plan
        self._plan = iter(plan)

    def act(self, last: StepResult | None) -> ToolCall | Finish:
        return next(self._plan, Finish())


class OraclePolicy(ScriptedPolicy):
    """Replays `world.solution()`, then finishes; `plan` keeps the plan it was given."""

    def start(self, world: ToolWorld[Any], task: Task) -> None:
        self.follow(world.solution())

    async def begin(self, episode: Any, tools: list[dict[str, Any]], task: Task) -> None:
        self.follow(await episode.solution())


_TOKEN = re.compile(r"[A-Z]+-\d+|\$?\d[\d,]*\.?\d*|[A-Za-z][\w ]{2,20}")


class ArgumentSampler:
    """Schema-shaped arguments, filled with strings and numbers seen so far (else plausible defaults)."""

    def __init__(self, rng: random.Random, strings: list[str] | None = None) -> None:
        self._rng = rng
        self.strings: list[str] = list(strings or [])
        self.numbers: list[float] = []

    def arguments(self, schema: dict[str, Any], optional_probability: float = 0.3) -> dict[str, JsonValue]:
        """Every required argument, and each optional one with `optional_probability`."""
        arguments: dict[str, JsonValue] = {}
        for name, prop in schema.get("properties", {}).items():
            if name in schema.get("required", []) or self._rng.random() < optional_probability:
                arguments[name] = self.value(prop, schema.get("$defs", {}))
        return arguments

    def value(self, prop: dict[str, Any], defs: dict[str, Any]) -> JsonValue:
        if "$ref" in prop:
            prop = defs.get(prop["$ref"].rsplit("/", 1)[-1], {})
        if "enum" in prop:
            return self._rng.choice(prop["enum"])  # type: ignore[no-any-return]
        if "anyOf" in prop:
            return self.value(self._rng.choice(prop["anyOf"]), defs)
        kind = prop.get("type")
        if kind == "integer":
            return int(self.number())
        if kind == "number":
            return self.number()
        if kind == "boolean":
            return self._rng.random() < 0.5
        if kind == "array":
            return [self.value(prop.get("items", {}), defs) for _ in range(self._rng.randint(0, 2))]
        if kind == "null":
            return None
        return self.string()

    def string(self) -> str:
        return self._rng.choice(self.strings) if self.strings else "x"

    def number(self) -> float:
        if self.numbers and self._rng.random() < 0.7:
            return self._rng.choice(self.numbers)
        return round(self._rng.uniform(1, 500), 2)

    def harvest(self, value: JsonValue) -> None:
        """Remember the strings and numbers in an observation, for later arguments."""
        if isinstance(value, dict):
            for item in value.values():
                self.harvest(item)
        elif isinstance(value, list):
            for item in value:
                self.harvest(item)
        elif isinstance(value, bool) or value is None:
            return
        elif isinstance(value, int | float):
            self.numbers.append(float(value))
        elif isinstance(value, str) and len(value) <= 40:
            self.strings.append(value)


class RandomPolicy:
    """Calls random tools with schema-shaped arguments drawn from values seen so far."""

    def __init__(self, seed: int, finish_probability: float = 0.05) -> None:
        self._rng = random.Random(seed)
        self._finish_probability = finish_probability

    def start(self, world: ToolWorld[Any], task: Task) -> None:
        self._begin([{"name": spec.name, "input_schema": spec.input_schema} for spec in world.tools()], task)

    async def begin(self, episode: Any, tools: list[dict[str, Any]], task: Task) -> None:
        self._begin(tools, task)

    def _begin(self, tools: list[dict[str, Any]], task: Task) -> None:
        self._tools = tools
        self._sampler = ArgumentSampler(self._rng, [m.strip("$") for m in _TOKEN.findall(task.instruction)])

    def act(self, last: StepResult | None) -> ToolCall | Finish:
        if last is not None:
            self._sampler.harvest(last.observation)
        if self._rng.random() < self._finish_probability:
            return Finish(answer=self._sampler.string())
        tool = self._rng.choice(self._tools)
        return ToolCall(name=tool["name"], arguments=self._sampler.arguments(tool["input_schema"]))


def make_policy(name: str, seed: int) -> OraclePolicy | RandomPolicy:
    if name == "oracle":
        return OraclePolicy()
    if name == "random":
        return RandomPolicy(seed)
    raise ValueError(f"unknown policy {name!r}; choose oracle or random")
