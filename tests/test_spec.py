"""Toolworld specs: a JSON document compiled into a world that keeps the same contract as a class."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from spadework.cli import app
from toolworlds.checks import check_world
from toolworlds.core import Finish, ToolCall, ToolWorld, replay
from toolworlds.hosting.export import export_world
from toolworlds.registry import UnknownWorldError, load_world
from toolworlds.spec import Spec, SpecError, load_spec, parse_spec, spec_schema
from toolworlds.spec_compile import compile_spec

LIBRARY = Path(__file__).parent.parent / "toolworlds" / "examples" / "library.json"
runner = CliRunner(env={"NO_COLOR": "1", "COLUMNS": "250"})

# One tool of every kind, several kinds twice (with and without their options).
TOOLS: list[dict[str, Any]] = [
    {"kind": "lookup", "name": "get_account", "description": "Show one account.", "table": "accounts"},
    {"kind": "search", "name": "find_account", "description": "Accounts by owner name.", "table": "accounts",
     "field": "owner"},
    {"kind": "search", "name": "orders_of", "description": "A customer's orders, by full name.", "table": "orders",
     "field": "customer", "match": "equals"},
    {"kind": "list", "name": "orders_by_status", "description": "Orders in one status.", "table": "orders",
     "filter_by": "status"},
    {"kind": "list", "name": "list_payees", "description": "Every payee.", "table": "payees"},
    {"kind": "update", "name": "cancel_order", "description": "Cancel an unshipped order.", "table": "orders",
     "field": "status", "value": "cancelled",
     "transitions": [{"from": "pending", "to": "cancelled"}, {"from": "paid", "to": "cancelled"}]},
    {"kind": "update", "name": "set_order_status", "description": "Set an order's status.", "table": "orders",
     "field": "status"},
    {"kind": "update", "name": "freeze_account", "description": "Freeze an account.", "table": "accounts",
     "field": "status", "value": "frozen", "transitions": [{"from": "active", "to": "frozen"}]},
    {"kind": "create", "name": "tag_order", "description": "Label an order.", "table": "tags", "key_prefix": "G"},
    {"kind": "create", "name": "add_payee", "description": "Add a payee.", "table": "payees"},
    {"kind": "delete", "name": "remove_payee", "description": "Remove a payee.", "table": "payees"},
    {"kind": "transfer", "name": "transfer", "description": "Move money between accounts.", "table": "accounts",
     "field": "balance"},
]  # fmt: skip

# A help desk whose task needs most of the tools.
DESK: dict[str, Any] = {
    "spec_version": 1,
    "name": "desk",
    "description": "A help desk over accounts, orders, order tags and payees.",
    "max_steps": 20,
    "tables": [
        {
            "name": "accounts",
            "key": "account_id",
            "fields": {
                "account_id": {"type": "string"},
                "owner": {"type": "string"},
                "balance": {"type": "number"},
                "status": {"type": "string", "enum": ["active", "frozen"], "default": "active"},
            },
            "records": [
                {"account_id": "A1", "owner": "Ada Lovelace", "balance": 120},
                {"account_id": "A2", "owner": "Alan Turing", "balance": 40.0},
                {"account_id": "A3", "owner": "Grace Hopper", "balance": 75.5, "status": "frozen"},
            ],
        },
        {
            "name": "orders",
            "key": "order_id",
            "fields": {
                "order_id": {"type": "string"},
                "customer": {"type": "string"},
                "status": {"type": "string", "enum": ["pending", "paid", "shipped", "cancelled"]},
                "items": {"type": "integer", "default": 1},
            },
            "records": [
                {"order_id": "O1", "customer": "Ada Lovelace", "status": "paid", "items": 2},
                {"order_id": "O2", "customer": "Ada Lovelace", "status": "shipped"},
                {"order_id": "O3", "customer": "Alan Turing", "status": "pending"},
            ],
        },
        {
            "name": "tags",
            "key": "tag_id",
            "fields": {"tag_id": {"type": "string"}, "order_id": {"type": "string"}, "label": {"type": "string"}},
            "records": [{"tag_id": "G1", "order_id": "O2", "label": "gift"}],
        },
        {
            "name": "payees",
            "key": "payee_id",
            "fields": {"payee_id": {"type": "string"}, "name": {"type": "string"}},
            "records": [{"payee_id": "P1", "name": "Acme Power"}, {"payee_id": "P2", "name": "City Water"}],
        },
    ],
    "tools": TOOLS,
    "task": {
        "instruction": "Ada Lovelace wants her paid order cancelled and tagged 'refund', 20.50 moved from her "
        "account to Alan Turing's, and the City Water payee removed. Then tell her what her balance is.",
        "hint": "Look people up by name first; only pending or paid orders can be cancelled.",
        "plan": [
            {"tool": "find_account", "arguments": {"owner": "Ada"}},
            {"tool": "find_account", "arguments": {"owner": "Alan"}},
            {"tool": "transfer", "arguments": {"from_account_id": "A1", "to_account_id": "A2", "amount": 20.5}},
            {"tool": "orders_of", "arguments": {"customer": "Ada Lovelace"}},
            {"tool": "cancel_order", "arguments": {"order_id": "O1"}},
            {"tool": "tag_order", "arguments": {"order_id": "O1", "label": "refund"}},
            {"tool": "list_payees"},
            {"tool": "remove_payee", "arguments": {"payee_id": "P2"}},
        ],
        "question": {"table": "accounts", "key": "A1", "field": "balance"},
        "untouched": ["orders/O2"],
    },
}


def desk(**changes: Any) -> dict[str, Any]:
    """A deep copy of DESK; `changes` replace top-level keys."""
    return {**copy.deepcopy(DESK), **changes}


@pytest.fixture(scope="module")
def desk_world() -> type[ToolWorld[Any]]:
    return compile_spec(parse_spec(DESK))


def started(world_class: type[ToolWorld[Any]], seed: int = 0) -> ToolWorld[Any]:
    world = world_class()
    world.reset(seed)
    return world


def step(world: ToolWorld[Any], tool: str, **arguments: Any) -> Any:
    return world.step(ToolCall(name=tool, arguments=arguments)).observation


def error_code(observation: Any) -> str | None:
    return observation["error"]["code"] if isinstance(observation, dict) and "error" in observation else None


def rejection(document: dict[str, Any]) -> str:
    """The message of the `SpecError` that parsing and compiling `document` raises."""
    with pytest.raises(SpecError) as caught:
        compile_spec(parse_spec(document))
    return str(caught.value)


# -- the format ----------------------------------------------------------------------------------


@pytest.mark.parametrize("document", [DESK, json.loads(LIBRARY.read_text())], ids=["desk", "library"])
def test_a_spec_dumped_to_json_loads_back_equal(document: dict[str, Any]) -> None:
    spec = parse_spec(document)
    dumped = spec.model_dump_json()
    assert '"from"' in dumped or "transitions" not in dumped  # aliases are dumped as the format spells them
    assert parse_spec(dumped) == spec
    assert Spec.model_validate_json(dumped) == spec


def test_the_published_schema_validates_the_examples_and_rejects_a_bad_kind() -> None:
    schema = spec_schema()
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    validator.validate(json.loads(LIBRARY.read_text()))
    validator.validate(DESK)
    bad = desk()
    bad["tools"][0]["kind"] = "teleport"
    assert not validator.is_valid(bad)
    assert not validator.is_valid(desk(spec_version=2))


def test_spec_schema_command_prints_the_schema() -> None:
    result = runner.invoke(app, ["toolworld", "spec-schema"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == spec_schema()


# -- every operation kind, through reset and step -------------------------------------------------


def test_tools_come_in_spec_order_with_derived_argument_schemas(desk_world: type[ToolWorld[Any]]) -> None:
    assert [spec.name for spec in desk_world.tools()] == [tool["name"] for tool in DESK["tools"]]
    schemas = {spec.name: spec.input_schema for spec in desk_world.tools()}
    assert schemas["get_account"]["required"] == ["account_id"]
    assert schemas["get_account"]["properties"]["account_id"]["type"] == "string"
    assert set(schemas["transfer"]["required"]) == {"from_account_id", "to_account_id", "amount"}
    assert schemas["transfer"]["properties"]["amount"]["exclusiveMinimum"] == 0
    assert schemas["set_order_status"]["properties"]["status"]["enum"] == ["pending", "paid", "shipped", "cancelled"]
    assert list(schemas["cancel_order"]["properties"]) == ["order_id"]  # the value is fixed
    assert schemas["orders_by_status"]["properties"]["status"]["enum"] == ["pending", "paid", "shipped", "cancelled"]
    assert schemas["list_payees"]["properties"] == {}
    assert set(schemas["tag_order"]["required"]) == {"order_id", "label"}  # the key is generated
    assert set(schemas["add_payee"]["required"]) == {"payee_id", "name"}


def test_lookup(desk_world: type[ToolWorld[Any]]) -> None:
    world = started(desk_world)
    assert step(world, "get_account", account_id="A3") == {
        "account_id": "A3", "owner": "Grace Hopper", "balance": 75.5, "status": "frozen"}  # fmt: skip
    assert error_code(step(world, "get_account", account_id="A9")) == "not_found"
    assert error_code(step(world, "get_account")) == "invalid_arguments"


def test_search_contains_and_equals(desk_world: type[ToolWorld[Any]]) -> None:
    world = started(desk_world)
    assert [a["account_id"] for a in step(world, "find_account", owner="  lovelace ")] == ["A1"]
    assert {a["account_id"] for a in step(world, "find_account", owner="a")} == {"A1", "A2", "A3"}
    assert {o["order_id"] for o in step(world, "orders_of", customer="ada lovelace")} == {"O1", "O2"}
    assert step(world, "orders_of", customer="Ada") == []  # equals: part of the name is not enough
    assert error_code(step(world, "find_account", owner=" ")) == "invalid_query"


def test_list_with_and_without_a_filter(desk_world: type[ToolWorld[Any]]) -> None:
    world = started(desk_world)
    assert [o["order_id"] for o in step(world, "orders_by_status", status="pending")] == ["O3"]
    assert {p["name"] for p in step(world, "list_payees")} == {"Acme Power", "City Water"}
    assert error_code(step(world, "orders_by_status", status="lost")) == "invalid_arguments"


def test_update_fixed_and_chosen_values_and_transitions(desk_world: type[ToolWorld[Any]]) -> None:
    world = started(desk_world)
    assert step(world, "cancel_order", order_id="O3")["status"] == "cancelled"
    refused = step(world, "cancel_order", order_id="O2")
    assert error_code(refused) == "illegal_transition"
    assert '"shipped"' in refused["error"]["message"] and "nothing" in refused["error"]["message"]
    assert error_code(step(world, "freeze_account", account_id="A3")) == "illegal_transition"  # already frozen
    assert step(world, "set_order_status", order_id="O2", status="paid")["status"] == "paid"
    assert error_code(step(world, "set_order_status", order_id="O2", status="lost")) == "invalid_arguments"
    assert error_code(step(world, "set_order_status", order_id="O9", status="paid")) == "not_found"


def test_create_with_a_given_or_generated_key(desk_world: type[ToolWorld[Any]]) -> None:
    world = started(desk_world)
    assert step(world, "tag_order", order_id="O1", label="refund") == {"tag_id": "G2", "order_id": "O1",
                                                                        "label": "refund"}  # fmt: skip
    assert step(world, "tag_order", order_id="O1", label="urgent")["tag_id"] == "G3"
    assert step(world, "add_payee", payee_id="P3", name="Gas Co") == {"payee_id": "P3", "name": "Gas Co"}
    assert error_code(step(world, "add_payee", payee_id="P1", name="Again")) == "already_exists"
    assert {p["payee_id"] for p in step(world, "list_payees")} == {"P1", "P2", "P3"}


def test_a_created_key_outside_the_key_fields_enum_is_refused_not_a_crash() -> None:
    """The key argument of a create call is free text; the record's key field may be an enum. Found by the
    staged designer's grammar walks: the record model raised a ValidationError out of the tool."""
    document = desk()
    document["tables"][3]["fields"]["payee_id"]["enum"] = ["P1", "P2", "P3"]
    world = started(compile_spec(parse_spec(document)))
    assert error_code(step(world, "add_payee", payee_id="P9", name="Gas Co")) == "invalid_record"
    assert step(world, "add_payee", payee_id="P3", name="Gas Co") == {"payee_id": "P3", "name": "Gas Co"}


