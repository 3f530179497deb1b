"""bfcl-eval's prompting protocol, read without running the model's text: `[func(a=1)]` replies decoded as
`default_decode_execute_prompting` decodes them, into the same call source, entry for entry.

bfcl-eval parses a reply with `ast`, turns each call into source (`decoded_output_to_execution_list`) and
`eval`s that source on the entry's backends; while decoding, it also `eval`s any argument that is an
arithmetic expression. The walk here is the same one (same AST rules, same failures, same source text), with
three differences, each where bfcl-eval would run something that is not one of the entry's functions:
- an argument expression is evaluated only as arithmetic on literals (`2*3`, `-1.5+x` fails, as it does there
  when `x` is undefined); one that would need Python's names (`len('ab')`) or would be huge is undecodable;
- a call whose source names anything but the entry's functions (`open(...)`, `os.system(...)`) is not run:
  its result is `Error during execution: name 'open' is not defined` (bfcl-eval gets that text only for
  names Python does not know), and the checker replays a call that fails the same way;
- a dict key that would end or escape its quotes in bfcl-eval's source (it writes keys unescaped) makes the
  call fail instead of changing what runs.
"""

from __future__ import annotations

import ast
import keyword
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.arithmetic import OPERATORS
from benchmarks.bfcl.calls import not_defined

FAILED_CALL = "spadework_call_not_run()"  # what the checker replays for a call not run: fails, changes nothing


class Undecodable(ValueError):
    """The reply is not calls in bfcl-eval's sense (its decoder raises): the model's turn ends."""


@dataclass(frozen=True)
class PromptedCall:
    """One decoded call: its source as bfcl-eval writes it, and why it cannot run here (None if it can)."""

    source: str
    refused: str | None = None

    @property
    def replayed(self) -> str:
        """What the checker executes for this call: the source, or a call that fails without effect."""
        return FAILED_CALL if self.refused else self.source

    @property
    def failure(self) -> str:
        """The execution result bfcl-eval's executor gives a call that raises."""
        return f"Error during execution: {self.refused}"


def decode(reply: str, functions: set[str]) -> list[PromptedCall]:
    """The reply's calls, in order; [] for an empty list (the turn ends). Raises `Undecodable`."""
    text = reply.strip("`\n ")
    if not text.startswith("["):
        text = "[" + text
    if not text.endswith("]"):
        text = text + "]"
    try:
        tree = ast.parse(text.strip().strip("'"), mode="eval")
        body = tree.body
        if isinstance(body, ast.Call):
            elements: list[ast.expr] = [body]
        elif isinstance(body, ast.List | ast.Tuple | ast.Set):
            elements = body.elts
        else:
            raise Undecodable(f"a {type(body).__name__}, not a list of calls")
        calls = []
        for element in elements:
            if not isinstance(element, ast.Call):
                raise Undecodable(f"a {type(element).__name__} where a call was expected")
            calls.append(_resolve_call(element))
        return [_write(name, arguments, functions) for name, arguments in calls]
    except Undecodable:
        raise
    except (SyntaxError, ValueError, TypeError, IndexError, AttributeError, ArithmeticError, RecursionError,
            MemoryError) as error:  # fmt: skip
        raise Undecodable(f"{type(error).__name__}: {error}") from error


def _resolve_call(call: ast.Call) -> tuple[str, dict[Any, Any]]:
    """`resolve_ast_call`: the dotted name, and the keyword arguments (positional ones are dropped)."""
    parts = []
    func = call.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts)), {argument.arg: _resolve(argument.value) for argument in call.keywords}


