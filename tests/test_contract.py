"""The toolworld contract, exercised on the small example world a newcomer would write."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Annotated

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, StringConstraints

from toolworlds import Brief, Finish, Scorecard, ToolCall, ToolWorld, WorldBugError, call, tool
from toolworlds.core import replay
from toolworlds.examples.library import LibraryWorld
from toolworlds.records import SequentialIds
from toolworlds.scoring import mentions_amount, numbers_in


@pytest.fixture
def world() -> LibraryWorld:
    library = LibraryWorld()
    library.reset(seed=4)
    return library


def test_example_world_is_well_under_sixty_lines() -> None:
    source = Path("toolworlds/examples/library.py").read_text().splitlines()
    code = [line for line in source if line.strip() and not line.strip().startswith(("#", '"""'))]
    assert len(code) < 60


def test_the_description_is_the_docstring_unindented_and_a_subclass_without_one_keeps_its_parents() -> None:
    class Indented(LibraryWorld):
        """A library with rules.

        Loans last two weeks.
        """

    class Quiet(Indented):
        pass

    class Explicit(Indented):
        """Notes for developers; the agent reads `description`."""

        description = """For the agent.
            Continued."""

    assert Indented.description == "A library with rules.\n\nLoans last two weeks."
    assert Quiet.description == Indented.description
    assert Explicit.description == "For the agent.\nContinued."


def test_schema_comes_from_signature_and_docstring() -> None:
    spec = LibraryWorld.tool_specs["search"]
    schema = spec.input_schema
    Draft202012Validator.check_schema(schema)
    assert schema["required"] == ["title"]
    assert schema["properties"]["title"] == {"type": "string", "description": "part of a title, any case."}
    assert schema["additionalProperties"] is False
    assert spec.description == "Find books whose title contains the text."
    assert LibraryWorld.openai_tools()[1]["function"]["name"] == "borrow"
    Draft202012Validator.check_schema(spec.output_schema)
    assert spec.output_schema["type"] == "array"


def test_tool_without_documented_argument_is_rejected_at_class_creation() -> None:
    with pytest.raises(TypeError, match="argument 'count' needs a line under 'Args:'"):

        class Undocumented(LibraryWorld):
            @tool
            def shout(self, count: int) -> str:
                """Shout."""
                return "!" * count


def test_tool_without_annotation_is_rejected() -> None:
    with pytest.raises(TypeError, match="argument 'count' needs a type annotation"):

        class Untyped(LibraryWorld):
            @tool
            def shout(self, count) -> str:
                """Shout.

                Args:
                    count: how loud.
                """
                return "!"


def test_argument_that_silently_rewrites_its_value_is_rejected() -> None:
    with pytest.raises(TypeError, match="argument 'note' uses strip_whitespace"):

        class Stripping(LibraryWorld):
            @tool
            def scribble(self, note: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]) -> str:
                """Scribble.

                Args:
                    note: the note.
                """
                return note


def test_reset_is_deterministic_and_hides_the_hint_in_its_own_field() -> None:
    first, second = LibraryWorld().reset(11), LibraryWorld().reset(11)
    assert first == second
    assert first.hint and first.hint not in first.instruction
    assert {LibraryWorld().reset(s).instruction for s in range(30)} != {first.instruction}


def test_successful_call_returns_the_tool_result_as_json(world: LibraryWorld) -> None:
    result = world.step(call("search", title=world.wanted))
    book = result.observation[0]
    assert result.observation == [{"book_id": book["book_id"], "title": world.wanted, "on_loan": False}]
    assert (result.reward, result.terminated, result.truncated) == (0.0, False, False)
    assert result.info == {"step": 1, "tool": "search"}


def test_unknown_tool_is_an_error_observation(world: LibraryWorld) -> None:
    result = world.step(ToolCall(name="steal", arguments={}))
    assert result.observation["error"]["code"] == "unknown_tool"
    assert "borrow, search" in result.observation["error"]["message"]
    assert not result.done


@pytest.mark.parametrize(
    ("arguments", "field", "problem"),
    [
        ({}, "book_id", "required argument is missing"),
        ({"book_id": 7}, "book_id", "7 is not of type 'string'"),
        ({"book_id": "B1", "copies": 2}, "copies", "unknown argument"),
    ],
)
def test_bad_arguments_name_the_field(world: LibraryWorld, arguments: object, field: str, problem: str) -> None:
    before = world.state.model_copy(deep=True)
    result = world.step({"kind": "tool_call", "name": "borrow", "arguments": arguments})
    error = result.observation["error"]
    assert error["code"] == "invalid_arguments"
    assert error["fields"][0]["field"] == field
    assert problem in error["fields"][0]["problem"]
    assert field in error["message"]
    assert world.state == before, "a rejected call must not run the tool"


