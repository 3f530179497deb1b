"""The shapes that cross the engine: chat messages and the tools an episode offers (`OpenAITool`, defined
with the tools), as OpenAI's chat API has them. Typed, so a misspelt key or a tool result without its call
id is a type error, not a silent drift in what the model is shown. JSON the engine does not own (a server's
answer, a tool's JSON Schema) stays a dict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, Required, cast

from typing_extensions import TypedDict  # the one pydantic can read before Python 3.12

from toolworlds.tool import OpenAITool

__all__ = ["CalledFunction", "Message", "MessageCall", "OpenAITool", "Role", "messages_from"]

Role = Literal["system", "user", "assistant", "tool"]


class CalledFunction(TypedDict):
    name: str
    arguments: str  # JSON text, as the API carries it


class MessageCall(TypedDict):
    id: str
    type: Literal["function"]
    function: CalledFunction


class Message(TypedDict, total=False):
    """One chat message; `content` None on an assistant turn that only calls tools."""

    role: Required[Role]
    content: str | None
    tool_calls: list[MessageCall]
    tool_call_id: str  # a tool result: the call it answers
    name: str  # a tool result: the tool's name (some templates show it)


ROLES: frozenset[str] = frozenset(("system", "user", "assistant", "tool"))


def messages_from(raw: Iterable[Mapping[str, Any]], where: str) -> list[Message]:
    """Messages read from data (a benchmark's turns), checked at the boundary: each has a known role and text
    (or no) content; `where` names the source in the error."""
    checked: list[Message] = []
    for position, message in enumerate(raw):
        if message.get("role") not in ROLES or not isinstance(message.get("content"), str | None):
            raise ValueError(f"{where}: message {position} is not a chat message (role one of {sorted(ROLES)}, "
                             f"content text): {dict(message)!r:.200}")  # fmt: skip
        checked.append(cast(Message, dict(message)))
    return checked
