"""How big a spec the designer may write: one set of caps, held by every grammar a spec is sampled under."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class StageTokens:
    """What each stage of a staged spec costs in tokens: the 90th percentile over the 66 finished replies of
    the embedded designer in `bench-corpora` runs (826149f and 9361ef5, tables and Python docs). Within the
    caps below a staged spec could still run past the reply's token budget (30 of those 96 replies did, most
    of them cut in the question, instruction or hint, the JSON unterminated); so a stage offers another
    field, record, table, tool or call only while the tokens left pay for it and for the cheapest way to the
    spec's end after it."""

    header: int = 93  # the spec's name and description, the first table's name and key field
    table: int = 37  # another table's name and key field
    field: int = 20
    records: int = 45  # the key's choice and the first record
    record: int = 42
    tool: int = 88
    call: int = 59
    brief: int = 104  # the question and the instruction
    hint: int = 91  # the hint, the untouched records and the spec's close

    def after_tables(self) -> int:
        """The cheapest end once the tables are written: one tool, one call, the brief and the hint."""
        return self.tool + self.after_tools()

    def after_tools(self) -> int:
        return self.call + self.after_plan()

    def after_plan(self) -> int:
        return self.brief + self.hint


@dataclass(frozen=True)
class SpecBudget:
    """How big a spec the designer may write, held by its grammar.

    Unbounded, the embedded model ran out of tokens in 29 of 32 specs: it listed records or repeated a
    field until the budget ended, and the JSON never closed. These caps keep the largest spec the grammar
    admits near the designer's token budget (staged, with 5 fields and records and 120 characters a text,
    10 of 16 specs still ran past 640 tokens; with 4, 4 and 80, 15 of 32, mostly on long names and
    descriptions); every spec within them is valid under the published schema (they only tighten it), and
    the example spec fits them.
    """

    tables: int = 2
    fields: int = 4  # per table
    records: int = 4  # per table
    tools: int = 3
    plan: int = 3  # calls
    untouched: int = 2
    choices: int = 5  # an enum's values, an update's values
    transitions: int = 3
    arguments: int = 3  # per planned call
    text: int = 60  # characters of any string
    value: int = 24  # characters of a record's string value (staged specs)
    name: int = 24  # characters of a name (staged specs; the format allows 40)
    tokens: StageTokens = dataclasses.field(default_factory=StageTokens)  # what a stage costs (staged specs)

    def limits(self) -> dict[tuple[str, str], dict[str, int]]:
        """(schema definition, property) -> the JSON Schema keywords that cap it."""
        items = {("Spec", "tables"): self.tables, ("Spec", "tools"): self.tools, ("TableSpec", "records"): self.records,
                 ("TaskSpec", "plan"): self.plan, ("TaskSpec", "untouched"): self.untouched,
                 ("FieldSpec", "enum"): self.choices, ("UpdateTool", "values"): self.choices,
                 ("UpdateTool", "transitions"): self.transitions}  # fmt: skip
        limits = {where: {"maxItems": count} for where, count in items.items()}
        limits[("TableSpec", "fields")] = {"maxProperties": self.fields}
        limits[("PlannedCall", "arguments")] = {"maxProperties": self.arguments}
        return limits


SPEC_BUDGET = SpecBudget()
