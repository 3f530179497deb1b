"""Many independent episodes of one world, keyed by session id: what the HTTP and MCP servers share."""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import anyio
from pydantic import BaseModel, Field, JsonValue

from toolworlds.checks import crash_site
from toolworlds.core import Finish, StepResult, Task, ToolCall, ToolWorld
from toolworlds.play import LocalEpisode


def _world_failure(method: str, error: Exception) -> str:
    """What failed, for the client: the world's method, the error, and where in the world's code it raised."""
    return f"the world's {method} raised {crash_site(error)}"


class SessionError(Exception):
    """A request about a session that cannot be served; `status` is the HTTP status it maps to."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class PublicTask(BaseModel):
    """The task as a client sees it: the hint only when the client asked for it."""

    world: str
    seed: int
    instruction: str
    max_steps: int
    hint: str | None = None

    @classmethod
    def of(cls, task: Task, include_hint: bool) -> PublicTask:
        return cls(
            world=task.world,
            seed=task.seed,
            instruction=task.instruction,
            max_steps=task.max_steps,
            hint=task.hint if include_hint else None,
        )


class ScoreReport(BaseModel):
    score: float = Field(ge=0, le=1)
    done: bool
    steps: int
    scorecard: str

    @classmethod
    def of(cls, world: ToolWorld[Any]) -> ScoreReport:
        """The score of the world's state as it is now, with the scorecard that explains it."""
        card = world.grade()
        return cls(score=card.score, done=world.done, steps=world.steps_taken, scorecard=card.summary())


class HostedEpisode(Protocol):
    """One session's episode: a trusted world in this process (`LocalEpisode`) or a `SandboxEpisode`."""

    async def reset(self, seed: int) -> Task: ...

    async def step(self, action: ToolCall | Finish) -> StepResult: ...

    async def grade(self) -> tuple[float, str]: ...

    async def snapshot(self) -> dict[str, Any]: ...

    async def close(self) -> None: ...


T = TypeVar("T")


@dataclass
class Session:
    """One episode behind a protocol (HTTP sessions, MCP): stepped one action at a time, ended for good when
    the world's own code fails (`failure`), whichever protocol asked."""

    episode: HostedEpisode
    public_task: PublicTask
    steps: int = 0
    done: bool = False
    failure: str | None = None  # what the world's own code did wrong; the episode ended there
    lock: anyio.Lock = field(default_factory=anyio.Lock)  # one step at a time, so `done` is never stale

    async def step(self, action: ToolCall | Finish) -> StepResult:
        """Apply an action; a finished or failed episode refuses it (409) instead of stepping."""
        async with self.lock:
            if self.failure is not None:
                raise SessionError(409, "episode_failed", f"the episode ended when {self.failure}")
            if self.done:
                raise SessionError(409, "episode_over", "the episode has ended; read its score or start a new one")
            result = await self.world("step", self.episode.step(action))
            self.steps += 1
            self.done = result.done
        return result

    async def score(self) -> ScoreReport:
        if self.failure is not None:
            raise SessionError(500, "world_error", f"no score: the episode ended when {self.failure}")
        score, summary = await self.world("grade", self.episode.grade())
        return ScoreReport(score=score, done=self.done, steps=self.steps, scorecard=summary)

    async def world(self, method: str, call: Awaitable[T]) -> T:
        """Await the world's own code; if it fails, the episode ends failed and the caller gets a named 500."""
        try:
            return await call
        except Exception as error:
            self.done, self.failure = True, _world_failure(method, error)
            raise SessionError(500, "world_error", self.failure) from None


EpisodeFactory = Callable[[], Awaitable[HostedEpisode]]


def in_process_episodes(world_class: type[ToolWorld[Any]]) -> EpisodeFactory:
    """Episodes of a trusted world class: a fresh instance in this process each time."""

    async def fresh() -> HostedEpisode:
        return LocalEpisode(world_class())

    return fresh


class SessionStore:
    """Holds up to `capacity` sessions. When full, the least recently used *finished* one makes room;
    live episodes are never dropped: creating one more is refused instead."""

    def __init__(self, episodes: EpisodeFactory, capacity: int = 10_000) -> None:
        self.episodes = episodes
        self.capacity = capacity
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    @classmethod
    def in_process(cls, world_class: type[ToolWorld[Any]], capacity: int = 10_000) -> SessionStore:
        """Sessions of a trusted world class, each a fresh instance in this process."""
        return cls(in_process_episodes(world_class), capacity)

    def __len__(self) -> int:
        return len(self._sessions)

    async def create(self, seed: int, include_hint: bool = False) -> tuple[str, PublicTask]:
        if len(self._sessions) >= self.capacity:
            await self._evict_one_finished()
        episode = await self.episodes()
        try:
            task = await episode.reset(seed)
        except Exception as error:  # the world's own code (reset) failed: no session
            await episode.close()
            raise SessionError(500, "world_error", _world_failure("reset", error)) from None
        public = PublicTask.of(task, include_hint)
        session_id = secrets.token_urlsafe(12)
        self._sessions[session_id] = Session(episode=episode, public_task=public)
        return session_id, public

    def get(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionError(404, "unknown_session", f"no session {session_id!r}; create one with POST /sessions")
        self._sessions.move_to_end(session_id)
        return session

    async def step(self, session_id: str, action: ToolCall | Finish) -> StepResult:
        return await self.get(session_id).step(action)

    async def call_tool(self, session_id: str, name: str, arguments: dict[str, JsonValue]) -> StepResult:
        return await self.step(session_id, ToolCall(name=name, arguments=arguments))

    async def score(self, session_id: str) -> ScoreReport:
        return await self.get(session_id).score()

    async def snapshot(self, session_id: str) -> dict[str, Any]:
        session = self.get(session_id)
        return await session.world("snapshot", session.episode.snapshot())

    async def delete(self, session_id: str) -> None:
        session = self.get(session_id)
        del self._sessions[session_id]
        await session.episode.close()

    async def _evict_one_finished(self) -> None:
        for session_id, session in self._sessions.items():
            if session.done:
                del self._sessions[session_id]
                await session.episode.close()
                return
        raise SessionError(503, "too_many_sessions", f"all {self.capacity} sessions are still playing; finish some")
