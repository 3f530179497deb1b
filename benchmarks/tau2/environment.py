"""One tau2 task as an engine environment: the official half-duplex orchestrator, driven by the engine's samples.

The official loop (`orchestrator.Orchestrator`, text half-duplex) passes one message at a time: the agent
greets ("Hi! How can I help you today?"), the user simulator answers; an agent message with tool calls goes to
the environment, whose results go back to the agent; one without goes to the user. Each message is a step.
It ends when the user says `###STOP###`, `###TRANSFER###` or `###OUT-OF-SCOPE###` (user_stop), after 200 steps
(max_steps) or 10 tool errors (too_many_errors); the limits are checked after every step that does not hand
over to the environment, even one that already ended it. The agent cannot end it (outside solo mode the
official agent's `###STOP###` is only text). A message with neither text nor calls is refused by the official
message check, which fails the simulation as an infrastructure error, and so does a tool call whose arguments
are not a JSON object (its client decodes them): so they end it here (`empty_agent_message`,
`agent_call_not_json`; an empty user message is a bad answer from the user's endpoint). The engine samples
the agent; this environment plays the tools (`env`), the user and the evaluator. Where the user has tools
(telecom's phone), a user message with calls goes to the environment and the results back to the user (a step
each), never to the agent; the agent sees only what the user says.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from benchmarks.parties import Party
from benchmarks.tau2.data import DomainData, Tau2Task
from benchmarks.tau2.domain_env import DomainEnv
from benchmarks.tau2.evaluator import Said, Termination, evaluate
from benchmarks.tau2.prompts import agent_system_prompt, user_system_prompt
from engine.environments import Ending, Opening, Response
from engine.messages import Message
from engine.parsing import ParsedReply
from engine.settings import Mode
from engine.trajectory import EpisodeKey
from engine.transport import EndpointFailure
from toolworlds.episode import Grade

GREETING = "Hi! How can I help you today?"
STOP, TRANSFER, OUT_OF_SCOPE = "###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###"
MAX_STEPS = 200  # the official CLI's --max-steps default
MAX_ERRORS = 10  # its --max-errors default
Destination = Literal["user", "agent", "env"]


def user_stops(content: str) -> bool:
    return STOP in content or TRANSFER in content or OUT_OF_SCOPE in content


@dataclass(frozen=True)
class Limits:
    max_steps: int = MAX_STEPS
    max_errors: int = MAX_ERRORS


@dataclass
class Dialogue:
    """What one simulation has said so far, and where it stands."""

    said: list[Said] = field(default_factory=list)  # the official trajectory, in order (the evaluator reads it)
    user_view: list[dict[str, Any]] = field(default_factory=list)  # the user simulator's chat, roles flipped
    steps: int = 0
    errors: int = 0
    termination: Termination | None = None


class Tau2Conversation:
    """One task per episode: the episode's seed is the task's index in `tasks`; its sample is the trial."""

    def __init__(self, domain: DomainData, tasks: list[Tau2Task], user: Party, judge: Party | None,
                 limits: Limits = Limits()) -> None:  # fmt: skip
        self.domain, self.tasks, self.user, self.judge, self.limits = domain, tasks, user, judge, limits
        self._task: Tau2Task | None = None
        self._env: DomainEnv | None = None
        self._key = EpisodeKey(world=user.world, seed=0)
        self.dialogue = Dialogue()

    @property
    def task(self) -> Tau2Task:
        if self._task is None:
            raise RuntimeError("call start(seed) first")
        return self._task

    @property
    def env(self) -> DomainEnv:
        if self._env is None:
            raise RuntimeError("call start(seed) first")
        return self._env

    async def start(self, seed: int, hinted: bool, mode: Mode) -> Opening:
        self._task = self.tasks[seed]
        self._env = self.domain.fresh_env(self._task)
        self._key = EpisodeKey(world=self.user.world, seed=seed)
        self.dialogue = Dialogue(said=[Said("assistant", GREETING)], user_view=[{"role": "user", "content": GREETING}])
        first = await self._user_step()
        system: Message = {"role": "system", "content": agent_system_prompt(self.domain.policy)}
        greeting: Message = {"role": "assistant", "content": GREETING}
        return Opening([system, greeting, {"role": "user", "content": first}], list(self.domain.tools))

    def prompt(self, messages: list[Message]) -> list[Message]:
        return messages

    async def respond(self, message: Message, reply: ParsedReply, turn: int) -> Response:
        dialogue = self.dialogue
        if dialogue.termination is not None:  # the user's first message ended it: the official asks no agent, and
            return await self._end()  # the engine always does once; its reply is not part of the simulation
        content = message.get("content")
        text = content if isinstance(content, str) else None
        calls = [{"name": call.name, "arguments": call.arguments} for call in reply.calls]
        unreadable = next((call.problem for call in reply.calls if call.problem), None)
        if unreadable is not None:  # the official client decodes every call's arguments, and fails the simulation
            return Response(ending=Ending("infra_error", "agent_call_not_json", detail=unreadable))
        if not calls and not (text or "").strip():
            detail = "AssistantMessage must have either content or tool_calls"
            return Response(ending=Ending("infra_error", "empty_agent_message", detail=detail))
        dialogue.said.append(Said("assistant", text, calls or None))
        destination: Destination = "env" if reply.calls else "user"
        self._count_step(destination)
        if dialogue.termination is not None:
            return await self._end()
        if destination == "user":
            if text is not None and text.strip():  # the official user never sees an empty message
                dialogue.user_view.append({"role": "user", "content": text})
            said = await self._user_step()
            if dialogue.termination is not None:
                return await self._end()
            return Response([{"role": "user", "content": said}])
        results: list[Message] = []
        for position, call in enumerate(reply.calls):
            outcome = self.env.call(call.name, dict(call.arguments))
            outcome_content, error = outcome.content, outcome.error
            dialogue.errors += error
            dialogue.said.append(Said("tool", outcome_content))
            results.append({"role": "tool", "tool_call_id": call.id or f"call_{turn}_{position}",
                            "content": outcome_content})  # fmt: skip
        self._count_step("agent")
        response = Response(results, tool_calls=len(reply.calls), problems=list(reply.problems))
        if dialogue.termination is not None:
            response.ending = await self._ending()
        return response

    async def _user_step(self) -> str:
        """The user simulator's turns until it speaks to the agent (each a step); it may end the simulation. A
        turn with tool calls goes to the environment, and the results back to the user."""
        dialogue = self.dialogue
        tools = self.domain.user_tools
        system = {"role": "system", "content": user_system_prompt(self.task, with_tools=tools is not None)}
        while True:
            answer = await self.user.answer(self._key, [system, *dialogue.user_view], tools=tools)
            content = answer.get("content")
            text = content if isinstance(content, str) else None
            calls = _user_calls(answer) if tools is not None else []
            if not calls and not (text or "").strip():
                raise EndpointFailure("bad_response", "the user simulator's message is empty (UserMessage must "
                                      "have either content or tool_calls)", retryable=False)  # fmt: skip
            dialogue.said.append(Said("user", text, [{"name": name, "arguments": arguments}
                                                     for _, name, arguments in calls] or None))  # fmt: skip
            if not calls:
                dialogue.user_view.append({"role": "assistant", "content": text})
                if user_stops(text or ""):
                    dialogue.termination = "user_stop"
                self._count_step("agent")
                return text or ""
            dialogue.user_view.append({"role": "assistant", "content": text, "tool_calls": [
                {"id": ident, "name": name, "function": {"name": name, "arguments": json.dumps(arguments)},
                 "type": "function"} for ident, name, arguments in calls]})  # fmt: skip
            self._count_step("env")
            for ident, name, arguments in calls:
                outcome = self.env.call(name, dict(arguments), "user")
                dialogue.errors += outcome.error
                dialogue.said.append(Said("tool", outcome.content))
                dialogue.user_view.append({"role": "tool", "content": outcome.content, "tool_call_id": ident})
            self._count_step("user")
            if dialogue.termination is not None:
                return ""

    def _count_step(self, destination: Destination) -> None:
        """One message passed; unless it went to the environment, the limits are checked (and win)."""
        dialogue = self.dialogue
        dialogue.steps += 1
        if destination == "env":
            return
        if dialogue.steps >= self.limits.max_steps:
            dialogue.termination = "max_steps"
        if dialogue.errors >= self.limits.max_errors:
            dialogue.termination = "too_many_errors"

    async def _end(self) -> Response:
        return Response(ending=await self._ending())

    async def _ending(self) -> Ending:
        grade = await self.grade()
        termination = self.dialogue.termination
        return Ending.on_state(grade, None if termination in ("agent_stop", "user_stop") else termination)

    async def grade(self) -> Grade:
        reward = await evaluate(self.domain, self.task, self.dialogue.termination, self.dialogue.said, self.judge,
                                self._key)  # fmt: skip
        card = {**reward, "steps": self.dialogue.steps, "errors": self.dialogue.errors}
        return Grade(score=float(reward["reward"]), scorecard=json.dumps(card))

    async def close(self) -> None:
        self._env = None


def _user_calls(answer: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """The user simulator's tool calls (id, name, arguments); arguments that are not a JSON object fail the
    simulation, as the official client's decoding does."""
    calls = []
    for position, call in enumerate(answer.get("tool_calls") or []):
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "")
        except (json.JSONDecodeError, TypeError) as error:
            raise EndpointFailure("bad_response", f"the user simulator's call arguments are not JSON: {error}",
                                  retryable=False) from None  # fmt: skip
        if not isinstance(arguments, dict):
            raise EndpointFailure("bad_response", "the user simulator's call arguments are not a JSON object",
                                  retryable=False)  # fmt: skip
        calls.append((str(call.get("id") or f"user_call_{position}"), str(function.get("name")), arguments))
    return calls