def test_arguments_that_are_not_an_object_are_named() -> None:
    _, problems = LibraryWorld.tool_specs["borrow"].validate(["B1"])
    assert problems[0].field == "(arguments)" and "must be a JSON object" in problems[0].problem


def test_refusal_is_an_error_observation_with_the_tools_code(world: LibraryWorld) -> None:
    result = world.step(call("borrow", book_id="B99"))
    assert result.observation == {"error": {"code": "not_found", "message": "no book 'B99'"}}
    assert result.info["error"] == "not_found"


def test_finish_terminates_with_the_score_as_reward(world: LibraryWorld) -> None:
    for action in world.solution():
        result = world.step(action)
    assert result.terminated and not result.truncated
    assert result.reward == 1.0 == world.score()
    assert result.info["scorecard"] == "+ borrowed the book"


def test_step_limit_truncates_and_scores_what_was_done(world: LibraryWorld) -> None:
    plan = world.solution()[:-1]
    for action in plan:
        world.step(action)
    for _ in range(world.max_steps - len(plan) - 1):
        assert not world.step(call("search", title="x")).done
    last = world.step(call("search", title="x"))
    assert last.truncated and not last.terminated
    assert last.reward == 1.0, "the book was borrowed before the limit, so the state earns full credit"


def test_calls_after_the_end_are_refused_without_changing_anything(world: LibraryWorld) -> None:
    world.step(Finish())
    snapshot = world.snapshot()
    result = world.step(call("borrow", book_id="B0"))
    assert result.observation["error"]["code"] == "episode_over"
    assert result.terminated and result.reward == 0.0
    assert world.snapshot() == snapshot


def test_step_before_reset_is_a_programming_error() -> None:
    with pytest.raises(RuntimeError, match="reset"):
        LibraryWorld().step(Finish())


def test_harm_halves_the_credit(world: LibraryWorld) -> None:
    other = next(b for b in world.state.books.values() if b.title != world.wanted)
    replay(world, 4, [*world.solution()[:-1], call("borrow", book_id=other.book_id), Finish()])
    assert world.score() == 0.5


def test_snapshot_is_json_and_holds_the_hidden_state(world: LibraryWorld) -> None:
    world.step(call("search", title="e"))
    snapshot = json.loads(json.dumps(world.snapshot()))
    assert snapshot["steps"] == 1 and snapshot["task"]["seed"] == 4
    assert set(snapshot["state"]["books"]) == set(world.state.books)


def test_a_world_bug_is_loud_not_an_observation() -> None:
    class Broken(LibraryWorld):
        @tool
        def crash(self) -> int:
            """Divide by zero."""
            return 1 // 0

    broken = Broken()
    broken.reset(0)
    with pytest.raises(WorldBugError, match="crash"):
        broken.step(call("crash"))


def test_build_must_set_state() -> None:
    class Stateless(ToolWorld[BaseModel]):
        name = "stateless"

        def build(self, rng: random.Random) -> Brief:
            return Brief(instruction="x", hint="y")

        def grade(self) -> Scorecard:
            return Scorecard().goal("x", True)

        def solution(self) -> list[ToolCall | Finish]:
            return [Finish()]

    with pytest.raises(WorldBugError, match=r"self\.state"):
        Stateless().reset(0)


def test_answer_matching_ignores_identifiers_and_refuses_hedging() -> None:
    assert numbers_in("ACC-1042 holds $1,204.50") == [1204.5]
    assert mentions_amount("You can spend $1,204.50 today.", 1204.5)
    assert not mentions_amount("You can spend $1,204.49 today.", 1204.5)
    assert not mentions_amount("maybe 10, 20, 1204.50, 30 or 40", 1204.5)


def test_sequential_ids_announce_the_next_one() -> None:
    ids = SequentialIds()
    upcoming = ids.upcoming_id("T")
    assert ids.new_id("T") == upcoming == "T-1001"
    assert ids.new_id("P") == "P-1002", "one counter across prefixes, as the reference plans assume"
