"""The trusted compiler: a checked `Spec` becomes an ordinary `ToolWorld` subclass.

Everything a hand-written world writes is derived here: each table a pydantic record model, each tool a
`ToolSpec` whose argument schema follows from its kind and table, and the grader from the reference plan.
The plan is run once at compile time on a copy of the initial state, and the difference between the two
states is the task: each changed field, created record and deleted record is one goal, the question's
answer another, and any other change a harm. A plan that is refused, or that changes nothing and asks
nothing (so doing nothing would score 1.0), is a `SpecError` before any episode runs.

Every seed gives the same task; the seed only shuffles the order in which each table's records are
stored (and so listed and searched), so a policy cannot learn positions instead of reading results.
"""

from __future__ import annotations

import json
import math
import random
import re
import types
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model

from toolworlds.core import Brief, Finish, ToolCall, ToolError, ToolWorld
from toolworlds.scoring import Scorecard, copy_of, mentions, mentions_amount
from toolworlds.spec import (
    CreateTool,
    DeleteTool,
    FieldSpec,
    ListTool,
    LookupTool,
    Scalar,
    SearchTool,
    Spec,
    SpecError,
    SpecProblem,
    TableSpec,
    ToolDefinition,
    TransferTool,
    UpdateTool,
    allowed_values,
    check_spec,
    load_spec,
    zero_value,
)
from toolworlds.tool import ToolSpec, listing, problems_in

Values = dict[str, dict[str, dict[str, Any]]]  # table -> key -> field -> value: a state as plain data
ToolT = TypeVar("ToolT", bound=ToolDefinition)
Key = Annotated[str, Field(min_length=1, max_length=200)]
NewKey = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[^/]*[^/\s][^/]*$")]
Text = Annotated[str, Field(max_length=200)]
PYTHON_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool}


def python_type(field: FieldSpec) -> Any:
    """The annotation of a field: its scalar type, or a `Literal` of its enum (so schemas list the values)."""
    if field.enum is None:
        return PYTHON_TYPES[field.type]
    return _literal(field, field.enum)


def _literal(field: FieldSpec, values: list[Scalar]) -> Any:
    cast_to = PYTHON_TYPES[field.type]
    return Literal.__getitem__(tuple(cast_to(value) for value in values))


def _shown(value: object) -> str:
    return json.dumps(value)


# -- operations: what each kind of tool takes, returns and does ---------------------------------------


@dataclass(frozen=True)
class Operation(ABC, Generic[ToolT]):
    """One tool's behaviour over one table."""

    tool: ToolT
    table: TableSpec
    record: type[BaseModel]

    @abstractmethod
    def arguments(self) -> dict[str, Any]:
        """Its argument fields, as `create_model` takes them."""

    @abstractmethod
    def result(self) -> Any:
        """The type of what it returns."""

    @abstractmethod
    def apply(self, state: BaseModel, arguments: dict[str, Any]) -> object:
        """Do it to `state`, or raise `ToolError` the way a real service refuses."""

    def records(self, state: BaseModel) -> dict[str, BaseModel]:
        return cast(dict[str, BaseModel], getattr(state, self.table.name))

    def find(self, state: BaseModel, key: str) -> BaseModel:
        record = self.records(state).get(key)
        if record is None:
            raise ToolError("not_found", f"no {self.table.name} record with {self.table.key} {key!r}")
        return record

    def key_argument(self, role: str = "the record") -> tuple[Any, Any]:
        """A record's key; with the table's `key_choices`, one of its records' keys as the spec lists them."""
        keys = tuple(self.table.keys())
        kind: Any = Literal[keys] if self.table.key_choices and keys else Key
        return kind, Field(description=f"The {self.table.key} of {role} ({self.table.name}).")

    def field(self, name: str) -> FieldSpec:
        return self.table.fields[name]

    def described(self, name: str, fallback: str) -> str:
        return self.field(name).description or fallback


