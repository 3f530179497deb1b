"""A tau2 domain's tools over its database, answering calls as the official environment does.

The official `Environment.get_response` calls the tool's Python method with the model's arguments as they came
(no validation before the call), turns any exception into the text `Error: <exception>` (counted as an error),
and serialises results with `to_json_str`: text as it is, pydantic models by `model_dump`, numbers and booleans
by `str`, everything else by `json.dumps`. The database's hash is SHA-256 of its `model_dump` as sorted JSON.
Domain toolkits (`airline.AirlineTools`, `retail.RetailTools`) keep the official class, method and model names,
because Python's own error messages (a missing argument, a bad literal) name them and the agent reads those.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, ClassVar

from pydantic import BaseModel

from benchmarks.arithmetic import OPERATORS

_TOOL = "__tau2_tool__"


def tool(mutates: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a toolkit method as a tool; `mutates` says whether it can change the database (the official
    `mutates_state`, inferred there from WRITE): the evaluator's replay reruns only those."""

    def mark(method: Callable[..., Any]) -> Callable[..., Any]:
        setattr(method, _TOOL, mutates)
        return method

    return mark


@dataclass(frozen=True)
class ToolResult:
    content: str
    error: bool


class Toolkit:
    """The tools of one domain over one copy of its database."""

    db: BaseModel
    tool_names: ClassVar[tuple[str, ...]] = ()  # filled per subclass, in definition order (the official order)

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls.tool_names = tuple(name for name, value in vars(cls).items() if hasattr(value, _TOOL))

    def __init__(self, db: BaseModel) -> None:
        self.db = db

    def mutates(self, name: str) -> bool:
        return self.mutates_tool(name)

    @classmethod
    def mutates_tool(cls, name: str) -> bool:
        """Whether the tool `name` can change the database (False for a name that is no tool)."""
        return name in cls.tool_names and bool(getattr(getattr(cls, name), _TOOL))

    def use_tool(self, tool_name: str, **kwargs: Any) -> Any:
        if tool_name not in self.tool_names:
            raise ValueError(f"Tool '{tool_name}' not found.")
        return getattr(self, tool_name)(**kwargs)

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """One call, answered as the official environment answers it."""
        try:
            result: Any = self.use_tool(name, **arguments)
            error = False
        except Exception as failure:  # the official catches everything a tool raises and shows it
            result, error = f"Error: {failure}", True
        return ToolResult(to_json_str(result), error)

    def db_hash(self) -> str:
        return dict_hash(self.db.model_dump())


def dict_hash(data: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def to_json_str(result: Any) -> str:
    """A tool's result as the agent reads it (the official `Environment.to_json_str`)."""
    if isinstance(result, str):
        return result
    return json.dumps(_plain(result), default=str)


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump()
    if isinstance(value, str) or value is None:
        return value
    if isinstance(value, (int, float, bool)):
        return str(value)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_plain(item) for item in value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    raise ValueError(f"Unsupported type: {type(value)}")


_MAX_POWER = 10_000  # the official evaluates `9**9**9` and hangs; here a power that large is an error


def calculate(expression: str) -> str:
    """The domains' `calculate` tool: what the official's `eval` of an arithmetic expression gives, rounded to two
    places, computed from the expression's syntax tree (model-written text is never `eval`ed here)."""
    if not all(char in "0123456789+-*/(). " for char in expression):
        raise ValueError("Invalid characters in expression")
    if not isinstance(expression, str):  # a list of digit strings passes the character check there too
        raise TypeError("eval() arg 1 must be a string, bytes or code object")
    tree = ast.parse(expression.lstrip(" \t"), filename="<string>", mode="eval")
    if isinstance(tree.body, ast.Tuple):  # "()"
        raise TypeError("float() argument must be a string or a real number, not 'tuple'")
    return str(round(float(_arithmetic(tree.body)), 2))


def _arithmetic(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _arithmetic(node.operand)
        return value if isinstance(node.op, ast.UAdd) else -value
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        left, right = _arithmetic(node.left), _arithmetic(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_POWER:
            raise OverflowError("exponent too large")
        return OPERATORS[type(node.op)](left, right)
    raise ValueError("Invalid expression")
