"""The binary operators a reference harness would `eval` in model text, for the harnesses that evaluate that
arithmetic from the syntax tree instead (each bounds what it builds by its own reference's limits)."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

OPERATORS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
