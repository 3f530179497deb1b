"""Toolworld specs: a world as one JSON document, for authors (small models) that cannot write a class.

A spec declares tables of records (the hidden state), tools that are each one of a few typed operation
kinds over those tables, and a task with its reference plan. Trusted code (`toolworlds.spec_compile`)
turns it into an ordinary `ToolWorld`: the tools' argument schemas, refusals and the grader are derived,
never written, so a spec can only say what the kinds can do, and every mistake in it is found before
an episode runs. This module is the format: its pydantic models, the rules between their parts, and
`SpecError`, the one exception a bad spec raises, naming the JSON path of each problem.

The kinds and what the reference worlds' tasks map onto:

| kind       | does                                                        | e.g.                          |
|------------|-------------------------------------------------------------|-------------------------------|
| `lookup`   | one record by its key                                       | look up an account            |
| `search`   | records whose string field contains (or equals) a text      | find a customer, a ticket     |
| `list`     | a table's records, optionally those with one field's value  | a customer's orders           |
| `update`   | set one field of a record to an allowed value, optionally   | freeze, cancel, set priority  |
|            | only along allowed `from -> to` transitions                 |                               |
| `create`   | add a record (its key given, or generated from a prefix)    | add a tag (a `tags` table)    |
| `delete`   | remove a record by its key                                  | remove a payee                |
| `transfer` | move an amount between two records' numeric field, keeping  | move money between accounts   |
|            | the source at or above a minimum                            |                               |

Fields are scalars (string, integer, number, boolean), so a list such as a ticket's tags is a table of
its own whose records name the ticket.
"""

from __future__ import annotations

import json
import keyword
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, PlainValidator, ValidationError, WithJsonSchema
from pydantic import StringConstraints as Text

from toolworlds.tool import JSON_SCHEMA_DIALECT, QuietSchema

SPEC_VERSION = 1
MAX_RECORDS = 500


def _scalar(value: object) -> str | bool | int | float:
    if isinstance(value, str | bool | int | float):
        return value
    raise ValueError("expected a string, number or boolean")


Scalar = Annotated[
    str | bool | int | float, PlainValidator(_scalar), WithJsonSchema({"type": ["string", "number", "boolean"]})
]
Identifier = Annotated[str, Text(pattern=r"^[a-z][a-z0-9_]{0,39}$")]
OneLine = Annotated[str, Text(min_length=1, max_length=200, pattern=r"^[^\n]*\S[^\n]*$")]
Prose = Annotated[str, Text(min_length=1, max_length=2000, pattern=r"\S")]
RecordRef = Annotated[str, Text(pattern=r"^[a-z][a-z0-9_]*/.+$"), Field(description="`table/key`, e.g. books/B1.")]
FieldType = Literal["string", "integer", "number", "boolean"]


class Strict(BaseModel):
    """Unknown keys are errors: a typo in a spec must not be silently ignored."""

    model_config = ConfigDict(extra="forbid", serialize_by_alias=True, validate_by_name=True)


class FieldSpec(Strict):
    type: FieldType
    enum: list[Scalar] | None = Field(default=None, min_length=1, description="The only values the field takes.")
    default: Scalar | None = Field(
        default=None,
        description="Used where a record or a create call leaves it out. Without one, a create call must give the "
        "field, and a record that leaves it out gets the field's zero value (its enum's first value, else \"\", 0 "
        "or false).",
    )
    description: str = Field(default="", max_length=200, description="Shown to the agent in argument schemas.")


class TableSpec(Strict):
    name: Identifier
    key: Identifier = Field(description="The field that identifies a record; it must be a string field.")
    fields: dict[Identifier, FieldSpec] = Field(min_length=1)
    records: list[dict[str, Scalar]] = Field(max_length=MAX_RECORDS, description="The hidden state.")
    key_choices: bool = Field(
        default=False,
        description="The key arguments of its tools (lookup, update, delete, transfer) list its records' keys as "
        "their only values: the agent chooses a record instead of spelling one, and a record created later cannot "
        "be named by them.",
    )

    def keys(self) -> list[str]:
        """Its records' keys, as the spec lists them (what `key_choices` offers)."""
        return [str(record[self.key]) for record in self.records if self.key in record]


