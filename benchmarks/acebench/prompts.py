"""ACEBench's prompt-based Agent protocol as pure functions: prompts, history lines, routing and the stop rule.

The texts are the reference's own (carried as data in `data/prompts.json`, MIT). Its two loops, which the engine
drives with these functions (`index` counts the messages the loop has produced, from 0):

multi_turn (`multi_turn_inference`): the user simulator opens (its reply to `user_opening`), then up to
`MAX_MESSAGES` messages follow, each chosen by the last message's recipient: to "user", the simulator answers;
to "agent", the agent answers (to "execution" if its text is a call, see `agent_recipient`, else to "user"); to
"execution", the apps run it (`AceBackends.respond`) and answer the agent. The agent's prompt holds the whole
dialogue so far (`render_history`). It ends once `conversation_over`.

multi_step (`multi_step_inference`): the question opens; the agent answers first and after every execution
message, and *every* agent message goes to execution (text it cannot parse gets `undecodable_reply`). The agent's
prompt holds the question and the execution messages only: upstream, the history is extended with the last
message on the agent's turns only, so the agent's own messages never enter it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, cast

from benchmarks.acebench.calls import CallSyntaxError, parse_calls
from benchmarks.acebench.data import VENDORED, AceTask, Kind, Language

STOP_PHRASE = "finish conversation"
MAX_MESSAGES = 40  # --max-dialog-turns: messages the loop produces (user, agent and execution alike)
# The reference's user (`APIModel_user.APIUSER`) samples so, with gpt-4o by default.
USER_SAMPLING = {"temperature": 0.001, "max_tokens": 1000}
MULTI_TURN_CALL = re.compile(r"\[.*\]")  # re.search, then the text must decode
MULTI_STEP_CALL = re.compile(r"\[.*?\]")  # re.match: only sets the recipient; every message is executed anyway
SPEAKER_PREFIXES = ("user:", "agent:")

Role = Literal["user", "agent", "execution"]


@dataclass(frozen=True)
class Message:
    """One dialogue message as the reference records it; an execution message's content is the list of shown
    results (`AceBackends.respond`), or multi_step's undecodable reply string."""

    sender: Role
    recipient: Role
    content: Any


@lru_cache(maxsize=2)
def _texts(language: Language) -> dict[str, str]:
    every = json.loads((VENDORED / "prompts.json").read_text(encoding="utf-8"))
    return cast(dict[str, str], every[language])


def undecodable_reply(language: Language) -> str:
    """multi_step's execution reply to agent text that is not a call (English in both languages)."""
    return _texts(language)["multi_step_undecodable"]


def agent_system_prompt(task: AceTask, language: Language | None = None) -> str:
    """The agent's system message. multi_turn: the role text, then the airline policy if Travel is involved and
    the phone policy if BaseApi is (each policy opens with its fixed "current time"); multi_step: its role text
    alone, in Chinese whatever the task's language unless `language` says otherwise (`_agent_language`;
    upstream formats it with an empty time, which it has no slot for)."""
    texts = _texts(language or _agent_language(task))
    if task.kind == "multi_step":
        return texts["multi_step_agent_system"]
    prompt = texts["multi_turn_agent_system"]
    if "Travel" in task.involved_classes:
        prompt += texts["travel_policy"]
    if "BaseApi" in task.involved_classes:
        prompt += texts["base_policy"]
    return prompt


def agent_user_prompt(task: AceTask, history: str) -> str:
    """The agent's one user message: the API docs and the history text (`render_history`). The docs go in as
    Python's `str()` of the list (single quotes, True/False), which is what `str.format` gives upstream."""
    template = _texts(_agent_language(task))[f"{task.kind}_agent_user"]
    return template.format(functions=task.functions, history=history)


def _agent_language(task: AceTask) -> Language:
    """The language of the agent's prompts: the task's, but Chinese for every multi_step task, as the reference
    plays them (it never passes the language to its multi_step agent, whose default is "zh")."""
    return "zh" if task.kind == "multi_step" else task.language


