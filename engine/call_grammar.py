"""A llama.cpp grammar (GBNF) that admits exactly one compact tool call: `{"name": "t", "arguments": {...}}`.

llama.cpp can turn a JSON schema into a grammar itself (`json_schema`), but its grammar lets a reply spend
tokens on optional whitespace (a small model pretty-prints, often past its token budget), and its many
rules make each sampling step dearer. This one fixes the layout (one space after `:` and `,`, nothing
else), keeps a tool's properties in their declared order with the required ones present, bounds strings,
and admits only JSON without escapes in strings, which is all a tool's arguments need here. Every reply it
admits parses as a call whose arguments satisfy the tool's types, enums and required fields.

`call_steps` walks the same language as forced text and choices: the text the grammar fixes at a point
(`{"name": "`, `", "arguments": `, a required property's name, closing braces) is `Glue` an engine appends
without decoding it, and each choice (a tool name, which optional property comes next, a value) is a
`Span` sampled under its own small grammar. A reply built that way is a text `call_grammar` admits, and
the model spends a decoding step only where it has a choice.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

MAX_STRING = 48  # characters in a string without a maxLength: a runaway string cannot eat the token budget
MAX_ITEMS = 8


class _Rules:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, body: str) -> str:
        name = f"r{len(self.lines) + 1}"
        self.lines.append(f"{name} ::= {body}")
        return name


def _literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _json_literal(value: Any) -> str:
    return _literal(json.dumps(value, ensure_ascii=False))


def _string(schema: dict[str, Any]) -> str:
    longest = int(schema.get("maxLength", MAX_STRING))
    shortest = int(schema.get("minLength", 0))
    return f'"\\"" [^"\\\\\\x00-\\x1f]{{{shortest},{max(shortest, longest)}}} "\\""'


_SCALARS = {
    "integer": '"-"? ("0" | [1-9] [0-9]{0,9})',  # no leading zeros: JSON has none
    "number": '"-"? ("0" | [1-9] [0-9]{0,9}) ("." [0-9]{1,4})?',
    "boolean": '("true" | "false")',
    "null": '"null"',
}


def _value(schema: Any, rules: _Rules) -> str:
    if not isinstance(schema, dict) or not schema:
        return f"({_string({})} | {_SCALARS['number']} | {_SCALARS['boolean']} | {_SCALARS['null']})"
    if "const" in schema:
        return _json_literal(schema["const"])
    if "enum" in schema:
        return "(" + " | ".join(_json_literal(option) for option in schema["enum"]) + ")"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return "(" + " | ".join(_value(option, rules) for option in schema[key]) + ")"
    kind = schema.get("type")
    if isinstance(kind, list):
        return "(" + " | ".join(_value({**schema, "type": one}, rules) for one in kind) + ")"
    if kind == "string":
        return _string(schema)
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "array":
        item = rules.add(_value(schema.get("items"), rules))
        most = int(schema.get("maxItems", MAX_ITEMS))
        return f'"[" ({item} (", " {item}){{0,{max(0, most - 1)}}})? "]"'
    if kind == "object" or "properties" in schema:
        return _object(schema, rules)
    return _value({}, rules)


def _object(schema: dict[str, Any], rules: _Rules) -> str:
    """`{...}` with the schema's properties in declared order, each optional one free to be left out."""
    properties = list((schema.get("properties") or {}).items())
    required = set(schema.get("required") or [])
    if not properties:
        return '"{}"'
    pairs = [f"{_literal(json.dumps(name) + ': ')} {rules.add(_value(value, rules))}" for name, value in properties]
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


def call_grammar(tools: Sequence[dict[str, Any]]) -> str:
    """The grammar of one call of one of `tools` (OpenAI function specs), with nothing before or after it."""
    rules = _Rules()
    calls = []
    for entry in tools:
        function = entry["function"]
        arguments = _value(function.get("parameters") or {"type": "object"}, rules)
        head = _literal('{"name": ' + json.dumps(function["name"]) + ', "arguments": ')
        calls.append(f'{head} {arguments} "}}"')
    return "\n".join([f"root ::= {' | '.join(calls)}", *rules.lines])