class ToolBase(Strict):
    name: Identifier
    description: OneLine = Field(description="What the agent reads about the tool.")
    table: Identifier


class LookupTool(ToolBase):
    """Takes the key field as its argument; returns the record."""

    kind: Literal["lookup"]


class SearchTool(ToolBase):
    """Takes a text argument named after `field`; returns the records that match it, ignoring case."""

    kind: Literal["search"]
    field: Identifier
    match: Literal["contains", "equals"] = "contains"


class ListTool(ToolBase):
    """Without `filter_by`, no arguments and every record; with it, the records with the given value."""

    kind: Literal["list"]
    filter_by: Identifier | None = None


class Transition(Strict):
    from_: Scalar = Field(alias="from")
    to: Scalar


class UpdateTool(ToolBase):
    """Takes the key, and the new value unless `value` fixes it; returns the updated record."""

    kind: Literal["update"]
    field: Identifier
    value: Scalar | None = Field(default=None, description="Always set this value (the tool then takes only the key).")
    values: list[Scalar] | None = Field(
        default=None, min_length=1, description="Values the agent may choose; default: the field's enum."
    )
    transitions: list[Transition] | None = Field(
        default=None, min_length=1, description="If given, the only changes allowed (anything else is refused)."
    )


class CreateTool(ToolBase):
    """Takes every field (those with defaults optional); returns the new record."""

    kind: Literal["create"]
    key_prefix: str | None = Field(
        default=None, max_length=20, description="Generate keys `<prefix><n>` instead of taking the key as an argument."
    )


class DeleteTool(ToolBase):
    """Takes the key; returns the removed record."""

    kind: Literal["delete"]


class TransferTool(ToolBase):
    """Takes `from_<key>`, `to_<key>` and a positive `amount`; returns both records after the move."""

    kind: Literal["transfer"]
    field: Identifier
    minimum: float = Field(default=0.0, description="The source's field may not go below this.")


ToolDefinition = Annotated[
    LookupTool | SearchTool | ListTool | UpdateTool | CreateTool | DeleteTool | TransferTool,
    Field(discriminator="kind"),
]
KINDS = ("lookup", "search", "list", "update", "create", "delete", "transfer")


class PlannedCall(Strict):
    tool: Identifier
    arguments: dict[str, JsonValue] = Field(default_factory=dict)


class Question(Strict):
    """The task asks for this field of this record, as it is after the plan."""

    table: Identifier
    key: str = Field(min_length=1)
    field: Identifier


class TaskSpec(Strict):
    instruction: Prose = Field(description="What the agent is asked to do.")
    hint: Prose = Field(description="Privileged help for hinted plays; must not give away ids or answers.")
    plan: list[PlannedCall] = Field(description="The reference solution: it must succeed and score 1.0.")
    question: Question | None = None
    untouched: list[RecordRef] = Field(default_factory=list, description="Records whose change is a harm.")


class Spec(Strict):
    """One toolworld: tables (the hidden state), tools over them, and one task with its reference plan."""

    spec_version: Literal[1]
    name: Identifier
    description: OneLine
    max_steps: int = Field(default=30, ge=2, le=100)
    tables: list[TableSpec] = Field(min_length=1)
    tools: list[ToolDefinition] = Field(min_length=1)
    task: TaskSpec

    def table(self, name: str) -> TableSpec | None:
        return next((table for table in self.tables if table.name == name), None)


# -- errors -----------------------------------------------------------------------------------------


class SpecProblem(BaseModel):
    path: str
    problem: str

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}" if self.path else self.problem


class SpecError(ValueError):
    """A spec that cannot become a world; each problem names its JSON path (`tools[2].table`)."""

    def __init__(self, problems: Sequence[SpecProblem]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(str(problem) for problem in self.problems))


def json_path(*parts: str | int) -> str:
    """`tables[0].fields.title`, from the keys and indexes that lead there."""
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.isidentifier():
            path += f".{part}" if path else part
        else:
            path += f"[{json.dumps(part)}]"
    return path


