"""A spec written in stages, each sampled under a grammar built from what the earlier stages wrote.

One grammar for the whole spec holds its form but not its references: the embedded designer named fields,
tables and tools that do not exist (18 of 43 failed specs), repeated names and keys, wrote plans that
could not run, and copied the prompt's example spec in all 21 of its valid ones. Here the reply is sampled
stage by stage, one request each, and each stage may only name what is already written:

    table    the spec's header (the first time), then a table's name (new, not reserved) and its key
             field, a plain string
    field    another field of the table: a new name, a type, and an enum or a default of that type
    records  the table's key (one of its plain string fields) and its first record, typed by its fields
    record   another record, its key none of the written ones; after a record: another record, another
             table, or the end of the tables
    tool     one tool over a written table, named anew: each kind's `field` is the table's own and of the
             type the kind needs, an update's values are its field's; the tools end only once one of them
             can change a record as written (a transfer with an amount to move, an update whose transitions
             start where a record is)
    task     instruction and hint, then the plan's first call
    call     another call: a written tool, its arguments as its compiled schema admits them in the state the
             calls before leave (existing records by key, updates along open transitions, transfers between
             two records of no more than the source holds); the plan ends in a change, or asks a question
             about an existing record (`plans="change"`: it must change something)
    end      records that must stay untouched, among those the plan does not name

With a `vocabulary` (`designer.vocabulary=document`) every name a table or field takes is a word of the
document, and every value typed anywhere (a record's, an update's listed values, a planned create's, search's or list
filter's arguments) is one of its cells, by column where the field is named like one.

With `task_text="derived"` the brief offers the questions only (each with the instruction trusted code words
for it from the plan) and the hint is the plan's tools in order (`trainers.designer.task_text`): each a grammar
of one string per choice, so what the model still chooses there is the question and the untouched records.
With `tool_text="derived"` each tool option carries the name and description trusted code writes for its kind,
table and field (`task_text.tool_name`), so the model chooses which tools, not what they are called.

Each stage is told how many of the reply's tokens are left (`grammar(tokens_left)`), and offers another
field, record, table, tool or call only while they pay for it and for the cheapest way to the spec's end
(`SpecBudget.tokens`): a spec the model leaves open at the budget's end is JSON that never closes.

The text is JSON the spec format parses (keys in a fixed order; `max_steps` left at its default). What the
grammars do not hold (an answer that is empty, a hint that leaks nothing) the gates still judge. Every
sampled token stays the server's; the trainer rebuilds each stage's admitted sets from the grammar recorded
with its span (`TokenTrace.spans`). The grammars are written for both engines that read them: llama.cpp
samples under them, llguidance (the trainer's) must admit the same texts, so no `{0,0}` and no ambiguous
repetition (`(call ", "){0,2} change "]"` was refused by llguidance where llama.cpp sampled it).
"""

from __future__ import annotations

import dataclasses
import json
import re
import string
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from engine.call_grammar import json_literal, json_value
from engine.gbnf import CONTROL, CharSet, GrammarRules, literal
from toolworlds.spec import (
    RESERVED,
    FieldSpec,
    ListTool,
    PlannedCall,
    Question,
    SearchTool,
    Spec,
    SpecError,
    TableSpec,
    TaskSpec,
    ToolDefinition,
    TransferTool,
    UpdateTool,
    zero_value,
)
from toolworlds.spec_compile import same_value, state_after_plan, tool_contract
from trainers.designer.budget import SPEC_BUDGET, SpecBudget
from trainers.designer.task_text import (
    TaskText,
    derived_hint,
    derived_instruction,
    says,
    tool_description,
    tool_name,
)
from trainers.designer.vocabulary import Vocabulary

Stage = Literal["table", "field", "records", "record", "tool", "task", "call", "brief", "hint"]
# Which plans may end: "any" ends in a change or, reads alone, where a question can follow; "change" only once
# a call changed something (in six measured runs no read-only world's question was ever answered unaided).
PlanRule = Literal["any", "change"]
_CLOSE = '"], \\"instruction\\": \\"-\\", \\"hint\\": \\"-\\"}}"'  # a plan cut short: the spec still parses
_KEY_CHOICES = ', "key_choices": true'  # after a table's key, with `key_choices` (trusted code's, never sampled freely)
KEY_CHOICES_TOKENS = 7  # what it costs (SmolLM2's tokenizer), added to the records stage's cost
_AFTER_RECORD: dict[str, Stage] = {"]}]": "tool", "]}, ": "table", ", ": "record"}
CHANGING_KINDS = frozenset({"update", "create", "delete", "transfer"})
_TOOL = TypeAdapter[ToolDefinition](ToolDefinition)
TEXT = CharSet.but('"\\' + CONTROL)  # what a JSON string holds unescaped
FIRST = TEXT.without({" "})  # a text starts with a visible character (the format wants one)
_TEXT_CHAR, _FIRST_CHAR = TEXT.gbnf(), FIRST.gbnf()
UNQUOTED = TEXT.without({"'"})  # free text beside quoted values, and in a hint
_UNQUOTED = UNQUOTED.gbnf()
_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]*")
# A key is written into `table/key` references (no '/'), and names a record: it starts with a letter or a
# digit (`][` passed every gate as a record's name).
KEY, KEY_FIRST = TEXT.without({"/"}), FIRST.without(set(string.punctuation))
NAME, NAME_FIRST = CharSet(only=string.ascii_lowercase + string.digits + "_"), CharSet(only=string.ascii_lowercase)
_NUMBER = '"-"? ("0" | [1-9] [0-9]{0,9}) ("." [0-9]{1,4})?'
_SCALARS = {"integer": '"-"? ("0" | [1-9] [0-9]{0,9})', "number": _NUMBER, "boolean": '("true" | "false")'}