def test_with_key_choices_a_tables_key_arguments_list_its_records_keys() -> None:
    """`key_choices`: the agent picks a record its tools list instead of spelling a key; a create still names a
    new one, which the listing (the spec's records) then cannot name."""
    document = desk()
    for table in document["tables"]:
        table["key_choices"] = True
    world_class = compile_spec(parse_spec(document))
    schemas = {tool.name: tool.input_schema["properties"] for tool in world_class.tools()}
    assert schemas["get_account"]["account_id"]["enum"] == ["A1", "A2", "A3"]
    assert schemas["transfer"]["from_account_id"]["enum"] == schemas["transfer"]["to_account_id"]["enum"]
    assert schemas["cancel_order"]["order_id"]["enum"] == ["O1", "O2", "O3"]
    assert schemas["remove_payee"]["payee_id"]["enum"] == ["P1", "P2"]
    assert "enum" not in schemas["add_payee"]["payee_id"]  # a new record's key
    world = started(world_class)
    assert step(world, "remove_payee", payee_id="P2") == {"payee_id": "P2", "name": "City Water"}
    assert step(world, "add_payee", payee_id="P3", name="Gas Co")["payee_id"] == "P3"
    refused = step(world, "remove_payee", payee_id="P3")
    assert error_code(refused) == "invalid_arguments" and "'P1'" in json.dumps(refused), refused
    assert all(check.passed for check in check_world(world_class, seeds=[0, 1]))  # the plan keeps the contract