class Lookup(Operation[LookupTool]):
    def arguments(self) -> dict[str, Any]:
        return {self.table.key: self.key_argument()}

    def result(self) -> Any:
        return self.record

    def apply(self, state: BaseModel, arguments: dict[str, Any]) -> object:
        return self.find(state, arguments[self.table.key])


class Search(Operation[SearchTool]):
    def arguments(self) -> dict[str, Any]:
        how = "part of" if self.tool.match == "contains" else "exactly"
        return {self.tool.field: (Text, Field(description=f"{how} the {self.tool.field}, any case."))}

    def result(self) -> Any:
        return types.GenericAlias(list, (self.record,))

    def apply(self, state: BaseModel, arguments: dict[str, Any]) -> object:
        needle = str(arguments[self.tool.field]).strip().lower()
        if not needle:
            raise ToolError("invalid_query", "the search text must not be empty")

        def matches(record: BaseModel) -> bool:
            text = str(getattr(record, self.tool.field)).strip().lower()
            return needle in text if self.tool.match == "contains" else needle == text

        return [record for record in self.records(state).values() if matches(record)]


class Listing(Operation[ListTool]):
    def arguments(self) -> dict[str, Any]:
        name = self.tool.filter_by
        if name is None:
            return {}
        return {name: (python_type(self.field(name)), Field(description=self.described(name, f"Only this {name}.")))}

    def result(self) -> Any:
        return types.GenericAlias(list, (self.record,))

    def apply(self, state: BaseModel, arguments: dict[str, Any]) -> object:
        records = list(self.records(state).values())
        name = self.tool.filter_by
        return records if name is None else [r for r in records if same_value(getattr(r, name), arguments[name])]


class Update(Operation[UpdateTool]):
    def arguments(self) -> dict[str, Any]:
        fields = {self.table.key: self.key_argument()}
        if self.tool.value is None:
            choices = _literal(self.field(self.tool.field), self.allowed)
            fields[self.tool.field] = (choices, Field(description=self.described(self.tool.field, "The new value.")))
        return fields

    @property
    def allowed(self) -> list[Scalar]:
        return allowed_values(self.tool, self.field(self.tool.field)) or []

    def result(self) -> Any:
        return self.record

    def apply(self, state: BaseModel, arguments: dict[str, Any]) -> object:
        key, name = arguments[self.table.key], self.tool.field
        record = self.find(state, key)
        new = self.tool.value if self.tool.value is not None else arguments[name]
        current = getattr(record, name)
        if self.tool.transitions is not None:
            onward = [t.to for t in self.tool.transitions if same_value(t.from_, current)]
            if not any(same_value(to, new) for to in onward):
                can = ", ".join(_shown(to) for to in onward) or "nothing"
                message = f"{self.table.name} {key} has {name} {_shown(current)} and cannot change to {_shown(new)}"
                raise ToolError("illegal_transition", f"{message}; it can change to: {can}")
        setattr(record, name, PYTHON_TYPES[self.field(name).type](new))
        return record


class Create(Operation[CreateTool]):
    def arguments(self) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        if self.tool.key_prefix is None:
            fields[self.table.key] = (NewKey, Field(description=f"The new record's {self.table.key}."))
        for name, field in self.table.fields.items():
            if name != self.table.key:
                default = ... if field.default is None else field.default
                fields[name] = (python_type(field), Field(default, description=self.described(name, f"Its {name}.")))
        return fields

    def result(self) -> Any:
        return self.record

    def apply(self, state: BaseModel, arguments: dict[str, Any]) -> object:
        records = self.records(state)
        key = self.new_key(records) if self.tool.key_prefix is not None else arguments[self.table.key]
        if key in records:
            raise ToolError("already_exists", f"{self.table.name} already has a record with {self.table.key} {key!r}")
        try:
            records[key] = self.record.model_validate({**arguments, self.table.key: key})
        except ValidationError as error:  # a key outside the key field's enum: the only check arguments miss
            problems = listing(problems_in(error))
            raise ToolError("invalid_record", f"not a valid {self.table.name} record: {problems}") from None
        return records[key]

    def new_key(self, records: dict[str, BaseModel]) -> str:
        """`<prefix><n>` for the first free n from the table's size up: the same for any record order."""
        number = len(records) + 1
        while f"{self.tool.key_prefix}{number}" in records:
            number += 1
        return f"{self.tool.key_prefix}{number}"


