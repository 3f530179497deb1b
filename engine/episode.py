"""One episode: reset, then model -> parse -> step -> observation, until the episode ends one way or another.

Every way it can end has a defined record (see `engine.trajectory`): the agent finishes (`ok`); the
world's step limit, the engine's turn limit or the token budget stops it (`truncated`, scored on the state
reached); the endpoint gives no usable answer after its retries, the episode outlives its deadline, or the
world's code crashes (`infra_error`, no reward). Replies that cannot be read as calls are shown to the
agent as an error and counted; they are the agent's mistakes, not infrastructure's.

History is sent back exactly as the server produced it: an assistant message is echoed with its content
and `tool_calls` untouched (the argument strings are not re-serialised), so a server that renders the
conversation sees the same text it sampled.

A `Conversation` (a benchmark dialogue) goes on past the agent's first answer: a reply without a call ends
the agent's turn, and the environment's next user message, or its end, follows (see `engine.conversation`).
"""

from __future__ import annotations

import json
import time
from typing import Any

import anyio

from engine.clients import ChatClient, ModelClient, Route, TokensClient
from engine.conversation import Conversation
from engine.endpoints import Endpoint, EndpointPool
from engine.environments import Environment
from engine.parsing import FINISH_TOOL, ParsedCall, ParsedReply
from engine.settings import EpisodeSettings, Mode
from engine.templates import load_template
from engine.trajectory import EpisodeKey, EpisodeRecord, Status, TokenTrace, Turn
from engine.transport import EndpointFailure
from toolworlds.core import Finish, StepResult, Task, ToolCall, WorldBugError, error_observation

# Of the causes `world_cause` names, those that are the world's own doing: its code raised, hung, died, would
# not load, or was quarantined for one of these. `world_sandbox` (the sandbox failed) and `world_worker_lost`
# (its process was killed for something else) are not.
WORLD_FAULTS = frozenset({"world_bug", "world_timeout", "world_crash", "world_load_error", "world_quarantined"})


def world_cause(reason: str) -> str:
    """The record's cause for a world that failed with `reason` (a `SandboxError.reason`, or `world_bug`)."""
    return reason if reason == "world_bug" else f"world_{reason}"


AGENT_RULES = (
    "Solve the user's task by calling the tools, one step at a time, using what each call returns. "
    f"When the task is done, call `{FINISH_TOOL}`, with `answer` set when the task asks a question."
)
FINISH_FUNCTION: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": FINISH_TOOL,
        "description": "End the task. Give `answer` when the task asks a question.",
        "parameters": {
            "type": "object",
            "properties": {"answer": {"type": "string", "description": "The answer to the task's question."}},
            "additionalProperties": False,
        },
    },
}


class _EpisodeEnded(Exception):
    def __init__(
        self,
        status: Status,
        cause: str | None,
        reward: float | None = None,
        scorecard: str | None = None,
        detail: str | None = None,
    ) -> None:
        self.status, self.cause, self.reward, self.scorecard, self.detail = status, cause, reward, scorecard, detail


def opening_messages(env: Environment, task: Task, hinted: bool, mode: Mode) -> list[dict[str, Any]]:
    """System rules (and, in constrained mode, the tool list, since no `tools` field is sent) and the task."""
    user = task.instruction if not hinted else f"{task.instruction}\n\nHint: {task.hint}"
    return [{"role": "system", "content": _system_prompt(env, mode)}, {"role": "user", "content": user}]


def shared_opening(env: Environment, settings: EpisodeSettings) -> list[int]:
    """The token ids every `tokens`-mode episode in `env` opens with: the rules and the tool schemas, up to
    where the task begins. A server can compute them once for many episodes (`EmbeddedServer.share_prefix`)."""
    template = load_template(settings.tokenizer or "")
    system = {"role": "system", "content": _system_prompt(env, settings.mode)}
    tools = [*env.tools, FINISH_FUNCTION]
    one, other = (template.opening([system, {"role": "user", "content": text}], tools) for text in ("A", "B"))
    length = next((i for i, (a, b) in enumerate(zip(one, other, strict=False)) if a != b), min(len(one), len(other)))
    return one[:length]


def _system_prompt(env: Environment, mode: Mode) -> str:
    system = f"{env.description}\n\n{AGENT_RULES}"
    if mode == "constrained":
        listing = json.dumps([entry["function"] for entry in [*env.tools, FINISH_FUNCTION]], indent=1)
        system += f'\n\nReply with one JSON object {{"name": <tool>, "arguments": {{...}}}}. The tools:\n{listing}'
    return system