def test_delete(desk_world: type[ToolWorld[Any]]) -> None:
    world = started(desk_world)
    assert step(world, "remove_payee", payee_id="P1") == {"payee_id": "P1", "name": "Acme Power"}
    assert error_code(step(world, "remove_payee", payee_id="P1")) == "not_found"
    assert [p["payee_id"] for p in step(world, "list_payees")] == ["P2"]


def test_transfer_moves_the_amount_and_refuses_overdrafts(desk_world: type[ToolWorld[Any]]) -> None:
    world = started(desk_world)
    receipt = step(world, "transfer", from_account_id="A2", to_account_id="A1", amount=10.1)
    assert receipt["amount"] == 10.1
    assert receipt["source"]["balance"] == 29.9 and receipt["target"]["balance"] == 130.1
    overdraft = step(world, "transfer", from_account_id="A2", to_account_id="A1", amount=30)
    assert error_code(overdraft) == "insufficient_funds" and "29.9" in overdraft["error"]["message"]
    assert error_code(step(world, "transfer", from_account_id="A1", to_account_id="A1", amount=1)) == "same_record"
    assert error_code(step(world, "transfer", from_account_id="A1", to_account_id="A9", amount=1)) == "not_found"
    assert error_code(step(world, "transfer", from_account_id="A1", to_account_id="A2", amount=0)) == (
        "invalid_arguments"
    )
    assert step(world, "get_account", account_id="A2")["balance"] == 29.9  # refusals change nothing


