"""Between a model's tool calls and bfcl-eval's executor: OpenAI tool specs out, safe call source in.

bfcl-eval runs a call by `eval`-ing its Python source on the backend instance, and its checker replays the
same strings. Model text never becomes that source: a call reaches the executor only as a documented
function name and JSON-literal arguments, from which the source is written here (`name(k=v!r, ...)`, the
form bfcl-eval's own FC handlers write). The `repr` of JSON values is a Python literal, so nothing but
the named method can run.
"""

from __future__ import annotations

import keyword
import math
from collections.abc import Iterable
from typing import Any

from benchmarks.bfcl.data import bfcl_modules
from toolworlds.tool import OpenAITool


class CallRefused(ValueError):
    """A call that cannot be written as safe source; the message says which name or argument is wrong."""


def openai_tools(docs: Iterable[dict[str, Any]]) -> list[OpenAITool]:
    """BFCL function docs as OpenAI tool specs, converted by bfcl-eval itself as its `OpenAICompletionsHandler`
    converts them (which keeps each doc's `response` schema, as it is, beside its parameters)."""
    bfcl_modules()
    from bfcl_eval.constants.enums import ModelStyle
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
    from bfcl_eval.model_handler.utils import convert_to_tool

    tools: list[OpenAITool] = convert_to_tool(list(docs), GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS)
    return tools


def call_source(name: str, arguments: dict[str, Any], documented: set[str]) -> str:
    """`name(k=v,...)` for bfcl-eval's executor, from a documented function name and JSON arguments."""
    if name not in documented:
        raise CallRefused(not_defined(name))
    parts = []
    for key, value in arguments.items():
        if not key.isidentifier() or keyword.iskeyword(key):
            raise CallRefused(f"{name}: {key!r} is not an argument name")
        _check_literal(value, f"{name}({key}=...)")
        parts.append(f"{key}={value!r}")
    return f"{name}({','.join(parts)})"


def not_defined(name: object) -> str:
    """What bfcl-eval's executor reports for a call to a name that is not one of the entry's functions."""
    return f"name {str(name).split('.')[0]!r} is not defined"


def _check_literal(value: Any, where: str) -> None:
    """Only JSON values (whose `repr` is a Python literal) pass; NaN and infinities have no literal."""
    if value is None or isinstance(value, bool | int | str):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CallRefused(f"{where}: {value!r} is not a finite number")
        return
    if isinstance(value, list):
        for item in value:
            _check_literal(item, where)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise CallRefused(f"{where}: object keys must be strings")
            _check_literal(item, where)
        return
    raise CallRefused(f"{where}: {type(value).__name__} is not a JSON value")