class Delete(Operation[DeleteTool]):
    def arguments(self) -> dict[str, Any]:
        return {self.table.key: self.key_argument("the record to remove")}

    def result(self) -> Any:
        return self.record

    def apply(self, state: BaseModel, arguments: dict[str, Any]) -> object:
        key = arguments[self.table.key]
        self.find(state, key)
        return self.records(state).pop(key)


class Transfer(Operation[TransferTool]):
    @property
    def number(self) -> type:
        return PYTHON_TYPES[self.field(self.tool.field).type]

    def arguments(self) -> dict[str, Any]:
        key, name = self.table.key, self.tool.field
        return {
            f"from_{key}": self.key_argument(f"the record the {name} leaves"),
            f"to_{key}": self.key_argument("the record that receives it"),
            "amount": (self.number, Field(gt=0, le=1e12, description=f"How much {name} to move; more than 0.")),
        }

    def result(self) -> Any:
        return self.receipt

    @cached_property
    def receipt(self) -> type[BaseModel]:
        fields: dict[str, Any] = {
            "amount": (self.number, ...),
            "source": (self.record, ...),
            "target": (self.record, ...),
        }
        return create_model(f"{self.tool.name}_result", **fields)

    def apply(self, state: BaseModel, arguments: dict[str, Any]) -> object:
        key, name, amount = self.table.key, self.tool.field, arguments["amount"]
        source, target = self.find(state, arguments[f"from_{key}"]), self.find(state, arguments[f"to_{key}"])
        if source is target:
            raise ToolError("same_record", f"from_{key} and to_{key} are the same {self.table.name} record")
        have, left = getattr(source, name), _tidy(getattr(source, name) - amount)
        if left < self.tool.minimum - 1e-9:
            floor = f"{self.tool.minimum:g}"
            message = f"{getattr(source, key)} has {name} {have}: moving {amount} would leave less than {floor}"
            raise ToolError("insufficient_funds", message)
        setattr(source, name, left)
        setattr(target, name, _tidy(getattr(target, name) + amount))
        return self.receipt(amount=amount, source=source, target=target)


KIND_OPERATIONS: dict[type, type[Operation[Any]]] = {
    LookupTool: Lookup, SearchTool: Search, ListTool: Listing, UpdateTool: Update,
    CreateTool: Create, DeleteTool: Delete, TransferTool: Transfer,
}  # fmt: skip


def _tidy(value: Any) -> Any:
    """Sums of floats rounded back to what a person wrote (0.1 + 0.2 is 0.3 here); integers stay exact."""
    return round(value, 9) if isinstance(value, float) else value


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def same_value(a: object, b: object) -> bool:
    """Equal as the JSON reads: numbers to a millionth (sums of floats drift), and true is not 1."""
    if _is_number(a) and _is_number(b):
        return math.isclose(cast(float, a), cast(float, b), abs_tol=1e-6)
    return a == b and isinstance(a, bool) == isinstance(b, bool)


# -- grading: what the reference plan changes is what the task asks --------------------------------


Change = tuple[str, str, str, Any]  # table, key, field, the value the plan leaves


