"""Call text (`[send_message(sender_name='Eve', message="hi")]`) to (name, arguments), without running any of it.

The reference decodes an agent's text with `ast` and then `eval`s a rewritten call string. Here the same
decoding decides what counts as a call, step for step (one leading space dropped, brackets added where
missing, then `strip("[]'")`, then `ast.parse`), so an agent's text is a call here exactly when it is one there;
but values are only ever read from the syntax tree. What the reference would have evaluated (arithmetic, a
nested call with keywords, a lambda) is read as a literal where that is safe and refused otherwise.

Reproduced quirks of the reference decoder: positional arguments are dropped (`f('x')` calls `f()`); a bare
name is its own text (`sender_name=Eve` is 'Eve'); a call without keywords as a value is its source text
(`time=now()` is 'now()'); any unary operator negates a constant (`+5` is -5); a later keyword wins
(`f(a=1, a=2)` is a=2); a text whose body is not a call, tuple or list (`[1]`, `[hello]`) is no calls at all.
Refused where the reference would evaluate or fail: attribute calls (`os.system()`), `**kwargs`, a top-level
dict argument (the reference reads a dict there as a nested call and fails or evaluates it), lambdas, names in
arithmetic, and any syntax it does not support (f-strings, comprehensions, sets...).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from benchmarks.arithmetic import OPERATORS

Call = tuple[str, dict[str, Any]]

MAX_TEXT = 10_000  # the longest string or list arithmetic may build


class CallSyntaxError(ValueError):
    """Text that is not a call batch; the message says what was wrong with it."""


def parse_calls(text: str) -> list[Call]:
    """The calls in one agent message (or milestone), in order, as (function name, keyword arguments)."""
    if not isinstance(text, str) or not text:
        raise CallSyntaxError("empty text is not a call")
    body = text[1:] if text[0] == " " else text
    if not body.startswith("["):
        body = "[" + body
    if not body.endswith("]"):
        body = body + "]"
    source = body.strip("[]'")
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        raise CallSyntaxError(f"not a call: {type(error).__name__}: {error}") from None
    node = tree.body
    if isinstance(node, ast.Call):
        return [_call(node)]
    if isinstance(node, ast.Tuple | ast.List):
        if not all(isinstance(element, ast.Call) for element in node.elts):
            raise CallSyntaxError("a bracketed list may hold only calls")
        return [_call(element) for element in node.elts if isinstance(element, ast.Call)]
    return []


def call_text(name: str, arguments: dict[str, Any]) -> str:
    """`[name(k=v, ...)]` with `repr` values: the reference's execution string in brackets, which is the form the
    milestones are written in (`[delete_message(message_id=3)]`) and so what an agent's text must equal."""
    return f"[{_source(name, arguments)}]"


def batch_text(calls: Sequence[Call]) -> str:
    """Several calls as one agent message, `[a(x=1), b()]`: the reference records a batch as one message."""
    return "[" + ", ".join(_source(name, arguments) for name, arguments in calls) + "]"


def _source(name: str, arguments: dict[str, Any]) -> str:
    return f"{name}({', '.join(f'{key}={value!r}' for key, value in arguments.items())})"


def _call(node: ast.Call) -> Call:
    if isinstance(node.func, ast.Attribute):
        raise CallSyntaxError(f"attribute calls are refused: {ast.unparse(node.func)}(...)")
    if not isinstance(node.func, ast.Name):
        raise CallSyntaxError(f"not a function name: {ast.unparse(node.func)}")
    arguments: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise CallSyntaxError(f"{node.func.id}: **-unpacking is refused")
        value = _value(keyword.value)
        if isinstance(value, dict):
            raise CallSyntaxError(f"{node.func.id}({keyword.arg}=...): a dict argument is read as a nested call")
        arguments[keyword.arg] = value
    return node.func.id, arguments


def _value(node: ast.expr) -> Any:
    """One argument value, read from the tree the way the reference's resolver reads it."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        if not isinstance(node.operand, ast.Constant):
            raise CallSyntaxError(f"unsupported value {ast.unparse(node)}")
        return _negate(node.operand.value, node)
    if isinstance(node, ast.List):
        return [_value(element) for element in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(element) for element in node.elts)
    if isinstance(node, ast.Dict):
        return _dict(node)
    if isinstance(node, ast.BinOp):
        return _arithmetic(node)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        if not node.keywords:
            return ast.unparse(node)
        return {_dotted(node.func): {keyword.arg: _value(keyword.value) for keyword in node.keywords}}
    if isinstance(node, ast.Subscript):
        return f"{ast.unparse(node.value)}[{ast.unparse(node.slice)}]"
    raise CallSyntaxError(f"unsupported value {ast.unparse(node)} ({type(node).__name__})")


def _negate(value: Any, node: ast.expr) -> Any:
    if isinstance(value, str | bytes) or value is None or value is Ellipsis:
        raise CallSyntaxError(f"cannot negate {ast.unparse(node)}")
    return -value


def _dict(node: ast.Dict) -> dict[Any, Any]:
    result: dict[Any, Any] = {}
    for key, item in zip(node.keys, node.values, strict=True):
        if key is None:
            raise CallSyntaxError("**-unpacking in a dict is refused")
        resolved = _value(key)
        try:
            result[resolved] = _value(item)
        except TypeError:
            raise CallSyntaxError(f"unhashable dict key {ast.unparse(key)}") from None
    return result


def _dotted(node: ast.expr) -> str:
    """A nested call's name as the reference writes it (`a.b.c`); it is only ever data here."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _arithmetic(node: ast.expr) -> Any:
    """Arithmetic on literal numbers and strings (`10 + 5`), which the reference `eval`s; nothing else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float | complex | str):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _arithmetic(node.operand)
        if isinstance(value, str):
            raise CallSyntaxError(f"cannot negate {ast.unparse(node)}")
        return -value if isinstance(node.op, ast.USub) else +value
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        left, right = _arithmetic(node.left), _arithmetic(node.right)
        _check_size(node, left, right)
        try:
            return OPERATORS[type(node.op)](left, right)
        except (TypeError, ValueError, ArithmeticError) as error:
            raise CallSyntaxError(f"{ast.unparse(node)}: {error}") from None
    raise CallSyntaxError(f"only arithmetic on literals is read: {ast.unparse(node)}")


def _check_size(node: ast.BinOp, left: Any, right: Any) -> None:
    """Refuse the few literal expressions that would take unbounded time or memory (`'a' * 10**9`, `9**9**9`)."""
    huge_base = isinstance(left, int) and abs(left) > 10**64
    if isinstance(node.op, ast.Pow) and (huge_base or not (isinstance(right, int | float) and abs(right) <= 64)):
        raise CallSyntaxError(f"exponent too large in {ast.unparse(node)}")
    if isinstance(node.op, ast.Mult) and isinstance(left, str) != isinstance(right, str):
        count = right if isinstance(left, str) else left
        text = left if isinstance(left, str) else right
        if isinstance(count, int) and len(text) * max(count, 0) > MAX_TEXT:
            raise CallSyntaxError(f"string too long in {ast.unparse(node)}")
    if (
        isinstance(node.op, ast.Add)
        and isinstance(left, str)
        and isinstance(right, str)
        and len(left + right) > MAX_TEXT
    ):
        raise CallSyntaxError(f"string too long in {ast.unparse(node)}")
