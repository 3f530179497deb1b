"""The three reference worlds: solvable by their oracle, not by chance, deterministic, honest schemas."""

from __future__ import annotations

import statistics
from functools import cache
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from toolworlds.checks import check_world
from toolworlds.core import ToolCall, ToolWorld
from toolworlds.play import Transcript, play
from toolworlds.policies import OraclePolicy, RandomPolicy
from toolworlds.registry import builtin_worlds

WORLDS = builtin_worlds()
SEEDS = range(200)


@cache
def oracle_runs(name: str) -> list[Transcript]:
    return [play(WORLDS[name](), seed, OraclePolicy()) for seed in SEEDS]


@cache
def random_runs(name: str) -> list[Transcript]:
    return [play(WORLDS[name](), seed, RandomPolicy(seed)) for seed in SEEDS]


def test_the_three_reference_worlds_are_registered() -> None:
    assert set(WORLDS) == {"banking", "ticketing", "orders"}


@pytest.mark.parametrize("name", sorted(WORLDS))
def test_keeps_the_contract_on_seeds_0_to_199(name: str) -> None:
    """Oracle scores 1.0 on every seed, doing nothing does not, deterministic, JSON, no leaky hint."""
    failed = [result for result in check_world(WORLDS[name], SEEDS) if not result.passed]
    assert failed == []


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WORLDS))
def test_keeps_the_contract_on_a_thousand_more_seeds(name: str) -> None:
    failed = [result for result in check_world(WORLDS[name], range(200, 1200)) if not result.passed]
    assert failed == []


@pytest.mark.parametrize("name", sorted(WORLDS))
def test_random_policy_scores_below_a_fifth(name: str) -> None:
    assert statistics.mean(t.score for t in random_runs(name)) < 0.2


@pytest.mark.parametrize("name", sorted(WORLDS))
def test_variants_span_one_to_eight_or_more_steps(name: str) -> None:
    runs = oracle_runs(name)
    steps = [t.tool_calls for t in runs]
    assert min(steps) == 1 and max(steps) >= 8
    assert len({t.task.instruction for t in runs}) >= 50
    assert len({t.task.variant for t in runs}) >= 10


@pytest.mark.parametrize("name", sorted(WORLDS))
def test_most_tasks_need_a_lookup_before_acting(name: str) -> None:
    """In most variants the first call reads (finds, lists, gets) rather than changes anything."""
    readers = ("find_", "list_", "get_", "search_", "track_")
    first_calls = [next(t.action for t in run.turns if isinstance(t.action, ToolCall)) for run in oracle_runs(name)]
    looked_up = [c for c in first_calls if isinstance(c, ToolCall) and c.name.startswith(readers)]
    assert len(looked_up) / len(first_calls) > 0.6


@pytest.mark.parametrize("name", sorted(WORLDS))
def test_same_seed_same_random_transcript(name: str) -> None:
    for seed in (0, 17, 123):
        first = play(WORLDS[name](), seed, RandomPolicy(seed))
        assert first.model_dump() == play(WORLDS[name](), seed, RandomPolicy(seed)).model_dump()


@pytest.mark.parametrize("name", sorted(WORLDS))
def test_a_world_has_ten_tools_with_valid_schemas(name: str) -> None:
    world: type[ToolWorld[Any]] = WORLDS[name]
    assert len(world.tools()) >= 10
    for spec in world.tools():
        Draft202012Validator.check_schema(spec.input_schema)
        Draft202012Validator.check_schema(spec.output_schema)
        assert spec.description and spec.input_schema["type"] == "object"


@pytest.mark.parametrize("name", sorted(WORLDS))
def test_wrong_type_and_missing_arguments_name_the_field(name: str) -> None:
    world = WORLDS[name]()
    world.reset(0)
    for spec in world.tools():
        schema = spec.input_schema
        for field in schema.get("required", []):
            missing = {k: v for k, v in _valid_looking(schema).items() if k != field}
            error = world.step(ToolCall(name=spec.name, arguments=missing)).observation["error"]
            assert error["code"] == "invalid_arguments"
            assert {"field": field, "problem": "required argument is missing"} in error["fields"]

            wrong = {**_valid_looking(schema), field: {"not": "this"}}
            error = world.step(ToolCall(name=spec.name, arguments=wrong)).observation["error"]
            assert error["code"] == "invalid_arguments"
            assert [p["field"] for p in error["fields"]] == [field], error
            world.reset(0)  # keep clear of the step limit


def _valid_looking(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments of the right JSON types (their values may still be refused by the tool)."""
    samples = {"string": "x", "integer": 1, "number": 1.0, "boolean": True, "array": []}
    values = {}
    for field, prop in schema["properties"].items():
        kind = prop.get("type") or next((p.get("type") for p in prop.get("anyOf", []) if "type" in p), "string")
        values[field] = prop["enum"][0] if "enum" in prop else samples.get(kind, "x")
    return values
