"""Many independent episodes of one world, keyed by session id: what the HTTP and MCP servers share."""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
from pydantic import BaseModel, JsonValue

from toolworlds.checks import crash_site
from toolworlds.core import Finish, StepResult, Task, ToolCall
from toolworlds.episode import Episode, Grade, World


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


class ScoreReport(Grade):
    """A session's grade, and how far its episode went."""

    done: bool
    steps: int


T = TypeVar("T")


@dataclass
class Session:
    """One episode behind a protocol (HTTP sessions, MCP): stepped one action at a time, ended for good when
    the world's own code fails (`failure`), whichever protocol asked."""

    episode: Episode
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
        grade = await self.world("grade", self.episode.grade())
        return ScoreReport(score=grade.score, scorecard=grade.scorecard, done=self.done, steps=self.steps)

    async def world(self, method: str, call: Awaitable[T]) -> T:
        """Await the world's own code; if it fails, the episode ends failed and the caller gets a named 500."""
        try:
            return await call
        except Exception as error:
            self.done, self.failure = True, _world_failure(method, error)
            raise SessionError(500, "world_error", self.failure) from None


class SessionStore:
    """Holds up to `capacity` sessions. When full, the least recently used *finished* one makes room;
    live episodes are never dropped: creating one more is refused instead."""

    def __init__(self, world: World, capacity: int = 10_000) -> None:
        self.world = world
        self.capacity = capacity
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    async def create(self, seed: int, include_hint: bool = False) -> tuple[str, PublicTask]:
        if len(self._sessions) >= self.capacity:
            await self._evict_one_finished()
        episode = await self.world.open()
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
