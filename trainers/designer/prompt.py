"""The designer's prompt: one fixed, versioned template.

It carries the toolworld contract in brief, one complete example world, the sampled document and a few
entries from the environment memory, and nothing else that changes over training, so that a change in
what the designer writes is a change in the policy, not in the prompt. Bump `PROMPT_VERSION` with any
edit: runs record it.
"""

from __future__ import annotations

from trainers.corpus import Document
from trainers.designer.memory import RememberedWorld

PROMPT_VERSION = "designer-v1"

EXAMPLE_WORLD = '''import random

from pydantic import BaseModel

from toolworlds import Brief, Finish, Scorecard, ToolCall, ToolError, ToolWorld, call, tool


class Book(BaseModel):
    book_id: str
    title: str
    on_loan: bool = False


class Shelf(BaseModel):
    books: dict[str, Book]


class LibraryWorld(ToolWorld[Shelf]):
    """A small library: find a book by title and borrow it."""

    name = "library"
    max_steps = 8

    def build(self, rng: random.Random) -> Brief:
        titles = rng.sample(["Dune", "Emma", "Ulysses", "Beloved", "Walden", "Middlemarch"], 4)
        self.state = Shelf(books={f"B{i}": Book(book_id=f"B{i}", title=t) for i, t in enumerate(titles)})
        self.wanted = rng.choice(titles)
        return Brief(instruction=f"Borrow '{self.wanted}' for me.", hint="Search by title to learn the book's id.")

    @tool
    def search(self, title: str) -> list[Book]:
        """Find books whose title contains the text.

        Args:
            title: part of a title, any case.
        """
        return [b for b in self.state.books.values() if title.lower() in b.title.lower()]

    @tool
    def borrow(self, book_id: str) -> Book:
        """Borrow a book by its id.

        Args:
            book_id: the id search returned.
        """
        book = self.state.books.get(book_id)
        if book is None:
            raise ToolError("not_found", f"no book {book_id!r}")
        if book.on_loan:
            raise ToolError("on_loan", f"{book_id} is already on loan")
        book.on_loan = True
        return book

    def grade(self) -> Scorecard:
        loans = [b for b in self.state.books.values() if b.on_loan]
        card = Scorecard().goal("borrowed the book", any(b.title == self.wanted for b in loans))
        return card.harm("borrowed other books", any(b.title != self.wanted for b in loans))

    def solution(self) -> list[ToolCall | Finish]:
        book = next(b for b in self.state.books.values() if b.title == self.wanted)
        return [call("search", title=self.wanted), call("borrow", book_id=book.book_id), Finish()]
'''

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


def designer_messages(document: Document, memory: list[RememberedWorld]) -> list[dict[str, str]]:
    """The chat messages that ask the designer for one world."""
    remembered = ""
    if memory:
        lines = "\n".join(world.line() for world in memory)
        remembered = (
            "\nWorlds you wrote before, and how the agent did (aim between too easy and too hard):\n" + lines + "\n"
        )
    request = REQUEST.format(title=document.title, text=document.text.strip(), memory=remembered)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": request}]