# -- grading ------------------------------------------------------------------------------------


def test_the_solution_scores_one_and_doing_nothing_does_not(desk_world: type[ToolWorld[Any]]) -> None:
    world = desk_world()
    world.reset(4)
    plan = world.solution()
    assert isinstance(plan[-1], Finish) and plan[-1].answer == "99.5"
    assert replay(world, 4, plan)[-1].reward == 1.0
    assert replay(world, 4, [Finish()])[-1].reward == 0.0
    half = replay(world, 4, [*plan[:3], Finish(answer="99.50")])  # the transfer and the answer: 3 of 6 goals
    assert half[-1].reward == 0.5


def test_a_wrong_answer_loses_only_the_question(desk_world: type[ToolWorld[Any]]) -> None:
    world = desk_world()
    world.reset(0)
    calls = world.solution()[:-1]
    assert replay(world, 0, [*calls, Finish(answer="120")])[-1].reward == pytest.approx(5 / 6, abs=1e-6)


@pytest.mark.parametrize(
    ("extra", "harms"),
    [
        (ToolCall(name="freeze_account", arguments={"account_id": "A2"}), 1),  # another record changed
        (ToolCall(name="tag_order", arguments={"order_id": "O3", "label": "x"}), 1),  # a record not asked for
        (ToolCall(name="set_order_status", arguments={"order_id": "O2", "status": "paid"}), 2),  # and untouched
        (ToolCall(name="set_order_status", arguments={"order_id": "O1", "status": "pending"}), 0),  # a missed goal
    ],
)
def test_side_effects_are_harms(desk_world: type[ToolWorld[Any]], extra: ToolCall, harms: int) -> None:
    world = desk_world()
    world.reset(1)
    *calls, finish = world.solution()
    score = replay(world, 1, [*calls, extra, finish])[-1].reward
    assert score == (0.5**harms if harms else pytest.approx(5 / 6, abs=1e-6))