class Episode:
    """Plays one key against one environment through one (sticky) endpoint."""

    def __init__(
        self, run: str, key: EpisodeKey, env: Environment, pool: EndpointPool, settings: EpisodeSettings
    ) -> None:
        self.run, self.key, self.env, self.pool, self.settings = run, key, env, pool, settings
        self.messages: list[dict[str, Any]] = []
        self.turns: list[Turn] = []
        self.tool_calls = 0
        self.malformed_turns = 0
        self.tokens: TokenTrace | None = None
        self.dialogue = env if isinstance(env, Conversation) else None
        self._tools: list[dict[str, Any]] = []  # filled at reset (a conversation's tools depend on its task)
        self._calling_replies = 0  # replies that ran tool calls in the user's current turn

    def _client(self, endpoint: Endpoint) -> ModelClient:
        route = Route(self.pool, endpoint, self.key.header(self.run), self.settings.request_timeout_s)
        if self.settings.mode == "tokens":
            template = load_template(self.settings.tokenizer or "")
            return TokensClient(route, self.settings, self._tools, template)
        return ChatClient(route, self.settings, self._tools)

    async def play(self) -> EpisodeRecord:
        started_at, started = time.time(), time.perf_counter()
        ended: _EpisodeEnded
        with anyio.move_on_after(self.settings.episode_timeout_s) as deadline, self.pool.sticky() as endpoint:
            client = self._client(endpoint)
            self.tokens = client.tokens
            try:
                await self._run(client, endpoint, started)
                raise AssertionError("unreachable: _run always ends with _EpisodeEnded")
            except _EpisodeEnded as end:
                ended = end
                client.finish(self.messages)
            except EndpointFailure as failure:
                ended = _EpisodeEnded("infra_error", f"endpoint:{failure.cause}", detail=failure.detail)
            except WorldBugError as bug:
                reason = getattr(bug, "reason", "world_bug")  # a sandboxed world: timeout, crash, quarantined...
                cause = world_cause(reason)
                ended = _EpisodeEnded("infra_error", cause, detail=str(bug))
            finally:
                with anyio.CancelScope(shield=True):
                    await self.env.close()
        if deadline.cancelled_caught:
            limit = self.settings.episode_timeout_s
            ended = _EpisodeEnded("infra_error", "episode_timeout", detail=f"the episode outlived its {limit:g} s")
        return EpisodeRecord(
            run=self.run,
            key=self.key,
            mode=self.settings.mode,
            model=self.settings.model,
            status=ended.status,
            cause=ended.cause,
            detail=ended.detail,
            reward=ended.reward,
            scorecard=ended.scorecard,
            messages=self.messages,
            turns=self.turns,
            tool_calls=self.tool_calls,
            malformed_turns=self.malformed_turns,
            tokens=self.tokens,
            started_at=started_at,
            duration_s=time.perf_counter() - started,
        )

    async def _run(self, client: ModelClient, endpoint: Endpoint, started: float) -> None:
        task = await self.env.reset(self.key.seed)
        offers_finish = self.dialogue is None or self.dialogue.finish_tool
        self._tools[:] = [*self.env.tools, FINISH_FUNCTION] if offers_finish else self.env.tools
        if self.dialogue is not None:
            self.messages = self.dialogue.opening(task, self.key.hinted, self.settings.mode)
        else:
            self.messages = opening_messages(self.env, task, self.key.hinted, self.settings.mode)
        client.start(self.messages)
        for index in range(self.settings.max_turns):
            turn = Turn(
                index=index, endpoint=endpoint.url, started_s=time.perf_counter() - started, latency_s=0.0, attempts=1
            )
            sent = self.dialogue.prompt(self.messages) if self.dialogue is not None else self.messages
            message, reply = await client.sample(sent, turn)
            self.turns.append(turn)
            self.messages.append(message)
            answered = len(self.messages)
            env_started = time.perf_counter()
            try:
                await self._act(reply, turn)
            finally:
                turn.env_s = time.perf_counter() - env_started
            client.observe(self.messages[answered:])
            budget = self.settings.max_episode_tokens
            if budget is not None and client.tokens_used + self.settings.max_tokens_per_turn > budget:
                await self._end_on_state("token_budget")  # the next turn might not fit: end on the state
        await self._end_on_state("turn_limit")

    async def _act(self, reply: ParsedReply, turn: Turn) -> None:
        """Run the calls in order; show problems to the agent; a reply with neither is a final answer (in a
        conversation: the end of the agent's turn, as is any reply to a conversation that reads replies itself)."""
        if self.dialogue is not None and self.dialogue.reads_replies:
            await self._next_user_turn(reply.text, turn)
            return
        if reply.problems and self.dialogue is not None and self.dialogue.malformed_ends_turn:
            turn.problems.extend(reply.problems)
            self.malformed_turns += 1
            await self._next_user_turn(reply.text, turn)
            return
        if not reply.calls and not reply.problems:
            if self.dialogue is not None:
                await self._next_user_turn(reply.text, turn)
            else:
                await self._step(Finish(answer=reply.text or None))
            return
        native = bool(self.messages[-1].get("tool_calls"))
        results: list[str] = []
        for position, call in enumerate(reply.calls):
            if call.problem:
                content = json.dumps(error_observation("malformed_call", call.problem))
            elif call.name == FINISH_TOOL and FINISH_FUNCTION in self._tools:
                answer = call.arguments.get("answer")
                if self.dialogue is not None:  # ends the agent's turn; later calls in this reply are dropped
                    await self._next_user_turn("" if answer is None else str(answer), turn)
                    return
                await self._step(Finish(answer=None if answer is None else str(answer)))  # ends the episode
            else:
                turn.tool_calls += 1
                self.tool_calls += 1
                result = await self._step(ToolCall(name=call.name, arguments=call.arguments))
                content = _observation_text(result.observation)
            if native:
                self.messages.append(
                    {"role": "tool", "tool_call_id": _call_id(call, turn, position), "content": content}
                )
            else:
                results.append(content)
        if reply.problems:
            turn.problems.extend(reply.problems)
            self.malformed_turns += 1
        # A native call that failed already has its error in its own tool message.
        loose_problems = [] if native else reply.problems
        feedback = self._feedback(results, loose_problems)
        if feedback:
            self.messages.append({"role": "user", "content": feedback})
        if self.dialogue is not None and turn.tool_calls:
            await self._count_calling_reply()

    async def _count_calling_reply(self) -> None:
        """One more reply in this user turn ran calls; past the conversation's limit, the episode is cut."""
        assert self.dialogue is not None
        self._calling_replies += 1
        limit = self.dialogue.max_calling_replies
        if limit is not None and self._calling_replies > limit:
            await self._end_on_state("user_turn_limit")

    def _feedback(self, results: list[str], problems: list[str]) -> str:
        """Tool results for calls written as text, and what was wrong with the reply, as one user message."""
        parts = [f"<tool_response>\n{content}\n</tool_response>" for content in results]
        if problems:
            names = ", ".join(entry["function"]["name"] for entry in self._tools)
            parts.append("Your reply could not be used: " + "; ".join(problems) + f". Call one of the tools ({names}).")
        return "\n".join(parts)

    async def _step(self, action: ToolCall | Finish) -> StepResult:
        result = await self.env.step(action)
        if result.done:
            scorecard = result.info.get("scorecard")
            status: Status = "ok" if result.terminated else "truncated"
            cause = None if result.terminated else "step_limit"
            raise _EpisodeEnded(status, cause, result.reward, str(scorecard) if scorecard is not None else None)
        return result

    async def _next_user_turn(self, reply: str, turn: Turn) -> None:
        """The agent ended its turn: the user's next message (and any tools it reveals), or the dialogue's end.
        A conversation that reads replies may instead answer with the results of the calls it ran."""
        assert self.dialogue is not None
        user = await self.dialogue.respond(reply)
        if user is None:
            grade = await self.env.grade()
            raise _EpisodeEnded("ok", None, grade.score, grade.scorecard)
        self._tools.extend(user.tools)  # the chat client reads this list at every request
        self.messages.append({"role": "user", "content": user.text(self.settings.mode)})
        if user.calls_run:  # the conversation ran the reply's calls: this is their results, not a new turn
            self.tool_calls += user.calls_run
            turn.tool_calls += user.calls_run
            await self._count_calling_reply()
        else:
            self._calling_replies = 0

    async def _end_on_state(self, cause: str) -> None:
        grade = await self.env.grade()
        raise _EpisodeEnded("truncated", cause, grade.score, grade.scorecard)


def _observation_text(observation: Any) -> str:
    """A tool's result as the model reads it: text as it is (as tool messages carry it), anything else as JSON."""
    return observation if isinstance(observation, str) else json.dumps(observation)


def _call_id(call: ParsedCall, turn: Turn, position: int) -> str:
    return call.id or f"call_{turn.index}_{position}"


async def play_episode(
    run: str, key: EpisodeKey, env: Environment, pool: EndpointPool, settings: EpisodeSettings
) -> EpisodeRecord:
    """Play `key` to its end and return its record; never raises for anything the model or server did."""
    return await Episode(run, key, env, pool, settings).play()
