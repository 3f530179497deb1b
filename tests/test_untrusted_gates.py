"""The gates before the sandbox: extraction, repair and the static policy, on model-style replies."""

from __future__ import annotations

import ast

import pytest

from toolworlds.examples import EXAMPLE_WORLD
from toolworlds.untrusted import ExtractionError, check_policy, extract_source, repair

LIBRARY = EXAMPLE_WORLD

HOSTILE = {
    "import os": "import not allowed",
    "import subprocess as sp": "import not allowed",
    "from socket import socket": "import not allowed",
    "import importlib": "import not allowed",
    "from . import sibling": "import not allowed",
    "x = ().__class__.__bases__[0].__subclasses__()": "dunder access",
    "y = f.__globals__['os']": "dunder access",
    "z = __builtins__['eval']": "dunder access",
    "open('/etc/passwd').read()": "forbidden name",
    "eval('1 + 1')": "forbidden name",
    "exec('x = 1')": "forbidden name",
    "compile('1', 'f', 'eval')": "forbidden name",
    "getattr(object, 'mro')": "forbidden name",
    "vars()['x'] = 1": "forbidden name",
    "def f():\n    global counter\n": "global state",
    "async def f():\n    return 1\n": "RestrictedPython",
    "attribute = 'mro' + '__'": "dunder string",
    "class Second(ToolWorld[Shelf]):\n    name = 'second'\n": "contract",
    "def broken(:\n": "syntax",
    # the parser accepts these and the compiler refuses them (RestrictedPython raised the first, mid-run)
    "def f():\n    try:\n        pass\n    except:\n        pass\n    except ValueError:\n        pass\n": "syntax",
    "return 1\n": "syntax",
}


def test_extraction_prefers_the_block_with_the_world() -> None:
    reply = (
        "First a helper:\n```python\nx = 1\n```\nThen the world:\n```python\n"
        "class Shop(ToolWorld[State]):\n    name = 'shop'\n```\nDone."
    )
    assert extract_source(reply).startswith("class Shop(ToolWorld[State]):")
    cut_off = "```python\nclass Shop(ToolWorld[State]):\n    name = 'sh"  # the reply hit its token limit
    assert "name = 'sh" in extract_source(cut_off)
    with pytest.raises(ExtractionError, match="no code block"):
        extract_source("I cannot write that world.")
    qualified = "import toolworlds\n\nclass Shop(toolworlds.ToolWorld[State]):\n    name = 'shop'\n"
    assert extract_source(qualified) == qualified  # a file written out as judged reads back as itself
    with pytest.raises(ExtractionError, match="the cap is 1,000"):
        extract_source("```python\nclass A(ToolWorld[S]):\n" + "    x = 1\n" * 200 + "```", max_bytes=1000)


def test_a_real_single_file_world_passes_the_policy() -> None:
    assert check_policy(LIBRARY) == []  # annotated pydantic fields and _private names are the contract's own


@pytest.mark.parametrize(("code", "rule"), HOSTILE.items(), ids=list(HOSTILE))
def test_hostile_code_is_rejected_with_its_rule_and_line(code: str, rule: str) -> None:
    violations = check_policy(LIBRARY + "\n" + code)
    assert rule in {v.rule for v in violations}
    first_line = LIBRARY.count("\n") + 2
    assert all(v.line >= first_line for v in violations), violations


@pytest.mark.parametrize(
    ("code", "rule"),
    [
        ("x = 1\x00\n", "syntax"),
        ("x = " + "-" * 100_000 + "1\n", "too deeply nested"),
        ("x = " + " + ".join(["1"] * 50_000) + "\n", "too deeply nested"),
    ],
    ids=["null byte", "deep unary", "long chain"],
)
def test_the_policy_returns_a_verdict_on_any_text(code: str, rule: str) -> None:
    """Alone or after a valid world, text that breaks Python's parser or compiler is a violation, not a crash."""
    for source in (code, LIBRARY + "\n" + code):
        assert rule in {violation.rule for violation in check_policy(source)}


def test_repair_adds_missing_imports_after_the_docstring_and_future_import() -> None:
    source = (
        '"""A dice world."""\nfrom __future__ import annotations\n\n'
        "class Dice(BaseModel):\n    faces: int = Field(default=6)\n\n"
        "def roll(rng: random.Random) -> float:\n    return math.floor(rng.random() * 6) + 1\n\n"
        "class DiceWorld(ToolWorld[Dice]):\n    def grade(self) -> Scorecard:\n        return Scorecard()\n"
    )
    fixed = repair(source)
    tree = ast.parse(fixed.source)
    assert isinstance(tree.body[1], ast.ImportFrom) and tree.body[1].module == "__future__"  # still first
    assert fixed.fixes == [
        "added `import math`",
        "added `import random`",
        "added `from pydantic import BaseModel, Field`",
        "added `from toolworlds import Scorecard, ToolWorld`",
    ]
    assert check_policy(fixed.source) == []
    assert [v.rule for v in check_policy("x = 1\n")] == ["contract"]  # no world at all
    assert repair(fixed.source).fixes == []  # repair is idempotent: a clean source is left alone


def test_repair_fixes_indentation_of_a_pasted_block() -> None:
    pasted = "    class Shelf(BaseModel):\n    \tbooks: list[str]\n"
    fixed = repair(pasted)
    assert fixed.fixes[:2] == ["expanded tabs to 4 spaces", "dedented a block indented as a whole"]
    assert fixed.source.startswith("from pydantic import BaseModel\nclass Shelf(BaseModel):\n    ")
    ast.parse(fixed.source)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('note = f"Answer with \\\\boxed{answer} for {account}"', "Answer with \\boxed{answer} for A-1"),
        ("""note = 'Reply {"name": "pay"} for {0}'.format(account)""", 'Reply {"name": "pay"} for A-1'),
        ("""note = f'''Use {"tool": "pay"} then {count + 1}'''""", 'Use {"tool": "pay"} then 3'),
        ('note = f"{account!r:>6} {{kept}} and a stray }"', " 'A-1' {kept} and a stray }"),
    ],
)
def test_literal_braces_are_escaped_so_the_string_means_what_it_says(line: str, expected: str) -> None:
    fixed = repair(line + "\n")
    assert fixed.fixes == ["escaped literal braces in 1 string field"]
    namespace: dict[str, object] = {"account": "A-1", "count": 2}
    exec(compile(fixed.source, "<repaired>", "exec"), namespace)  # trusted test input, in the test process
    assert namespace["note"] == expected


def test_brace_repair_leaves_valid_fields_and_plain_strings_alone() -> None:
    source = (
        'a = f"{x} {y!r} {z:>10} {{lit}} {d[1]} {o.attr}"\nb = "plain {not} formatted"\nc = "{0} {k}".format(1, k=2)\n'
    )
    assert repair(source).source == source
