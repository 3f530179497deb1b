"""Spadework's worlds as TRL environments: `GRPOTrainer(environment_factory=trl_environment("banking"))`.

TRL (1.16) instantiates the factory with no arguments, calls `reset(**row)` with each dataset row before a
rollout (the string it returns is appended to the last user message), offers every public method as a tool,
reading its schema from the method's type hints and Google-style docstring, and pays `get_reward()` once the
rollout ends. So each world's tools become methods here, built from their JSON Schemas: `enum` becomes
`Literal`, arrays `list[...]`, nested objects `dict` (the world still validates every call against its full
schema, and bounds such as `maxLength` are written into the argument's description). A row's `seed` picks the
task; `finish` ends the episode; the reward is the world's grade (partial credit in [0, 1]) of the state
reached. Worlds with different tools train together through the dict form (`trl_environments([...])`, rows
carrying an `environment` column).
"""

from __future__ import annotations

import inspect
import json
import keyword
from collections.abc import Callable, Iterable, Mapping
from types import GenericAlias
from typing import Any, ClassVar, Literal, Union

from toolworlds.adapters.blocking import BlockingEpisode, BlockingWorld
from toolworlds.core import StepResult, action_of, error_observation
from toolworlds.tool import FINISH_TOOL

_BOUNDS = ("minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "pattern",
           "minItems", "maxItems")  # fmt: skip
_SCALARS: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None)}


class ToolworldEnvironment:
    """One rollout's episode of a world; subclasses made by `trl_environment` carry the world and its tools."""

    world_spec: ClassVar[str]
    hinted: ClassVar[bool] = False
    _shared: ClassVar[BlockingWorld | None] = None

    def __init__(self) -> None:
        self._episode: BlockingEpisode | None = None
        self._score: float | None = None

    @classmethod
    def _world(cls) -> BlockingWorld:
        """The world every instance of this class opens episodes in (one event loop, one sandbox per class)."""
        if cls._shared is None:
            cls._shared = BlockingWorld(cls.world_spec)
        return cls._shared

    def reset(self, **row: Any) -> str:
        """Open the row's task (`seed`, default 0) and return its instruction (with the hint when `hinted`)."""
        if self._episode is not None:
            self._episode.close()
        self._episode, self._score = self._world().open(), None
        task = self._episode.reset(int(row.get("seed", 0)))
        return task.instruction if not self.hinted else f"{task.instruction}\n\nHint: {task.hint}"

    def get_reward(self) -> float:
        """The world's grade of the state the rollout reached (given by its ending step, or graded now when the
        rollout stopped before the episode ended)."""
        return self._score if self._score is not None else self._opened().grade().score

    def finish(self, answer: str | None = None) -> str:
        """End the task. Give `answer` when the task asks a question.

        Args:
            answer: The answer to the task's question, if it asks one.
        """
        return self._call(FINISH_TOOL, {} if answer is None else {"answer": answer})

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        if self._score is not None:
            return json.dumps(error_observation("episode_over", "the episode has ended; no tool can be called"))
        result = self._opened().step(action_of(name, arguments))
        self._end_if_done(result)
        return json.dumps(result.observation, ensure_ascii=False)

    def _end_if_done(self, result: StepResult) -> None:
        if result.done:
            self._score = float(result.reward)  # the world's grade, given on the ending step

    def _opened(self) -> BlockingEpisode:
        if self._episode is None:
            raise RuntimeError("TRL calls reset() before a rollout's tools")
        return self._episode


def trl_environment(world: str, hinted: bool = False) -> type[ToolworldEnvironment]:
    """A class for `GRPOTrainer(environment_factory=...)`: `world`'s tools and `finish` as methods."""
    probe = BlockingWorld(world)
    try:
        tools = probe.world.openai_tools()
        name = probe.world.name
    finally:
        probe.close()
    methods: dict[str, Any] = {entry["function"]["name"]: _tool_method(entry["function"]) for entry in tools}
    clash = sorted({"reset", "get_reward", FINISH_TOOL} & set(methods))
    if clash:
        raise ValueError(f"{world}: a tool named {clash[0]!r} would take the place of TRL's own method")
    class_name = "".join(part.title() for part in name.replace("-", "_").split("_") if part) + "Environment"
    attributes = {"world_spec": world, "hinted": hinted, "__doc__": f"TRL environment of the world {name!r}.",
                  **methods}  # fmt: skip
    return type(class_name, (ToolworldEnvironment,), attributes)


