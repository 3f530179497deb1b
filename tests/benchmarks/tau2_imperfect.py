"""A weak agent, a plain user and a rule-bound judge playing tau2, scripted from the request alone.

Replies depend only on what a request says, never on who sent it, so spadework's harness and the official
pipeline (sierra-research/tau2-bench's `tau2 run`, whose agent, user and judge are litellm clients) can be
pointed at one server and asked the same questions. The user opens with a tag naming the task (so the agent's
requests tell which task they are for) and says "Please go on." until the agent says it is done; the agent
plays the task's gold actions with one deterministic mistake (`MISTAKES`: an agent's or the user's), then
says it is done and what its task asks to communicate; the judge meets an assertion exactly when the agent
saw no tool error in the conversation. Every request is kept (task, role, digest), in arrival order.

In telecom the user has a phone: the agent asks for the user's gold actions in a message (`ASK` and the calls
as JSON), the user makes them with its tools one call at a time and says it has; the mistakes there are the
user's as much as the agent's (`TELECOM_MISTAKES`).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from benchmarks.tau2.data import DomainData, Tau2Task

OPENING = "Hi, I need help with my request."
GO_ON = "Please go on."
THANKS = "Thank you, that is all. ###STOP###"
DONE = "Done."
UNREADABLE: dict[str, Any] = {}  # stands for arguments sent as text that is not JSON
MISTAKES = (
    "perfect",
    "wrong_tool_name",  # the first state-changing call's name misspelt
    "missing_argument",  # the first state-changing call without its first argument
    "changed_value",  # the first state-changing call's first string argument changed
    "skipped_write",  # the last state-changing gold action left out
    "repeated_write",  # the last state-changing gold action made twice
    "silent",  # done without saying what the task asks to communicate
    "early_stop",  # ###STOP### before any call
    "parallel_calls",  # the first two calls in one message
    "unreadable_arguments",  # the first state-changing call's arguments not JSON
    "text_with_call",  # the first call with a sentence in the same message
    "empty_message",  # an empty message first
    "calculator",  # a calculate call first
    "error_storm",  # unknown tools until the error limit
    "endless_chat",  # questions until the step limit
    "user_transfer",  # the user asks for a human after the agent's first message
    "user_out_of_scope",  # the user gives up after the agent's first message
    "user_empty",  # the user's second message is empty
)
TELECOM_MISTAKES = (
    "perfect",
    "missing_argument",
    "skipped_write",
    "repeated_write",
    "early_stop",
    "error_storm",
    "endless_chat",
    "agent_calls_user_tool",  # the agent makes the user's first call itself
    "user_wrong_tool",  # the user's first call misspelt
    "user_skips",  # the user leaves the last call it was asked for out
    "user_parallel",  # the user makes every call it was asked for in one message
    "user_text_with_call",  # the user's first call with a sentence in the same message
    "user_calls_agent_tool",  # the user calls one of the agent's tools
    "user_extra_argument",  # the user's first call with an argument the tool does not take
    "user_unreadable",  # the user's first call's arguments not JSON
)
ASK = "Please do this on your phone: "
DID = "I did that."
TAG = re.compile(r"\[tau2 task (\w+)/(\S+)\]")
JUDGE_OPENING = "\n        TASK"
USER_OPENING = "# User Simulation Guidelines"


def mistakes_of(domain: DomainData) -> tuple[str, ...]:
    return TELECOM_MISTAKES if domain.user_tools is not None else MISTAKES


def plan(domain: DomainData, tasks: list[Tau2Task]) -> dict[str, str]:
    """Task id -> mistake: one mistake per task, in turn, over those of `tasks` whose gold actions change the
    database (in telecom: that have gold actions, the user's or the agent's), one task per scenario (the user's
    requests show only the scenario); a task with something to communicate, if any, gets `silent`; in telecom
    a task judged on its actions too plays it perfectly, and another misses an argument (which its action
    check forgives)."""
    writes = domain.toolkit.mutates_tool
    telecom = domain.user_tools is not None
    seen: set[str] = set()
    chosen: list[Tau2Task] = []
    for task in tasks:
        scenario = str(task.user_scenario)
        acts = bool(task.gold_actions) if telecom else any(writes(action.name) for action in task.gold_actions)
        if scenario not in seen and acts:
            seen.add(scenario)
            chosen.append(task)
    mistakes_list = mistakes_of(domain)
    chosen = chosen[: len(mistakes_list)]
    mistakes = {task.id: mistakes_list[place % len(mistakes_list)] for place, task in enumerate(chosen)}
    if telecom:
        judged = [task.id for task in chosen
                  if task.evaluation_criteria and "ACTION" in task.evaluation_criteria.reward_basis]  # fmt: skip
        for wanted, task_id in zip(("perfect", "missing_argument"), judged, strict=False):
            holder = next(task for task, mistake in mistakes.items() if mistake == wanted)
            mistakes[holder], mistakes[task_id] = mistakes[task_id], wanted
        return mistakes
    talking = [task.id for task in chosen if task.evaluation_criteria and task.evaluation_criteria.communicate_info]
    silent = next(task for task, mistake in mistakes.items() if mistake == "silent")
    if talking and silent not in talking:
        mistakes[silent], mistakes[talking[0]] = mistakes[talking[0]], "silent"
    return mistakes


def digest(body: dict[str, Any]) -> str:
    """What a request asks, whoever sent it: each message's role, text (None and "" alike), calls (name and
    decoded arguments) and the id a tool result answers, and the tools offered (by their whole schema)."""
    messages = []
    for message in body["messages"]:
        calls = [(call["function"]["name"], json.loads(call["function"]["arguments"] or "{}"))
                 for call in message.get("tool_calls") or []]  # fmt: skip
        messages.append([message["role"], message.get("content") or None, calls, message.get("tool_call_id")])
    tools = body.get("tools") or []
    text = json.dumps({"messages": messages, "tools": tools}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class ImperfectTau2:
    """The scripted agent, user and judge for `chosen` (task id -> mistake) of one domain."""

    def __init__(self, domain: DomainData, chosen: dict[str, str]) -> None:
        self.domain, self.chosen = domain, chosen
        self.tasks = {task.id: task for task in domain.tasks if task.id in chosen}
        self.by_scenario = {str(task.user_scenario): task.id for task in self.tasks.values()}
        self.writes = domain.toolkit.mutates_tool
        self.requests: list[tuple[str, str, str]] = []

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        system = str(messages[0].get("content") or "")
        if system.startswith(JUDGE_OPENING):
            task, role = self._tagged(str(messages[1]["content"])), "judge"
            reply: dict[str, Any] = {"role": "assistant", "content": self._verdict(str(messages[1]["content"]))}
        elif system.startswith(USER_OPENING):  # the longest scenario it holds (one may hold another: a persona's)
            task = max(((scenario, task) for scenario, task in self.by_scenario.items() if scenario in system),
                       key=lambda pair: len(pair[0]))[1]  # fmt: skip
            role = "user"
            reply = self._user(task, messages[1:])
        else:
            task, role = self._tagged(str(messages[2]["content"])), "agent"
            reply = self._agent(task, messages)
        self.requests.append((task, role, digest(body)))
        return {"id": "scripted", "object": "chat.completion", "model": body.get("model", "imperfect"),
                "choices": [{"index": 0, "message": reply, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}  # fmt: skip

    def _tagged(self, text: str) -> str:
        found = TAG.search(text)
        if found is None:
            raise ValueError(f"no task tag in {text[:200]!r}")
        return found.group(2)

    def _verdict(self, prompt: str) -> str:
        assertions = prompt.rsplit("expectedOutcomes:", 1)[1].strip()
        met = "Error:" not in prompt
        results = [{"expectedOutcome": assertions, "reasoning": "scripted", "metExpectation": met}]
        return json.dumps({"results": results})

    def _user(self, task: str, chat: list[dict[str, Any]]) -> dict[str, Any]:
        """The user's next message; in its chat the agent speaks as `user`, the user as `assistant`."""
        said = sum(message["role"] == "assistant" for message in chat)
        mistake = self.chosen[task]
        if said == 0:
            return _text(f"[tau2 task {self.domain.name}/{task}] {OPENING}")
        heard = max(place for place, message in enumerate(chat) if message["role"] == "user")
        last = str(chat[heard].get("content") or "")
        if last.startswith(ASK):
            return self._on_phone(mistake, json.loads(last.removeprefix(ASK)), chat[heard + 1 :])
        if said == 1 and mistake == "user_transfer":
            return _text("I want a human agent. ###TRANSFER###")
        if said == 1 and mistake == "user_out_of_scope":
            return _text("I don't know how to go on. ###OUT-OF-SCOPE###")
        if said == 1 and mistake == "user_empty":
            return _text("")
        return _text(THANKS if last.startswith(DONE) else GO_ON)

    def _on_phone(self, mistake: str, asked: list[list[Any]], since: list[dict[str, Any]]) -> dict[str, Any]:
        """The user's next call of those the agent `asked` for (after the messages `since` the asking), with its
        mistake in the first; `DID` once every one is made."""
        calls: list[tuple[str, dict[str, Any]]] = [(name, dict(arguments)) for name, arguments in asked]
        if mistake == "user_skips":
            calls = calls[:-1]
        if calls and mistake == "user_wrong_tool":
            calls[0] = (calls[0][0] + "s", calls[0][1])
        if calls and mistake == "user_extra_argument":
            calls[0] = (calls[0][0], {**calls[0][1], "force": True})
        if calls and mistake == "user_calls_agent_tool":
            calls.insert(0, ("get_data_usage", {"customer_id": "C1001", "line_id": "L1002"}))
        if calls and mistake == "user_unreadable":
            calls[0] = (calls[0][0], UNREADABLE)
        made = sum(len(message.get("tool_calls") or []) for message in since)
        if made >= len(calls):
            return _text(DID)
        batch = calls[made:] if mistake == "user_parallel" else [calls[made]]
        message = _calls(made, batch, prefix="user_call")
        if mistake == "user_text_with_call" and made == 0:
            message["content"] = "Doing it now."
        return message

    def _agent(self, task: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The agent's next message: the place in its plan is the number of its messages after the greeting."""
        place = sum(message["role"] == "assistant" for message in messages[2:])
        script = self._script(task)
        if place < len(script):
            return script[place]
        if self.chosen[task] == "endless_chat":
            return {"role": "assistant", "content": f"Could you tell me more ({place})?"}
        return {"role": "assistant", "content": "###STOP###"}

    def _script(self, task_id: str) -> list[dict[str, Any]]:
        if self.domain.user_tools is not None:
            return self._phone_script(task_id)
        task, mistake = self.tasks[task_id], self.chosen[task_id]
        gold = [(action.name, dict(action.arguments)) for action in task.gold_actions]
        criteria = task.evaluation_criteria
        infos = [] if criteria is None else list(criteria.communicate_info or [])
        done = DONE if mistake == "silent" or not infos else f"{DONE} " + " ".join(infos)
        calls: list[list[tuple[str, dict[str, Any]]]] = [[call] for call in gold]
        prefix: list[dict[str, Any]] = []
        whole = _whole_script(mistake)
        if whole is not None:
            return whole
        if mistake == "empty_message":
            prefix = [_text("")]
        if mistake == "calculator":
            calls.insert(0, [("calculate", {"expression": "2 * (3 + 4) / 5"})])
        writes = [place for place, (name, _) in enumerate(gold) if self.writes(name)]
        if writes:
            first = writes[0]
            name, arguments = gold[first]
            if mistake == "wrong_tool_name":
                calls[first] = [(name + "s", arguments)]
            if mistake == "missing_argument" and arguments:
                calls[first] = [(name, dict(list(arguments.items())[1:]))]
            if mistake == "changed_value":
                changed = dict(arguments)
                for key, value in changed.items():
                    if isinstance(value, str):
                        changed[key] = value + "X"
                        break
                calls[first] = [(name, changed)]
            if mistake == "unreadable_arguments":
                calls[first] = [(name, UNREADABLE)]
            if mistake == "skipped_write":
                del calls[writes[-1]]
            if mistake == "repeated_write":
                calls.insert(writes[-1], [gold[writes[-1]]])
        if mistake == "parallel_calls" and len(calls) >= 2:
            calls[0:2] = [calls[0] + calls[1]]
        messages = prefix + [_calls(place, batch) for place, batch in enumerate(calls)]
        if mistake == "text_with_call" and len(messages) > len(prefix):
            messages[len(prefix)]["content"] = "Let me look into that."
        return [*messages, _text(done)]

    def _phone_script(self, task_id: str) -> list[dict[str, Any]]:
        """Telecom: the gold actions in order, the agent's as calls, each run of the user's as one request to
        the user; the agent's mistakes are in its calls."""
        task, mistake = self.tasks[task_id], self.chosen[task_id]
        whole = _whole_script(mistake)
        if whole is not None:
            return whole
        steps: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = []
        for action in task.gold_actions:
            call = (action.name, dict(action.arguments))
            if action.requestor == "user" and steps and steps[-1][0] == "ask":
                steps[-1][1].append(call)
            else:
                steps.append(("ask" if action.requestor == "user" else "call", [call]))
        mine = [place for place, (kind, _) in enumerate(steps) if kind == "call"]
        asks = [place for place, (kind, _) in enumerate(steps) if kind == "ask"]
        if mine and mistake == "missing_argument":
            name, arguments = steps[mine[0]][1][0]
            steps[mine[0]] = ("call", [(name, dict(list(arguments.items())[1:]))])
        if mine and mistake == "skipped_write":
            del steps[mine[-1]]
        elif mine and mistake == "repeated_write":
            steps.insert(mine[-1], steps[mine[-1]])
        if asks and mistake == "agent_calls_user_tool":
            steps.insert(asks[0], ("call", [steps[asks[0]][1][0]]))
        messages = [_calls(place, batch) if kind == "call" else _text(ASK + json.dumps(batch))
                    for place, (kind, batch) in enumerate(steps)]  # fmt: skip
        return [*messages, _text(DONE)]


def _whole_script(mistake: str) -> list[dict[str, Any]] | None:
    """The agent's script where the mistake replaces the whole of it: stopping at once, only chatting (it asks
    until the step limit), or unknown tools until the error limit."""
    if mistake == "early_stop":
        return [_text("I cannot help with that. ###STOP###")]
    if mistake == "endless_chat":
        return []
    if mistake == "error_storm":
        return [_calls(place, [("lookup_everything", {"n": place})]) for place in range(12)]
    return None


def _text(content: str) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def _calls(place: int, batch: list[tuple[str, dict[str, Any]]], prefix: str = "call") -> dict[str, Any]:
    calls = [{"id": f"{prefix}_{place}_{index}", "type": "function",
              "function": {"name": name, "arguments": '{"' if arguments is UNREADABLE else json.dumps(arguments)}}
             for index, (name, arguments) in enumerate(batch)]  # fmt: skip
    return {"role": "assistant", "content": None, "tool_calls": calls}
