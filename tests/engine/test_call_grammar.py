"""The call grammar admits exactly compact calls that parse and fit their tool's schema.

Soundness: replies chosen at random inside the grammar (walked byte by byte with llguidance, the engine the
trainer scores with) all parse as one call that satisfies its tool's schema (types, enums, required fields
and string lengths: what the grammar enforces; numeric bounds are the world's to refuse). Completeness: the
reference worlds' own calls, written compactly in the declared property order, are admitted.
"""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest

from engine.call_grammar import call_grammar
from engine.parsing import parse_constrained
from tests.grammar_walk import admits, random_reply
from toolworlds.registry import load_world
from toolworlds.tool import FINISH_FUNCTION

EXTRA = {"type": "function", "function": {"name": "set_status", "parameters": {"type": "object", "properties": {
    "ticket_id": {"type": "string", "maxLength": 6}, "status": {"enum": ["open", "on_hold", "closed"]},
    "priority": {"type": "integer"}, "notify": {"type": "boolean"}, "ratio": {"type": "number"},
    "tags": {"type": "array", "items": {"type": "string"}}, "note": {"type": "string"}},
    "required": ["ticket_id", "status"]}}}  # fmt: skip
KEPT = {"type", "enum", "const", "required", "maxLength", "minLength", "additionalProperties"}  # the grammar's share


def tools_of(world: str) -> list[dict[str, Any]]:
    return [*load_world(world).openai_tools(), FINISH_FUNCTION]


@pytest.mark.parametrize("world", ["banking", "orders", "ticketing", "extra"])
def test_every_reply_the_grammar_admits_is_a_call_that_fits_its_schema(bytes_matcher: Any, world: str) -> None:
    tools = [EXTRA, FINISH_FUNCTION] if world == "extra" else tools_of(world)
    schemas = {tool["function"]["name"]: tool["function"]["parameters"] for tool in tools}
    grammar = call_grammar(tools)
    rng = random.Random(world)
    names = set()
    for _ in range(40):
        text = random_reply(bytes_matcher, grammar, rng)
        reply = parse_constrained(text)
        assert not reply.problems and len(reply.calls) == 1, text
        validator = jsonschema.Draft202012Validator(schemas[reply.calls[0].name])
        broken = [error.message for error in validator.iter_errors(reply.calls[0].arguments) if error.validator in KEPT]
        assert not broken, (text, broken)
        names.add(reply.calls[0].name)
    assert len(names) > 1  # the walk reached more than one tool


def test_numbers_are_json_numbers(bytes_matcher: Any) -> None:
    grammar = call_grammar([EXTRA])
    head = '{"name": "set_status", "arguments": {"ticket_id": "T-1", "status": "open", '
    for good in ('"priority": 0', '"priority": -12', '"ratio": 0.5', '"ratio": 10'):
        assert admits(bytes_matcher, grammar, head + good + "}}"), good
    for bad in ('"priority": 06', '"priority": -00', '"ratio": 01.5', '"priority": 1.5'):
        assert not admits(bytes_matcher, grammar, head + bad + "}}"), bad


def test_a_bound_at_zero_or_above_drops_the_sign_and_one_item_needs_no_repetition(bytes_matcher: Any) -> None:
    """`exclusiveMinimum: 0` (an amount) admits no negative number; `maxItems: 1` is a list of at most one
    (written without `{0,0}`, which llguidance refuses)."""
    tool = {"type": "function", "function": {"name": "pay", "parameters": {"type": "object", "properties": {
        "amount": {"type": "number", "exclusiveMinimum": 0}, "tags": {"type": "array", "maxItems": 1,
        "items": {"type": "string"}}}, "required": ["amount"]}}}  # fmt: skip
    grammar = call_grammar([tool])
    assert "{0,0}" not in grammar
    head = '{"name": "pay", "arguments": {"amount": '
    assert admits(bytes_matcher, grammar, head + '12.5, "tags": ["a"]}}')
    assert not admits(bytes_matcher, grammar, head + "-3}}")
    assert not admits(bytes_matcher, grammar, head + '1, "tags": ["a", "b"]}}')


@pytest.mark.parametrize("world", ["banking", "orders", "ticketing"])
def test_the_reference_calls_are_admitted(bytes_matcher: Any, world: str) -> None:
    env = load_world(world)()
    tools = tools_of(world)
    grammar = call_grammar(tools)
    order = {tool["function"]["name"]: list(tool["function"]["parameters"]["properties"]) for tool in tools}
    calls = ['{"name": "finish", "arguments": {}}', '{"name": "finish", "arguments": {"answer": "4 items"}}']
    for seed in range(5):
        env.reset(seed)
        for step in env.solution():
            if hasattr(step, "arguments"):  # in the declared order, the only one the grammar admits
                arguments = {key: step.arguments[key] for key in order[step.name] if key in step.arguments}
                calls.append(json.dumps({"name": step.name, "arguments": arguments}, ensure_ascii=False))
    assert len(calls) > 7
    for call in calls:
        assert admits(bytes_matcher, grammar, call), call