def trl_environments(worlds: Iterable[str], hinted: bool = False) -> dict[str, type[ToolworldEnvironment]]:
    """The dict form: one environment class per world, rows choosing theirs by an `environment` column."""
    return {world: trl_environment(world, hinted) for world in worlds}


def task_rows(world: str, seeds: Iterable[int], environment: bool = False) -> list[dict[str, Any]]:
    """Dataset rows for these seeds: a prompt whose user message `reset` fills with the task (and, for the dict
    form, the `environment` each row uses)."""
    prompt = [{"role": "user", "content": ""}]
    return [{"prompt": prompt, "seed": seed, **({"environment": world} if environment else {})} for seed in seeds]


def _tool_method(function: Mapping[str, Any]) -> Callable[..., str]:
    name = function["name"]
    schema = function.get("parameters") or {}
    defs = schema.get("$defs", {})
    required = set(schema.get("required", []))
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {"return": str}
    described: list[str] = []
    properties = schema.get("properties", {})
    for argument in sorted(properties, key=lambda a: a not in required):  # required first, as Python wants
        if not argument.isidentifier() or keyword.iskeyword(argument):
            raise ValueError(f"tool {name}: argument {argument!r} cannot be a Python parameter, so TRL cannot offer it")
        prop = _resolved(properties[argument], defs)
        hint = _hint(prop, defs)
        default = inspect.Parameter.empty if argument in required else prop.get("default")
        if argument not in required and default is None:
            hint = hint | None
        annotations[argument] = hint
        parameters.append(inspect.Parameter(argument, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint))
        described.append(f"    {argument}: {_description(prop, argument)}")

    def method(self: ToolworldEnvironment, **arguments: Any) -> str:
        return self._call(name, arguments)

    method.__name__ = method.__qualname__ = name
    method.__signature__ = inspect.Signature(parameters, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = annotations
    summary = " ".join(str(function.get("description") or name).split())
    method.__doc__ = f"{summary}\n\nArgs:\n" + "\n".join(described) if described else summary
    return method


def _resolved(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """`schema` with a `$ref` to `$defs` (pydantic's nested models and enums) replaced by its target."""
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
        return schema
    target = dict(defs.get(ref.removeprefix("#/$defs/"), {}))
    return {**target, **{k: v for k, v in schema.items() if k != "$ref"}}


def _hint(schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    """The Python type hint transformers turns back into (nearly) this JSON Schema."""
    schema = _resolved(schema, defs)
    if schema.get("enum"):
        return Literal[tuple(schema["enum"])]
    if "const" in schema:
        return Literal[schema["const"]]
    alternatives = schema.get("anyOf") or schema.get("oneOf")
    if alternatives:
        return _union([_hint(alternative, defs) for alternative in alternatives])
    kind = schema.get("type")
    if isinstance(kind, list):
        return _union([_hint({**schema, "type": one}, defs) for one in kind])
    if kind == "array":
        items = schema.get("items")
        return GenericAlias(list, (_hint(items, defs) if isinstance(items, dict) and items else Any,))
    if kind == "object":
        return dict[str, Any]
    return _SCALARS.get(str(kind), Any)


def _union(hints: list[Any]) -> Any:
    unique = list(dict.fromkeys(hints))
    return unique[0] if len(unique) == 1 else Union[tuple(unique)]  # noqa: UP007  # built at run time


def _description(schema: dict[str, Any], argument: str) -> str:
    text = " ".join(str(schema.get("description") or argument).split())
    bounds = [f"{key} {json.dumps(schema[key])}" for key in _BOUNDS if key in schema]
    if schema.get("type") == "object" and "properties" in schema:
        bounds.append(f"fields {json.dumps(schema['properties'], separators=(',', ':'))}")
    return f"{text} [{'; '.join(bounds)}]" if bounds else text
