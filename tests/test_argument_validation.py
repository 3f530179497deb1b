"""The fast argument check agrees with the JSON Schema validator on every argument the worlds' tools can get.

`ToolSpec.validate` asks a compiled validator "valid?" first and pays for the Python one only when told no.
That shortcut may never change a verdict: for arguments taken from every world's reference plays and
mutated every way an agent gets them wrong, the problems `validate` reports must be exactly those the
Python validator names, and where it names none, exactly what pydantic says.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from toolworlds.core import ToolCall
from toolworlds.registry import builtin_worlds
from toolworlds.tool import ToolSpec, problems_in, schema_problems

ODD_VALUES: list[Any] = [None, True, 0, -1, 5, 20.0, 2.5, 10**12, "", "5", "x" * 300, "B0", [], [1], {}, {"a": 1}]


def reference_arguments() -> Iterator[tuple[str, ToolSpec, dict[str, Any]]]:
    """Every tool call of every builtin world's reference solution, over a few seeds."""
    for name, world_class in sorted(builtin_worlds().items()):
        world = world_class()
        for seed in range(4):
            world.reset(seed)
            for action in world.solution():
                if isinstance(action, ToolCall) and action.name in world.tool_specs:
                    yield name, world.tool_specs[action.name], dict(action.arguments)


def mutations(arguments: dict[str, Any], spec: ToolSpec) -> Iterator[Any]:
    """The arguments as given, and wrong in one place: a value swapped, a key gone or added, a nested value."""
    yield arguments
    yield {}
    yield [arguments]
    for key in list(arguments) + list(spec.input_schema.get("properties", {})):
        without = {k: v for k, v in arguments.items() if k != key}
        yield without
        for value in ODD_VALUES:
            yield {**without, key: value}
        inner = arguments.get(key)
        if isinstance(inner, list) and inner:
            for value in ODD_VALUES[:8]:
                changed = copy.deepcopy(arguments)
                changed[key][0] = value
                yield changed
        if isinstance(inner, dict):
            for inner_key in list(inner):
                for value in ODD_VALUES[:8]:
                    changed = copy.deepcopy(arguments)
                    changed[key][inner_key] = value
                    yield changed
    yield {**arguments, "unexpected": 1}


CASES = list(reference_arguments())


def test_every_builtin_world_contributes_calls() -> None:
    assert {name for name, _, _ in CASES} == set(builtin_worlds())
    assert len({(name, spec.name) for name, spec, _ in CASES}) >= 15


@pytest.mark.parametrize("world", sorted(builtin_worlds()))
def test_the_fast_check_never_changes_a_verdict(world: str) -> None:
    checked = 0
    refused = 0
    for _, spec, arguments in (case for case in CASES if case[0] == world):
        python = Draft202012Validator(spec.input_schema)
        for candidate in mutations(arguments, spec):
            parsed, problems = spec.validate(candidate)
            if not isinstance(candidate, dict):
                assert parsed is None and problems[0].field == "(arguments)"
                continue
            expected = schema_problems(python, candidate)
            if expected:
                assert parsed is None and problems == expected, (spec.name, candidate)
                refused += 1
            else:
                try:
                    spec.arguments.model_validate(candidate)
                    assert parsed is not None and problems == [], (spec.name, candidate)
                except ValidationError as error:
                    assert parsed is None and problems == problems_in(error), (spec.name, candidate)
            checked += 1
    assert checked >= 50 and refused >= 20  # the mutations reach both verdicts
