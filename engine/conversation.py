"""Environments whose user speaks more than once: benchmark dialogues (BFCL's turns, ACEBench's simulated user).

A toolworld has one instruction and ends when the agent finishes. A conversation goes on: a reply without a
tool call (or a `finish` call, where the conversation offers one) ends the agent's *turn*, and the
environment answers with the user's next message, possibly revealing more tools, until it has nothing more
to say. The environment also owns what the model sees first (a benchmark's own system prompt, or none), and
the benchmark's rules for a turn: whether an unreadable reply ends it, and how many replies that call tools
it may take (BFCL cuts an entry after the 21st).

The engine keeps the conversation append-only, so `tokens` mode stays token-exact: tools revealed in a later
turn are added to the request's `tools` in `chat` and `constrained` mode, and written into that turn's user
message in `tokens` mode (a rendered tool list cannot change without re-rendering the prompt); constrained
requests get them in their schema and, to read, in that message too.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any

from pydantic import BaseModel, Field

from engine.settings import Mode
from toolworlds.core import Finish, StepResult, Task, ToolCall
from toolworlds.episode import Grade

NEW_TOOLS_HEADER = "New tools you can call from now on:"


class UserTurn(BaseModel):
    """What the user says next; `tools` (OpenAI function specs) become callable from this turn on.

    A conversation that reads replies itself also answers a reply's calls with their results (`calls_run` > 0):
    those continue the agent's turn, counting toward `max_calling_replies`, rather than begin the user's next."""

    content: str
    tools: list[dict[str, Any]] = Field(default_factory=list)
    calls_run: int = 0

    def text(self, mode: Mode) -> str:
        """The user message as sent. Where no `tools` field is sent (`tokens` renders the list once,
        `constrained` sends a schema), the revealed tools are listed in it."""
        if not self.tools or mode == "chat":
            return self.content
        listing = "\n".join(json.dumps(entry["function"]) for entry in self.tools)
        return f"{NEW_TOOLS_HEADER}\n{listing}\n\n{self.content}"


class Conversation(ABC):
    """The engine's view of a dialogue: an `Environment` (reset/step/score/close) plus the user's side.

    `step` is only ever given `ToolCall`s; where the agent would finish a toolworld, the engine calls
    `respond` instead. A conversation that `reads_replies` (a prompt-based benchmark protocol) gets every
    reply in `respond` and runs its calls itself; the engine then only samples and keeps the record.
    """

    name: str
    description: str
    tools: list[dict[str, Any]]
    finish_tool: bool = False  # offer `finish` as the way to end a turn (constrained mode needs one)
    malformed_ends_turn: bool = False  # a reply that cannot be read ends the turn (else it is shown as an error)
    reads_replies: bool = False  # every reply goes to `respond` as text: the benchmark reads its own call syntax
    max_calling_replies: int | None = None  # once one user turn has more replies that ran calls, the episode is cut

    @abstractmethod
    async def reset(self, seed: int) -> Task: ...

    @abstractmethod
    def opening(self, task: Task, hinted: bool, mode: Mode) -> list[dict[str, Any]]:
        """The first messages: the conversation's own system prompt, if any, and the user's first turn."""

    @abstractmethod
    async def step(self, action: ToolCall | Finish) -> StepResult: ...

    @abstractmethod
    async def respond(self, reply: str) -> UserTurn | None:
        """The agent ended its turn saying `reply`: the user's next turn, or None when the dialogue is over."""

    def prompt(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """What `chat` and `constrained` requests send for the conversation so far (a benchmark that shows the
        model a rendered transcript instead of the messages overrides this; `tokens` mode never calls it)."""
        return messages

    @abstractmethod
    async def grade(self) -> Grade: ...

    @abstractmethod
    async def close(self) -> None: ...