def test_a_seed_shuffles_record_order_but_not_the_task(desk_world: type[ToolWorld[Any]]) -> None:
    orders = set()
    for seed in range(12):
        world = started(desk_world, seed)
        assert world.task.instruction == DESK["task"]["instruction"]
        orders.add(tuple(a["account_id"] for a in step(world, "find_account", owner="a")))
    assert len(orders) > 1 and {frozenset(order) for order in orders} == {frozenset({"A1", "A2", "A3"})}


# -- rejected specs -------------------------------------------------------------------------------


def test_an_unknown_table_in_a_tool_names_its_path() -> None:
    document = desk()
    document["tools"][2]["table"] = "acounts"
    message = rejection(document)
    assert "tools[2].table: no table named 'acounts'" in message and "accounts, orders" in message


def test_an_unknown_tool_in_the_plan_names_its_path() -> None:
    document = desk()
    document["task"]["plan"][1]["tool"] = "borow"
    assert "task.plan[1].tool: no tool named 'borow'" in rejection(document)


def test_an_enum_violation_in_a_record_names_its_path() -> None:
    document = desk()
    document["tables"][1]["records"][2]["status"] = "opne"
    message = rejection(document)
    assert "tables[1].records[2].status:" in message and '"opne" is not one of the allowed values' in message


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: d["tables"][3]["records"].append({"payee_id": "P1", "name": "Twin"}),
         "tables[3].records[2].payee_id: duplicate key 'P1' (also records[0])"),
        (lambda d: d["tables"][0]["records"][0].update(balance="lots"),
         'tables[0].records[0].balance: expected a number, got "lots"'),
        (lambda d: d["tables"][0]["records"][0].update(colour="red"),
         "tables[0].records[0].colour: no field named 'colour' in table 'accounts'"),
        (lambda d: d["tools"][1].update(kind="teleport"), "tools[1].kind: expected one of: lookup, search"),
        (lambda d: d["tools"][3].pop("table"), "tools[3].table: required, but missing"),
        (lambda d: d["tools"][1].update(feild="owner"), "tools[1].feild: not a key this format has"),
        (lambda d: d["tools"][6].update(field="owner"), "tools[6].field: no field named 'owner' in table 'orders'"),
        (lambda d: d["tools"][11].update(field="owner"), "tools[11].field: transfer needs a numeric field"),
        (lambda d: d["tools"][7].update(value="closed"), 'tools[7].value: "closed" is not one of: "active", "frozen"'),
        (lambda d: d["tools"][4].update(name="get_account"), "tools[4].name: a tool named 'get_account' is already"),
        (lambda d: d["task"].update(untouched=["orders/O1"]), "task.untouched[0]: the plan itself changes orders/O1"),
        (lambda d: d["task"].update(question={"table": "tags", "key": "G9", "field": "label"}),
         "task.question.key: no record tags/G9 after the plan"),
        (lambda d: d.update(name="Desk World"), "name: String should match pattern"),
        (lambda d: d["tables"][2]["fields"]["tag_id"].update(enum=["G1", "G2"]),
         "tools[8].key_prefix: key_prefix makes up keys, but 'tag_id' only takes the values of its enum"),
    ],
)  # fmt: skip
def test_each_problem_names_its_json_path(edit: Any, expected: str) -> None:
    document = desk()
    edit(document)
    assert expected in rejection(document)


