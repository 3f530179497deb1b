"""`spadework toolworld validate`: exit 0 only for a valid world, JSON on request, clear usage errors.

Kept out of tests/sandbox: the command runs its own event loop, which must not nest in a module's."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from spadework.cli import app
from tests.sandbox.conftest import LIBRARY_SOURCE
from tests.sandbox.test_validate import FREE_LUNCH


def test_validate_command(tmp_path: Path) -> None:
    runner = CliRunner(env={"NO_COLOR": "1", "COLUMNS": "200"})
    good, bad = tmp_path / "world.py", tmp_path / "reply.md"
    good.write_text(LIBRARY_SOURCE)
    bad.write_text(FREE_LUNCH)
    passed = runner.invoke(app, ["toolworld", "validate", str(good), "--seeds", "4"])
    assert passed.exit_code == 0, passed.output
    assert "valid" in passed.output and "every tool callable" in passed.output and "FAIL" not in passed.output
    failed = runner.invoke(app, ["toolworld", "validate", str(bad), "--seeds", "4", "--json"])
    assert failed.exit_code == 1
    summary = json.loads(failed.stdout)
    assert summary["valid"] is False and summary["rejection"].startswith("smoke: doing nothing does not")
    missing = runner.invoke(app, ["toolworld", "validate", str(tmp_path / "absent.py")])
    assert missing.exit_code == 2 and "does not exist" in missing.output


def test_a_spec_file_is_validated_by_the_spec_gates(tmp_path: Path) -> None:
    """`spec-schema --help` says any command that takes a world takes a spec: validate said "no code block"."""
    runner = CliRunner(env={"NO_COLOR": "1", "COLUMNS": "200"})
    passed = runner.invoke(app, ["toolworld", "validate", "toolworlds/examples/library.json", "--json"])
    assert passed.exit_code == 0, passed.output
    assert [gate["gate"] for gate in json.loads(passed.stdout)["gates"]] == ["parse", "compile", "smoke", "meaning"]
    broken = tmp_path / "broken.json"
    broken.write_text(Path("toolworlds/examples/library.json").read_text().replace('"tools"', '"tool_list"', 1))
    failed = runner.invoke(app, ["toolworld", "validate", str(broken), "--json"])
    assert failed.exit_code == 1 and json.loads(failed.stdout)["rejection"].startswith("parse")