@dataclass(frozen=True)
class Glue:
    """Text the grammar fixes here: appended as it is, never sampled."""

    text: str


@dataclass(frozen=True)
class Span:
    """A choice of the model's: sampled under `grammar` (GBNF, from the span's start) until it is complete."""

    grammar: str


Steps = Generator[Glue | Span, str | None, str]  # sends each Span's sampled text back; returns the whole text


def call_steps(tools: Sequence[dict[str, Any]]) -> Steps:
    """One call of one of `tools` as glue and spans; `send` each span's sampled text, get the reply's text back.

    The texts it builds are exactly those `call_grammar(tools)` admits (same layout, order and bounds)."""
    heads = {
        '{"name": ' + json.dumps(entry["function"]["name"]) + ', "arguments": ': entry["function"] for entry in tools
    }
    head = yield from _choose(list(heads))
    arguments = yield from _value_steps(heads[head].get("parameters") or {"type": "object"})
    yield Glue("}")
    return head + arguments + "}"


def _choose(options: list[str]) -> Generator[Glue | Span, str | None, str]:
    """One of `options` (none a prefix of another): what they share at the start and the end is glue, the
    part that tells them apart a span."""
    if len(options) == 1:
        yield Glue(options[0])
        return options[0]
    head = _shared_start(options)
    tail = _shared_start([option[len(head) :][::-1] for option in options])[::-1]
    if head:
        yield Glue(head)
    middles = [option[len(head) : len(option) - len(tail)] for option in options]
    sampled = yield Span("root ::= " + " | ".join(_literal(middle) if middle else '""' for middle in middles))
    if tail:
        yield Glue(tail)
    return head + (sampled or "") + tail


def _shared_start(texts: list[str]) -> str:
    shortest = min(texts, key=len)
    for index, character in enumerate(shortest):
        if any(text[index] != character for text in texts):
            return shortest[:index]
    return shortest


def _value_steps(schema: Any) -> Generator[Glue | Span, str | None, str]:
    """A value as `_value` admits it; strings, enums and objects are split, anything else is one span."""
    if (
        isinstance(schema, dict)
        and schema.get("type") == "string"
        and not {"const", "enum", "anyOf", "oneOf"} & set(schema)
    ):
        yield Glue('"')
        rules = _Rules()
        content = _string(schema).split(" ", 1)[1]  # the string's grammar without its opening quote
        sampled = yield Span("\n".join([f"root ::= {content}", *rules.lines]))
        return '"' + (sampled or "")
    if isinstance(schema, dict) and "const" in schema:
        text = json.dumps(schema["const"], ensure_ascii=False)
        yield Glue(text)
        return text
    if isinstance(schema, dict) and "enum" in schema:
        return (yield from _choose([json.dumps(option, ensure_ascii=False) for option in schema["enum"]]))
    if (
        isinstance(schema, dict)
        and (schema.get("type") == "object" or ("type" not in schema and "properties" in schema))
        and not {"anyOf", "oneOf"} & set(schema)
    ):
        return (yield from _object_steps(schema))
    rules = _Rules()
    body = _value(schema, rules)
    sampled = yield Span("\n".join([f"root ::= {body}", *rules.lines]))
    return sampled or ""


def _object_steps(schema: dict[str, Any]) -> Generator[Glue | Span, str | None, str]:
    """`{...}` as `_object` admits it: properties in declared order, an optional one free to be left out."""
    properties = list((schema.get("properties") or {}).items())
    required = set(schema.get("required") or [])
    if not properties:
        yield Glue("{}")
        return "{}"
    text = "{"
    yield Glue("{")
    start = 0
    while True:
        separator = ", " if start else ""
        options: list[str] = []
        for chosen in range(start, len(properties)):
            options.append(separator + json.dumps(properties[chosen][0]) + ": ")
            if properties[chosen][0] in required:
                break
        else:
            options.append("}")
        picked = yield from _choose(options)
        text += picked
        if picked == "}":
            return text
        index = start + options.index(picked)
        text += yield from _value_steps(properties[index][1])
        start = index + 1