def _resolve(node: ast.AST | None) -> Any:
    """`resolve_ast_by_type`, with arithmetic evaluated on literals only (bfcl-eval `eval`s it)."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):  # bfcl-eval negates the operand's value, whatever the operator
        if not isinstance(node.operand, ast.Constant):
            raise Undecodable("a unary operator on something other than a literal")
        operand: Any = node.operand.value
        return -operand
    if isinstance(node, ast.List):
        return [_resolve(item) for item in node.elts]
    if isinstance(node, ast.Dict):
        return {_resolve(key): _resolve(value) for key, value in zip(node.keys, node.values, strict=True)}
    if isinstance(node, ast.BinOp):
        return _arithmetic(node)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return ast.unparse(node) if not node.keywords else dict([_resolve_call(node)])
    if isinstance(node, ast.Tuple):
        return tuple(_resolve(item) for item in node.elts)
    if isinstance(node, ast.Lambda):  # bfcl-eval indexes the lambda's body, which always raises
        raise Undecodable("a lambda")
    if isinstance(node, ast.Subscript):
        return ast.unparse(node.value) + "[" + ast.unparse(node.slice) + "]"
    raise Undecodable(f"Unsupported AST type: {type(node)}")


_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_, ast.Invert: operator.invert,
}  # fmt: skip
MAX_LENGTH = 10_000  # longest string or list an argument expression may build
MAX_BITS = 4_000  # largest integer it may build


def _arithmetic(node: ast.AST) -> Any:
    """What `eval` gives for an expression of literals and + - * / // % ** (a bounded subset of Python)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List | ast.Tuple):
        items = [_arithmetic(item) for item in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_arithmetic(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        left, right = _arithmetic(node.left), _arithmetic(node.right)
        if _too_costly(node.op, left, right):
            raise Undecodable("an expression too large to evaluate here")
        result = OPERATORS[type(node.op)](left, right)
        if isinstance(result, int) and result.bit_length() > MAX_BITS:
            raise Undecodable("a number too large to evaluate here")
        return result
    raise Undecodable(f"an expression that needs Python to evaluate ({type(node).__name__})")


def _too_costly(op: ast.operator, left: Any, right: Any) -> bool:
    """Refuse, before computing, what could take long or build something huge (and `%` formatting of text)."""
    if isinstance(op, ast.Mod) and isinstance(left, str | bytes):
        return True
    if isinstance(op, ast.Pow) and isinstance(right, int | float):
        base_bits = left.bit_length() if isinstance(left, int) else 64
        return abs(right) * max(base_bits, 1) > MAX_BITS
    if isinstance(op, ast.Mult):
        for sequence, count in ((left, right), (right, left)):
            if isinstance(sequence, str | bytes | list | tuple) and isinstance(count, int):
                return len(sequence) * max(count, 0) > MAX_LENGTH
    return False


def _write(name: str, arguments: dict[Any, Any], functions: set[str]) -> PromptedCall:
    """`decoded_output_to_execution_list` for one call: its source, and whether only entry functions run."""
    problems: list[str] = []
    source = _call_source(name, arguments, functions, problems)
    return PromptedCall(source, problems[0] if problems else None)


def _call_source(name: Any, arguments: dict[Any, Any], functions: set[str], problems: list[str]) -> str:
    if name not in functions:
        problems.append(not_defined(name))
    for key in arguments:
        if not isinstance(key, str) or not key.isidentifier() or keyword.iskeyword(key):
            problems.append(f"{key!r} is not an argument name")
    listed = ", ".join(f"{key}={_value_source(value, functions, problems)}" for key, value in arguments.items())
    return f"{name}({listed})"


def _value_source(value: Any, functions: set[str], problems: list[str]) -> str:
    """`parse_nested_value`: a dict whose values are all dicts is a nested call (its first key names it;
    an empty dict has none, and decoding fails); another dict is written with its keys in bare quotes."""
    if not isinstance(value, dict):
        return repr(value)
    if all(isinstance(item, dict) for item in value.values()):
        if not value:
            raise Undecodable("an empty dict (bfcl-eval reads it as a call with no name)")
        name = next(iter(value))
        return _call_source(name, value[name], functions, problems)
    items = []
    for key, item in value.items():
        if any(character in str(key) for character in "'\\\n\r\0"):
            problems.append(f"the dict key {str(key)!r} cannot be written between quotes")
        items.append(f"'{key}': {_value_source(item, functions, problems)}")
    return "{" + ", ".join(items) + "}"
