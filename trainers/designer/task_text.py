"""A designed task's instruction and hint, written by trusted code from its plan (`designer.task_text=derived`).

The embedded designer wrote instructions such as "Crowns of the World of The Knight" and "Do what you are
told, but not whats", and hints such as "Use cuisine:", even with every value its plan types forced into the
instruction by the grammar (46 valid worlds of a train-selfplay run at 4cd5292, none a request a person could
act on). A spec's plan and question already say what the task is, so trusted code can word it: one clause
per planned call, in plan order, then the question; the hint names the plan's tools in their order. The
designer still chooses the world (tables, fields, records, tools), the plan, the question and the records
that must stay untouched: only those choices learn. The stages offer each text as a grammar of that one
string, so the reply stays the tokens the server sampled.

With `designer.tool_text=derived` the tools' names and descriptions are trusted code's too (`tool_name`,
`tool_description`): the model named them `tools_to_list_of_items` (it creates a record) and
`fips_15003_20220326_2` (it deletes one), so unaided the agent had to guess which tool does what, and all 8
valid worlds of run 22 went unsolved unaided. Then the model still chooses which tools a table has (kind
and field), but not what they are called. Measured against the model's names (docs/guide.md, pre-registered
A/B at 9112fc7): 8 of 32 valid worlds at the frontier against 12 of 31, no more unaided wins: not the default.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from toolworlds.checks import leaks_answer
from toolworlds.spec import (
    CreateTool,
    DeleteTool,
    ListTool,
    LookupTool,
    Question,
    SearchTool,
    TableSpec,
    ToolDefinition,
    TransferTool,
    UpdateTool,
)

TaskText = Literal["written", "derived"]  # who writes a staged spec's instruction and hint: the model, or trusted code


def derived_instruction(
    tables: Sequence[TableSpec],
    tools: Sequence[ToolDefinition],
    plan: Sequence[Mapping[str, Any]],
    question: Question | None,
) -> str:
    """One sentence, "Please <a clause per call>, then <...>, and tell me <the question>.", naming in single
    quotes every value the plan types and the record the question asks about. A record is named by its key
    alone (the reply's tokens are few: a valid spec took up to 759 of the 768 the CPU preset allows); a
    table only where a call reaches records by something else (search, list), adds or removes one."""
    by_table = {table.name: table for table in tables}
    by_name = {tool.name: tool for tool in tools}
    clauses = []
    for call in plan:
        tool = by_name.get(str(call.get("tool")))
        table = by_table.get(tool.table) if tool is not None else None
        clause = _clause(tool, table, call.get("arguments") or {}) if tool is not None and table is not None else None
        if clause is not None and clause not in clauses:  # the same read twice asks nothing new
            clauses.append(clause)
    sentence = ", then ".join(clauses)
    if question is not None:
        asked = f"tell me the {_words(question.field)} of {_quoted(question.key)}"
        sentence = f"{sentence}, and {asked}" if sentence else asked
    return f"Please {sentence}." if sentence else "Please finish."


_VERBS = {"lookup": "get", "delete": "delete", "search": "find", "list": "list", "create": "add",
          "transfer": "move", "update": "set"}  # fmt: skip
_NOT_NAME = re.compile(r"[^a-z0-9]+")


def tool_name(kind: str, table: str, field: str | None = None, longest: int = 40) -> str:
    """A tool's name from what it does: `delete_fips`, `list_airports_by_country`, `set_status_of_tickets`
    (cut to `longest` characters, the format's most; two tools the cut makes equal, the stages keep apart)."""
    verb = _VERBS[kind]
    if field is None:
        parts = [verb, table]
    elif kind in ("search", "list"):
        parts = [verb, table, "by", field]
    elif kind == "transfer":
        parts = [verb, field, "in", table]
    else:
        parts = [verb, field, "of", table]
    name = "_".join(_NOT_NAME.sub("_", part.lower()).strip("_") for part in parts)
    return name[:longest].rstrip("_")


def tool_description(kind: str, table: TableSpec, field: str | None = None) -> str:
    """What a tool does, in words, naming its table and field as the tools show them."""
    records, what = _words(table.name), _words(field or "")
    return {
        "lookup": f"Look up a record of {records} by its {_words(table.key)}.",
        "delete": f"Remove a record from {records} by its {_words(table.key)}.",
        "search": f"Find the record in {records} whose {what} matches.",
        "list": f"List the records in {records} whose {what} is the given value." if field
        else f"List every record in {records}.",
        "create": f"Add a record to {records}.",
        "transfer": f"Move an amount of {what} from one record of {records} to another.",
        "update": f"Set the {what} of a record in {records}.",
    }[kind]  # fmt: skip


def derived_hint(tools: Sequence[ToolDefinition], plan: Sequence[Mapping[str, Any]]) -> str:
    """The plan's tools in its order, "Use <tool>, then <tool>." (a tool called twice in a row, once): which
    tools and in what order, never an id, an amount or an answer."""
    known = {tool.name for tool in tools}
    order: list[str] = []
    for call in plan:
        name = str(call.get("tool"))
        if name in known and (not order or order[-1] != name):
            order.append(name)
    return "Use " + ", then ".join(order) + "." if order else "Look up the records the task names first."


def says(instruction: str, value: Any) -> bool:
    """Whether the instruction already holds `value` as the leak gate reads it (`leaks_answer`): a question
    whose answer it holds asks nothing. A substring would not do: the zero a record's number holds by default
    is in '10.083', and 3 of 16 derived designs of one run lost every question to that and were refused."""
    return leaks_answer(instruction, _quoted(value).strip("'"), shortest=1)


def _clause(tool: ToolDefinition, table: TableSpec, arguments: Mapping[str, Any]) -> str:
    records, key = _words(table.name), _quoted(arguments.get(table.key))
    if isinstance(tool, LookupTool):
        return f"look up {key}"
    if isinstance(tool, SearchTool):
        how = "contains" if tool.match == "contains" else "is"
        return f"find the record in {records} whose {_words(tool.field)} {how} {_quoted(arguments.get(tool.field))}"
    if isinstance(tool, ListTool):
        if tool.filter_by is None:
            return f"list every record in {records}"
        value = _quoted(arguments.get(tool.filter_by))
        return f"list the records in {records} whose {_words(tool.filter_by)} is {value}"
    if isinstance(tool, UpdateTool):
        new = tool.value if tool.value is not None else arguments.get(tool.field)
        return f"set the {_words(tool.field)} of {key} to {_quoted(new)}"
    if isinstance(tool, CreateTool):
        given = [f"{_words(name)} {_quoted(value)}" for name, value in arguments.items() if name != table.key]
        new = f"{key} to {records}" if table.key in arguments else f"a record to {records}"
        return f"add {new}" + (f" with {_listing(given)}" if given else "")
    if isinstance(tool, DeleteTool):
        return f"remove {key} from {records}"
    assert isinstance(tool, TransferTool)
    source, target = arguments.get(f"from_{table.key}"), arguments.get(f"to_{table.key}")
    amount = _quoted(arguments.get("amount"))
    return f"move {amount} of {_words(tool.field)} from {_quoted(source)} to {_quoted(target)}"


def _words(name: str) -> str:
    return name.replace("_", " ")


def _quoted(value: Any) -> str:
    """A value as the instruction names it: text and numbers in single quotes (a whole number without its
    `.0`), a flag as a word."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"'{value}'"


def _listing(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