def _structure_problems(error: ValidationError, document: object) -> list[SpecProblem]:
    """Pydantic's errors, their locations walked through the document so union tags drop out of the path."""
    problems: dict[str, SpecProblem] = {}
    for detail in error.errors(include_url=False):
        parts: list[str | int] = []
        node, loc = document, list(detail["loc"])
        for index, part in enumerate(loc):
            if part == "[key]":  # the key of a dict entry failed, not its value
                detail = {**detail, "msg": f"as a name: {detail['msg']}"}
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                parts.append(part)
                node = node[part]
            elif isinstance(node, dict) and isinstance(part, str) and (part in node or index == len(loc) - 1):
                parts.append(part)
                node = node.get(part)
        problem = _wording(detail)
        if detail["type"] in ("union_tag_invalid", "union_tag_not_found"):
            parts.append("kind")
        path = json_path(*parts)
        problems.setdefault(path, SpecProblem(path=path, problem=problem))
    return list(problems.values())


def _wording(detail: Any) -> str:
    kind = detail["type"]
    if kind == "missing":
        return "required, but missing"
    if kind == "extra_forbidden":
        return "not a key this format has"
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        return f"expected one of: {', '.join(KINDS)}"
    message = str(detail["msg"]).removeprefix("Value error, ")
    shown = json.dumps(detail["input"], default=str)
    return f"{message} (got {shown[:80]})"


# -- reading a spec ---------------------------------------------------------------------------------


def parse_spec(document: str | bytes | Mapping[str, Any]) -> Spec:
    """A spec from JSON text or a parsed document, checked in full; raises `SpecError`."""
    if isinstance(document, str | bytes):
        try:
            document = json.loads(document)
        except json.JSONDecodeError as error:
            raise SpecError([SpecProblem(path="", problem=f"not JSON: {error}")]) from None
    if not isinstance(document, Mapping):
        raise SpecError([SpecProblem(path="", problem="a spec is a JSON object")])
    try:
        spec = Spec.model_validate(document)
    except ValidationError as error:
        raise SpecError(_structure_problems(error, dict(document))) from None
    check_spec(spec)
    return spec


def load_spec(path: Path) -> Spec:
    """The spec in a `.json` file; raises `SpecError` (unreadable files included)."""
    try:
        text = path.read_text()
    except OSError as error:
        raise SpecError([SpecProblem(path="", problem=f"cannot read {path}: {error.strerror}")]) from None
    return parse_spec(text)


def spec_schema() -> dict[str, Any]:
    """The published JSON Schema (draft 2020-12) of the spec format."""
    schema = Spec.model_json_schema(schema_generator=QuietSchema)
    return {"$schema": JSON_SCHEMA_DIALECT, "$id": f"urn:spadework:toolworld-spec:{SPEC_VERSION}", **schema}


# -- the rules between parts -----------------------------------------------------------------------

RESERVED = frozenset(name for name in dir(BaseModel) if not name.startswith("_")) | frozenset(keyword.kwlist)


def check_spec(spec: Spec) -> None:
    """Raise `SpecError` listing every reference to a missing name and every value that breaks its field."""
    problems = list(_table_problems(spec)) + list(_tool_problems(spec)) + list(_task_problems(spec))
    if problems:
        raise SpecError(problems)


def value_problem(field: FieldSpec, value: Scalar) -> str | None:
    """What is wrong with `value` for `field`, or None when it fits the type and the enum."""
    fits = {
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
    }[field.type]
    if not fits:
        expected = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false"}
        return f"expected {expected[field.type]}, got {json.dumps(value)}"
    if field.enum is not None and not is_one_of(value, field.enum):
        return f"{json.dumps(value)} is not one of the allowed values: {_listed(field.enum)}"
    return None


def is_one_of(value: Scalar, allowed: Sequence[Scalar]) -> bool:
    """`value in allowed`, except that true is not 1: Python's `True == 1` must not pass a boolean for a number."""
    return any(value == option and isinstance(value, bool) == isinstance(option, bool) for option in allowed)


