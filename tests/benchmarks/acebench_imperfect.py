"""A weak agent and a plain user playing ACEBench Agent's prompt protocol, scripted from the request alone.

Its replies depend only on what a request says, never on who sent it, so spadework's harness and the reference
pipeline (chenchen0103/ACEBench's `generate.py`, whose agent and user simulator are OpenAI clients) can be
pointed at the same server and asked the same questions. The agent says the task's first milestone path with
one deterministic mistake per task (`MISTAKES`), then that it is done; the user opens with a tag naming the
task (so the agent's requests, which hold only the API list and the history, tell which task they are for),
says "go on", and finishes once the agent says it is done. Every request is kept, in arrival order.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from benchmarks.acebench.calls import CallSyntaxError, batch_text, parse_calls
from benchmarks.acebench.data import AceTask
from benchmarks.acebench.prompts import STOP_PHRASE, agent_system_prompt
from spadework.testing.mock_server import MockModel, MockSettings

DONE = "All done."
GO_ON = "Please go on."
OPENING = "Hello, I need help with my task."
MISTAKES = (
    "perfect",
    "wrong_api_name",  # the first call's API name misspelt
    "lowercase_api_name",  # the first call's API name in lower case
    "bad_syntax",  # the first call without its closing parenthesis and bracket
    "double_quoted",  # the first call's strings in double quotes
    "json_call",  # the first call as a JSON object
    "text_before_call",  # a sentence, then the first call, in one message
    "missing_argument",  # the first call without its first argument
    "changed_value",  # the first call's first string (or number) argument changed
    "repeated_call",  # the first call made twice, in two messages
    "merged_calls",  # the first two calls in one message
    "reversed_path",  # the calls in reverse order
    "partial_path",  # only the first half of the calls, then done
    "early_finish",  # "finish conversation" before any call
    "early_done",  # done before any call
)
TAG = re.compile(r"\[task ([a-z]{2}/agent_multi_(?:turn|step)_\d+)\]")


def plan(tasks: list[AceTask]) -> dict[str, str]:
    """Task key -> mistake, the mistakes in turn within each kind. Groups of tasks share a question (their start
    states differ), and a request shows only the question (the user's) or the API list and history (the
    agent's): one task per group."""
    chosen: dict[str, str] = {}
    counts: dict[str, int] = {}
    seen: set[tuple[str, str]] = set()
    for task in tasks:
        if (task.language, task.question) in seen:
            continue
        seen.add((task.language, task.question))
        chosen[task.key] = MISTAKES[counts.get(task.kind, 0) % len(MISTAKES)]
        counts[task.kind] = counts.get(task.kind, 0) + 1
    return chosen


def digest(messages: list[dict[str, Any]]) -> str:
    """What identifies a request's messages, order and all (a few bytes to keep for thousands of requests)."""
    return hashlib.sha256(json.dumps(messages, ensure_ascii=False, sort_keys=True).encode()).hexdigest()[:16]


class ImperfectAce:
    """Answers agent and user-simulator requests for the tasks in `plan` (task key -> mistake)."""

    def __init__(self, tasks: list[AceTask], plan: dict[str, str]) -> None:
        self.tasks = {task.key: task for task in tasks if task.key in plan}
        self.plan = plan
        self.agent_prompts = {agent_system_prompt(task) for task in self.tasks.values()}
        self.requests: list[tuple[str, str, str]] = []  # (task key, "agent" or "user", digest), in arrival order
        self._envelope = MockModel(MockSettings())

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        messages: list[dict[str, Any]] = body.get("messages") or []
        agent = bool(messages) and messages[0].get("content") in self.agent_prompts
        task = self._agent_task(messages) if agent else self._user_task(messages)
        self.requests.append((task.key, "agent" if agent else "user", digest(messages)))
        text = self._agent(task, messages[-1]["content"]) if agent else self._user(task, messages)
        return {"role": "assistant", "content": text}

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        """The reply in the scripted server's own OpenAI envelope (`spadework.testing.mock_server`)."""
        return self._envelope.completion(body, self.reply(body))

    def _user_task(self, messages: list[dict[str, Any]]) -> AceTask:
        system = str(messages[0].get("content")) if messages else ""
        found = [task for task in self.tasks.values() if task.kind == "multi_turn" and task.question in system]
        if not found:
            raise LookupError("a user request for none of the planned tasks")
        return max(found, key=lambda task: len(task.question))  # one question may hold another

    def _agent_task(self, messages: list[dict[str, Any]]) -> AceTask:
        prompt = str(messages[-1].get("content"))
        tagged = TAG.search(prompt)
        if tagged:
            return self.tasks[tagged.group(1)]
        steps = [task for task in self.tasks.values() if task.kind == "multi_step"]
        found = [task for task in steps if f"user:{task.question}\n" in prompt]
        if len(found) != 1:
            raise LookupError(f"an agent request for {len(found)} of the planned tasks")
        return found[0]

    def _user(self, task: AceTask, messages: list[dict[str, Any]]) -> str:
        if len(messages) <= 2:
            return f"{OPENING} [task {task.key}]"
        return STOP_PHRASE if str(messages[-1].get("content")).strip() == DONE else GO_ON

    def _agent(self, task: AceTask, prompt: str) -> str:
        label = "\nagent:" if task.kind == "multi_turn" else "\nexecution result:"  # multi_step shows no agent lines
        said = prompt.count(label)
        script = _script(task, self.plan[task.key])
        if said < len(script):
            return script[said]
        return DONE if task.kind == "multi_turn" else STOP_PHRASE


def _script(task: AceTask, mistake: str) -> list[str]:
    """The agent's messages before it says it is done: the first milestone path, with the task's mistake."""
    path = [stone.strip() for stone in task.milestones[0]]
    if mistake == "early_finish":
        return [STOP_PHRASE]
    if mistake == "early_done":
        return [DONE]
    if mistake == "reversed_path":
        return path[::-1]
    if mistake == "partial_path":
        return path[: len(path) // 2]
    if mistake == "merged_calls" and len(path) > 1:
        try:
            return [batch_text([*parse_calls(path[0]), *parse_calls(path[1])]), *path[2:]]
        except CallSyntaxError:
            return path
    if mistake == "repeated_call" and path:
        return [path[0], *path]
    if mistake == "perfect" or not path:
        return path
    return [_mistaken(path[0], mistake), *path[1:]]


def _mistaken(stone: str, mistake: str) -> str:
    """One milestone written wrong."""
    try:
        (name, arguments), *rest = parse_calls(stone)
    except (CallSyntaxError, ValueError):
        return stone
    if mistake == "wrong_api_name":
        return batch_text([(name + "_now", arguments), *rest])
    if mistake == "lowercase_api_name":
        return batch_text([(name.lower(), arguments), *rest])
    if mistake == "bad_syntax":
        return stone.removesuffix("]").removesuffix(")")
    if mistake == "double_quoted":
        return stone.replace("'", '"')
    if mistake == "json_call":
        return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    if mistake == "text_before_call":
        return f"Sure, I will do that now. {stone}"
    if mistake == "missing_argument":
        return batch_text([(name, dict(list(arguments.items())[1:])), *rest])
    if mistake == "changed_value":
        changed = dict(arguments)
        for key, value in arguments.items():
            if isinstance(value, str):
                changed[key] = value + "x"
                break
            if isinstance(value, int | float) and not isinstance(value, bool):
                changed[key] = value + 1
                break
        return batch_text([(name, changed), *rest])
    raise ValueError(f"unknown mistake {mistake!r}")
