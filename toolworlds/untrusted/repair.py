"""Gate 2: deterministic fixes for the breakages small models make most, each one reported.

- Indentation: tabs expanded, and a block indented as a whole (pasted from a list item) dedented.
- Braces: literal braces in f-strings and `.format` strings (`\\boxed{x}`, JSON examples) doubled.
- Missing imports: a name the code uses but never defines or imports, when it is an allowed module
  (`random`, `math`, `json`, `re`, ...) or a name of the toolworld contract or pydantic, gets its import.

Whether the code is valid before and after is measured by the caller (the policy gate and the sandbox).
"""

from __future__ import annotations

import ast
import builtins
import textwrap
from dataclasses import dataclass, field

from toolworlds.untrusted.braces import repair_braces
from toolworlds.untrusted.extract import extract_source

MODULE_NAMES = ("random", "math", "json", "re", "itertools", "functools", "statistics", "string", "datetime")
FROM_IMPORTS = {
    **{
        name: "toolworlds"
        for name in ("ToolWorld", "tool", "call", "Brief", "Scorecard", "ToolCall", "ToolError", "Finish", "mentions")
    },
    **{name: "pydantic" for name in ("BaseModel", "Field")},
    **{name: "typing" for name in ("Any", "Literal", "ClassVar")},
    **{name: "dataclasses" for name in ("dataclass", "field")},
}


@dataclass
class Repair:
    """The repaired source and what was done to it."""

    source: str
    fixes: list[str] = field(default_factory=list)


def prepare(text: str) -> Repair:
    """The code the gates judge, and so the code every command runs: the world extracted from `text` (a model's
    reply, or a file) with this gate's fixes. Raises `ExtractionError` when there is no code to extract."""
    return repair(extract_source(text))


def repair(source: str) -> Repair:
    result = Repair(source)
    _fix_indentation(result)
    result.source, escaped = repair_braces(result.source)
    if escaped:
        result.fixes.append(f"escaped literal braces in {escaped} string field{'s' if escaped > 1 else ''}")
    _add_missing_imports(result)
    return result


def _fix_indentation(result: Repair) -> None:
    if "\t" in result.source:
        result.source = result.source.expandtabs(4)
        result.fixes.append("expanded tabs to 4 spaces")
    dedented = textwrap.dedent(result.source)
    if dedented != result.source:
        result.source = dedented
        result.fixes.append("dedented a block indented as a whole")


def _add_missing_imports(result: Repair) -> None:
    try:
        tree = ast.parse(result.source)
    except SyntaxError:
        return  # nothing to learn from an unparsable tree; the policy gate reports the syntax error
    defined = set(dir(builtins))
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            defined.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
        elif isinstance(node, ast.Name):
            (defined if isinstance(node.ctx, ast.Store) else used).add(node.id)
    missing = sorted(used - defined)
    lines = [f"import {name}" for name in missing if name in MODULE_NAMES]
    by_module: dict[str, list[str]] = {}
    for name in missing:
        if name in FROM_IMPORTS:
            by_module.setdefault(FROM_IMPORTS[name], []).append(name)
    lines += [f"from {module} import {', '.join(names)}" for module, names in sorted(by_module.items())]
    if not lines:
        return
    body = result.source.splitlines(keepends=True)
    at = _after_future_imports(tree)
    result.source = "".join(body[:at]) + "\n".join(lines) + "\n" + "".join(body[at:])
    result.fixes += [f"added `{line}`" for line in lines]


def _after_future_imports(tree: ast.Module) -> int:
    """The line index after the docstring and any `from __future__` imports (they must stay first)."""
    at = 0
    for index, node in enumerate(tree.body):
        is_docstring = index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if is_docstring or (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            at = node.end_lineno or at
        else:
            break
    return at
