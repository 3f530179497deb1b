"""What the agent talks to in one episode: it opens the conversation, answers every reply, and says how it ended.

The engine's loop (`engine.episode`) only samples: each reply goes to the environment, whose `Response` is
the messages that follow it (tool results, an error to show the agent, the user's next turn), any tools it
reveals, and, once the episode is over, its `Ending`. A toolworld is one such environment
(`ToolworldEnvironment`: the calls run in a `toolworlds.episode.Episode`, `finish` or a reply without calls
ends it); a benchmark dialogue is another (`engine.conversation.Conversation`: a reply without calls ends
the agent's turn and the user answers). Both run a reply's calls the same way (`run_calls`).

In-process worlds step under a limiter shared by all their episodes (`playing` wraps them in
`toolworlds.episode.Paced`), so thousands of episodes cannot pile CPU work onto the event loop in one burst;
sandboxed steps run in their own processes, whose sockets pace them.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

from engine.messages import Message, OpenAITool
from engine.parsing import ParsedCall, ParsedReply
from engine.settings import EpisodeSettings, Mode
from engine.templates import load_template
from engine.trajectory import Status
from toolworlds.core import Finish, StepResult, Task, ToolCall, error_observation
from toolworlds.episode import Described, Episode, Grade, Paced, World
from toolworlds.sandbox.described import SandboxWorld
from toolworlds.tool import FINISH_FUNCTION, FINISH_TOOL

AGENT_RULES = (
    "Solve the user's task by calling the tools, one step at a time, using what each call returns. "
    f"When the task is done, call `{FINISH_TOOL}`, with `answer` set when the task asks a question."
)


@dataclass(frozen=True)
class Ending:
    """How an episode ended, as its record keeps it (`engine.trajectory.EpisodeRecord`)."""

    status: Status
    cause: str | None = None
    reward: float | None = None
    scorecard: str | None = None
    detail: str | None = None

    @classmethod
    def on_state(cls, grade: Grade, cause: str | None = None) -> Ending:
        """Ended on the state reached: `ok` when the environment ended it, else cut (`truncated`) for `cause`."""
        return cls("ok" if cause is None else "truncated", cause, grade.score, grade.scorecard)

    @classmethod
    def of_step(cls, result: StepResult) -> Ending:
        """A step that ended the episode: the agent finished (`ok`), or the world's step limit cut it."""
        scorecard = result.info.get("scorecard")
        status: Status = "ok" if result.terminated else "truncated"
        cause = None if result.terminated else "step_limit"
        return cls(status, cause, result.reward, None if scorecard is None else str(scorecard))


@dataclass(frozen=True)
class Opening:
    """The first messages, and the tools offered from the first turn on."""

    messages: list[Message]
    tools: list[OpenAITool]


@dataclass
class Response:
    """What follows one reply: messages, tools revealed from now on, the calls run and what could not be read,
    and, when the episode is over, its ending."""

    messages: list[Message] = field(default_factory=list)
    tools: list[OpenAITool] = field(default_factory=list)
    tool_calls: int = 0
    problems: list[str] = field(default_factory=list)
    ending: Ending | None = None


class Environment(Protocol):
    """One episode's counterpart; a fresh one per episode."""

    async def start(self, seed: int, hinted: bool, mode: Mode) -> Opening: ...

    def prompt(self, messages: list[Message]) -> list[Message]:
        """What `chat` and `constrained` requests send for the conversation so far (`tokens` mode never asks)."""
        ...

    async def respond(self, message: Message, reply: ParsedReply, turn: int) -> Response:
        """Answer the assistant `message` of turn `turn`, read as `reply`."""
        ...

    async def grade(self) -> Grade:
        """The state reached, graded: for an episode the engine cuts (turn limit, token budget)."""
        ...

    async def close(self) -> None: ...


@dataclass
class CallsRun:
    """A reply's calls, run in order until one ends the episode or the agent calls `finish`."""

    messages: list[Message] = field(default_factory=list)
    tool_calls: int = 0
    problems: list[str] = field(default_factory=list)
    ending: Ending | None = None  # a step ended the episode
    finish: str | None = None  # the agent called `finish` with this answer ("" for none); later calls are dropped
    finished: bool = False


async def run_calls(
    message: Message,
    reply: ParsedReply,
    turn: int,
    step: Callable[[ToolCall], Awaitable[StepResult]],
    tools: list[OpenAITool],
) -> CallsRun:
    """Run `reply`'s calls through `step`; each native call's result is a tool message answering its id, results
    of calls written as text and what was wrong with the reply go back as one user message. `finish` counts
    only where `tools` offers it."""
    native = bool(message.get("tool_calls"))
    offers_finish = FINISH_FUNCTION in tools
    done = CallsRun()
    results: list[str] = []
    for position, call in enumerate(reply.calls):
        if call.problem:
            content = json.dumps(error_observation("malformed_call", call.problem))
        elif call.name == FINISH_TOOL and offers_finish:
            answer = call.arguments.get("answer")
            done.finished, done.finish = True, None if answer is None else str(answer)
            return done
        else:
            done.tool_calls += 1
            result = await step(ToolCall(name=call.name, arguments=call.arguments))
            if result.done:
                done.ending = Ending.of_step(result)
                return done
            content = _observation_text(result.observation)
        if native:
            done.messages.append({"role": "tool", "tool_call_id": _call_id(call, turn, position), "content": content})
        else:
            results.append(content)
    done.problems = list(reply.problems)
    # A native call that failed already has its error in its own tool message.
    feedback = _feedback(results, [] if native else reply.problems, tools)
    if feedback:
        done.messages.append({"role": "user", "content": feedback})
    return done