def test_a_field_a_record_leaves_out_takes_its_zero_value_and_its_key_never_does() -> None:
    """Defaults first, then an enum's first value, then the type's zero; a create call must still give it."""
    document = desk()
    document["tables"][0]["records"][1] = {"account_id": "A2"}  # no owner, balance or status
    document["tables"][1]["records"][2] = {"order_id": "O3", "customer": "Alan Turing"}  # no status, no items
    world = started(compile_spec(parse_spec(document)))
    state = world.state.model_dump()
    assert state["accounts"]["A2"] == {"account_id": "A2", "owner": "", "balance": 0.0, "status": "active"}
    assert state["orders"]["O3"] == {"order_id": "O3", "customer": "Alan Turing", "status": "pending", "items": 1}
    add_payee = next(tool for tool in world.openai_tools() if tool["function"]["name"] == "add_payee")
    assert add_payee["function"]["parameters"]["required"] == ["payee_id", "name"]
    document["tables"][3]["records"][1] = {"name": "City Water"}
    assert "tables[3].records[1].payee_id: required, but missing (every record has its key)" in rejection(document)


def test_several_problems_are_reported_together() -> None:
    document = desk()
    document["tools"][0]["table"] = "nowhere"
    document["task"]["plan"][0]["tool"] = "nothing"
    with pytest.raises(SpecError) as caught:
        parse_spec(document)
    assert [problem.path for problem in caught.value.problems] == ["tools[0].table", "task.plan[0].tool"]


def test_a_refused_plan_is_rejected_naming_the_call() -> None:
    document = desk()
    document["task"]["plan"][4]["arguments"] = {"order_id": "O2"}  # shipped: cannot be cancelled
    message = rejection(document)
    assert message.startswith("task.plan[4]: call 4 (cancel_order) is refused: illegal_transition")
    document["task"]["plan"][2]["arguments"]["amount"] = 500
    assert "task.plan[2]: call 2 (transfer) is refused: insufficient_funds" in rejection(document)


def test_a_plan_call_with_bad_arguments_is_rejected_naming_the_argument() -> None:
    document = desk()
    document["task"]["plan"][4]["arguments"] = {"order": "O1"}
    message = rejection(document)
    assert "task.plan[4].arguments: call 4 (cancel_order) has invalid arguments" in message
    assert "order_id: required argument is missing" in message


def test_a_task_that_doing_nothing_solves_is_rejected() -> None:
    document = desk()
    document["task"]["plan"] = [{"tool": "list_payees"}]
    document["task"]["question"] = None
    document["task"]["untouched"] = []
    assert "task: the plan changes nothing and there is no question" in rejection(document)


def test_text_that_is_not_json_is_one_clear_error() -> None:
    with pytest.raises(SpecError, match="not JSON"):
        parse_spec('{"spec_version": 1,')


# -- the world in the rest of the system ---------------------------------------------------------


