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

from pydantic import BaseModel, Field, SkipValidation

from engine.environments import Ending, Opening, Response, run_calls
from engine.messages import Message, OpenAITool
from engine.parsing import ParsedReply
from engine.settings import Mode
from toolworlds.core import Finish, StepResult, Task, ToolCall
from toolworlds.episode import Grade
from toolworlds.tool import FINISH_FUNCTION

NEW_TOOLS_HEADER = "New tools you can call from now on:"


class UserTurn(BaseModel):
    """What the user says next; `tools` (OpenAI function specs) become callable from this turn on.

    A conversation that reads replies itself also answers a reply's calls with their results (`calls_run` > 0):
    those continue the agent's turn, counting toward `max_calling_replies`, rather than begin the user's next."""

    content: str
    # As the benchmark wrote them, key order included (a tokens-mode listing shows them as JSON).
    tools: SkipValidation[list[OpenAITool]] = Field(default_factory=list)
    calls_run: int = 0

    def text(self, mode: Mode) -> str:
        """The user message as sent. Where no `tools` field is sent (`tokens` renders the list once,
        `constrained` sends a schema), the revealed tools are listed in it."""
        if not self.tools or mode == "chat":
            return self.content
        listing = "\n".join(json.dumps(entry["function"]) for entry in self.tools)
        return f"{NEW_TOOLS_HEADER}\n{listing}\n\n{self.content}"


class Conversation(ABC):
    """A dialogue as an `Environment`: its own opening, and after each reply the results of its calls or, when
    the reply ends the agent's turn, the user's next turn (`user_turn`).

    `step` is only ever given `ToolCall`s; where the agent would finish a toolworld, the user answers instead.
    A conversation that `reads_replies` (a prompt-based benchmark protocol) gets every reply in `user_turn`
    and runs its calls itself.
    """

    name: str
    description: str
    tools: list[OpenAITool]  # offered from the first turn (after `reset`: they may depend on the task)
    finish_tool: bool = False  # offer `finish` as the way to end a turn (constrained mode needs one)
    malformed_ends_turn: bool = False  # a reply that cannot be read ends the turn (else it is shown as an error)
    reads_replies: bool = False  # every reply goes to `user_turn` as text: the benchmark reads its own call syntax
    max_calling_replies: int | None = None  # once one user turn has more replies that ran calls, the episode is cut

    @abstractmethod
    async def reset(self, seed: int) -> Task: ...

    @abstractmethod
    def opening(self, task: Task, hinted: bool, mode: Mode) -> list[Message]:
        """The first messages: the conversation's own system prompt, if any, and the user's first turn."""

    @abstractmethod
    async def step(self, action: ToolCall | Finish) -> StepResult: ...

    @abstractmethod
    async def user_turn(self, reply: str) -> UserTurn | None:
        """The agent ended its turn saying `reply`: the user's next turn, or None when the dialogue is over."""

    def prompt(self, messages: list[Message]) -> list[Message]:
        """What `chat` and `constrained` requests send for the conversation so far (a benchmark that shows the
        model a rendered transcript instead of the messages overrides this; `tokens` mode never calls it)."""
        return messages

    @abstractmethod
    async def grade(self) -> Grade: ...

    @abstractmethod
    async def close(self) -> None: ...

    async def start(self, seed: int, hinted: bool, mode: Mode) -> Opening:
        self._mode, self._calling_replies = mode, 0  # replies that ran calls in the user's current turn
        task = await self.reset(seed)
        self._offered = [*self.tools, FINISH_FUNCTION] if self.finish_tool else list(self.tools)
        return Opening(self.opening(task, hinted, mode), list(self._offered))

    async def respond(self, message: Message, reply: ParsedReply, turn: int) -> Response:
        if self.reads_replies or (not reply.calls and not reply.problems):
            return await self._next_user_turn(reply.text)
        if reply.problems and self.malformed_ends_turn:
            response = await self._next_user_turn(reply.text)
            response.problems[:0] = reply.problems
            return response
        calls = await run_calls(message, reply, turn, self.step, self._offered)
        if calls.finished:  # ends the agent's turn; later calls in the reply were dropped
            response = await self._next_user_turn(calls.finish or "")
            response.messages[:0] = calls.messages
            response.tool_calls += calls.tool_calls
            return response
        response = Response(calls.messages, tool_calls=calls.tool_calls, problems=calls.problems, ending=calls.ending)
        if calls.tool_calls and response.ending is None:
            response.ending = await self._count_calling_reply()
        return response

    async def _next_user_turn(self, reply: str) -> Response:
        """The user's next message (and any tools it reveals), or the dialogue's end. A conversation that reads
        replies may instead answer with the results of the calls it ran: those continue the agent's turn."""
        user = await self.user_turn(reply)
        if user is None:
            return Response(ending=Ending.on_state(await self.grade()))
        self._offered.extend(user.tools)
        response = Response([{"role": "user", "content": user.text(self._mode)}], list(user.tools), user.calls_run)
        if user.calls_run:
            response.ending = await self._count_calling_reply()
        else:
            self._calling_replies = 0
        return response

    async def _count_calling_reply(self) -> Ending | None:
        """One more reply in this user turn ran calls; past the conversation's limit, the episode is cut."""
        self._calling_replies += 1
        limit = self.max_calling_replies
        if limit is not None and self._calling_replies > limit:
            return Ending.on_state(await self.grade(), "user_turn_limit")
        return None