def _listed(values: Sequence[Scalar]) -> str:
    return ", ".join(json.dumps(value) for value in values)


def _problem(problem: str, *path: str | int) -> SpecProblem:
    return SpecProblem(path=json_path(*path), problem=problem)


def _table_problems(spec: Spec) -> Iterator[SpecProblem]:
    seen: dict[str, int] = {}
    for t, table in enumerate(spec.tables):
        if table.name in seen:
            yield _problem(f"a table named {table.name!r} is already defined (tables[{seen[table.name]}])", "tables", t)
        seen.setdefault(table.name, t)
        for name in [table.name, *table.fields]:
            if name in RESERVED:
                where = ("tables", t, "name") if name == table.name else ("tables", t, "fields", name)
                yield _problem(f"{name!r} is reserved (a Python keyword or pydantic attribute); rename it", *where)
        key_field = table.fields.get(table.key)
        if key_field is None:
            yield _problem(
                f"no field named {table.key!r}; the fields are: {', '.join(table.fields)}", "tables", t, "key"
            )
        elif key_field.type != "string":
            yield _problem("the key field must be a string field", "tables", t, "fields", table.key, "type")
        elif key_field.default is not None:
            yield _problem("the key field cannot have a default", "tables", t, "fields", table.key, "default")
        for name, field in table.fields.items():
            for v, value in enumerate(field.enum or []):
                if (problem := value_problem(field.model_copy(update={"enum": None}), value)) is not None:
                    yield _problem(problem, "tables", t, "fields", name, "enum", v)
            if field.default is not None and (problem := value_problem(field, field.default)) is not None:
                yield _problem(problem, "tables", t, "fields", name, "default")
        yield from _record_problems(table, t)


def zero_value(field: FieldSpec) -> Scalar:
    """What a record holds in a field it leaves out: the default, else the enum's first value, else the type's zero
    (a small author often leaves fields out; a missing value is a fact of the world, not a broken spec)."""
    if field.default is not None:
        return field.default
    if field.enum:
        return field.enum[0]
    zeros: dict[str, Scalar] = {"string": "", "integer": 0, "number": 0.0, "boolean": False}
    return zeros[field.type]


def _record_problems(table: TableSpec, t: int) -> Iterator[SpecProblem]:
    keys: dict[str, int] = {}
    for r, record in enumerate(table.records):
        where = ("tables", t, "records", r)
        for name, value in record.items():
            field = table.fields.get(name)
            if field is None:
                known = ", ".join(table.fields)
                yield _problem(
                    f"no field named {name!r} in table {table.name!r}; the fields are: {known}", *where, name
                )
            elif (problem := value_problem(field, value)) is not None:
                yield _problem(problem, *where, name)
        if table.key not in record:
            yield _problem("required, but missing (every record has its key)", *where, table.key)
        key = record.get(table.key)
        if isinstance(key, str):
            if not key.strip() or "/" in key:
                yield _problem("a key must be non-empty and contain no '/'", *where, table.key)
            elif key in keys:
                yield _problem(f"duplicate key {key!r} (also records[{keys[key]}])", *where, table.key)
            keys.setdefault(key, r)


def _tool_problems(spec: Spec) -> Iterator[SpecProblem]:
    seen: dict[str, int] = {}
    for i, tool in enumerate(spec.tools):
        if tool.name in seen:
            yield _problem(
                f"a tool named {tool.name!r} is already defined (tools[{seen[tool.name]}])", "tools", i, "name"
            )
        seen.setdefault(tool.name, i)
        table = spec.table(tool.table)
        if table is None:
            known = ", ".join(t.name for t in spec.tables)
            yield _problem(f"no table named {tool.table!r}; the tables are: {known}", "tools", i, "table")
            continue
        yield from _kind_problems(tool, table, i)


def _field(table: TableSpec, name: str, *path: str | int) -> tuple[FieldSpec | None, list[SpecProblem]]:
    field = table.fields.get(name)
    if field is None:
        known = ", ".join(table.fields)
        return None, [_problem(f"no field named {name!r} in table {table.name!r}; the fields are: {known}", *path)]
    return field, []