@dataclass(frozen=True)
class Expectations:
    """The goals and harms of a spec's task, read once off the initial state and the plan's end state."""

    initial: Values
    changes: list[Change]
    deletions: list[tuple[str, str]]
    creations: list[tuple[str, dict[str, Any]]]
    generated_keys: dict[str, str]  # table -> its key field, where new records get keys the agent cannot choose
    answer: Scalar | None
    answer_type: str | None
    untouched: list[tuple[str, str]]

    @classmethod
    def of_plan(cls, spec: Spec, initial: Values, planned: Values) -> Expectations:
        """Every field, creation and deletion that tells `planned` from `initial` is a goal."""
        changes = [
            (table, key, name, value)
            for table, records in planned.items()
            for key, record in records.items()
            if key in initial[table]
            for name, value in record.items()
            if not same_value(value, initial[table][key][name])
        ]
        deletions = [(table, key) for table, records in initial.items() for key in records if key not in planned[table]]
        creations = [(t, r) for t, records in planned.items() for key, r in records.items() if key not in initial[t]]
        generated = {tool.table: cast(TableSpec, spec.table(tool.table)).key for tool in spec.tools
                     if isinstance(tool, CreateTool) and tool.key_prefix is not None}  # fmt: skip
        question, answer, answer_type = spec.task.question, None, None
        if question is not None:
            answer = planned[question.table].get(question.key, {}).get(question.field)
            answer_type = cast(TableSpec, spec.table(question.table)).fields[question.field].type
        untouched = [(table, key) for table, _, key in (ref.partition("/") for ref in spec.task.untouched)]
        return cls(initial, changes, deletions, creations, generated, answer, answer_type, untouched)

    @property
    def goal_count(self) -> int:
        return len(self.changes) + len(self.deletions) + len(self.creations) + (self.answer_type is not None)

    def answer_text(self) -> str | None:
        """How the reference play words the answer: what the matcher for the field's type accepts."""
        value = self.answer
        if value is None:
            return None
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, float):
            return format(value, "f").rstrip("0").rstrip(".")
        return str(value)

    def grade(self, state: BaseModel, answer: str | None) -> Scorecard:
        now: Values = state.model_dump()
        card = Scorecard()
        for table, key, name, value in self.changes:
            record = now[table].get(key)
            card.goal(f"{table}/{key} {name} set", record is not None and same_value(record[name], value))
        for table, key in self.deletions:
            card.goal(f"{table}/{key} deleted", key not in now[table])
        unasked = {
            table: [r for key, r in records.items() if key not in self.initial[table]] for table, records in now.items()
        }
        for table, wanted in self.creations:
            card.goal(f"{table} record created", self._take(unasked[table], wanted, self.generated_keys.get(table)))
        if self.answer_type is not None:
            card.goal("answered the question", self.answered(answer))
        card.harm("changed records the task did not ask for", self._collateral(now))
        card.harm("created records the task did not ask for", any(unasked.values()))
        for table, key in self.untouched:
            card.harm(f"changed {table}/{key}", now[table].get(key) != self.initial[table][key])
        return card

    def answered(self, answer: str | None) -> bool:
        """The tolerant matchers the reference worlds use: the amount to the cent, the text ignoring case."""
        expected = self.answer
        if self.answer_type == "boolean":
            words = set(re.findall(r"[a-z]+", (answer or "").lower()))
            yes, no = bool(words & {"yes", "true"}), bool(words & {"no", "not", "false"})
            return yes != no and yes == expected
        if _is_number(expected):
            return mentions_amount(answer, float(cast(float, expected)))
        return mentions(answer, str(expected))

    @staticmethod
    def _take(candidates: list[dict[str, Any]], wanted: dict[str, Any], ignored: str | None) -> bool:
        """Remove and report the first new record that matches `wanted` (on every field but a generated key)."""
        for index, record in enumerate(candidates):
            if all(same_value(record[name], value) for name, value in wanted.items() if name != ignored):
                del candidates[index]
                return True
        return False

    def _collateral(self, now: Values) -> bool:
        """Any edit or removal of an existing record the plan leaves alone, field by field."""
        planned = {(table, key, name) for table, key, name, _ in self.changes}
        deleted = set(self.deletions)
        for table, records in self.initial.items():
            for key, record in records.items():
                current = now[table].get(key)
                if current is None:
                    if (table, key) not in deleted:
                        return True
                    continue
                if any((table, key, n) not in planned and not same_value(current[n], v) for n, v in record.items()):
                    return True
        return False


