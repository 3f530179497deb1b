"""The `meaning` gate: a designed world's instruction is a sentence naming what its plan types (directly, or
by another value the tools showed beside it) and the record its answer comes from; its hint names a tool
or a step. Judged through `validate_spec` on variants of the example spec whose answers are known."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from toolworlds.examples import EXAMPLE_SPEC
from toolworlds.untrusted.validate import validate_spec


def _judged(**task: Any) -> str | None:
    spec = json.loads(EXAMPLE_SPEC)
    spec["task"].update(task)
    verdict = anyio.run(lambda: validate_spec(json.dumps(spec), seeds=range(2)))
    assert verdict.valid == (verdict.rejection is None)
    if verdict.rejection is not None:
        assert [gate.name for gate in verdict.gates][-1] == "meaning", verdict.rejection  # every other gate passed
    return verdict.rejection


QUESTION = {"question": {"table": "books", "key": "B4", "field": "author"}, "untouched": []}
LOOKUP = [{"tool": "search", "arguments": {"title": "Beloved"}}]


@pytest.mark.parametrize(
    ("task", "rejection"),
    [
        ({"instruction": "{ ]["}, "meaning: seed 0: not a sentence: the instruction '{ ][' has 0 words"),
        ({"instruction": "type_21"}, "meaning: seed 0: not a sentence"),
        (
            {"instruction": "Your pet has a petted."},
            "meaning: seed 0: a value it never names: the plan's call to search types 'Dune'",
        ),
        ({"instruction": "Dune Dune Dune."}, "meaning: seed 0: nothing to do"),
        ({"hint": "]; {"}, "meaning: seed 0: a hint of no step"),
        (
            {
                "instruction": "Please search for '][' now.",
                "plan": [
                    {"tool": "search", "arguments": {"title": "]["}},
                    {"tool": "borrow", "arguments": {"book_id": "B2"}},
                ],
            },
            "meaning: seed 0: punctuation for a name",
        ),
        ({"hint": "Several titles may match."}, "meaning: seed 0: a hint of no step"),
        # a question about a record the instruction never names (its title is only shown by the search)
        (
            {"instruction": "Who is the author of it?", "hint": "Search first.", "plan": LOOKUP, **QUESTION},
            "meaning: seed 0: a value it never names: the plan's call to search types 'Beloved'",
        ),
    ],
)
def test_a_task_that_means_nothing_is_rejected_by_name(task: dict[str, Any], rejection: str) -> None:
    found = _judged(**task)
    assert found is not None and found.startswith(rejection), found


@pytest.mark.parametrize(
    "task",
    [
        {},  # the example: "Borrow 'Dune'", and B2 is named by its title, which the search showed beside it
        {"instruction": "Please borrow Dune for me.", "hint": "Use search, then borrow."},
        {"hint": "Look it up by title first."},  # a step, no tool name
        {"instruction": "Borrowed Dune is what I want.", "hint": "borrow"},  # a tool by name
        {"instruction": "Who wrote the book Beloved?", "hint": "Search by title.", "plan": LOOKUP, **QUESTION},
    ],
)
def test_a_task_that_names_what_it_asks_passes(task: dict[str, Any]) -> None:
    assert _judged(**task) is None


def test_a_record_named_only_by_a_value_shown_later_is_not_named() -> None:
    """Naming a record by a text the tools show only after the call that needs it is no naming: the plan
    borrows B2 before anything showed it, so "Dune" does not lead to it."""
    plan = [{"tool": "borrow", "arguments": {"book_id": "B2"}}]
    found = _judged(instruction="Please borrow Dune for me.", hint="Use borrow.", plan=plan)
    assert found is not None and "types 'B2'" in found, found
    assert _judged(instruction="Please borrow book B2 for me.", hint="Use borrow.", plan=plan) is None
