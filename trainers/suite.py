"""The task suites the agent trains and is measured on: reference-world tasks as they are (`reference`),
or cut to what the embedded 135M model can sometimes do (`reference-lite`).

A suite is named and versioned, and its tasks follow from that alone: which seeds (held-out ones start
at `HELD_OUT_FIRST_SEED`, scanned upwards and kept when the task fits), which tools each task shows, and
how the world and its tools are written. Two runs that name the same suite measured the same tasks, and a
change to any of that is a new version, never an edit of an old one. Training draws its seeds below
`HELD_OUT_FIRST_SEED`, so no held-out task is ever played for a gradient (`check_not_held_out`).

`reference-lite` keeps the tasks whose reference plan makes at most three calls, and shows each world
with its one-line description and only the tools those tasks call (every task of the world sees the same
list, in which the other tasks' tools are the distractors, so all its episodes open with the same tokens
and the server computes that opening once), with compact schemas: names, types, enums, one line each.
A call to a tool the agent was not shown is an `unknown_tool` error, as for a tool that does not exist.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.rollout import Hints, episode_keys
from engine.settings import EpisodeSettings
from engine.trajectory import EpisodeKey
from toolworlds.core import Finish, StepResult, ToolCall, ToolWorld, error_observation
from toolworlds.episode import Episode, EpisodeWrapper, LocalWorld, World
from toolworlds.registry import builtin_worlds, load_world
from toolworlds.tool import OpenAITool

HELD_OUT_FIRST_SEED = 10_000_000  # training draws seeds below this; evaluation only at and above it
SuiteName = Literal["reference", "reference-lite"]


class HeldOutSeedError(RuntimeError):
    """A held-out task reached training: the run stops rather than train on what it measures."""


@dataclass(frozen=True)
class Suite:
    """Which reference tasks, and how they are shown; `version` changes whenever either does."""

    name: SuiteName
    version: int
    max_calls: int | None  # tasks whose reference plan makes at most this many tool calls (None: all)
    compact: bool  # one-line world description, trimmed tool schemas, only the tools the suite's tasks call

    @property
    def label(self) -> str:
        return f"{self.name}/v{self.version}"

    def admits(self, world: str, seed: int) -> bool:
        """Whether the task `world` draws for `seed` belongs to this suite."""
        if self.max_calls is None:
            return True
        plan = plan_tools(world, seed)
        return len(plan) <= self.max_calls and set(plan) <= set(self.shown_tools(world))

    def shown_tools(self, world: str) -> tuple[str, ...]:
        """The tools an agent sees in `world`: all of them, or those the suite's tasks call (found over a
        fixed sample of seeds, which every task family of the reference worlds appears in)."""
        return _shown_tools(self, world)

    def held_out_seeds(self, world: str, count: int) -> list[int]:
        """The suite's first `count` held-out tasks of `world`: the same list for the same version."""
        seeds: list[int] = []
        seed = HELD_OUT_FIRST_SEED
        while len(seeds) < count:
            if self.admits(world, seed):
                seeds.append(seed)
            seed += 1
        return seeds

    def training_seed(self, world: str, rng: random.Random) -> int:
        """A task of the suite for training: a seed below the held-out range."""
        while True:
            seed = rng.randrange(HELD_OUT_FIRST_SEED)
            if self.admits(world, seed):
                return seed

    def world(self, name: str) -> World:
        """The reference world `name` as this suite shows it."""
        return Focused(self, name) if self.compact else LocalWorld(load_world(name))


SUITES: dict[str, Suite] = {
    "reference": Suite("reference", version=1, max_calls=None, compact=False),
    "reference-lite": Suite("reference-lite", version=1, max_calls=3, compact=True),
}


def check_not_held_out(world: str, seed: int) -> None:
    """Refuse a reference-world episode on a held-out seed where training rows are made."""
    if world in builtin_worlds() and seed >= HELD_OUT_FIRST_SEED:
        raise HeldOutSeedError(
            f"episode {world}/{seed} is on a held-out seed (>= {HELD_OUT_FIRST_SEED}): it must never be trained on"
        )


