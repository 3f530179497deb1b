"""`just --list` reads as a menu: every recipe has a group and a one-line description of its own."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_recipe_has_a_group_and_a_one_line_description() -> None:
    just = shutil.which("just")
    assert just is not None, "just comes with the dev install (pip install -e '.[dev]')"
    dumped = json.loads(subprocess.run([just, "--dump", "--dump-format", "json"], cwd=ROOT, check=True,
                                       capture_output=True, text=True).stdout)  # fmt: skip
    lines = (ROOT / "justfile").read_text().splitlines()
    problems = []
    for name, recipe in dumped["recipes"].items():
        if not recipe["doc"]:
            problems.append(f"{name}: no description (a comment right above it)")
            continue
        if not any("group" in attribute for attribute in recipe["attributes"] if isinstance(attribute, dict)):
            problems.append(f"{name}: no [group(...)]")
        # just shows only the comment line right above a recipe: a longer note must stand apart, after a blank line
        at = lines.index(f"# {recipe['doc']}")
        if lines[at - 1].startswith("#"):
            problems.append(f"{name}: its description continues a longer comment, so the menu shows only its end")
        if len(recipe["doc"]) > 110:
            problems.append(f"{name}: a description of {len(recipe['doc'])} characters (at most 110)")
    assert not problems, "\n".join(problems)
