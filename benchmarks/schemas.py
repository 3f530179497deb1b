"""Benchmark function docs (ACEBench's `"type": "dict"`, `float`, `tuple`...) as OpenAI tool specs.

ACEBench writes its docs in the Gorilla style; native tool calling needs JSON Schema types. An unknown type
becomes `string`, floats are marked as such, as bfcl-eval's FC handlers do (BFCL's own docs are converted by
bfcl-eval itself: `benchmarks.bfcl.calls.openai_tools`)."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from toolworlds.tool import OpenAIFunction, OpenAITool

# What ACEBench's docs use (dict, list, string, integer, object), and the other Gorilla names.
GORILLA_TYPES = {"dict": "object", "list": "array", "tuple": "array", "float": "number", "any": "string"}


def openai_tools(docs: Iterable[dict[str, Any]], types: Mapping[str, str] | None = None) -> list[OpenAITool]:
    """One `{"type": "function", "function": ...}` per doc, its parameters an object of JSON Schema types."""
    mapping = types or GORILLA_TYPES
    tools: list[OpenAITool] = []
    for doc in docs:
        parameters = copy.deepcopy(doc.get("parameters") or {})
        parameters["type"] = "object"
        properties = parameters.get("properties") or {}
        parameters["properties"] = {name: _schema(schema, mapping) for name, schema in properties.items()}
        function: OpenAIFunction = {"name": doc["name"], "description": doc.get("description", ""),
                                    "parameters": parameters}  # fmt: skip
        tools.append({"type": "function", "function": function})
    return tools


def _schema(schema: dict[str, Any], types: Mapping[str, str]) -> dict[str, Any]:
    converted = dict(schema)
    kind = schema.get("type", "string")
    if kind == "float":
        converted["format"] = "float"
        converted["description"] = f"{schema.get('description', '')} This is a float type value."
    json_types = {"string", "integer", "number", "boolean", "array", "object", "null"}
    converted["type"] = types.get(kind, kind if kind in json_types else "string")
    if isinstance(schema.get("properties"), dict):
        converted["properties"] = {name: _schema(inner, types) for name, inner in schema["properties"].items()}
    if isinstance(schema.get("items"), dict):
        converted["items"] = _schema(schema["items"], types)
    return converted