def _repeat(item: str, most: int, separator: str = '", "') -> str:
    """One to `most` of `item`, separated."""
    return item if most <= 1 else f"{item} ({separator} {item}){{0,{most - 1}}}"  # llguidance refuses `{0,0}`


def _choice(options: list[str]) -> str:
    return "(" + " | ".join(options) + ")"


def text_except(
    used: AbstractSet[str], first: CharSet, rest: CharSet, longest: int, rules: GrammarRules, quoted: bool = True
) -> str:
    """A text of a `first` then `rest` characters, at most `longest` of them, that is none of `used` (in
    JSON quotes unless `quoted` is false): a walk down the trie of the used texts, leaving it at any character
    no used text continues with, or ending where no used text ends."""
    tail = rest.gbnf()

    def node(prefix: str) -> str | None:
        """The rest of a text that starts with `prefix`; None where none can follow (a used text at its longest)."""
        options = []
        if prefix and prefix not in used:
            options.append('""')
        if len(prefix) < longest:
            after = {text[len(prefix)] for text in used if text.startswith(prefix) and len(text) > len(prefix)}
            for c in sorted(after):
                if (onward := node(prefix + c)) is not None:
                    options.append(f"{literal(c)} {onward}")
            free = (rest if prefix else first).without(after).gbnf()
            room = longest - len(prefix) - 1  # characters left after this one
            if free:
                options.append(f"{free} {tail}{{0,{room}}}" if room > 0 else free)
        return rules.add(_choice(options)) if options else None

    text = node("") or '""'
    return f'"\\"" {text} "\\""' if quoted else text


def text_among(texts: AbstractSet[str], rules: GrammarRules) -> str:
    """A quoted text that is one of `texts`: a walk down their trie, one way through for each."""

    def node(depth: int, under: list[str]) -> str:
        options = ['""'] if any(len(text) == depth for text in under) else []
        onward: dict[str, list[str]] = {}
        for text in under:
            if len(text) > depth:
                onward.setdefault(text[depth], []).append(text)
        options += [f"{literal(c)} {node(depth + 1, group)}" for c, group in sorted(onward.items())]
        return rules.add(_choice(options))

    return f'"\\"" {node(0, sorted(texts))} "\\""'


def name_except(used: AbstractSet[str], rules: GrammarRules, longest: int = SPEC_BUDGET.name) -> str:
    """A quoted identifier (`[a-z][a-z0-9_]*`, at most `longest` characters) that is none of `used`."""
    names = {name for name in used if re.fullmatch(r"[a-z][a-z0-9_]*", name)}
    return text_except(names, NAME_FIRST, NAME, longest, rules)


def key_except(used: AbstractSet[str], rules: GrammarRules, longest: int = SPEC_BUDGET.value) -> str:
    """A quoted record key (visible first, no '/' or quote, at most `longest` characters) none of `used`."""
    return text_except(used, KEY_FIRST, KEY, longest, rules)


