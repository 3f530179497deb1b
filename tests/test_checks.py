"""`check_world` and `spadework toolworld check`: a flawed world is caught, and the flaw is named."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from spadework.cli import app
from tests.worlds import flawed
from toolworlds.checks import CHECKS, check_world
from toolworlds.core import ToolWorld
from toolworlds.examples.library import LibraryWorld


def test_a_sound_world_passes_every_check() -> None:
    results = check_world(LibraryWorld, range(30))
    assert [r.name for r in results] == [name for name, _ in CHECKS]
    assert all(r.passed for r in results), results


@pytest.mark.parametrize(
    ("world", "failing", "detail"),
    [
        (flawed.WrongPlan, "reference plan scores 1.0", "the reference plan scores 0.0"),
        (flawed.Unseeded, "deterministic per seed", "differ"),
        (flawed.LeakyHint, "hint helps without the answer", "the hint contains 'B"),
        (flawed.FreeLunch, "doing nothing does not", "already scores 1.0"),
        (flawed.FragileTool, "every tool callable", "renew crashed on"),
        (flawed.DigitHint, "hint helps without the answer", "the hint contains '"),
        (flawed.SetOrder, "deterministic per seed", "played in another process differs at turns[0].result.observation"),
        (flawed.FineInDollars, "hint helps without the answer", "5', which the reference plan types"),
        (flawed.ListedId, "hint helps without the answer", "the hint contains 'B"),
        (flawed.AnswerInASentence, "hint helps without the answer", "the hint contains '"),
        (flawed.CodeInDescription, "written for the agent", "the description names 'MAX_LOANS'"),
        (flawed.CodeInHint, "written for the agent", "seed 0: the hint names 'self.state.books'"),
        (flawed.CodeInToolDoc, "written for the agent", "the tool renew names 'RENEWAL_LIMIT'"),
    ],
)
def test_each_flaw_fails_its_own_check(world: type[ToolWorld[object]], failing: str, detail: str) -> None:
    results = {r.name: r for r in check_world(world, range(30))}
    assert not results[failing].passed and detail in results[failing].detail
    # A world that draws its task from elsewhere than its seed has no reference plan either: the plan, read in
    # an episode of its own (as the agent's oracle reads it), solves another task.
    also = ["reference plan scores 1.0"] if world is flawed.Unseeded else []
    assert [name for name, r in results.items() if not r.passed] == [failing, *also]


def test_check_command_exits_nonzero_on_a_flaw() -> None:
    runner = CliRunner(env={"NO_COLOR": "1", "COLUMNS": "200"})
    good = runner.invoke(app, ["toolworld", "check", "toolworlds/examples/library.py:LibraryWorld", "--seeds", "20"])
    assert good.exit_code == 0 and "FAIL" not in good.output
    bad = runner.invoke(app, ["toolworld", "check", "tests/worlds/flawed.py:FreeLunch", "--seeds", "20"])
    assert bad.exit_code == 1 and "FAIL" in bad.output


def test_a_world_that_crashes_is_named_with_its_method_and_line() -> None:
    (result,) = check_world(flawed.GradeCrash, range(3))
    assert result.name == "plays at all" and not result.passed
    assert "KeyError: 'on_loan' (in grade, flawed.py line " in result.detail, result.detail
