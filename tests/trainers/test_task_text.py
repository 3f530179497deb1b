"""A designed task worded by trusted code (`trainers.designer.task_text`): one clause per planned call, in
plan order, naming every value the plan types; the hint names the plan's tools in order and nothing typed."""

from __future__ import annotations

import json

import anyio

from toolworlds.spec import Question, TableSpec, ToolDefinition, parse_spec
from toolworlds.untrusted.validate import validate_spec
from trainers.designer.task_text import derived_hint, derived_instruction, says, tool_description, tool_name

ACCOUNTS = TableSpec.model_validate({
    "name": "bank_accounts", "key": "account_id",
    "fields": {"account_id": {"type": "string"}, "owner": {"type": "string"}, "balance": {"type": "number"},
               "status": {"type": "string", "enum": ["open", "frozen"]}},
    "records": [{"account_id": "A1", "owner": "Ada", "balance": 120.0, "status": "open"},
                {"account_id": "A2", "owner": "Bo", "balance": 5.0, "status": "open"}],
})  # fmt: skip
TOOLS = {
    "find": {"kind": "search", "name": "find", "description": "By owner.", "table": "bank_accounts",
             "field": "owner", "match": "equals"},
    "show": {"kind": "lookup", "name": "show", "description": "One account.", "table": "bank_accounts"},
    "by_status": {"kind": "list", "name": "by_status", "description": "By status.", "table": "bank_accounts",
                  "filter_by": "status"},
    "everything": {"kind": "list", "name": "everything", "description": "All.", "table": "bank_accounts"},
    "freeze": {"kind": "update", "name": "freeze", "description": "Freeze.", "table": "bank_accounts",
               "field": "status", "value": "frozen"},
    "set_status": {"kind": "update", "name": "set_status", "description": "Set.", "table": "bank_accounts",
                   "field": "status"},
    "open_account": {"kind": "create", "name": "open_account", "description": "Open.", "table": "bank_accounts"},
    "open_numbered": {"kind": "create", "name": "open_numbered", "description": "Open.", "table": "bank_accounts",
                      "key_prefix": "N"},
    "close": {"kind": "delete", "name": "close", "description": "Close.", "table": "bank_accounts"},
    "pay": {"kind": "transfer", "name": "pay", "description": "Pay.", "table": "bank_accounts", "field": "balance"},
}  # fmt: skip


def _tools() -> list[ToolDefinition]:
    spec = parse_spec({"spec_version": 1, "name": "bank", "description": "A bank.", "tables": [ACCOUNTS.model_dump()],
                       "tools": list(TOOLS.values()),
                       "task": {"instruction": "-", "hint": "-", "plan": [{"tool": "everything"}],
                                "question": {"table": "bank_accounts", "key": "A1", "field": "owner"}}})  # fmt: skip
    return list(spec.tools)


def say(*plan: tuple[str, dict[str, object]], question: Question | None = None) -> str:
    calls = [{"tool": tool, "arguments": arguments} for tool, arguments in plan]
    return derived_instruction([ACCOUNTS], _tools(), calls, question)


def test_each_kind_of_call_is_one_clause_naming_what_it_types() -> None:
    assert say(("show", {"account_id": "A1"})) == "Please look up 'A1'."
    assert say(("find", {"owner": "Ada"})) == "Please find the record in bank accounts whose owner is 'Ada'."
    assert say(("by_status", {"status": "open"})) == "Please list the records in bank accounts whose status is 'open'."
    assert say(("everything", {})) == "Please list every record in bank accounts."
    assert say(("freeze", {"account_id": "A2"})) == "Please set the status of 'A2' to 'frozen'."
    assert say(("set_status", {"account_id": "A2", "status": "open"})) == ("Please set the status of 'A2' to 'open'.")
    assert say(("open_account", {"account_id": "A3", "owner": "Cy", "balance": 10.0, "status": "open"})) == (
        "Please add 'A3' to bank accounts with owner 'Cy', balance '10' and status 'open'."
    )
    assert say(("open_numbered", {"owner": "Cy"})) == "Please add a record to bank accounts with owner 'Cy'."
    assert say(("close", {"account_id": "A2"})) == "Please remove 'A2' from bank accounts."
    assert say(("pay", {"from_account_id": "A1", "to_account_id": "A2", "amount": 12.5})) == (
        "Please move '12.5' of balance from 'A1' to 'A2'."
    )


