"""Gate 3: a static policy on the AST, with RestrictedPython as a second opinion.

Allow-listed imports only; no dunder attributes or names (the usual `().__class__.__subclasses__()`
escapes) and no string constants holding `__`; no builtins that reach outside the world (`open`,
`eval`, `exec`, `compile`, `__import__`, `getattr` games, `globals`, `vars`, `input`, ...); exactly one
`ToolWorld` subclass. This keeps honest mistakes and lazy escapes out; the
sandbox is what contains the rest.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

ALLOWED_MODULES = frozenset(
    {
        "__future__", "abc", "collections", "collections.abc", "dataclasses", "datetime", "decimal", "enum",
        "fractions", "functools", "heapq", "itertools", "json", "math", "operator", "random", "re", "statistics",
        "string", "textwrap", "typing", "uuid", "bisect", "copy", "pydantic", "toolworlds",
    }
)  # fmt: skip
FORBIDDEN_NAMES = frozenset(
    {
        "eval", "exec", "compile", "open", "__import__", "getattr", "setattr", "delattr", "globals", "locals",
        "vars", "input", "breakpoint", "memoryview", "help", "exit", "quit", "classmethod_descriptor",
    }
)  # fmt: skip
ALLOWED_DUNDERS = frozenset({"__init__", "__name__", "__future__"})
# A world's only randomness is the `rng` its `build` gets, and its time is a counter in its state: what else
# each of these modules offers draws from a generator seeded per process, or reads the wall clock, so the same
# seed would play differently twice (and the checks could pass on draws a real play never makes).
SEEDED_ONLY = {
    "random": frozenset({"Random"}),
    "uuid": frozenset({"UUID", "uuid3", "uuid5", "NAMESPACE_DNS", "NAMESPACE_URL", "NAMESPACE_OID"}),
}
CLOCK_READS = frozenset({"now", "today", "utcnow"})
# RestrictedPython forbids what the toolworld contract needs: annotated fields (pydantic state models) and
# single-underscore names. Those verdicts are set aside; any other RestrictedPython error rejects the code.
_CONTRACT_NEEDS = ("AnnAssign statements are not allowed", 'because it starts with "_"')


@dataclass(frozen=True)
class Violation:
    """One breach of the policy, with where it is."""

    line: int
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.rule}: {self.detail}"


def check_policy(source: str, filename: str = "<world>") -> list[Violation]:
    """Every violation found; an empty list means the code may go on to the sandbox.

    Whatever the text, this returns: a gate that raised on model-written code would end the run that asked.
    """
    try:
        tree = ast.parse(source, filename)
        # The compiler refuses what the parser accepts (a bare `except:` before another, `return` outside a
        # function, ...); compiling runs nothing, and RestrictedPython would raise it below.
        compile(tree, filename, "exec", dont_inherit=True)
    except SyntaxError as error:
        return [Violation(error.lineno or 0, "syntax", error.msg)]
    except ValueError as error:  # e.g. a null byte
        return [Violation(0, "syntax", str(error))]
    except (RecursionError, MemoryError):
        return [Violation(0, "too deeply nested", "the parser or compiler ran out of stack")]
    try:
        violations = _walk(tree) + _world_classes(tree)
        violations += _second_opinion(source, filename)
    except (RecursionError, MemoryError):
        return [Violation(0, "too deeply nested", "the policy check ran out of stack")]
    return sorted(violations, key=lambda v: v.line)


def _walk(tree: ast.AST) -> list[Violation]:
    found: list[Violation] = []
    unseeded = {alias.asname or alias.name: alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names if alias.name in SEEDED_ONLY}  # fmt: skip
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        found += _nondeterminism(node, line, unseeded)
        if isinstance(node, ast.Import):
            found += [_import(line, alias.name) for alias in node.names if not _allowed(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if node.level or not _allowed(module):
                found.append(_import(line, module))
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            found.append(Violation(line, "forbidden name", node.id))
        elif isinstance(node, ast.Name | ast.Attribute | ast.alias | ast.arg | ast.FunctionDef | ast.ClassDef):
            name = _identifier(node)
            if name and _dunder(name) and name not in ALLOWED_DUNDERS:
                found.append(Violation(line, "dunder access", name))
        elif isinstance(node, ast.Global | ast.Nonlocal):
            found.append(Violation(line, "global state", ", ".join(node.names)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "__" in node.value:
            found.append(Violation(line, "dunder string", repr(node.value[:40])))  # fodder for attribute games
    return found


def _nondeterminism(node: ast.AST, line: int, unseeded: dict[str, str]) -> list[Violation]:
    """Draws from a per-process generator (`random.choice`, `from random import randint`, `uuid.uuid4`) and
    reads of the wall clock (`datetime.now()`, `date.today()`)."""
    if isinstance(node, ast.ImportFrom) and node.module in SEEDED_ONLY:
        drawn = [alias.name for alias in node.names if alias.name not in SEEDED_ONLY[node.module]]
        return [Violation(line, "unseeded randomness", f"from {node.module} import {name}: use rng") for name in drawn]
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in unseeded:
        module = unseeded[node.value.id]
        if node.attr not in SEEDED_ONLY[module]:
            return [Violation(line, "unseeded randomness", f"{module}.{node.attr}: draw from the rng build gets")]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CLOCK_READS:
        return [Violation(line, "wall clock", f".{node.func.attr}(): keep the time in the state, as a counter")]
    return []


def _world_classes(tree: ast.Module) -> list[Violation]:
    """Exactly one top-level class must derive from `ToolWorld` (that is what the sandbox loads)."""
    worlds = [
        node
        for node in tree.body
        if isinstance(node, ast.ClassDef) and any("ToolWorld" in ast.unparse(base) for base in node.bases)
    ]
    if len(worlds) == 1:
        return []
    lines = ", ".join(str(node.lineno) for node in worlds) or "none"
    return [Violation(worlds[1].lineno if worlds else 0, "contract", f"one ToolWorld subclass needed, found {lines}")]


def _identifier(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.alias):
        return node.asname or node.name
    if isinstance(node, ast.arg):
        return node.arg
    if isinstance(node, ast.FunctionDef | ast.ClassDef):
        return node.name
    return None


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _allowed(module: str) -> bool:
    return module in ALLOWED_MODULES or module.split(".")[0] in {"toolworlds", "pydantic"}


def _import(line: int, module: str) -> Violation:
    return Violation(line, "import not allowed", module or "(relative import)")


def _second_opinion(source: str, filename: str) -> list[Violation]:
    from RestrictedPython.compile import compile_restricted_exec

    result = compile_restricted_exec(source, filename)
    violations = []
    for error in result.errors:
        if any(allowed in error for allowed in _CONTRACT_NEEDS):
            continue
        head, _, detail = error.partition(": ")
        line = int(head.removeprefix("Line ")) if head.startswith("Line ") and head[5:].isdigit() else 0
        violations.append(Violation(line, "RestrictedPython", detail or error))
    return violations
