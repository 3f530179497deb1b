"""The designer's prompt: one fixed, versioned template.

It carries the toolworld contract in brief, one complete example world (Python only: a spec is written
in stages whose grammars hold its form, and an example spec was copied, not learned from: 21 of 21 valid
specs under `designer-spec-v2`), the sampled document and a few entries from the environment memory, and
nothing else that changes over training, so that a change in what the designer writes is a change in the
policy, not in the prompt. Bump `PROMPT_VERSION` (or `SPEC_PROMPT_VERSION`) with any edit: runs record it.
"""

from __future__ import annotations

from typing import Literal

from toolworlds.examples import EXAMPLE_WORLD
from trainers.designer.budget import SPEC_BUDGET, SpecBudget
from trainers.designer.memory import RememberedWorld
from trainers.designer.stages import PlanRule
from trainers.documents import Document

DesignFormat = Literal["python", "spec"]
PROMPT_VERSION = "designer-v2"  # v2: the docstring is written for the agent
# v3: stages, no example; v4: the plan first; v5: values named; v6: the plan's size and rule as the grammar holds them
SPEC_PROMPT_VERSION = "designer-spec-v6"


SYSTEM = (
    """You design toolworlds: small Python environments in which an AI agent solves a task by calling tools.

A toolworld is one Python file with one class that subclasses `ToolWorld[State]`:
- The class docstring is what the agent reads first: the world and its rules, for someone who sees only
  the tools (never your constants, fields or helper names).
- `State` is a pydantic model holding the hidden state (accounts, tickets, orders, ...).
- `build(self, rng)` creates `self.state` and the task from `rng` alone (no other randomness), and returns
  `Brief(instruction=..., hint=...)`. The instruction is all the agent sees; the hint is a privileged tip
  that makes the task easier without giving away ids, amounts or the answer.
- Tools are methods marked `@tool`, with type hints and a docstring that has an `Args:` section. A tool
  refuses a bad request with `raise ToolError(code, message)`.
- `grade(self)` returns a `Scorecard` with `.goal(name, met)` for each part of the task (partial credit) and
  `.harm(name, done)` for damage. `self.answer` holds the agent's final answer when the task asks a question.
- `solution(self)` returns the reference play, `[call("tool", arg=value), ..., Finish()]`, which scores 1.0.
Only these imports are allowed: random, json, re, math, datetime, collections, itertools, functools,
statistics, string, dataclasses, enum, typing, pydantic, toolworlds.

Here is a complete toolworld:

```python
"""
    + EXAMPLE_WORLD
    + """```"""
)

REQUEST = """Write one new toolworld grounded in the document below: its tools, state and task should come from
what the document describes. Make the task take several tool calls, give partial credit, and make the hint
helpful but not the answer.

Document ({title}):
{text}
{memory}
Reply with the complete Python file in one ```python code block."""


NO_DOCUMENT = """Write one new toolworld in a domain of your choice. Make the task take several tool calls,
give partial credit, and make the hint helpful but not the answer.
{memory}
Reply with the complete Python file in one ```python code block."""


def _limits(budget: SpecBudget) -> str:
    """The budget in words; the grammar holds the same caps."""
    return (
        f"Keep it small, or the reply is cut off before it closes: at most {budget.tables} tables, each with at "
        f"most {budget.fields} fields and {budget.records} records; at most {budget.tools} tools; a plan of at "
        f"most {budget.plan} calls; every text at most {budget.text} characters."
    )


SPEC_SYSTEM_HEAD = """You design toolworlds: small environments in which an AI agent solves a task by calling tools.
You write a toolworld as one JSON spec, in this order:
1. its `name` and `description`;
2. `tables`, the hidden state: each table has a `name`, typed `fields` (the first is the record's id, a
   string), the `key` field that identifies a record, and a few `records` with real-looking values;
3. `tools`, each one kind of operation on one table: `lookup` (a record by its key), `search` (records
   whose `field` contains a text), `list` (every record, or those whose `filter_by` field has a value),
   `update` (set `field` of a record to `value`, or to one of `values`, optionally only along
   `transitions`), `create`, `delete`, `transfer` (move an amount of `field` from one record to another,
   keeping the source at or above `minimum`);
4. the `task`, plan first: the `plan` is the reference solution as tool calls, and must succeed; every
   change it makes is a goal; a `question` names the record field whose value is the answer; then the
   `instruction`, all the agent sees: a sentence that says what to do and names, in single quotes, each
   value the plan types and the record the question asks about ("Please borrow the book 'Dune' with id
   'B2'."); the `hint` starts with a step or "Use <tool>" and says which tools to use in which order,
   without ids, amounts or the answer; `untouched` lists records that must not change.
"""


def spec_system(budget: SpecBudget = SPEC_BUDGET) -> str:
    """The spec designer's system message, with the caps its grammar holds."""
    return SPEC_SYSTEM_HEAD + _limits(budget)


def _task_size(budget: SpecBudget, plans: PlanRule) -> str:
    """The plan the request asks for, in words; the stage grammar holds the same (`plan_calls`, `plans`)."""
    calls = {1: "one tool call", 2: "two tool calls"}.get(budget.plan, "two or three tool calls")
    if plans == "change":
        calls += " that changes a record" if budget.plan == 1 else ", at least one of which changes a record"
    return calls


SPEC_REQUEST = """Write one new toolworld spec grounded in the document below: its tables, tools and task should
come from what the document describes. Make the task take {size}, and make the hint
helpful but not the answer.

Document ({title}):
{text}
{memory}
Reply with the JSON spec only."""

SPEC_NO_DOCUMENT = """Write one new toolworld spec in a domain of your choice. Make the task take {size}, and
make the hint helpful but not the answer.
{memory}
Reply with the JSON spec only."""


def prompt_version(design_format: DesignFormat) -> str:
    return SPEC_PROMPT_VERSION if design_format == "spec" else PROMPT_VERSION


def designer_messages(
    document: Document,
    memory: list[RememberedWorld],
    design_format: DesignFormat = "python",
    budget: SpecBudget = SPEC_BUDGET,
    plans: PlanRule = "any",
) -> list[dict[str, str]]:
    """The chat messages that ask the designer for one world, as Python or as a spec (within `budget`, under
    the plan rule `plans`: the prompt says what the stage grammar will hold it to)."""
    remembered = ""
    if memory:
        lines = "\n".join(world.line() for world in memory)
        remembered = (
            "\nWorlds you wrote before, and how the agent did (aim between too easy and too hard):\n" + lines + "\n"
        )
    spec = design_format == "spec"
    size = _task_size(budget, plans)
    if not document.text.strip():  # the no-corpus ablation
        request = (SPEC_NO_DOCUMENT if spec else NO_DOCUMENT).format(memory=remembered, size=size)
    else:
        template = SPEC_REQUEST if spec else REQUEST
        request = template.format(title=document.title, text=document.text.strip(), memory=remembered, size=size)
    system = spec_system(budget) if spec else SYSTEM
    return [{"role": "system", "content": system}, {"role": "user", "content": request}]