def history_line(kind: Kind, message: Message) -> str:
    """`user:...`, `agent:...`, `execution:...` (multi_step: `execution result:...`), no space after the colon,
    non-text content as Python's `str()` of it, one line each (newline-terminated)."""
    if message.sender == "user":
        return f"user:{message.content}\n"
    if message.sender == "agent":
        return f"agent:{message.content}\n"
    label = "execution" if kind == "multi_turn" else "execution result"
    return f"{label}:{message.content}\n"


def render_history(kind: Kind, messages: Sequence[Message]) -> str:
    """The history text in the agent's prompt for the dialogue so far (opening message first)."""
    shown = messages if kind == "multi_turn" else [message for message in messages if message.sender != "agent"]
    return "".join(history_line(kind, message) for message in shown)


def agent_recipient(kind: Kind, text: str) -> Role:
    """Where an agent message goes. multi_turn: to execution when some `[...]` is in it (on one line) and the whole
    text decodes as calls (`calls.parse_calls`), else to the user. multi_step: "execution" when the text starts with
    `[...]`, else "user", as recorded upstream, though the loop executes every agent message regardless."""
    if kind == "multi_step":
        return "execution" if MULTI_STEP_CALL.match(text) else "user"
    if not MULTI_TURN_CALL.search(text):
        return "user"
    try:
        parse_calls(text)
    except CallSyntaxError:
        return "user"
    return "execution"


def next_speaker(kind: Kind, index: int, last: Message) -> Role:
    """Who produces message `index`, given the last message so far."""
    if kind == "multi_step":
        return "agent" if index == 0 or last.sender == "execution" else "execution"
    return last.recipient


def conversation_over(index: int, content: Any) -> bool:
    """After message `index` was added: stop once it says "finish conversation", from the third message on
    (substring of text; for an execution message's list, an element equal to it), whoever sent it. The loop also
    stops after `MAX_MESSAGES` messages."""
    return index > 1 and STOP_PHRASE in content


def user_system_prompt(task: AceTask) -> str:
    """The simulator's system message: the phone or airline user rules with `Instruction: {question}` (phone
    when BaseApi is involved, else airline when Travel is; upstream crashes for neither)."""
    texts = _texts(task.language)
    if "BaseApi" in task.involved_classes:
        template = texts["user_system_base"]
    elif "Travel" in task.involved_classes:
        template = texts["user_system_travel"]
    else:
        raise ValueError(f"{task.key}: the user simulator needs BaseApi or Travel among {task.involved_classes}")
    return template.format(instruction=task.question)


def user_opening(language: Language) -> str:
    """The first message the simulator gets, as its user: "Is there anything you need help with today?"."""
    return _texts(language)["user_opening"]


def strip_speaker_prefix(text: str) -> str:
    """An agent message as handed to the simulator: one leading `user:` or `agent:` removed."""
    for prefix in SPEAKER_PREFIXES:
        if text.startswith(prefix):
            return text[len(prefix) :]
    return text


def simulator_messages(task: AceTask, exchanges: Sequence[Message]) -> list[dict[str, str]]:
    """The simulator's chat so far, for its next reply: system prompt, the opening line as "user", then its own
    replies as role "system" (sic: upstream appends them so) and the agent's messages to it as "user".
    `exchanges` are the dialogue's user messages and agent-to-user messages, in order; others are skipped."""
    chat = [
        {"role": "system", "content": user_system_prompt(task)},
        {"role": "user", "content": user_opening(task.language)},
    ]
    for message in exchanges:
        if message.sender == "user":
            chat.append({"role": "system", "content": str(message.content)})
        elif message.sender == "agent" and message.recipient == "user":
            chat.append({"role": "user", "content": strip_speaker_prefix(str(message.content))})
    return chat
