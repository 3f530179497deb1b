"""The milestones as a model and a user would say them, for a scripted server (`spadework mock-server --script
acebench`): agent requests get the task's first milestone path one message at a time, user requests get a
user who answers until the agent says it is done.

Played through the engine, the tasks whose milestones reproduce the answer in process must pass: that checks
the model path (prompts, routing, the call syntax, the simulator's requests, scoring) end to end. The agent's
progress is read from the request alone (the number of its earlier messages), as a stateless server must.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from benchmarks.acebench.calls import Call, CallSyntaxError, parse_calls
from benchmarks.acebench.data import AceTask, load_tasks
from benchmarks.acebench.prompts import STOP_PHRASE

DONE = "All done."
GO_ON = "Please go on."
OPENING = "Hello, I need help with my task."


@lru_cache(maxsize=1)
def vendored_tasks() -> tuple[AceTask, ...]:
    """The tasks in seed order, read once (the server answers many requests per task)."""
    return tuple(load_tasks())


def parseable_path(task: AceTask) -> list[list[Call]]:
    """The first milestone path's messages that parse, as calls (what a native tool-calling agent could say)."""
    calls = []
    for stone in task.milestones[0]:
        try:
            calls.append(parse_calls(stone.strip()))
        except CallSyntaxError:
            continue
    return calls


def agent_prompt_reply(task: AceTask, messages: list[dict[str, Any]]) -> str:
    """`prompt` protocol: the next milestone (as text), then the end (to the user, or the stop phrase)."""
    history = str(messages[-1].get("content") or "").split("\n")  # the history is one line per message
    label = "agent:" if task.kind == "multi_turn" else "execution result:"  # multi_step shows no agent lines
    said = sum(line.startswith(label) for line in history)
    path = task.milestones[0]
    if said < len(path):
        return path[said].strip()
    return DONE if task.kind == "multi_turn" else STOP_PHRASE


def agent_fc_reply(task: AceTask, messages: list[dict[str, Any]]) -> list[Call] | str:
    """`fc` protocol: the next parseable milestone as native calls, then the end as text."""
    said = sum(1 for message in messages if message.get("role") == "assistant" and message.get("tool_calls"))
    path = parseable_path(task)
    if said < len(path):
        return path[said]
    return DONE if task.kind == "multi_turn" else STOP_PHRASE


def user_reply(chat: list[dict[str, Any]]) -> str:
    """The simulated user: opens, says go on, and finishes once the agent says it is done."""
    if len(chat) <= 2:
        return OPENING
    return STOP_PHRASE if str(chat[-1].get("content")).strip() == DONE else GO_ON