@pytest.mark.parametrize("source", ["desk", "library"])
def test_a_spec_world_keeps_the_contract(source: str, desk_world: type[ToolWorld[Any]]) -> None:
    world = desk_world if source == "desk" else load_world(str(LIBRARY))
    results = check_world(world, range(20))
    assert all(result.passed for result in results), [r for r in results if not r.passed]


def test_a_spec_world_exports(desk_world: type[ToolWorld[Any]], tmp_path: Path) -> None:
    written = export_world(desk_world, tmp_path)
    assert tmp_path / "openapi.json" in written
    assert json.loads((tmp_path / "tools.json").read_text()) == desk_world.openai_tools()
    transfer = json.loads((tmp_path / "schemas" / "transfer.input.json").read_text())
    Draft202012Validator.check_schema(transfer)
    assert Draft202012Validator(transfer).is_valid({"from_account_id": "A1", "to_account_id": "A2", "amount": 1})
    document = json.loads((tmp_path / "openapi.json").read_text())
    assert "/sessions/{session_id}/tools/remove_payee" in document["paths"]


def test_the_example_loads_by_path_and_plays_like_the_python_library() -> None:
    world_class = load_world(str(LIBRARY))
    assert world_class.name == "library" and [t.name for t in world_class.tools()] == ["search", "borrow"]
    assert load_spec(LIBRARY).task.untouched == ["books/B5"]
    world = world_class()
    world.reset(0)
    assert replay(world, 0, world.solution())[-1].reward == 1.0
    wrong: list[ToolCall | Finish] = [ToolCall(name="borrow", arguments={"book_id": "B5"}), Finish()]  # the sequel
    assert replay(world, 0, wrong)[-1].reward == 0.0
    both = [ToolCall(name="borrow", arguments={"book_id": "B2"}), ToolCall(name="borrow", arguments={"book_id": "B1"})]
    assert replay(world, 0, [*both, Finish()])[-1].reward == 0.5


def test_a_bad_spec_file_is_the_registry_clean_error(tmp_path: Path) -> None:
    document = desk()
    document["tools"][2]["table"] = "acounts"
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(document))
    with pytest.raises(UnknownWorldError, match=r"broken\.json is not a valid toolworld spec: tools\[2\]\.table"):
        load_world(str(path))
    with pytest.raises(UnknownWorldError, match="no such file"):
        load_world(str(tmp_path / "missing.json"))
    result = runner.invoke(app, ["toolworld", "show", str(path)])
    assert result.exit_code == 2 and "no table named 'acounts'" in result.output


def test_the_cli_plays_a_spec_file() -> None:
    result = runner.invoke(app, ["toolworld", "play", str(LIBRARY), "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert "score 1.000" in result.output


@pytest.mark.parametrize(
    ("change", "rejection"),
    [
        (lambda spec: spec["task"].update(plan=spec["task"]["plan"][:1]), "compile: task: the plan changes nothing"),
        (lambda spec: spec["task"].update(hint="Borrow B2."), "smoke: hint helps without the answer"),
        (lambda spec: spec.update(name="Library"), "parse: name:"),
    ],
)
def test_the_spec_gates_stop_at_the_first_failure_and_say_why(change: Any, rejection: str) -> None:
    import anyio

    from toolworlds.examples import EXAMPLE_SPEC
    from toolworlds.untrusted.validate import SPEC_GATES, validate_spec

    sound = anyio.run(lambda: validate_spec(EXAMPLE_SPEC, seeds=range(2)))
    assert sound.valid and [gate.name for gate in sound.gates] == list(SPEC_GATES)
    assert sound.local is not None and sound.world is not None and sound.world.name == "library"
    assert [tool["name"] for tool in sound.world.tools] == ["search", "borrow"]
    spec = json.loads(EXAMPLE_SPEC)
    change(spec)
    verdict = anyio.run(lambda: validate_spec(f"```json\n{json.dumps(spec)}\n```", seeds=range(2)))
    assert not verdict.valid and verdict.local is None
    assert verdict.rejection is not None and verdict.rejection.startswith(rejection), verdict.rejection
