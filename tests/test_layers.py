"""The layers hold: no package imports one above it, and no modules import each other in a circle.

Layers, bottom up: toolworlds (the contract, worlds, sandbox) < engine (playing through models) < trainers
(self-play and its updates) < benchmarks (public harnesses, performance scripts) < spadework (the command and
the test infrastructure that scripts all of them). Imports inside functions count: a lazy import is still a
dependency, only a later one."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("toolworlds", "engine", "trainers", "benchmarks", "spadework")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every project module `path` imports, at its top or inside a function (`from a import b`: `a.b` when that
    is a module, else `a`)."""
    found: set[str] = set()
    package = _module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else _module_name(path)
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against this module's package
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] in LAYERS}


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(path): path for layer in LAYERS for path in (ROOT / layer).rglob("*.py")}
    return {name: {imported for imported in _imports(path) if imported in modules} for name, path in modules.items()}


def test_no_package_imports_a_layer_above_its_own() -> None:
    upward = [
        f"{module} imports {imported}"
        for module, imported_modules in _graph().items()
        for imported in imported_modules
        if LAYERS.index(imported.split(".")[0]) > LAYERS.index(module.split(".")[0])
    ]
    assert not upward, "imports against the layers:\n" + "\n".join(sorted(upward))


# What a package's README says it never imports: (package, forbidden prefixes, allowed exceptions).
NEVER = [
    ("toolworlds.hosting", ("toolworlds.sandbox", "toolworlds.untrusted"), ()),
    ("toolworlds.sandbox", ("toolworlds.hosting", "toolworlds.untrusted"), ("toolworlds.untrusted.policy",)),
    (
        "toolworlds.reference",
        ("toolworlds.",),
        ("toolworlds.core", "toolworlds.tool", "toolworlds.scoring", "toolworlds.records", "toolworlds.reference"),
    ),
    (
        "toolworlds.examples",
        ("toolworlds.",),
        ("toolworlds.core", "toolworlds.tool", "toolworlds.scoring", "toolworlds.records", "toolworlds.examples"),
    ),
    ("trainers.designer", ("trainers.selfplay", "trainers.grpo", "trainers.train_cli"), ()),
    ("toolworlds.adapters", ("engine", "trainers", "benchmarks", "spadework"), ()),
    ("benchmarks.bfcl", ("trainers",), ()),
    ("benchmarks.acebench", ("trainers",), ()),
    (
        "benchmarks.acebench.scenarios",
        ("toolworlds", "engine", "trainers", "benchmarks.acebench."),
        ("benchmarks.acebench.scenarios", "benchmarks.acebench.data"),
    ),
]


def test_each_package_keeps_to_what_its_readme_says_it_never_imports() -> None:
    broken = [
        f"{module} imports {imported}"
        for package, forbidden, allowed in NEVER
        for module, imported_modules in _graph().items()
        if module == package or module.startswith(package + ".")
        for imported in imported_modules
        if imported.startswith(forbidden) and not imported.startswith(allowed)
    ]
    assert not broken, "imports a README forbids:\n" + "\n".join(sorted(broken))


def test_no_code_outside_the_adapters_imports_them() -> None:
    """Each adapter's library is an optional extra: nothing else in spadework may need it to import. The one
    exception is the CLI's `toolworld serve --openenv`, which imports its adapter inside the command."""
    importers = sorted(
        module
        for module, imported in _graph().items()
        if not module.startswith("toolworlds.adapters") and any(i.startswith("toolworlds.adapters") for i in imported)
    )
    importers.remove("toolworlds.cli")
    top_level = ast.parse((ROOT / "toolworlds" / "cli.py").read_text()).body
    eager = [node for node in top_level if isinstance(node, ast.ImportFrom) and "adapters" in (node.module or "")]
    assert not eager, "toolworlds/cli.py imports an adapter at its top: the CLI would need the extra"
    assert not importers, f"import an adapter: {importers}"


def test_no_modules_import_each_other_in_a_circle() -> None:
    graph = _graph()
    # A package's __init__ importing its own modules is how packages re-export; it is not a circle of modules.
    for module in graph:
        graph[module] = {m for m in graph[module] if not m.startswith(module + ".")}
    circles = _strongly_connected(graph)
    assert not circles, "import circles:\n" + "\n".join(" -> ".join(sorted(circle)) for circle in circles)


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm: the components of more than one module (each one a circle of imports)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_the_checks_see_a_circle_and_an_upward_import_when_there_is_one() -> None:
    """The graph reader itself: a module that imports a higher layer and its own importer is caught."""
    graph = _graph()
    assert "engine.episode" in graph["engine.rollout"]  # a known import is read
    graph["toolworlds.core"] = {*graph["toolworlds.core"], "engine.rollout"}
    assert any("toolworlds.core" in circle for circle in _strongly_connected(graph))


def test_every_folder_of_code_has_a_readme_of_one_screen() -> None:
    """Each top-level folder and each package says what lives there, its entry point and what it never imports."""
    folders = [ROOT / name for name in (*LAYERS, "tests", "docs")]
    folders += [init.parent for layer in LAYERS for init in (ROOT / layer).rglob("__init__.py")]
    problems = []
    for folder in sorted(set(folders)):
        readme = folder / "README.md"
        if not readme.is_file():
            problems.append(f"{folder.relative_to(ROOT)}: no README.md")
            continue
        text = readme.read_text()
        if len(text.splitlines()) > 40:
            problems.append(f"{readme.relative_to(ROOT)}: {len(text.splitlines())} lines (one screen: at most 40)")
        if folder.name != "docs" and not ("Entry point:" in text and "Never imports:" in text):
            problems.append(f"{readme.relative_to(ROOT)}: says no 'Entry point:' or no 'Never imports:'")
    assert not problems, "\n".join(problems)
