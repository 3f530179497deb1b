"""A llama.cpp grammar (GBNF) that admits exactly one compact tool call: `{"name": "t", "arguments": {...}}`.

llama.cpp can turn a JSON schema into a grammar itself (`json_schema`), but its grammar lets a reply spend
tokens on optional whitespace (a small model pretty-prints, often past its token budget), and its many
rules make each sampling step dearer. This one fixes the layout (one space after `:` and `,`, nothing
else), keeps a tool's properties in their declared order with the required ones present, bounds strings,
and admits only JSON without escapes in strings, which is all a tool's arguments need here. Every reply it
admits parses as a call whose arguments satisfy the tool's types, enums and required fields.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from engine.gbnf import CONTROL, CharSet, GrammarRules, literal
from engine.messages import OpenAITool

MAX_STRING = 48  # characters in a string without a maxLength: a runaway string cannot eat the token budget
MAX_ITEMS = 8
STRING_CHAR = CharSet.but('"\\' + CONTROL).gbnf()  # a character of a JSON string that needs no escape


def json_literal(value: Any) -> str:
    """A GBNF literal of `value` as compact JSON, characters as they are (as the prompt shows them)."""
    return literal(json.dumps(value, ensure_ascii=False))


def _string(schema: dict[str, Any]) -> str:
    longest = int(schema.get("maxLength", MAX_STRING))
    shortest = int(schema.get("minLength", 0))
    return f'"\\"" {STRING_CHAR}{{{shortest},{max(shortest, longest)}}} "\\""'


_SCALARS = {
    "integer": '"-"? ("0" | [1-9] [0-9]{0,9})',  # no leading zeros: JSON has none
    "number": '"-"? ("0" | [1-9] [0-9]{0,9}) ("." [0-9]{1,4})?',
    "boolean": '("true" | "false")',
    "null": '"null"',
}


def _not_negative(schema: dict[str, Any]) -> bool:
    """Whether a number `schema` admits no negative value (an amount, a count): the grammar drops the sign."""
    bounds = (schema.get("minimum"), schema.get("exclusiveMinimum"))
    return any(isinstance(bound, int | float) and bound >= 0 for bound in bounds)


def json_value(schema: Any, rules: GrammarRules) -> str:
    """A GBNF expression for one compact JSON value `schema` admits (the subset tool arguments use)."""
    if isinstance(schema, dict) and "x-gbnf" in schema:  # a schema may carry its own expression
        return str(schema["x-gbnf"])
    if not isinstance(schema, dict) or not schema:
        return f"({_string({})} | {_SCALARS['number']} | {_SCALARS['boolean']} | {_SCALARS['null']})"
    if "const" in schema:
        return json_literal(schema["const"])
    if "enum" in schema:
        return "(" + " | ".join(json_literal(option) for option in schema["enum"]) + ")"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return "(" + " | ".join(json_value(option, rules) for option in schema[key]) + ")"
    kind = schema.get("type")
    if isinstance(kind, list):
        return "(" + " | ".join(json_value({**schema, "type": one}, rules) for one in kind) + ")"
    if kind == "string":
        return _string(schema)
    if kind in ("integer", "number") and _not_negative(schema):
        return _SCALARS[kind].removeprefix('"-"? ')
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "array":
        item = rules.add(json_value(schema.get("items"), rules))
        most = int(schema.get("maxItems", MAX_ITEMS))
        more = f' (", " {item}){{0,{most - 1}}}' if most > 1 else ""  # llguidance refuses `{0,0}`
        return f'"[" ({item}{more})? "]"'
    if kind == "object" or "properties" in schema:
        return _object(schema, rules)
    return json_value({}, rules)


def _object(schema: dict[str, Any], rules: GrammarRules) -> str:
    """`{...}` with the schema's properties in declared order, each optional one free to be left out."""
    properties = list((schema.get("properties") or {}).items())
    required = set(schema.get("required") or [])
    if not properties:
        return '"{}"'
    pairs = [
        f"{literal(json.dumps(name, ensure_ascii=False) + ': ')} {rules.add(json_value(value, rules))}"
        for name, value in properties
    ]
    # after[i]: the properties from i on, the first of them preceded by ", "; first[i]: with nothing before it.
    after: list[str] = [""] * (len(properties) + 1)
    first: list[str] = [""] * (len(properties) + 1)
    after[len(properties)] = first[len(properties)] = rules.add('""')
    for start in range(len(properties) - 1, -1, -1):
        follow, lead = [], []
        for chosen in range(start, len(properties)):
            follow.append(f'", " {pairs[chosen]} {after[chosen + 1]}')
            lead.append(f"{pairs[chosen]} {after[chosen + 1]}")
            if properties[chosen][0] in required:
                break  # a required property cannot be skipped
        else:
            follow.append('""')
            lead.append('""')
        after[start] = rules.add(" | ".join(follow))
        first[start] = rules.add(" | ".join(lead))
    return f'"{{" {first[0]} "}}"'


def call_grammar(tools: Sequence[OpenAITool]) -> str:
    """The grammar of one call of one of `tools` (OpenAI function specs), with nothing before or after it."""
    rules = GrammarRules()
    calls = []
    for entry in tools:
        function = entry["function"]
        arguments = json_value(function.get("parameters") or {"type": "object"}, rules)
        head = literal('{"name": ' + json.dumps(function["name"], ensure_ascii=False) + ', "arguments": ')
        calls.append(f'{head} {arguments} "}}"')
    return rules.grammar(" | ".join(calls))
