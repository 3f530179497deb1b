"""How big a spec the designer may write: one set of caps, held by every grammar a spec is sampled under."""

from __future__ import annotations

from dataclasses import dataclass


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
