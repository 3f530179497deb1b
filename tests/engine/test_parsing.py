"""Every tool-call protocol on valid and broken input: calls read exactly, problems named, nothing raises."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator, ValidationError

from engine.parsing import (
    ParsedCall,
    constrained_response_format,
    parse_constrained,
    parse_native,
    parse_text,
)
from toolworlds.reference.banking import BankingWorld


def native(*calls: tuple[str | None, object], content: str | None = None) -> dict[str, object]:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
            for i, (name, arguments) in enumerate(calls)
        ],
    }


def test_native_calls_keep_their_ids_and_arguments() -> None:
    reply = parse_native(native(("get_balance", '{"account_id": "A-1"}'), ("list_accounts", "")))
    assert reply.calls == [
        ParsedCall("get_balance", {"account_id": "A-1"}, "c0"),
        ParsedCall("list_accounts", {}, "c1"),
    ]
    assert not reply.malformed


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ('{"account_id": ', "arguments are not valid JSON"),
        ('["A-1"]', "arguments must be a JSON object, got list"),
        (42, "arguments must be a JSON object, got int"),
    ],
)
def test_native_call_with_broken_arguments_is_kept_with_its_problem(arguments: object, problem: str) -> None:
    reply = parse_native(native(("get_balance", arguments), ("list_accounts", "{}")))
    assert reply.malformed and problem in reply.problems[0] and "get_balance" in reply.problems[0]
    broken, fine = reply.calls
    assert broken.id == "c0" and problem in broken.problem  # it still needs a tool message answering c0
    assert fine == ParsedCall("list_accounts", {}, "c1")


def test_native_call_without_a_name() -> None:
    reply = parse_native(native((None, "{}")))
    assert reply.problems == ["tool call 1 has no function name"]
    assert reply.calls[0].problem


def test_hermes_tags_one_or_many() -> None:
    text = (
        'Let me look.\n<tool_call>\n{"name": "get_balance", "arguments": {"account_id": "A-1"}}\n</tool_call>\n'
        '<tool_call>{"name": "list_accounts", "arguments": {}}</tool_call>'
    )
    reply = parse_text(text)
    assert [call.name for call in reply.calls] == ["get_balance", "list_accounts"]
    assert reply.calls[0].arguments == {"account_id": "A-1"}
    assert not reply.problems


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('<tool_call>{"name": "x", "arguments": {"a": }</tool_call>', "<tool_call> block 1 is not valid JSON"),
        ('<tool_call>{"name": "x", "arguments": {}}', "<tool_call> block 1 is not closed"),
        ('<tool_call>{"arguments": {}}</tool_call>', "<tool_call> block 1 has no string 'name'"),
        ("<tool_call>[1, 2]</tool_call>", "<tool_call> block 1 is not a JSON object"),
    ],
)
def test_broken_hermes_tags(text: str, problem: str) -> None:
    reply = parse_text(text)
    assert not reply.calls
    assert reply.problems and reply.problems[0].startswith(problem)


def test_a_good_tag_survives_a_broken_one() -> None:
    text = '<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": </tool_call>'
    reply = parse_text(text)
    assert [call.name for call in reply.calls] == ["a"]
    assert len(reply.problems) == 1 and "block 2" in reply.problems[0]


def test_bare_json_object_list_and_fenced() -> None:
    assert parse_text('{"name": "a", "arguments": {"x": 1}}').calls == [ParsedCall("a", {"x": 1})]
    assert parse_text('{"name": "a", "parameters": {"x": 1}}').calls == [ParsedCall("a", {"x": 1})]
    many = parse_text('[{"name": "a", "arguments": {}}, {"name": "b", "arguments": "{\\"y\\": 2}"}]')
    assert many.calls == [ParsedCall("a", {}), ParsedCall("b", {"y": 2})]
    fenced = parse_text('```json\n{"name": "a", "arguments": {}}\n```')
    assert fenced.calls == [ParsedCall("a", {})]


def test_broken_bare_json() -> None:
    reply = parse_text('{"name": "a", "arguments": {')
    assert not reply.calls and "looks like JSON but is not valid" in reply.problems[0]
    assert parse_text('{"tool": "a"}').problems == ["JSON call 1 has no string 'name'"]


def test_python_call_lists() -> None:
    reply = parse_text("[get_balance(account_id='A-1'), transfer(amount=5.5, memo=None, tags=['x'])]")
    assert reply.calls == [
        ParsedCall("get_balance", {"account_id": "A-1"}),
        ParsedCall("transfer", {"amount": 5.5, "memo": None, "tags": ["x"]}),
    ]
    assert parse_text('get_balance(account_id="A-1")').calls == [ParsedCall("get_balance", {"account_id": "A-1"})]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[get_balance('A-1')]", "passes positional arguments"),
        ("[get_balance(account_id=os.system('ls'))]", "account_id= is not a literal value"),
        ("[get_balance(**spec)]", "uses **kwargs"),
        ("[get_balance(account_id='A-1'), 3]", "Python call 2 is not a function call"),
        ("[get_balance(account_id='A-1')", "does not parse"),
    ],
)
def test_broken_python_calls_are_never_evaluated(text: str, problem: str) -> None:
    reply = parse_text(text)
    assert any(problem in entry for entry in reply.problems), reply.problems


def test_prose_is_a_final_answer_not_a_problem() -> None:
    reply = parse_text("The balance of A-1 is $12.50.")
    assert not reply.calls and not reply.problems
    assert parse_native({"role": "assistant", "content": "Done."}).text == "Done."


def test_constrained_replies() -> None:
    assert parse_constrained('{"name": "a", "arguments": {"x": 1}}').calls == [ParsedCall("a", {"x": 1})]
    assert "not valid JSON" in parse_constrained('{"name": "a", "argu').problems[0]
    assert parse_constrained('"a"').problems == ["the reply is not a JSON object with a tool name"]


def test_constrained_schema_admits_exactly_the_worlds_calls() -> None:
    tools = BankingWorld.openai_tools()
    response_format = constrained_response_format(tools)
    assert response_format["type"] == "json_schema"
    validator = Draft202012Validator(response_format["json_schema"]["schema"])
    name = tools[0]["function"]["name"]
    required = tools[0]["function"]["parameters"].get("required", [])
    good = {"name": name, "arguments": {key: "A-1" for key in required}}
    validator.validate(good)
    with pytest.raises(ValidationError):
        validator.validate({"name": "no_such_tool", "arguments": {}})
    with pytest.raises(ValidationError):
        validator.validate({"name": name})
    assert json.loads(json.dumps(response_format)) == response_format


def test_constrained_schema_bounds_strings_without_touching_the_tools() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "note",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "text": {"type": "string"},
                        "code": {"type": "string", "maxLength": 8},
                        "kind": {"type": "string", "enum": ["a", "b"]},
                        "tags": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
                    },
                },
            },
        }
    ]
    before = json.dumps(tools)
    schema = constrained_response_format(tools, max_string_length=16)["json_schema"]["schema"]
    assert json.dumps(tools) == before  # the world's own schemas are not mutated
    validator = Draft202012Validator(schema)
    validator.validate({"name": "note", "arguments": {"text": "x" * 16, "code": "12345678", "tags": ["y" * 16]}})
    for too_long in ({"text": "x" * 17}, {"code": "123456789"}, {"tags": ["y" * 17]}):
        with pytest.raises(ValidationError):
            validator.validate({"name": "note", "arguments": too_long})
    properties = schema["oneOf"][0]["properties"]["arguments"]["properties"]
    assert "maxLength" not in properties["kind"]


def test_strict_native_reading_is_openais_protocol_exactly_and_the_lenient_one_is_kinder() -> None:
    """`strict` (bfcl-eval's FC reading): calls only from `tool_calls`, arguments a JSON object string."""
    text_calls = {"role": "assistant", "content": "[get_balance(account_id='A-1')]"}
    assert parse_native(text_calls, strict=True).calls == []
    assert parse_native(text_calls).calls == [ParsedCall(name="get_balance", arguments={"account_id": "A-1"})]
    for raw in ("", None, "[1, 2]", '{"x": '):
        strict = parse_native(native(("pwd", raw), ("ls", "{}")), strict=True)
        assert strict.malformed and "tool call 1 (pwd)" in strict.problems[0], raw
    assert parse_native(native(("pwd", ""))).calls == [ParsedCall(name="pwd", arguments={}, id="c0")]
    assert parse_native(native(("pwd", None))).calls == [ParsedCall(name="pwd", arguments={}, id="c0")]
    both = parse_native(native(("ls", '{"a": true}'), content="Let me look."), strict=True)
    assert both.calls == [ParsedCall(name="ls", arguments={"a": True}, id="c0")] and both.text == "Let me look."