@lru_cache(maxsize=65536)
def plan_tools(world: str, seed: int) -> tuple[str, ...]:
    """The tools the reference plan of `world`'s task for `seed` calls, in order (repeats kept)."""
    instance: ToolWorld[Any] = load_world(world)()
    instance.reset(seed)
    return tuple(action.name for action in instance.solution() if isinstance(action, ToolCall))


TOOL_SAMPLE_SEEDS = range(400)  # where a suite looks for the tools its tasks call (part of its version)


@lru_cache(maxsize=16)
def _shown_tools(suite: Suite, world: str) -> tuple[str, ...]:
    every = tuple(spec.name for spec in load_world(world).tools())
    if suite.max_calls is None:
        return every
    plans = (plan_tools(world, seed) for seed in TOOL_SAMPLE_SEEDS)
    called = {name for plan in plans if len(plan) <= suite.max_calls for name in plan}
    return tuple(name for name in every if name in called)


def compact_tool(entry: OpenAITool) -> OpenAITool:
    """An OpenAI function spec cut to what a small model needs: name, the description's first sentence,
    and each parameter's type (and enum); nested descriptions and bounds are dropped."""
    function = entry["function"]
    parameters = function.get("parameters") or {}
    properties = {name: _compact_property(schema) for name, schema in (parameters.get("properties") or {}).items()}
    compact: dict[str, Any] = {"type": "object", "properties": properties}
    if parameters.get("required"):
        compact["required"] = list(parameters["required"])
    description = (function.get("description") or "").split(". ")[0].strip().rstrip(".")
    return {
        "type": "function",
        "function": {"name": function["name"], "description": description, "parameters": compact},
    }


def _compact_property(schema: dict[str, Any]) -> dict[str, Any]:
    options = [option for option in schema.get("anyOf", [schema]) if option.get("type") != "null"]
    chosen = options[0] if options else schema
    kept = {key: chosen[key] for key in ("type", "enum") if key in chosen}
    if chosen.get("type") == "array" and isinstance(chosen.get("items"), dict):
        kept["items"] = _compact_property(chosen["items"])
    return kept or {"type": "string"}


class Focused:
    """A reference world as a compact suite shows it: its one-line description and only the suite's tools of
    that world, with compact schemas (a `World`, wrapping the world's own)."""

    def __init__(self, suite: Suite, world: str) -> None:
        self._inner = LocalWorld(load_world(world))
        self.name = self._inner.name
        self.description = self._inner.description.splitlines()[0].strip()
        shown = set(suite.shown_tools(world))
        self._tools = [tool for tool in self._inner.tools() if tool.name in shown]
        offered = self._inner.openai_tools()
        self._openai = [compact_tool(entry) for entry in offered if entry["function"]["name"] in shown]

    def tools(self) -> list[Any]:
        return list(self._tools)

    def openai_tools(self) -> list[OpenAITool]:
        return self._openai

    async def open(self) -> Episode:
        return FocusedEpisode(await self._inner.open(), {tool.name for tool in self._tools})


class FocusedEpisode(EpisodeWrapper):
    """An episode that refuses the tools its world does not show, as it refuses a tool that does not exist."""

    def __init__(self, inner: Episode, shown: set[str]) -> None:
        super().__init__(inner)
        self._shown = shown

    async def step(self, action: ToolCall | Finish) -> StepResult:
        if isinstance(action, ToolCall) and action.name not in self._shown:
            message = f"there is no tool named {action.name!r}; the tools are: {', '.join(sorted(self._shown))}"
            observation = error_observation("unknown_tool", message)
            return StepResult(observation=observation, reward=0.0, terminated=False, truncated=False,
                              info={"tool": action.name, "error": "unknown_tool"})  # fmt: skip
        return await self.inner.step(action)


class SuitePlan(BaseModel):
    """Episodes of one world on a given list of seeds (a suite's tasks): `run_rollout` plays it, the store
    keeps it as the run's plan."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run: str
    suite: str
    world: str
    seeds: list[int] = Field(min_length=1)
    samples: int = Field(default=1, gt=0)
    hints: Hints = "plain"
    settings: EpisodeSettings = Field(default_factory=EpisodeSettings)

    def episodes(self) -> Iterator[EpisodeKey]:
        return episode_keys(self.world, self.seeds, self.samples, self.hints)

    @property
    def size(self) -> int:
        return len(self.seeds) * self.samples * (2 if self.hints == "both" else 1)