# -- the world class ------------------------------------------------------------------------------


class SpecWorld(ToolWorld[BaseModel]):
    """A world compiled from a spec; the compiler fills in the class attributes and the tools."""

    spec: ClassVar[Spec]
    initial: ClassVar[BaseModel]
    expectations: ClassVar[Expectations]

    def build(self, rng: random.Random) -> Brief:
        shuffled: Values = {}
        for table, records in self.initial.model_dump().items():
            keys = list(records)
            rng.shuffle(keys)
            shuffled[table] = {key: records[key] for key in keys}
        self.state = type(self.initial).model_validate(shuffled)
        return Brief(instruction=self.spec.task.instruction, hint=self.spec.task.hint, variant="spec")

    def grade(self) -> Scorecard:
        return self.expectations.grade(self.state, self.answer)

    def solution(self) -> list[ToolCall | Finish]:
        calls: list[ToolCall | Finish] = [
            ToolCall(name=c.tool, arguments=dict(c.arguments)) for c in self.spec.task.plan
        ]
        return [*calls, Finish(answer=self.expectations.answer_text())]


@dataclass(frozen=True)
class CompiledTool:
    spec: ToolSpec
    operation: Operation[Any]


def compile_spec(spec: Spec) -> type[SpecWorld]:
    """The `ToolWorld` class a spec describes; raises `SpecError` if the spec or its plan is unsound."""
    check_spec(spec)
    initial, tools = _state_and_tools(spec)
    planned = _run_plan(spec, tools, initial)
    expectations = _expectations(spec, Expectations.of_plan(spec, initial.model_dump(), planned.model_dump()))
    card = expectations.grade(planned, expectations.answer_text())
    if card.score < 1.0:  # a safety net: by construction the plan's own end state meets every goal
        problem = f"the reference plan scores {card.score}, not 1.0 ({card.summary()})"
        raise SpecError([SpecProblem(path="task.plan", problem=problem)])

    namespace: dict[str, Any] = {
        "__doc__": spec.description,
        "__module__": __name__,
        "name": spec.name,
        "description": spec.description,
        "max_steps": spec.max_steps,
        "spec": spec,
        "initial": initial,
        "expectations": expectations,
        "tool_specs": {name: compiled.spec for name, compiled in tools.items()},
        **{compiled.spec.method_name: _method(compiled.operation) for compiled in tools.values()},
    }
    class_name = "".join(part.title() for part in spec.name.split("_")) + "SpecWorld"
    return cast(type[SpecWorld], types.new_class(class_name, (SpecWorld,), exec_body=lambda ns: ns.update(namespace)))


def _state_and_tools(spec: Spec) -> tuple[BaseModel, dict[str, CompiledTool]]:
    """The initial state (a model with one `key -> record` map per table) and every tool, compiled."""
    records = {table.name: _record_model(table) for table in spec.tables}
    state_fields: dict[str, Any] = {
        name: (types.GenericAlias(dict, (str, model)), ...) for name, model in records.items()
    }
    state_model = create_model(f"{spec.name}_state", **state_fields)
    initial = state_model.model_validate({t.name: {r[t.key]: _complete(t, r) for r in t.records} for t in spec.tables})
    return initial, {tool.name: _compile_tool(tool, spec, records) for tool in spec.tools}


def state_after_plan(spec: Spec) -> Values:
    """The state `spec`'s plan leaves, as plain data, for a spec whose task may not be finished yet: what a
    staged designer reads to offer its next call only the records that exist then. Raises `SpecError` if a
    call is refused; does not check the rest of the spec (the gates do)."""
    initial, tools = _state_and_tools(spec)
    state: Values = _run_plan(spec, tools, initial).model_dump()
    return state


def compile_spec_file(path: Path) -> type[SpecWorld]:
    """Load and compile a `.json` spec (trusted: it runs in this process, but a spec holds no code)."""
    return compile_spec(load_spec(path))


