"""The designer's prompt: one fixed, versioned template.

It carries the toolworld contract in brief, one complete example world, the sampled document and a few
entries from the environment memory, and nothing else that changes over training, so that a change in
what the designer writes is a change in the policy, not in the prompt. Bump `PROMPT_VERSION` with any
edit: runs record it.
"""

from __future__ import annotations

from toolworlds.examples import EXAMPLE_WORLD
from trainers.corpus import Document
from trainers.designer.memory import RememberedWorld

PROMPT_VERSION = "designer-v1"


SYSTEM = (
    """You design toolworlds: small Python environments in which an AI agent solves a task by calling tools.

A toolworld is one Python file with one class that subclasses `ToolWorld[State]`:
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


def designer_messages(document: Document, memory: list[RememberedWorld]) -> list[dict[str, str]]:
    """The chat messages that ask the designer for one world."""
    remembered = ""
    if memory:
        lines = "\n".join(world.line() for world in memory)
        remembered = (
            "\nWorlds you wrote before, and how the agent did (aim between too easy and too hard):\n" + lines + "\n"
        )
    if not document.text.strip():  # the no-corpus ablation
        request = NO_DOCUMENT.format(memory=remembered)
    else:
        request = REQUEST.format(title=document.title, text=document.text.strip(), memory=remembered)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": request}]
