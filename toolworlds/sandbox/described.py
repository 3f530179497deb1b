"""A world in the sandbox as this process knows it: by its schemas alone (`WorldInfo`).

`DescribedWorld` says what a world class says of itself (name, description, tools with the reading interface
of `ToolSpec`), so the exporters and servers read both alike; `SandboxWorld` adds `open()`, an episode in a
sandbox process of its own, which makes it a `World` (`toolworlds.episode`) like a trusted class in this
process.
"""

from __future__ import annotations

import copy
from typing import Any

from jsonschema import Draft202012Validator

from toolworlds.episode import Episode
from toolworlds.sandbox.pool import SandboxPool, WorldInfo
from toolworlds.tool import ArgumentProblem, OpenAITool, openai_function, schema_problems

LOCAL_DEFS = "#/$defs/"


def retarget_refs(schema: Any, ref_template: str) -> Any:
    """A copy of `schema` whose local `#/$defs/Name` references follow `ref_template` instead."""
    if isinstance(schema, dict):
        moved = {key: retarget_refs(value, ref_template) for key, value in schema.items()}
        reference = moved.get("$ref")
        if isinstance(reference, str) and reference.startswith(LOCAL_DEFS):
            moved["$ref"] = ref_template.format(model=reference.removeprefix(LOCAL_DEFS))
        return moved
    if isinstance(schema, list):
        return [retarget_refs(item, ref_template) for item in schema]
    return copy.copy(schema)


class DescribedTool:
    """A tool known by its schemas, with the reading interface of `ToolSpec` that the exporters use."""

    def __init__(self, entry: dict[str, Any]) -> None:
        self.name: str = entry["name"]
        self.description: str = entry.get("description", "")
        self.input_schema: dict[str, Any] = entry["input_schema"]
        self.output_schema: dict[str, Any] = entry["output_schema"]
        self._validator = Draft202012Validator(self.input_schema)

    @property
    def required_arguments(self) -> tuple[str, ...]:
        return tuple(self.input_schema.get("required", ()))

    def input_schema_with_refs(self, ref_template: str) -> dict[str, Any]:
        return retarget_refs(self.input_schema, ref_template)  # type: ignore[no-any-return]

    def output_schema_with_refs(self, ref_template: str) -> dict[str, Any]:
        return retarget_refs(self.output_schema, ref_template)  # type: ignore[no-any-return]

    def validate(self, arguments: object) -> tuple[dict[str, Any] | None, list[ArgumentProblem]]:
        """The schema's verdict on arguments (the world's own pydantic checks run in the sandbox, at the step)."""
        if not isinstance(arguments, dict):
            kind = type(arguments).__name__
            return None, [ArgumentProblem(field="(arguments)", problem=f"must be a JSON object, got {kind}")]
        problems = schema_problems(self._validator, arguments)
        return (None, problems) if problems else (arguments, [])

    def openai_function(self) -> OpenAITool:
        return openai_function(self.name, self.description, self.input_schema)


class DescribedWorld:
    """A sandboxed world as a world class describes itself: name, description, tools (`Described`)."""

    def __init__(self, info: WorldInfo) -> None:
        self.info = info
        self.name = info.name
        self.description = info.description
        self.max_steps = info.max_steps
        self._tools = [DescribedTool(entry) for entry in info.tools]

    def tools(self) -> list[DescribedTool]:
        return list(self._tools)

    def openai_tools(self) -> list[OpenAITool]:
        return [tool.openai_function() for tool in self._tools]


class SandboxWorld(DescribedWorld):
    """A world loaded in `pool`: each episode opens in a sandbox process of its own."""

    def __init__(self, pool: SandboxPool, info: WorldInfo) -> None:
        super().__init__(info)
        self.pool = pool

    async def open(self) -> Episode:
        return await self.pool.open(self.info)
