"""Turn what a model replied into tool calls, whatever protocol it used, without ever raising.

Models call tools in several ways. Servers with a tool parser return native `tool_calls`; servers without
one return text, in which the common protocols are `<tool_call>{json}</tool_call>` (Hermes, Qwen), a bare
JSON object or list of objects, and a Python call list such as `[get_balance(account_id="A-1")]`. In
`constrained` mode the reply is JSON that a schema forced into `{"name": ..., "arguments": {...}}`.

Every parser returns a `ParsedReply`: the calls it could read and a list of problems for the parts it
could not. A reply with problems is not an exception: the episode shows the problems to the agent and
counts them (peers crash whole runs on one bad call).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.messages import OpenAITool

MAX_CONSTRAINED_STRING = 256


@dataclass(frozen=True)
class ParsedCall:
    """One tool call the model made; `id` is the server's call id, or one the engine assigns."""

    name: str
    arguments: dict[str, Any]
    id: str = ""
    problem: str = ""  # set for a native call that cannot run: it still needs a tool message answering its id


@dataclass
class ParsedReply:
    """What a reply amounts to: free text, the calls read from it, and what could not be read."""

    text: str
    calls: list[ParsedCall] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def malformed(self) -> bool:
        return bool(self.problems)


_TOOL_CALL_TAG = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_FENCE = re.compile(r"^```(?:json|python)?\s*(.*?)\s*```$", re.DOTALL)


def parse_native(message: Mapping[str, Any], strict: bool = False) -> ParsedReply:
    """Read an OpenAI `message` with `tool_calls`; fall back to the text protocols when it has none.

    `strict` reads OpenAI's function-calling protocol as bfcl-eval's FC handlers do: only `tool_calls` are
    calls (a reply without them is text, whatever it says), and each call's arguments must be a JSON object
    (`""` is not `{}`)."""
    text = message.get("content") or ""
    native = message.get("tool_calls") or []
    if not native:
        return ParsedReply(text=text) if strict else parse_text(text)
    reply = ParsedReply(text=text)
    for position, entry in enumerate(native):
        function = entry.get("function") or {}
        name = function.get("name")
        call_id = str(entry.get("id") or "")
        if not isinstance(name, str) or not name:
            reply.problems.append(f"tool call {position + 1} has no function name")
            reply.calls.append(ParsedCall(name="", arguments={}, id=call_id, problem=reply.problems[-1]))
            continue
        arguments = _arguments_object(function.get("arguments"), f"tool call {position + 1} ({name})", reply, strict)
        if arguments is None:
            reply.calls.append(ParsedCall(name=name, arguments={}, id=call_id, problem=reply.problems[-1]))
        else:
            reply.calls.append(ParsedCall(name=name, arguments=arguments, id=call_id))
    return reply


def parse_text(text: str) -> ParsedReply:
    """Read tool calls written as text, trying each common protocol; plain prose is a final answer."""
    stripped = text.strip()
    if "<tool_call>" in stripped:
        return _parse_tagged(text)
    fenced = _FENCE.match(stripped)
    body = fenced.group(1) if fenced else stripped
    if _looks_like_python_call(body):
        return _parse_python_calls(text, body)
    if body.startswith(("{", "[")):
        return _parse_json_calls(text, body)
    return ParsedReply(text=text)


def parse_constrained(text: str) -> ParsedReply:
    """Read a reply produced under `constrained_response_format`: one JSON object naming a tool."""
    reply = ParsedReply(text=text)
    value = _loaded(text, "the reply is not valid JSON", reply)
    if value is not _INVALID:
        _append_json_call(value, "the reply", reply)
    return reply