def _kind_problems(tool: ToolDefinition, table: TableSpec, i: int) -> Iterator[SpecProblem]:
    if isinstance(tool, SearchTool):
        field, problems = _field(table, tool.field, "tools", i, "field")
        yield from problems
        if field is not None and field.type != "string":
            yield _problem(f"search needs a string field; {tool.field!r} is {field.type}", "tools", i, "field")
    elif isinstance(tool, ListTool) and tool.filter_by is not None:
        yield from _field(table, tool.filter_by, "tools", i, "filter_by")[1]
    elif isinstance(tool, TransferTool):
        field, problems = _field(table, tool.field, "tools", i, "field")
        yield from problems
        if field is not None and field.type not in ("integer", "number"):
            yield _problem(f"transfer needs a numeric field; {tool.field!r} is {field.type}", "tools", i, "field")
    elif isinstance(tool, UpdateTool):
        yield from _update_problems(tool, table, i)
    elif isinstance(tool, CreateTool) and tool.key_prefix is not None:
        key = table.fields.get(table.key)
        if key is not None and key.enum is not None:
            problem = f"key_prefix makes up keys, but {table.key!r} only takes the values of its enum"
            yield _problem(problem, "tools", i, "key_prefix")


def allowed_values(tool: UpdateTool, field: FieldSpec) -> list[Scalar] | None:
    """What an update may set: its own `values`, else the field's enum, else true/false; None if unbounded."""
    if tool.values is not None:
        return list(tool.values)
    if field.enum is not None:
        return list(field.enum)
    return [True, False] if field.type == "boolean" else None


def _update_problems(tool: UpdateTool, table: TableSpec, i: int) -> Iterator[SpecProblem]:
    field, problems = _field(table, tool.field, "tools", i, "field")
    yield from problems
    if field is None:
        return
    if tool.field == table.key:
        yield _problem("the key field cannot be updated", "tools", i, "field")
    for v, value in enumerate(tool.values or []):
        if (problem := value_problem(field, value)) is not None:
            yield _problem(problem, "tools", i, "values", v)
    allowed = allowed_values(tool, field)
    if allowed is None:
        yield _problem(f"{tool.field!r} is a free {field.type}; list the values it may be set to", "tools", i, "values")
        return
    if tool.value is not None and not is_one_of(tool.value, allowed):
        yield _problem(f"{json.dumps(tool.value)} is not one of: {_listed(allowed)}", "tools", i, "value")
    for n, transition in enumerate(tool.transitions or []):
        if (problem := value_problem(field, transition.from_)) is not None:
            yield _problem(problem, "tools", i, "transitions", n, "from")
        if not is_one_of(transition.to, allowed):
            yield _problem(
                f"{json.dumps(transition.to)} is not one of: {_listed(allowed)}", "tools", i, "transitions", n, "to"
            )


def _task_problems(spec: Spec) -> Iterator[SpecProblem]:
    task, tools = spec.task, [tool.name for tool in spec.tools]
    for p, planned in enumerate(task.plan):
        if planned.tool not in tools:
            yield _problem(
                f"no tool named {planned.tool!r}; the tools are: {', '.join(tools)}", "task", "plan", p, "tool"
            )
    if len(task.plan) + 1 > spec.max_steps:
        yield _problem(f"{len(task.plan)} calls and a finish do not fit in max_steps={spec.max_steps}", "task", "plan")
    if task.question is not None:
        table = spec.table(task.question.table)
        if table is None:
            yield _problem(f"no table named {task.question.table!r}", "task", "question", "table")
        else:
            yield from _field(table, task.question.field, "task", "question", "field")[1]
    for u, ref in enumerate(task.untouched):
        name, _, key = ref.partition("/")
        table = spec.table(name)
        if table is None:
            yield _problem(f"no table named {name!r}", "task", "untouched", u)
        elif key not in {record.get(table.key) for record in table.records}:
            yield _problem(f"no record {key!r} in table {name!r}", "task", "untouched", u)