def _complete(table: TableSpec, record: dict[str, Any]) -> dict[str, Any]:
    """A spec's record with the fields it left out at their zero values."""
    return {**{name: zero_value(field) for name, field in table.fields.items()}, **record}


def _record_model(table: TableSpec) -> type[BaseModel]:
    fields: dict[str, Any] = {
        name: (
            python_type(field),
            Field(... if field.default is None else field.default, description=field.description or None),
        )
        for name, field in table.fields.items()
    }
    return create_model(f"{table.name}_record", __config__=ConfigDict(extra="forbid"), **fields)


def tool_contract(tool: ToolDefinition, spec: Spec) -> ToolSpec:
    """The contract (argument and result schemas) `tool` has in the world `spec` compiles to, with no plan run:
    what a staged designer needs to write calls of a tool before the task exists."""
    table = spec.table(tool.table)
    if table is None:
        raise SpecError([SpecProblem(path="tools", problem=f"no table named {tool.table!r}")])
    return _compile_tool(tool, spec, {table.name: _record_model(table)}).spec


def _compile_tool(tool: ToolDefinition, spec: Spec, records: dict[str, type[BaseModel]]) -> CompiledTool:
    table = spec.table(tool.table)
    assert table is not None  # check_spec found every table a tool names
    operation = KIND_OPERATIONS[type(tool)](tool, table, records[table.name])
    arguments = create_model(f"{tool.name}_arguments", __config__=ConfigDict(extra="forbid"), **operation.arguments())
    returns: TypeAdapter[Any] = TypeAdapter(operation.result())
    method_name = f"_spec_tool_{tool.name}"  # never a ToolWorld attribute, whatever the tool is called
    return CompiledTool(ToolSpec(tool.name, tool.description, arguments, returns, method_name), operation)


def _method(operation: Operation[Any]) -> Callable[..., object]:
    def run(self: SpecWorld, **arguments: Any) -> object:
        return operation.apply(self.state, arguments)

    return run


def _run_plan(spec: Spec, tools: dict[str, CompiledTool], initial: BaseModel) -> BaseModel:
    """The state the reference plan leaves; a call it makes that is invalid or refused rejects the spec."""
    state = copy_of(initial)
    for index, planned in enumerate(spec.task.plan):
        compiled = tools[planned.tool]
        arguments, problems = compiled.spec.validate(planned.arguments)
        if arguments is None:
            problem = f"call {index} ({planned.tool}) has invalid arguments: {listing(problems)}"
            raise SpecError([SpecProblem(path=f"task.plan[{index}].arguments", problem=problem)])
        try:
            compiled.operation.apply(state, dict(arguments))
        except ToolError as refusal:
            problem = f"call {index} ({planned.tool}) is refused: {refusal.code}: {refusal.message}"
            raise SpecError([SpecProblem(path=f"task.plan[{index}]", problem=problem)]) from None
    return state


def _expectations(spec: Spec, expectations: Expectations) -> Expectations:
    """`expectations`, unless the task they describe is unanswerable, contradictory or already done."""
    task, problems = spec.task, []
    if task.question is not None:
        where = f"{task.question.table}/{task.question.key}"
        if expectations.answer is None:
            problems.append(SpecProblem(path="task.question.key", problem=f"no record {where} after the plan"))
        elif isinstance(expectations.answer, str) and not expectations.answer.strip():
            problems.append(SpecProblem(path="task.question.field", problem=f"{where} has an empty answer"))
    for index, (table, key) in enumerate(expectations.untouched):
        if any(change[:2] == (table, key) for change in expectations.changes) or (table, key) in expectations.deletions:
            problems.append(
                SpecProblem(path=f"task.untouched[{index}]", problem=f"the plan itself changes {table}/{key}")
            )
    if not problems and not expectations.goal_count:
        problem = "the plan changes nothing and there is no question, so doing nothing would already score 1.0"
        problems.append(SpecProblem(path="task", problem=problem))
    if problems:
        raise SpecError(problems)
    return expectations