class SpecStages:
    """The stage machine of one staged spec: `grammar()` for the next stage, `wrote(text)` with what it sampled."""

    def __init__(
        self,
        budget: SpecBudget = SPEC_BUDGET,
        task_text: TaskText = "written",
        plans: PlanRule = "any",
        vocabulary: Vocabulary | None = None,
        tool_text: TaskText = "written",
        key_choices: bool = False,
    ) -> None:
        if key_choices:  # the records stage writes `, "key_choices": true` too
            budget = dataclasses.replace(budget, tokens=dataclasses.replace(
                budget.tokens, records=budget.tokens.records + KEY_CHOICES_TOKENS))  # fmt: skip
        self.budget = budget
        self.task_text = task_text  # "derived": trusted code words the instruction and hint (`task_text`)
        self.tool_text = tool_text  # "derived": trusted code names and describes each tool (`tool_name`)
        self.key_choices = key_choices  # every table's key arguments list its records' keys (`TableSpec.key_choices`)
        self.plans = plans  # "change": every plan changes something (reads alone never end it)
        self.vocabulary = vocabulary  # set: tables' names and records' values are copied from it (`vocabulary`)
        self.stage: Stage | None = "table"
        self.tables: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] = []
        self.plan: list[dict[str, Any]] = []
        self.instruction = ""
        self.tokens_left: int | None = None  # of the reply's budget, as the next stage starts (None: no budget)

    # -- the machine ---------------------------------------------------------------------------------

    def grammar(self, tokens_left: int | None = None) -> str | None:
        """The next stage's grammar; None once the spec is whole (or what was written leaves no way on). With
        `tokens_left`, it offers more (fields, records, tables, tools, calls) only where the tokens pay for
        them and the spec can still close (`StageTokens`)."""
        self.tokens_left = tokens_left
        builders = {"table": self._table, "field": self._field, "records": self._records,
                    "record": self._next_record, "tool": self._tool, "task": self._task, "call": self._call,
                    "brief": self._brief, "hint": self._hint}  # fmt: skip
        grammar = builders[self.stage]() if self.stage is not None else None
        if grammar is None:
            self.stage = None
        return grammar

    def wrote(self, text: str) -> None:
        """Take in what the current stage sampled (its whole text, as its grammar admitted it)."""
        try:
            self._read(text)
        except (ValueError, KeyError, IndexError, StopIteration):  # cut short by the token budget: nothing follows
            self.stage = None

    def _read(self, text: str) -> None:
        if self.stage in ("table", "field"):
            more = text.endswith(", ")
            body = text.removesuffix(", " if more else "}")
            if self.stage == "table":  # `{"name": "` opens only the table: a field's value is an object
                head = json.loads(body[body.rindex('{"name": "') :] + "}}")
                self.tables.append({"name": head["name"], "fields": head["fields"]})
            else:
                self.tables[-1]["fields"].update(json.loads("{" + body + "}"))
            self.stage = "field" if more else "records"
        elif self.stage in ("records", "record"):
            ending = next(end for end in ("]}]", "]}, ", ", ") if text.endswith(end))
            record = text.removesuffix(ending)
            if self.stage == "records":
                key, record = record.removeprefix(', "key": ').split(', "records": [', 1)
                chosen = key.endswith(_KEY_CHOICES)
                self.tables[-1] |= {"key": json.loads(key.removesuffix(_KEY_CHOICES)), "records": []}
                if chosen:
                    self.tables[-1]["key_choices"] = True
            self.tables[-1]["records"].append(json.loads(record))
            self.stage = _AFTER_RECORD[ending]
        elif self.stage == "tool":
            more = text.endswith(", ")
            self.tools.append(json.loads(text.removeprefix(', "tools": [').removesuffix(", " if more else "]")))
            self.stage = "tool" if more else "task"
        elif self.stage in ("task", "call"):
            start = text.index('"plan": [') + len('"plan": [') if self.stage == "task" else 0
            call, end = json.JSONDecoder().raw_decode(text, start)  # raises on `_CLOSE`: nothing follows
            self.plan.append(call)
            self.stage = "call" if text[end:] == ", " else "brief"
        elif self.stage == "brief":
            self.instruction = json.loads(text[text.rindex(', "instruction": ') + len(', "instruction": ') :])
            self.stage = "hint"
        else:
            self.stage = None

    def _room(self, *costs: int) -> bool:
        """Whether the tokens left pay for `costs` (always, without a budget)."""
        return self.tokens_left is None or self.tokens_left >= sum(costs)

    # -- tables --------------------------------------------------------------------------------------

    def _table(self) -> str:
        """[the header,] a table's name (new) and its key field, a plain string; then `, ` or `}`."""
        rules = GrammarRules()
        used = {str(table["name"]) for table in self.tables}
        key_field = f'{self._data_name(RESERVED, rules)} ": {{\\"type\\": \\"string\\"}}"'
        head = f'"{{\\"name\\": " {self._data_name(used | RESERVED, rules)} ", \\"fields\\": {{" {key_field}'
        cost = self.budget.tokens.table if self.tables else self.budget.tokens.header
        head = f"{head} {self._after_field(1, cost)}"
        if self.tables:
            return rules.grammar(head)
        header = f'"{{\\"spec_version\\": 1, \\"name\\": " {self._name(set(), rules)} ", \\"description\\": "'
        return rules.grammar(f'{header} {self._text()} ", \\"tables\\": [" {head}')

    def _field(self) -> str:
        """Another field of the table, named anew, typed; then `, ` or `}`."""
        rules, fields = GrammarRules(), self.tables[-1]["fields"]
        name = self._data_name(set(fields) | RESERVED, rules)
        return rules.grammar(
            f'{name} ": " {self._field_spec(rules)} {self._after_field(len(fields) + 1, self.budget.tokens.field)}'
        )

    def _after_field(self, fields: int, cost: int) -> str:
        """`, ` for another field (where the tokens pay for it, this stage, the first record and the cheapest
        end), or `}`."""
        tokens = self.budget.tokens
        more = fields < self.budget.fields and self._room(cost, tokens.field, tokens.records, tokens.after_tables())
        return '(", " | "}")' if more else '"}"'

    def _field_spec(self, rules: GrammarRules) -> str:
        """A field's declaration, typed throughout: its enum's values or its default are of its type (no
        description: the agent reads the field's name, and every token here is one the rest cannot have)."""
        options = []
        for kind in ("string", "integer", "number", "boolean"):
            value = self._string() if kind == "string" else _SCALARS[kind]
            default = f'", \\"default\\": " {value}'
            if kind != "boolean":  # an enum or a default, not both: a default outside its enum breaks the spec
                default = f'", \\"enum\\": [" {_repeat(value, self.budget.choices)} "]" | {default}'
            options.append(f'"{{\\"type\\": \\"{kind}\\"" ({default})? "}}"')
        return _choice(options)

    def _records(self) -> str | None:
        """The table's key and its first record, then what follows it (`_after_record`)."""
        rules, fields = GrammarRules(), self.tables[-1]["fields"]
        keys = [name for name, field in fields.items() if field == {"type": "string"}]  # no default, free values
        after = self._after_record(1, self.budget.tokens.records)
        choices = f" {literal(_KEY_CHOICES)}" if self.key_choices else ""
        options = [
            f'{json_literal(key)}{choices} ", \\"records\\": [" {self._record(key, set(), rules)} {after}'
            for key in keys
        ]
        if not options:  # the key field was declared again as something else: no key to choose
            return None
        return rules.grammar(f'", \\"key\\": " {_choice(options)}')

    def _next_record(self) -> str:
        """Another record of the table, its key none of the written ones; then what follows it."""
        rules, table = GrammarRules(), self.tables[-1]
        used = {str(record.get(table["key"])) for record in table["records"]}
        after = self._after_record(len(table["records"]) + 1, self.budget.tokens.record)
        return rules.grammar(f"{self._record(table['key'], used, rules)} {after}")

    def _record(self, key: str, used: set[str], rules: GrammarRules) -> str:
        fields = self.tables[-1]["fields"]
        properties = {name: self._value_schema(name, field) for name, field in fields.items()}
        properties[key] = {"x-gbnf": self._record_key(key, used, rules)}
        return rules.add(json_value({"type": "object", "properties": properties, "required": [key]}, rules))

    def _after_record(self, records: int, cost: int) -> str:
        """`, ` for another record, `]}, ` for another table (each where the tokens pay for it, this stage and
        the cheapest end), `]}]` for the end of the tables."""
        tokens = self.budget.tokens
        end = tokens.after_tables()
        options = ['", "'] if records < self.budget.records and self._room(cost, tokens.record, end) else []
        if len(self.tables) < self.budget.tables and self._room(cost, tokens.table, tokens.records, end):
            options.append('"]}, "')
        return _choice([*options, '"]}]"'])

    def _value_schema(self, name: str, field: dict[str, Any]) -> dict[str, Any]:
        if field.get("enum"):
            return {"enum": field["enum"]}
        kind = field.get("type", "string")
        if copied := self._copied(name, kind):
            return {"enum": copied}
        return {"type": kind, "maxLength": self.budget.value} if kind == "string" else {"type": kind}

    def _copied_field(self, name: str, field: FieldSpec) -> list[Any]:
        """`_copied` for a written field: [] for one with an enum (its own values rule)."""
        return [] if field.enum else self._copied(name, field.type)

    def _copied(self, name: str, kind: str) -> list[Any]:
        """The document's values a field `name` of type `kind` may take (`Vocabulary.values`); [] where it is
        free (no vocabulary, a boolean, or no cell of the type)."""
        if self.vocabulary is None or kind == "boolean":
            return []
        return self.vocabulary.values(name, kind)

    def _record_key(self, key: str, used: AbstractSet[str], rules: GrammarRules) -> str:
        """A record's key, none of `used`: one of the document's (`Vocabulary.keys`) while any is left."""
        if self.vocabulary is not None and (left := set(self.vocabulary.keys(key)) - used):
            return text_among(left, rules)
        return self._key(used, rules)

    # -- tools ---------------------------------------------------------------------------------------

    def _tool(self) -> str | None:
        """One tool, then `, ` for another or `]`: the tools end only once one of them can change something
        (a transfer with no amount to move, an update along transitions no record is at, cannot: 5 of 16
        designs of one measured arm closed with an empty plan on such a tool)."""
        rules = GrammarRules()
        used = {str(tool.get("name")) for tool in self.tools}
        sure: list[str] = []  # changing tools that can be called on the records as written
        other: list[str] = []  # the rest: reading tools, and changing ones that may not be callable
        for table in self._written_tables():
            for option, callable_change in self._tool_options(table, used, rules):
                (sure if callable_change else other).append(option)
        if not sure:
            return None
        opening = '", \\"tools\\": [" ' if not self.tools else ""
        tokens = self.budget.tokens
        can_change = self._can_change()
        if len(self.tools) + 1 >= self.budget.tools or not self._room(tokens.tool, tokens.tool, tokens.after_tools()):
            ends = f'{_choice(sure + other if can_change else sure)} "]"'
        elif can_change:
            ends = f'{_choice(sure + other)} (", " | "]")'
        else:  # nothing written can change a record yet: only a tool that can may end the list
            unsure = f' | {_choice(other)} ", "' if other else ""
            ends = f'({_choice(sure)} (", " | "]"){unsure})'
        return rules.grammar(opening + ends)

    def _can_change(self) -> bool:
        """Whether a written tool of a changing kind has a call that succeeds on the records as written."""
        spec = self._partial_spec(self._written_tables(), [])
        try:
            state = state_after_plan(spec)
        except (SpecError, ValueError, TypeError):
            return False
        return any(tool.kind in CHANGING_KINDS for tool, _ in self._possible_calls(spec, state, GrammarRules()))

    def _tool_options(self, table: TableSpec, used: AbstractSet[str], rules: GrammarRules) -> list[tuple[str, bool]]:
        """Each tool `table` may have, and whether it surely changes something when called on the records as
        written (a delete, a create, an update with no transitions, a transfer with no minimum on a field some
        record holds an amount of): each option is one or the other, never both, so no text is admitted twice.
        With `tool_text="derived"` each option's name and description are trusted code's (`tool_name`,
        `tool_description`), and an option whose name a written tool has is not offered."""
        on = f'", \\"table\\": " {json_literal(table.name)}'
        derived = self.tool_text == "derived"
        written = None if derived else (self._name(used, rules), self._text())

        def head(kind: str, field: str | None = None) -> str | None:
            if written is not None:
                name, description = written
            elif (derived_name := tool_name(kind, table.name, field)) in used:
                return None
            else:
                description = json_literal(tool_description(kind, table, field)[: self.budget.text])
                name = json_literal(derived_name)
            return f'"{{\\"kind\\": \\"{kind}\\", \\"name\\": " {name} ", \\"description\\": " {description} {on}'

        def field_is(names: list[str]) -> str:
            return f'", \\"field\\": " {_choice([json_literal(n) for n in names])}'

        def each(kind: str, names: list[str], tail: str = "") -> list[str]:
            """`kind` on any of `names` (one option; derived: one per field, since the name says which)."""
            if not names:
                return []
            if not derived:
                return [f'{head(kind)} {field_is(names)}{tail} "}}"']
            heads = [(n, head(kind, n)) for n in names]
            return [f'{h} {field_is([n])}{tail} "}}"' for n, h in heads if h is not None]

        fields = table.fields
        strings = [n for n, f in fields.items() if f.type == "string"]
        numbers = [n for n, f in fields.items() if f.type in ("integer", "number")]
        options: list[tuple[str, bool]] = []
        for kind, sure in (("lookup", False), ("delete", True)):
            if (plain := head(kind)) is not None:
                options.append((f'{plain} "}}"', sure))
        options += [(option, False) for option in each("search", strings)]
        if derived:  # the name says whether it filters, and by what
            if (plain := head("list")) is not None:
                options.append((f'{plain} "}}"', False))
            for n in fields:
                if (filtered := head("list", n)) is not None:
                    options.append((f'{filtered} ", \\"filter_by\\": " {json_literal(n)} "}}"', False))
        else:
            filters = _choice([json_literal(n) for n in fields])
            options.append((f'{head("list")} (", \\"filter_by\\": " {filters})? "}}"', False))
        if (create := head("create")) is not None:
            options.append((f'{create} (", \\"key_prefix\\": " {self._string(1, 8)})? "}}"', True))
        movable = [n for n in numbers if len(table.records) > 1 and _amount_up_to(_most(table, n)) is not None]
        options += [(option, True) for option in each("transfer", movable)]
        options += [(option, False) for option in each("transfer", [n for n in numbers if n not in movable])]
        options += [(option, False) for option in each("transfer", numbers, f' ", \\"minimum\\": " {_NUMBER}')]
        for field_name, field in fields.items():
            if field_name != table.key and (updating := head("update", field_name)) is not None:
                update = f'{updating} ", \\"field\\": " {json_literal(field_name)}'
                held = _held(table, field_name)
                settings = self._update(field_name, field, held, rules)
                options += [(f"{update} {setting}", sure) for setting, sure in settings]
        return options

    def _update(
        self, field_name: str, field: FieldSpec, held: list[Any], rules: GrammarRules
    ) -> list[tuple[str, bool]]:
        """An update's settings after its field, values of the field's own (an enum's, true/false, or listed:
        the document's, `_copied`, where it has some), each marked whether the update surely changes a record
        as written (`held`: the field's values there): with no transitions, or transitions the first of which
        starts where a record is."""
        budget = self.budget
        if not (field.enum or field.type == "boolean"):
            if copied := self._copied(field_name, field.type):
                value = _choice([json_literal(v) for v in copied])
            else:
                value = self._string() if field.type == "string" else _SCALARS[field.type]
            return [(f'", \\"values\\": [" {_repeat(value, budget.choices)} "]}}"', True)]
        values: list[Any] = list(field.enum) if field.enum else [True, False]
        value = _choice([json_literal(v) for v in values])
        move = rules.add(f'"{{\\"from\\": " {value} ", \\"to\\": " {value} "}}"')
        more = f'(", " {move}){{0,{budget.transitions - 1}}}' if budget.transitions > 1 else '""'
        at = [v for v in values if any(same_value(v, h) for h in held)]  # where some record is now
        elsewhere = [v for v in values if v not in at]

        def first(froms: list[Any], tos: list[Any]) -> str | None:
            if not froms or not tos:
                return None
            choices = [_choice([json_literal(v) for v in group]) for group in (froms, tos)]
            return f'"{{\\"from\\": " {choices[0]} ", \\"to\\": " {choices[1]} "}}"'

        def listed(moves: list[str | None]) -> str:
            return f'", \\"transitions\\": [" {_choice([m for m in moves if m])} {more} "]}}"'

        options = [(f'(", \\"value\\": " {value})? "}}"', True)]
        if at:  # a first transition from where a record is: callable
            options.append((listed([first(at, values)]), True))
        if elsewhere:
            options.append((listed([first(elsewhere, values)]), False))
        for target in values:  # with a value, callable where a first transition leads from a record to it
            fixed = f'", \\"value\\": " {json_literal(target)} '
            if at:
                options.append((fixed + listed([first(at, [target])]), True))
            others = [v for v in values if v != target]
            unsure = [first(elsewhere, values), first(at, others)]
            if any(unsure):
                options.append((fixed + listed(unsure), False))
        return options

    # -- the task ------------------------------------------------------------------------------------

    def _task(self) -> str | None:
        """The plan's first call (`_call`): the task is written plan first, so that the instruction and the
        hint (`_brief`, `_hint`) are written knowing what the plan does."""
        call = self._call()
        if call is None:
            return None
        root, _, rules = call.partition("\n")
        return f'root ::= ", \\"task\\": {{\\"plan\\": [" {root.removeprefix("root ::= ")}\n{rules}'

    def _call(self) -> str | None:
        """One planned call, offered only what exists after the calls before it (records by their keys,
        updates along their transitions from the record's current value, transfers between two different
        records of no more than the source holds); then `, ` for another call or `]`. A plan may end in a
        read only where a question can follow it (`_brief`): one that changes nothing must ask one; with
        `plans="change"`, only once a call before it changed something."""
        rules = GrammarRules()
        tables = self._written_tables()
        spec = self._partial_spec(tables, self.plan)
        try:
            state = state_after_plan(spec)
        except (SpecError, ValueError, TypeError):  # a call the world refused (beyond what the grammar holds)
            return rules.grammar(_CLOSE)  # the spec closes, and the gates name the refused call
        changing: list[str] = []
        reading: list[str] = []
        for tool, schema in self._possible_calls(spec, state, rules):
            arguments = json_value(schema, rules)
            call = f'"{{\\"tool\\": " {json_literal(tool.name)} ", \\"arguments\\": " {arguments} "}}"'
            (changing if tool.kind in CHANGING_KINDS else reading).append(call)
        changed = self._plan_changes()
        # Another call is offered only where one will surely be possible after this one: a tool that needs
        # no record (search, list, create), or records enough, in the tools' tables, that one call cannot take
        # them all (counted over every table, a walk planned `, ` after deleting a one-record table's record,
        # and the spec closed as `}, ]`: not JSON).
        needs_none = any(tool.kind in ("search", "list", "create") for tool in spec.tools)
        acted_on = {tool.table for tool in spec.tools}
        left = sum(len(records) for table, records in state.items() if table in acted_on)
        tokens = self.budget.tokens
        more = (len(self.plan) + 1 < self.budget.plan and (needs_none or left > 2)
                and self._room(tokens.call, tokens.call, tokens.after_plan()))  # fmt: skip
        can_ask = bool(self._questions(tables, state))  # a read changes nothing: what is asked now has its answer then
        options = []
        if changing:
            after_change = _choice(['", "', '"]"'] if more else ['"]"'])
            options.append(f"{rules.add(_choice(changing))} {after_change}")
        ends = (['", "'] if more else []) + (['"]"'] if changed or (can_ask and self.plans == "any") else [])
        if reading and ends:
            options.append(f"{rules.add(_choice(reading))} {_choice(ends)}")
        # No call can be made (the tools' records are gone, no amount fits): the spec closes, the gates say why.
        return rules.grammar(_choice(options) if options else _CLOSE)

    def _possible_calls(
        self, spec: Spec, state: dict[str, Any], rules: GrammarRules
    ) -> Iterator[tuple[ToolDefinition, dict[str, Any]]]:
        """(tool, arguments' schema) for every way a written tool's call can succeed in `state`."""
        for tool in spec.tools:
            table = spec.table(tool.table)
            try:
                contract = tool_contract(tool, spec)
            except (SpecError, ValueError, TypeError):
                continue
            assert table is not None
            for schema in self._argument_schemas(contract.input_schema, tool, table, state.get(table.name, {}), rules):
                yield tool, schema

    def _argument_schemas(
        self,
        schema: dict[str, Any],
        tool: ToolDefinition,
        table: TableSpec,
        records: dict[str, dict[str, Any]],
        rules: GrammarRules,
    ) -> list[dict[str, Any]]:
        """The arguments' schema held to what exists now, as one schema per way the call can succeed; none
        when no call of the tool can (no record to name, or every transition closed)."""
        properties = dict(schema.get("properties", {}))
        key, keys = table.key, list(records)
        if table.key_choices:  # only the keys the spec lists: a record the plan created cannot be named
            listed = set(table.keys())
            keys = [name for name in keys if name in listed]
        if tool.kind == "create":
            for name, field in table.fields.items():  # a new record's values, as the records' own (`_value_schema`)
                if name in properties and name != key and (copied := self._copied_field(name, field)):
                    properties[name] = {"enum": copied}
            if key in properties:
                properties[key] = {"x-gbnf": self._record_key(key, set(keys), rules)}
            return [{**schema, "properties": properties}]
        if isinstance(tool, TransferTool):
            schemas = []
            for source in keys:
                others = [b for b in keys if b != source]
                amount = _amount_up_to(float(records[source].get(tool.field) or 0) - tool.minimum)
                if others and amount is not None:
                    chosen = {f"from_{key}": {"const": source}, f"to_{key}": {"enum": others}, "amount": amount}
                    schemas.append({**schema, "properties": {**properties, **chosen}})
            return schemas
        if isinstance(tool, SearchTool):  # an empty search is refused, one for punctuation alone (`][`) means nothing
            if copied := self._copied(tool.field, "string"):
                return [{**schema, "properties": {**properties, tool.field: {"enum": copied}}}]
            text = f'"\\"" {KEY_FIRST.gbnf()} {_TEXT_CHAR}{{0,{self.budget.value - 1}}} "\\""'
            return [{**schema, "properties": {**properties, tool.field: {"x-gbnf": text}}}]
        if isinstance(tool, ListTool):  # it names no record (a filter on the key field is a value, not a lookup)
            by = tool.filter_by
            if by is not None and by in table.fields and (copied := self._copied_field(by, table.fields[by])):
                return [{**schema, "properties": {**properties, by: {"enum": copied}}}]
            return [schema]
        if not keys:
            return []
        if isinstance(tool, UpdateTool) and tool.transitions is not None:
            schemas = []
            for name, record in records.items():
                onward = [t.to for t in tool.transitions if same_value(t.from_, record.get(tool.field))]
                if tool.value is not None:
                    onward = [value for value in onward if same_value(value, tool.value)]
                if onward:
                    chosen = {**properties, key: {"const": name}}
                    if tool.field in properties:
                        chosen[tool.field] = {"enum": onward}
                    schemas.append({**schema, "properties": chosen})
            return schemas
        return [{**schema, "properties": {**properties, key: {"enum": keys}}}]

    def _plan_changes(self) -> bool:
        """Whether a call written so far is of a changing kind (reads alone must ask a question)."""
        kinds = {tool.get("name"): tool.get("kind") for tool in self.tools}
        return any(kinds.get(call.get("tool")) in CHANGING_KINDS for call in self.plan)

    def _brief(self) -> str:
        """The question, about a field other than the key of a record that exists after the plan, whose answer
        is not empty (optional once the plan changed something, required before); then the instruction, written
        knowing the plan and naming what it types and the record the question asks about (`_instruction`)."""
        rules, tables = GrammarRules(), self._written_tables()
        try:
            state = state_after_plan(self._partial_spec(tables, self.plan))
        except (SpecError, ValueError, TypeError):
            state = {}
        if self.task_text == "derived":
            return self._derived_brief(tables, state, rules)
        typed, opening = self._typed_values(), rules.add('[A-Z] [a-z]{1,14} (" " [a-z]{2,14}){2,3}')
        instruction = '", \\"instruction\\": "'
        fields: dict[tuple[str, str], list[str]] = {}  # the fields each record can be asked, by (table, key)
        for question, _ in self._questions(tables, state):
            fields.setdefault((question.table, question.key), []).append(question.field)
        options = [
            f'"{{\\"table\\": " {json_literal(table)} ", \\"key\\": " {json_literal(key)} '
            f'", \\"field\\": " {_choice([json_literal(name) for name in names])} "}}" '
            f"{instruction} {self._instruction(list(dict.fromkeys([*typed, key])), opening)}"
            for (table, key), names in fields.items()
        ]
        asked = f'", \\"question\\": " {_choice(options)}' if options else None
        told = f"{instruction} {self._instruction(typed, opening)}"
        if asked is None or not self._plan_changes():  # reads alone must ask (the `_call` grammar saw to it)
            return rules.grammar(asked or told)
        return rules.grammar(_choice([asked, told]))

    def _derived_brief(self, tables: list[TableSpec], state: dict[str, Any], rules: GrammarRules) -> str:
        """The question the model chooses (any field but the key of a record that exists after the plan,
        whose answer is not empty and not already in the instruction), each with the instruction trusted code
        words for it (`derived_instruction`); no question only after a change."""
        tools = self._written_tools(tables)
        told = '", \\"instruction\\": "'
        options = []
        for question, answer in self._questions(tables, state):
            instruction = derived_instruction(tables, tools, self.plan, question)
            if not says(instruction, answer):
                asked = json_literal(question.model_dump())
                options.append(f'", \\"question\\": " {asked} {told} {json_literal(instruction)}')
        if self._plan_changes() or not options:
            options.append(f"{told} {json_literal(derived_instruction(tables, tools, self.plan, None))}")
        return rules.grammar(_choice(options))  # with neither question nor change, the gates say so

    @staticmethod
    def _questions(tables: list[TableSpec], state: dict[str, Any]) -> list[tuple[Question, Any]]:
        """(question, answer) for every field but the key of every record in `state` whose value is not empty."""
        return [
            (Question(table=table.name, key=key, field=name), record.get(name))
            for table in tables
            for key, record in state.get(table.name, {}).items()
            for name in table.fields
            if name != table.key and str(record.get(name, "")).strip()
        ]

    def _typed_values(self) -> list[str]:
        """What the plan types, as the instruction must name it (`toolworlds.checks.task_meaning`): every
        text and number of its calls' arguments (a whole number without its `.0`), in plan order (flags are verbs)."""
        values = [
            value if isinstance(value, str) else str(int(value) if float(value).is_integer() else value)
            for call in self.plan
            for value in (call.get("arguments") or {}).values()
            if not isinstance(value, bool) and isinstance(value, str | int | float) and str(value).strip()
        ]
        return list(dict.fromkeys(values))

    def _instruction(self, values: list[str], opening: str) -> str:
        """A quoted instruction that names `values`, each in single quotes, in order: a sentence's opening
        (`opening`: a capitalised word and two or three lowercase ones), then the values with free text between them and
        after. Trusted code fixes that the values are named; the model chooses every word around them."""
        budget = self.budget.text
        free = f"{_UNQUOTED}{{0,{budget // 3}}}"
        quoted = [literal(json.dumps(value, ensure_ascii=False)[1:-1]) for value in values]  # as JSON holds them
        named = " ".join(f'{free} " \'" {value} "\'"' for value in quoted)
        return f'"\\"" {opening} {named} {free} "\\""'

    def _hint(self) -> str:
        """The hint, a step: how to start (use or call a written tool, or a first step), then free text with
        no single quote, so never a copy of the instruction (which quotes what it names) and never a quoted
        value; optional untouched records, among those no planned call names; then the spec closes."""
        rules, tables = GrammarRules(), self._written_tables()
        if self.task_text == "derived":
            hint = json_literal(derived_hint(self._written_tools(tables), self.plan))
        else:
            hint = self._written_hint(rules)
        named = {str(value) for call in self.plan for value in (call.get("arguments") or {}).values()}
        refs = [json_literal(f"{t.name}/{k}") for t in tables for k in self._keys(t) if k not in named]
        untouched = f'(", \\"untouched\\": [" {_repeat(_choice(refs), self.budget.untouched)} "]")?' if refs else '""'
        return rules.grammar(f'", \\"hint\\": " {hint} {untouched} "}}}}"')

    def _written_hint(self, rules: GrammarRules) -> str:
        tools = [str(tool.get("name")) for tool in self.tools if _IDENTIFIER.fullmatch(str(tool.get("name")))]
        copies = set() if "'" in self.instruction else self._copies_of_instruction()  # nothing quoted: one may copy
        steps = []
        for opener in [f"Use {name}" for name in tools] + ["First ", "Search ", "Look up "]:
            taken = {copy[len(opener) :] for copy in copies if copy.startswith(opener)}
            rest = text_except(taken, UNQUOTED, UNQUOTED, self.budget.text, rules, quoted=False)
            steps.append(f"{literal(opener)} {rest if taken else f'{_UNQUOTED}{{0,{self.budget.text}}}'}")
        return f'"\\"" {_choice(steps)} "\\""'

    def _copies_of_instruction(self) -> set[str]:
        """The hints the gates read as the instruction (equal once stripped): a hint starts with a visible
        character and its only blank is the space, so these are the stripped instruction with trailing spaces."""
        core = self.instruction.strip()
        return {core + " " * spaces for spaces in range(max(0, self.budget.text - len(core)) + 1)}

    # -- reading what was written --------------------------------------------------------------------

    def _written_tables(self) -> list[TableSpec]:
        """The written tables that parse, the first of each name (a later duplicate is the gates' to name)."""
        tables: dict[str, TableSpec] = {}
        for table in self.tables:
            try:
                parsed = TableSpec.model_validate(table)
            except ValidationError:
                continue
            tables.setdefault(parsed.name, parsed)
        return list(tables.values())

    def _written_tools(self, tables: list[TableSpec]) -> list[ToolDefinition]:
        tools: dict[str, ToolDefinition] = {}
        names = {table.name for table in tables}
        for tool in self.tools:
            try:
                parsed = _TOOL.validate_python(tool)
            except ValidationError:
                continue
            if parsed.table in names:
                tools.setdefault(parsed.name, parsed)
        return list(tools.values())

    def _partial_spec(self, tables: list[TableSpec], plan: list[dict[str, Any]]) -> Spec:
        calls = [PlannedCall.model_validate(call) for call in plan]
        task = TaskSpec(instruction="-", hint="-", plan=calls)
        tools = self._written_tools(tables)
        return Spec.model_construct(
            spec_version=1, name="staged", description="-", max_steps=30, tables=tables, tools=tools, task=task
        )

    @staticmethod
    def _keys(table: TableSpec) -> list[str]:
        return list(dict.fromkeys(str(r[table.key]) for r in table.records if isinstance(r.get(table.key), str)))

    def _name(self, used: AbstractSet[str], rules: GrammarRules) -> str:
        return name_except(used, rules, self.budget.name)

    def _data_name(self, used: AbstractSet[str], rules: GrammarRules) -> str:
        """A table's or a field's name, none of `used`: one of the document's words while any is left."""
        if self.vocabulary is not None and (left := set(self.vocabulary.names) - used):
            return text_among(left, rules)
        return self._name(used, rules)

    def _key(self, used: AbstractSet[str], rules: GrammarRules) -> str:
        return key_except(used, rules, self.budget.value)

    def _text(self) -> str:
        return self._string(1, self.budget.text)

    def _string(self, shortest: int = 0, longest: int = 0) -> str:
        longest = longest or self.budget.text
        if shortest == 0:
            return f'"\\"" {_TEXT_CHAR}{{0,{longest}}} "\\""'
        return f'"\\"" {_FIRST_CHAR} {_TEXT_CHAR}{{{shortest - 1},{longest - 1}}} "\\""'


def _held(table: TableSpec, field: str) -> list[Any]:
    """The values of `field` in `table`'s records as written (a field left out holds its zero value)."""
    return [record.get(field, zero_value(table.fields[field])) for record in table.records]


def _most(table: TableSpec, field: str) -> float:
    """The largest amount of `field` a record of `table` holds as written."""
    amounts = _held(table, field)
    return max((float(a) for a in amounts if isinstance(a, int | float) and not isinstance(a, bool)), default=0.0)


def _amount_up_to(available: float) -> dict[str, Any] | None:
    """A positive whole amount that cannot exceed `available`: the numbers 1..available below 10, else any
    with fewer digits than it has (a grammar cannot compare numbers); None when not even 1 fits."""
    if available < 1:
        return None
    if available < 10:
        return {"enum": list(range(1, int(available) + 1))}
    digits = len(str(int(available)))
    return {"x-gbnf": "[1-9]" if digits == 2 else f"[1-9] [0-9]{{0,{digits - 2}}}"}  # `{0,0}`: llguidance refuses