def _feedback(results: list[str], problems: list[str], tools: list[OpenAITool]) -> str:
    """Tool results for calls written as text, and what was wrong with the reply, as one user message."""
    parts = [f"<tool_response>\n{content}\n</tool_response>" for content in results]
    if problems:
        names = ", ".join(entry["function"]["name"] for entry in tools)
        parts.append("Your reply could not be used: " + "; ".join(problems) + f". Call one of the tools ({names}).")
    return "\n".join(parts)


def _observation_text(observation: Any) -> str:
    """A tool's result as the model reads it: text as it is (as tool messages carry it), anything else as JSON."""
    return observation if isinstance(observation, str) else json.dumps(observation)


def _call_id(call: ParsedCall, turn: int, position: int) -> str:
    return call.id or f"call_{turn}_{position}"


def opening_messages(world: Described, task: Task, hinted: bool, mode: Mode) -> list[Message]:
    """System rules (and, in constrained mode, the tool list, since no `tools` field is sent) and the task."""
    user = task.instruction if not hinted else f"{task.instruction}\n\nHint: {task.hint}"
    return [{"role": "system", "content": _system_prompt(world, mode)}, {"role": "user", "content": user}]


def shared_opening(world: Described, settings: EpisodeSettings) -> list[int]:
    """The token ids every `tokens`-mode episode of `world` opens with: the rules and the tool schemas, up to
    where the task begins. A server can compute them once for many episodes (`EmbeddedServer.share_prefix`)."""
    template = load_template(settings.tokenizer or "")
    system: Message = {"role": "system", "content": _system_prompt(world, settings.mode)}
    tools = [*world.openai_tools(), FINISH_FUNCTION]
    one, other = (template.opening([system, {"role": "user", "content": text}], tools) for text in ("A", "B"))
    length = next((i for i, (a, b) in enumerate(zip(one, other, strict=False)) if a != b), min(len(one), len(other)))
    return one[:length]


def _system_prompt(world: Described, mode: Mode) -> str:
    system = f"{world.description}\n\n{AGENT_RULES}"
    if mode == "constrained":
        listing = json.dumps([entry["function"] for entry in [*world.openai_tools(), FINISH_FUNCTION]], indent=1)
        system += f'\n\nReply with one JSON object {{"name": <tool>, "arguments": {{...}}}}. The tools:\n{listing}'
    return system


class ToolworldEnvironment:
    """One episode of a toolworld: a reply's calls run in the world; `finish`, a reply without calls, or the
    world's own end ends it."""

    def __init__(self, world: World) -> None:
        self.world = world
        self._episode: Episode | None = None
        self._tools: list[OpenAITool] = []

    async def start(self, seed: int, hinted: bool, mode: Mode) -> Opening:
        self._episode = await self.world.open()
        task = await self._episode.reset(seed)
        self._tools = [*self.world.openai_tools(), FINISH_FUNCTION]
        return Opening(opening_messages(self.world, task, hinted, mode), list(self._tools))

    def prompt(self, messages: list[Message]) -> list[Message]:
        return messages

    async def respond(self, message: Message, reply: ParsedReply, turn: int) -> Response:
        if not reply.calls and not reply.problems:  # a final answer
            return Response(ending=await self._finish(reply.text or None))
        calls = await run_calls(message, reply, turn, self.step, self._tools)
        ending = await self._finish(calls.finish) if calls.finished else calls.ending
        return Response(calls.messages, tool_calls=calls.tool_calls, problems=calls.problems, ending=ending)

    async def _finish(self, answer: str | None) -> Ending | None:
        result = await self.step(Finish(answer=answer))
        return Ending.of_step(result) if result.done else None

    async def step(self, action: ToolCall | Finish) -> StepResult:
        return await self._opened().step(action)

    async def grade(self) -> Grade:
        return await self._opened().grade()

    async def close(self) -> None:
        if self._episode is not None:
            await self._episode.close()

    def _opened(self) -> Episode:
        if self._episode is None:
            raise RuntimeError("start the environment before stepping it")
        return self._episode


def playing(world: World, max_concurrent_steps: int = 64) -> Callable[[], Environment]:
    """A fresh environment per episode of `world`; an in-process world's steps share one limiter (a sandboxed
    world's are not limited here: its processes pace themselves)."""
    in_process = not isinstance(world, SandboxWorld)
    paced = Paced(world, anyio.CapacityLimiter(max_concurrent_steps)) if in_process else world
    return lambda: ToolworldEnvironment(paced)