def constrained_response_format(
    tools: Sequence[OpenAITool], max_string_length: int = MAX_CONSTRAINED_STRING
) -> dict[str, Any]:
    """An OpenAI `response_format` that only admits a call of one of `tools` (OpenAI function specs).

    A oneOf over `{"name": const, "arguments": <that tool's parameters>}`, so even a tiny model's reply
    is a well-formed call once the server enforces the schema. Strings without a length bound get
    `maxLength`: measured with SmolLM2-135M on llama.cpp, 5 of 24 constrained turns ran a string until
    `max_tokens` cut the JSON off.
    """
    options = []
    for entry in tools:
        function = entry["function"]
        parameters = function.get("parameters") or {"type": "object"}
        options.append(
            {
                "type": "object",
                "properties": {
                    "name": {"const": function["name"]},
                    "arguments": _bounded_strings(parameters, max_string_length),
                },
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    schema = {"oneOf": options}
    return {"type": "json_schema", "json_schema": {"name": "tool_call", "strict": True, "schema": schema}}


def _bounded_strings(schema: Any, limit: int) -> Any:
    """A copy of `schema` in which every unbounded string type has `maxLength: limit`."""
    if isinstance(schema, list):
        return [_bounded_strings(item, limit) for item in schema]
    if not isinstance(schema, dict):
        return schema
    copied = {key: _bounded_strings(value, limit) for key, value in schema.items()}
    types = copied.get("type")
    is_string = types == "string" or (isinstance(types, list) and "string" in types)
    if is_string and "maxLength" not in copied and "enum" not in copied and "const" not in copied:
        copied["maxLength"] = limit
    return copied


# -- protocols ------------------------------------------------------------------------------------


def _parse_tagged(text: str) -> ParsedReply:
    reply = ParsedReply(text=text)
    for position, match in enumerate(_TOOL_CALL_TAG.finditer(text)):
        where = f"<tool_call> block {position + 1}"
        body = match.group(1).strip()
        if not match.group(0).endswith("</tool_call>"):
            reply.problems.append(f"{where} is not closed with </tool_call>")
            continue
        value = _loaded(body, f"{where} is not valid JSON", reply)
        if value is not _INVALID:
            _append_json_call(value, where, reply)
    return reply


def _parse_json_calls(text: str, body: str) -> ParsedReply:
    reply = ParsedReply(text=text)
    value = _loaded(body, "the reply looks like JSON but is not valid", reply)
    if value is _INVALID:
        return reply
    entries = value if isinstance(value, list) else [value]
    for position, entry in enumerate(entries):
        _append_json_call(entry, f"JSON call {position + 1}", reply)
    return reply


_INVALID = object()


def _loaded(text: str, problem: str, reply: ParsedReply) -> Any:
    """`text` as JSON, or `_INVALID` after adding `problem (why, where)` to `reply`."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        reply.problems.append(f"{problem} ({error.msg} at character {error.pos})")
        return _INVALID


def _append_json_call(value: Any, where: str, reply: ParsedReply) -> None:
    if not isinstance(value, dict):
        reply.problems.append(f"{where} is not a JSON object with a tool name")
        return
    name = value.get("name")
    if not isinstance(name, str) or not name:
        reply.problems.append(f"{where} has no string 'name'")
        return
    raw = value.get("arguments", value.get("parameters", {}))
    arguments = _arguments_object(raw, f"{where} ({name})", reply)
    if arguments is not None:
        reply.calls.append(ParsedCall(name=name, arguments=arguments))


def _arguments_object(raw: Any, where: str, reply: ParsedReply, strict: bool = False) -> dict[str, Any] | None:
    """Arguments come as a JSON string (OpenAI) or an object (text protocols); both must be an object.
    Missing or empty arguments are `{}`, unless `strict`."""
    if (raw is None or raw == "") and not strict:
        return {}
    if raw is None:
        reply.problems.append(f"{where}: arguments are missing")
        return None
    if isinstance(raw, str):
        raw = _loaded(raw, f"{where}: arguments are not valid JSON", reply)
        if raw is _INVALID:
            return None
    if not isinstance(raw, dict):
        reply.problems.append(f"{where}: arguments must be a JSON object, got {type(raw).__name__}")
        return None
    return raw


_PYTHON_CALL = re.compile(r"^\[?\s*[A-Za-z_][\w.]*\s*\(")


def _looks_like_python_call(body: str) -> bool:
    """`[name(` always; a bare `name(...)` only when it also ends like a call, so prose stays prose."""
    if not _PYTHON_CALL.match(body):
        return False
    return body.startswith("[") or body.endswith(")")


def _parse_python_calls(text: str, body: str) -> ParsedReply:
    """`[f(a=1), g(b="x")]` or `f(a=1)`: keyword arguments with literal values only (nothing is evaluated)."""
    reply = ParsedReply(text=text)
    try:
        tree = ast.parse(body, mode="eval").body
    except SyntaxError as error:
        reply.problems.append(f"the Python-style call list does not parse ({error.msg})")
        return reply
    nodes = tree.elts if isinstance(tree, ast.List | ast.Tuple) else [tree]
    for position, node in enumerate(nodes):
        where = f"Python call {position + 1}"
        if not isinstance(node, ast.Call):
            reply.problems.append(f"{where} is not a function call")
            continue
        name = ast.unparse(node.func)
        if node.args:
            reply.problems.append(f"{where} ({name}) passes positional arguments; name every argument")
            continue
        arguments: dict[str, Any] = {}
        for keyword in node.keywords:
            if keyword.arg is None:
                reply.problems.append(f"{where} ({name}) uses **kwargs")
                break
            try:
                arguments[keyword.arg] = ast.literal_eval(keyword.value)
            except (ValueError, SyntaxError):
                reply.problems.append(f"{where} ({name}): {keyword.arg}= is not a literal value")
                break
        else:
            reply.calls.append(ParsedCall(name=name, arguments=arguments))
    return reply
