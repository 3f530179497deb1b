"""The designer writes specs within a budget (`trainers.designer.budget.SpecBudget`).

Unbounded, the embedded model's specs ran past the token budget and never closed; the budget caps every
list, map and text. A chat designer gets it as a JSON-schema response format (these tests: the example
spec fits, a spec over any cap is refused, and the budget only tightens the published schema, so whatever
the response format admits, the spec format accepts); a tokens designer gets it from its stage grammars
(`tests/trainers/test_spec_stages.py`).
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from toolworlds.examples import EXAMPLE_SPEC
from toolworlds.spec import spec_schema
from trainers.config import DesignerConfig
from trainers.designer.budget import SPEC_BUDGET
from trainers.designer.generate import design_constraint, design_schema
from trainers.designer.prompt import designer_messages, spec_system
from trainers.documents import Document

BOUNDS = ("maxItems", "maxProperties", "maxLength")


def example() -> dict[str, Any]:
    return dict(json.loads(EXAMPLE_SPEC))


def over_budget() -> dict[str, dict[str, Any]]:
    """The example pushed past one cap at a time."""
    specs = {}
    spec = example()
    book = spec["tables"][0]["records"][0]
    spec["tables"][0]["records"] = [{**book, "book_id": f"B{n}"} for n in range(SPEC_BUDGET.records + 1)]
    specs["records"] = spec
    spec = example()
    spec["tables"][0]["fields"].update({f"extra_{n}": {"type": "string"} for n in range(SPEC_BUDGET.fields)})
    specs["fields"] = spec
    spec = example()
    spec["tools"] = [{**spec["tools"][0], "name": f"search_{n}"} for n in range(SPEC_BUDGET.tools + 1)]
    specs["tools"] = spec
    spec = example()
    spec["task"]["plan"] = spec["task"]["plan"] * SPEC_BUDGET.plan
    specs["plan"] = spec
    spec = example()
    spec["task"]["hint"] = "Search first. " * SPEC_BUDGET.text
    specs["text"] = spec
    return specs


def test_the_example_spec_fits_the_budget_and_the_prompt_states_it() -> None:
    jsonschema.validate(example(), design_schema())
    assert f"at most {SPEC_BUDGET.fields} fields and {SPEC_BUDGET.records} records" in spec_system().replace("\n", " ")


@pytest.mark.parametrize(
    ("plan_calls", "plans", "asked"),
    [
        (3, "any", "Make the task take two or three tool calls, and"),
        (2, "any", "Make the task take two tool calls, and"),
        (1, "change", "Make the task take one tool call that changes a record, and"),
        (3, "change", "Make the task take two or three tool calls, at least one of which changes a record, and"),
    ],
)
def test_the_spec_prompt_asks_for_the_plan_its_grammar_holds(plan_calls: int, plans: str, asked: str) -> None:
    settings = DesignerConfig(format="spec", plans=plans, plan_calls=plan_calls)  # type: ignore[arg-type]
    document = Document(source="tables:x", title="Rentals", text="Cars rented by the day.")
    for doc in (document, Document(source="none", title="", text="")):  # with a document and without
        system, user = designer_messages(doc, [], "spec", settings.spec_budget(), settings.plans)
        assert asked in user["content"].replace("\n", " ")
        assert f"a plan of at most {plan_calls} calls" in system["content"].replace("\n", " ")


@pytest.mark.parametrize("cap", sorted(over_budget()))
def test_a_spec_over_any_cap_is_refused_by_the_designers_schema(cap: str) -> None:
    spec = over_budget()[cap]
    jsonschema.validate(spec, spec_schema())  # the published format would take it
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(spec, design_schema())


def test_the_budget_only_tightens_the_published_schema() -> None:
    def walk(published: Any, designed: Any, path: str) -> None:
        if isinstance(published, dict):
            assert isinstance(designed, dict), path
            for key in designed.keys() - published.keys():
                assert key in BOUNDS, f"{path}: the budget added {key!r}"
            for key, value in published.items():
                if key in BOUNDS:
                    assert designed[key] <= value, f"{path}.{key}: loosened"
                else:
                    walk(value, designed[key], f"{path}.{key}")
        elif isinstance(published, list):
            assert isinstance(designed, list) and len(designed) == len(published), path
            for index, (a, b) in enumerate(zip(published, designed, strict=True)):
                walk(a, b, f"{path}[{index}]")
        else:
            assert designed == published, path

    published = {key: value for key, value in spec_schema().items() if key not in ("$schema", "$id")}
    designed = design_schema()
    walk(published, designed, "")
    assert designed["$defs"]["TableSpec"]["properties"]["records"]["maxItems"] == SPEC_BUDGET.records


def test_chat_designers_get_the_same_budget_as_a_response_format() -> None:
    grammar, extra = design_constraint("spec", tokens=False)
    assert grammar is None
    assert extra["response_format"]["json_schema"]["schema"] == design_schema()
