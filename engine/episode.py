"""One episode: reset, then model -> parse -> step -> observation, until the episode ends one way or another.

Every way it can end has a defined record (see `engine.trajectory`): the agent finishes (`ok`); the
world's step limit, the engine's turn limit or the token budget stops it (`truncated`, scored on the state
reached); the endpoint gives no usable answer after its retries, the episode outlives its deadline, or the
world's code crashes (`infra_error`, no reward). Replies that cannot be read as calls are shown to the
agent as an error and counted; they are the agent's mistakes, not infrastructure's.

History is sent back exactly as the server produced it: an assistant message is echoed with its content
and `tool_calls` untouched (the argument strings are not re-serialised), so a server that renders the
conversation sees the same text it sampled.

The loop only samples: what follows a reply (tool results, the user's next turn, the end) is the
environment's answer (`engine.environments`), and the loop returns the `Ending` it is given, or cuts the
episode at its turn limit or token budget.
"""

from __future__ import annotations

import time

import anyio

from engine.clients import ChatClient, ModelClient, Route, TokensClient
from engine.endpoints import Endpoint, EndpointPool
from engine.environments import Ending, Environment
from engine.messages import Message, OpenAITool
from engine.settings import EpisodeSettings
from engine.templates import load_template
from engine.trajectory import EpisodeKey, EpisodeRecord, TokenTrace, Turn
from engine.transport import EndpointFailure
from toolworlds.core import WorldBugError

# Of the causes `world_cause` names, those that are the world's own doing: its code raised, hung, died, would
# not load, or was quarantined for one of these. `world_sandbox` (the sandbox failed) and `world_worker_lost`
# (its process was killed for something else) are not.
WORLD_FAULTS = frozenset({"world_bug", "world_timeout", "world_crash", "world_load_error", "world_quarantined"})


def world_cause(reason: str) -> str:
    """The record's cause for a world that failed with `reason` (a `SandboxError.reason`, or `world_bug`)."""
    return reason if reason == "world_bug" else f"world_{reason}"


class Episode:
    """Plays one key against one environment through one (sticky) endpoint."""

    def __init__(
        self, run: str, key: EpisodeKey, env: Environment, pool: EndpointPool, settings: EpisodeSettings
    ) -> None:
        self.run, self.key, self.env, self.pool, self.settings = run, key, env, pool, settings
        self.messages: list[Message] = []
        self.turns: list[Turn] = []
        self.tool_calls = 0
        self.malformed_turns = 0
        self.tokens: TokenTrace | None = None
        self._tools: list[OpenAITool] = []  # what the client offers; filled at the start, grown by reveals

    def _client(self, endpoint: Endpoint) -> ModelClient:
        route = Route(self.pool, endpoint, self.key.header(self.run), self.settings.request_timeout_s)
        if self.settings.mode == "tokens":
            template = load_template(self.settings.tokenizer or "")
            return TokensClient(route, self.settings, self._tools, template)
        return ChatClient(route, self.settings, self._tools)

    async def play(self) -> EpisodeRecord:
        started_at, started = time.time(), time.perf_counter()
        ending: Ending
        with anyio.move_on_after(self.settings.episode_timeout_s) as deadline, self.pool.sticky() as endpoint:
            client = self._client(endpoint)
            self.tokens = client.tokens
            try:
                ending = await self._run(client, endpoint, started)
                client.finish(self.messages)
            except EndpointFailure as failure:
                ending = Ending("infra_error", f"endpoint:{failure.cause}", detail=failure.detail)
            except WorldBugError as bug:
                reason = getattr(bug, "reason", "world_bug")  # a sandboxed world: timeout, crash, quarantined...
                ending = Ending("infra_error", world_cause(reason), detail=str(bug))
            finally:
                with anyio.CancelScope(shield=True):
                    await self.env.close()
        if deadline.cancelled_caught:
            limit = self.settings.episode_timeout_s
            ending = Ending("infra_error", "episode_timeout", detail=f"the episode outlived its {limit:g} s")
        return EpisodeRecord(
            run=self.run,
            key=self.key,
            mode=self.settings.mode,
            model=self.settings.model,
            status=ending.status,
            cause=ending.cause,
            detail=ending.detail,
            reward=ending.reward,
            scorecard=ending.scorecard,
            messages=self.messages,
            turns=self.turns,
            tool_calls=self.tool_calls,
            malformed_turns=self.malformed_turns,
            tokens=self.tokens,
            started_at=started_at,
            duration_s=time.perf_counter() - started,
        )

    async def _run(self, client: ModelClient, endpoint: Endpoint, started: float) -> Ending:
        opening = await self.env.start(self.key.seed, self.key.hinted, self.settings.mode)
        self.messages = opening.messages
        self._tools[:] = opening.tools
        client.start(self.messages)
        for index in range(self.settings.max_turns):
            turn = Turn(
                index=index, endpoint=endpoint.url, started_s=time.perf_counter() - started, latency_s=0.0, attempts=1
            )
            sent = self.env.prompt(self.messages) if self.settings.mode != "tokens" else self.messages
            message, reply = await client.sample(sent, turn)
            self.turns.append(turn)
            self.messages.append(message)
            answered = len(self.messages)
            env_started = time.perf_counter()
            try:
                response = await self.env.respond(message, reply, index)
            finally:
                turn.env_s = time.perf_counter() - env_started
            self.messages.extend(response.messages)
            self._tools.extend(response.tools)  # the chat client reads this list at every request
            turn.tool_calls += response.tool_calls
            self.tool_calls += response.tool_calls
            if response.problems:
                turn.problems.extend(response.problems)
                self.malformed_turns += 1
            if response.ending is not None:
                return response.ending
            client.observe(self.messages[answered:])
            budget = self.settings.max_episode_tokens
            if budget is not None and client.tokens_used + self.settings.max_tokens_per_turn > budget:
                return await self._cut("token_budget")  # the next turn might not fit: end on the state
        return await self._cut("turn_limit")

    async def _cut(self, cause: str) -> Ending:
        return Ending.on_state(await self.env.grade(), cause)


async def play_episode(
    run: str, key: EpisodeKey, env: Environment, pool: EndpointPool, settings: EpisodeSettings
) -> EpisodeRecord:
    """Play `key` to its end and return its record; never raises for anything the model or server did."""
    return await Episode(run, key, env, pool, settings).play()