def test_calls_follow_in_plan_order_and_the_question_comes_last() -> None:
    question = Question(table="bank_accounts", key="A2", field="balance")
    assert say(("find", {"owner": "Bo"}), ("freeze", {"account_id": "A2"}), question=question) == (
        "Please find the record in bank accounts whose owner is 'Bo', then set the status of 'A2' to 'frozen', "
        "and tell me the balance of 'A2'."
    )
    assert say(("everything", {}), question=question) == (
        "Please list every record in bank accounts, and tell me the balance of 'A2'."
    )
    assert say(question=question) == "Please tell me the balance of 'A2'."
    assert say(("everything", {}), ("everything", {})) == "Please list every record in bank accounts."


def test_the_hint_names_the_plans_tools_in_order_once_each_in_a_row() -> None:
    plan = [("find", {"owner": "Bo"}), ("freeze", {"account_id": "A2"}), ("freeze", {"account_id": "A1"}),
            ("find", {"owner": "Ada"})]  # fmt: skip
    calls = [{"tool": tool, "arguments": arguments} for tool, arguments in plan]
    assert derived_hint(_tools(), calls) == "Use find, then freeze, then find."
    assert "A2" not in derived_hint(_tools(), calls) and "Bo" not in derived_hint(_tools(), calls)


def test_a_tool_is_named_and_described_for_its_kind_table_and_field() -> None:
    assert tool_name("delete", "fips") == "delete_fips" and tool_name("create", "countries") == "add_countries"
    assert tool_name("list", "airports") == "list_airports"
    assert tool_name("list", "airports", "country") == "list_airports_by_country"
    assert tool_name("search", "bank_accounts", "owner") == "find_bank_accounts_by_owner"
    assert tool_name("update", "bank_accounts", "status") == "set_status_of_bank_accounts"
    assert tool_name("transfer", "bank_accounts", "balance") == "move_balance_in_bank_accounts"
    assert tool_name("lookup", "a" * 45) == "get_" + "a" * 36  # the format's 40 characters
    assert tool_name("update", "t", "x" * 35) == "set_" + "x" * 35  # cut where `_of` would begin, then no `_`
    assert tool_description("delete", ACCOUNTS) == "Remove a record from bank accounts by its account id."
    assert (
        tool_description("list", ACCOUNTS, "status") == "List the records in bank accounts whose status is the "
        "given value."
    )
    assert tool_description("transfer", ACCOUNTS, "balance") == ("Move an amount of balance from one record of bank "
                                                                 "accounts to another.")  # fmt: skip


def test_a_spec_worded_by_trusted_code_passes_the_meaning_and_leak_gates() -> None:
    plan: list[tuple[str, dict[str, object]]] = [
        ("find", {"owner": "Bo"}),
        ("pay", {"from_account_id": "A1", "to_account_id": "A2", "amount": 20}),
    ]
    calls = [{"tool": tool, "arguments": arguments} for tool, arguments in plan]
    spec = {"spec_version": 1, "name": "bank", "description": "A small bank.", "tables": [ACCOUNTS.model_dump()],
            "tools": [TOOLS["find"], TOOLS["pay"]],
            "task": {"plan": calls, "instruction": say(*plan), "hint": derived_hint(_tools(), calls)}}  # fmt: skip
    verdict = anyio.run(lambda: validate_spec(json.dumps(spec), seeds=range(2)))
    assert verdict.valid, verdict.rejection
    assert {gate.name: gate.passed for gate in verdict.gates}["meaning"]
    assert verdict.answer_leak == 0.0


def test_an_answer_is_said_only_where_it_stands_as_a_whole_token_as_the_leak_gate_reads_it() -> None:
    """A substring test refused every question of 3 of 16 derived designs of one run: a number's default zero
    is "in" '10.083' and '101'."""
    told = "Please list the records in city whose timezone is '101', and tell me the zone of '10.083'."
    assert not says(told, 0) and not says(told, 10) and not says(told, "city records")
    assert says(told, 101) and says(told, 10.083) and says(told, "City")
    assert says("Please look up 'B1', and tell me its pages.", "B1") and not says("Please look up 'B12'.", "B1")
    assert says("Please set the on loan of 'B2' to true.", True) and says("Pay '$1,042.50' now.", 1042.5)
