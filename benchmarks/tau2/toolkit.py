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
import operator
import warnings
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

    def call(self, name: str, arguments: dict[str, Any], after: Callable[[], None] | None = None) -> ToolResult:
        """One call, answered as the official environment answers it; `after` (the domain's sync) runs once the
        tool has, before the result is serialised, and its failure is the call's."""
        clash = _binding_error(arguments)
        if clash is not None:
            return ToolResult(f"Error: {clash}", True)
        try:
            result: Any = self.use_tool(name, **arguments)
            if after is not None:
                after()
            error = False
        except Exception as failure:  # the official catches everything a tool raises and shows it
            result, error = f"Error: {failure}", True
        return ToolResult(to_json_str(result), error)

    def db_hash(self) -> str:
        return dict_hash(self.db.model_dump())


def _binding_error(arguments: dict[str, Any]) -> str | None:
    """What Python says where the official passes the arguments on (`make_tool_call(name, requestor=...,
    **arguments)`) and one is named like that function's own parameters."""
    if "requestor" in arguments:
        where = "tau2.environment.environment.Environment.make_tool_call()"
        return f"{where} got multiple values for keyword argument 'requestor'"
    clash = next((name for name in ("self", "tool_name") if name in arguments), None)
    return None if clash is None else f"Environment.make_tool_call() got multiple values for argument '{clash}'"


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


MAX_BITS = 100_000  # the largest integer arithmetic may build: the official's eval of `9**9**9` never returns
TOO_LARGE = "int too large to convert to float"  # what the official says of any integer this large in the end


def calculate(expression: str) -> str:
    """The domains' `calculate` tool: what the official's `eval` of an arithmetic expression gives, rounded to two
    places, computed from the expression's syntax tree (model-written text is never `eval`ed here)."""
    if not all(char in "0123456789+-*/(). " for char in expression):
        raise ValueError("Invalid characters in expression")
    if not isinstance(expression, str):  # a list of digit strings passes the character check there too
        raise TypeError("eval() arg 1 must be a string, bytes or code object")
    source = expression.lstrip(" \t")
    with warnings.catch_warnings():  # "perhaps you missed a comma?": the agent reads the error, not this
        warnings.simplefilter("ignore", SyntaxWarning)
        compile(source, "<string>", "eval")  # compiling runs nothing, and refuses what eval refuses, in its words
    tree = ast.parse(source, filename="<string>", mode="eval")
    return str(round(float(_arithmetic(tree.body)), 2))


def _arithmetic(root: ast.expr) -> Any:
    """The value of an expression of numbers, `()`, `...`, unary and binary operators and calls, as Python's
    `eval` gives it (its own errors included), evaluated without recursion (eval takes ~2,900 operators) and
    refusing integers past `MAX_BITS`."""
    values: list[Any] = []
    stack: list[tuple[ast.expr, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        children = _operands(node)
        if not ready and children:
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(children))
            continue
        operands = [values.pop() for _ in children][::-1]
        values.append(_apply(node, operands))
    return values[0]


def _operands(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.UnaryOp):
        return [node.operand]
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.Call):
        return [node.func, *node.args]
    if isinstance(node, ast.Tuple):
        return list(node.elts)
    return []


def _apply(node: ast.expr, operands: list[Any]) -> Any:
    if isinstance(node, ast.Constant) and (node.value is Ellipsis or isinstance(node.value, (int, float))):
        return node.value
    if isinstance(node, ast.Tuple) and not any(isinstance(element, ast.Starred) for element in node.elts):
        return tuple(operands)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        return operator.pos(operands[0]) if isinstance(node.op, ast.UAdd) else operator.neg(operands[0])
    if isinstance(node, ast.Call) and not node.keywords:
        raise TypeError(f"'{type(operands[0]).__name__}' object is not callable")
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        left, right = operands
        if isinstance(node.op, ast.Pow) and _huge_power(left, right):
            raise OverflowError(TOO_LARGE)
        result = OPERATORS[type(node.op)](left, right)
        if isinstance(result, int) and result.bit_length() > MAX_BITS:
            raise OverflowError(TOO_LARGE)
        return result
    raise ValueError("Invalid expression")


def _huge_power(base: Any, exponent: Any) -> bool:
    """Whether `base ** exponent` is an integer past `MAX_BITS` (a float power overflows by itself)."""
    if not (isinstance(base, int) and isinstance(exponent, int)) or exponent <= 0 or abs(base) <= 1:
        return False
    return (abs(base).bit_length() - 1) * exponent > MAX_BITS
